"""k_sweep: its name, notebook, config and output names (the declaration reads them)."""

from __future__ import annotations

from dataclasses import dataclass

from attnknn_lib.base.errors import ConfigError, check_choice, check_range
from attnknn_lib.base.knobs import int_csv, knob
from attnknn_lib.data.registry import DATASET_NAMES
from attnknn_lib.evaluation.methods import method_labels
from attnknn_lib.evaluation.verdicts import MARGINS
from attnknn_lib.experiments.common.shared import ExperimentConfig
from attnknn_lib.experiments.framework.declaration import Artifacts, figure, record, table

NAME = "k_sweep"
NOTEBOOK = "02_k_sweep.ipynb"
LABELS = method_labels("uniform", "distance", "cosine", "attnknn", "attnknn_retrained", attnknn="Attn-KNN (as trained)")
COMPARED = ("attnknn", "attnknn_retrained")  # each minus the best baseline at the same k
ARTIFACTS = Artifacts(NAME, (record(), table("table"), table("calibration", "_calibration"), figure("figure")))


@dataclass(frozen=True)
class Config(ExperimentConfig):
    """The k-sweep's own knobs on top of the shared recipe (which names main's models)."""

    dataset: str = knob("fashion_mnist", "dataset whose trained main models are swept")
    seeds: tuple[int, ...] = knob((0, 1, 2, 3, 4), "seeds of main's models (comma-separated; five: its verdicts "
                                                   "are counted)")
    k_values: tuple[int, ...] = knob((1, 3, 5, 10, 20, 50), "neighbour counts (comma-separated)")
    sqrt_k: bool = knob(True, "add k as round(sqrt(training rows)), marked in the figure")
    retrain: bool = knob(True, "also train a fresh attention at each k on the frozen embedding")
    retrain_seeds: int = knob(5, "how many of the seeds (the first ones) get the attention retrained")
    head_epochs: int = knob(12, "most epochs of each retrained attention (main's recipe epochs); it stops earlier "
                                "at a plateau (head_patience)")
    head_patience: int = knob(2, "a retrained attention stops after this many epochs without a better validation "
                                 "score")
    n_boot: int = knob(200, "bootstrap resamples for the 95 % intervals")
    margin_accuracy: float = knob(MARGINS["accuracy"], "equivalence margin of accuracy differences (0.0025 is 0.25 pp)")
    margin_nll: float = knob(MARGINS["nll"], "equivalence margin of NLL differences")

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "seeds", int_csv("seeds", self.seeds))
        object.__setattr__(self, "k_values", int_csv("k_values", self.k_values))
        check_choice("dataset", self.dataset, DATASET_NAMES)
        if min(self.k_values) < 1:
            raise ConfigError(f"k_values={','.join(map(str, self.k_values))} is not allowed; every k must be >= 1")
        check_range("retrain_seeds", self.retrain_seeds, 1, len(self.seeds))
        check_range("head_epochs", self.head_epochs, 1, None)
        check_range("head_patience", self.head_patience, 1, None)
        check_range("n_boot", self.n_boot, 1, None)
        for name in ("margin_accuracy", "margin_nll"):
            check_range(name, getattr(self, name), 0.0, None)

    def margin(self, metric: str) -> float | None:
        """The declared equivalence margin of a metric (the config's, else the library's; None for
        ECE, which is described only)."""
        return getattr(self, f"margin_{metric}", MARGINS.get(metric))

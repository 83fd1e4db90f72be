"""long_tail: its name, notebook, config and output names (the declaration reads them)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from attnknn_lib.base.errors import check_range
from attnknn_lib.base.knobs import float_csv, knob
from attnknn_lib.data.spec import DataSpec
from attnknn_lib.evaluation.methods import method_labels
from attnknn_lib.evaluation.verdicts import MARGINS
from attnknn_lib.experiments.common.robustness import (
    RobustnessConfig,
)
from attnknn_lib.experiments.framework.declaration import Artifacts, figure, record, table

NAME = "long_tail"
NOTEBOOK = "04_long_tail.ipynb"
BETAS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0)  # the remedies' prior exponents (1.0 was an edge)
LABELS = method_labels("uniform", "distance", "cosine", "best_baseline", "reference", "attnknn", "cnn", "best_baseline_balanced",
                       "attnknn_balanced", "cnn_balanced")
REMEDIED = {"best_baseline_balanced": "best_baseline", "attnknn_balanced": "attnknn", "cnn_balanced": "cnn"}
GROUPS = ("head", "middle", "tail")
ARTIFACTS = Artifacts(NAME, (record(), table("table"), figure("figure")))


@dataclass(frozen=True)
class Config(RobustnessConfig):
    """Long-tail knobs on top of the shared recipe and the robustness settings."""

    ratios: tuple[float, ...] = knob((1.0, 0.1, 0.01), "imbalance ratios, smallest over largest class (1 is balanced)")
    # five seeds in both settings: their verdicts enter the paper's counts
    seeds: tuple[int, ...] = knob((0, 1, 2, 3, 4), "seeds of main's models (setting bank)")
    retrain_seeds: tuple[int, ...] = knob((0, 1, 2, 3, 4), "training seeds of setting trained")
    # the long-tailed models train at main's budget (the whole long-tailed subset, main's epochs): the
    # balanced ratio 1 is then main's own model, trained once
    retrain_max_train: int = knob(0, "training rows of setting trained before the imbalance (0 keeps the recipe's)")
    retrain_epochs: int = knob(0, "epochs of setting trained (0 keeps the recipe's)")
    imbalance_seed: int = knob(0, "seed offset of the subsample: models of seed s get class order and rows of seed offset + s")
    margin_accuracy: float = knob(MARGINS["accuracy"], "equivalence margin of accuracy differences (0.0025 is 0.25 pp)")

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "ratios", float_csv("ratios", self.ratios, 1e-4, 1.0))
        check_range("imbalance_seed", self.imbalance_seed, 0, None)

    def imbalanced(self, spec: DataSpec, ratio: float, seed: int) -> DataSpec:
        """``spec`` imbalanced at ``ratio``, with the class order and rows drawn for model seed ``seed``."""
        return spec if ratio == 1 else replace(spec, imbalance=ratio, prep_seed=self.imbalance_seed + seed)

    def conditions(self, spec: DataSpec):
        """seed -> {ratio key: the imbalanced ``spec`` of that seed}."""
        return lambda seed: {f"{r:g}": self.imbalanced(spec, r, seed) for r in self.ratios}

"""theory: its name, notebook, config and output names (the declaration reads them)."""

from __future__ import annotations

from dataclasses import dataclass

from attnknn_lib.base.errors import ConfigError, check_choice, check_range
from attnknn_lib.base.knobs import float_csv, int_csv, knob
from attnknn_lib.data.registry import DATASET_NAMES
from attnknn_lib.experiments.common.shared import ExperimentConfig
from attnknn_lib.experiments.framework.declaration import Artifacts, figure, record, table

NAME = "theory"
NOTEBOOK = "06_theory.ipynb"

TIMED = ("results.cost",)  # the measured cost of dense vs top-k attention (reproducibility.record_view)

ARTIFACTS = Artifacts(NAME, (record(), table("table"), figure("k", "_k"), figure("geometry", "_geometry"),
                             figure("topk", "_topk")))


@dataclass(frozen=True)
class Config(ExperimentConfig):
    """The theory notebook's own knobs on top of the shared recipe (which names main's models)."""

    dataset: str = knob("fashion_mnist", "dataset whose trained main models are analysed")
    seeds: tuple[int, ...] = knob((0, 1, 2), "seeds of main's models (comma-separated)")
    k_values: tuple[int, ...] = knob((1, 2, 5, 10, 20, 50, 100, 200, 500), "k of the error and NLL curves (round(sqrt(n)) is added)")
    temperatures: tuple[float, ...] = knob((0.03, 0.1, 0.3), "softmax temperatures T of the plain attention (scores q.k / T)")
    truncation_queries: int = knob(500, "test queries for the truncation errors (dense attention over the whole memory)")
    tail_seed: int = knob(0, "seed of the sampled tail rows")
    cost_sizes: tuple[int, ...] = knob((1000, 3000, 10000, 30000), "memory sizes n of the cost comparison")
    cost_queries: int = knob(500, "queries of the cost comparison")
    repeats: int = knob(3, "timed repeats (the median is reported)")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("seeds", "k_values", "cost_sizes"):
            object.__setattr__(self, name, int_csv(name, getattr(self, name)))
        object.__setattr__(self, "temperatures", float_csv("temperatures", self.temperatures, 1e-3, 100.0))
        check_choice("dataset", self.dataset, DATASET_NAMES)
        if min(self.k_values) < 1:
            raise ConfigError(f"k_values={','.join(map(str, self.k_values))} is not allowed; every k must be >= 1")
        if min(self.cost_sizes) < 4:
            raise ConfigError(f"cost_sizes={','.join(map(str, self.cost_sizes))} is not allowed; every n must be >= 4")
        for name in ("truncation_queries", "cost_queries", "repeats"):
            check_range(name, getattr(self, name), 1, None)

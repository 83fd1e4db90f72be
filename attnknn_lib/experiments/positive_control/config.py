"""positive_control: its name, notebook, config and output names (the declaration reads them)."""

from __future__ import annotations

from dataclasses import dataclass

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.base.knobs import float_csv, int_csv, knob
from attnknn_lib.data.synthetic import ClusterTask
from attnknn_lib.experiments.common.fixed_embedding import ENDPOINTS, HEADS, HeadKnobs
from attnknn_lib.experiments.framework.declaration import Artifacts, figure, record, table

__all__ = ["ARTIFACTS", "DATASET", "ENDPOINTS", "HEADS", "NAME", "NOTEBOOK", "Config"]

NAME = "positive_control"
NOTEBOOK = "08_positive_control.ipynb"
DATASET = "clusters"  # the generated task's name in file names (it is no dataset of the registry)
ARTIFACTS = Artifacts(NAME, (record(), table("headroom", "_headroom"), table("verdicts", "_verdicts"),
                             table("shares", "_shares"), table("diagnostic", "_diagnostic"), figure("figure", ""),
                             figure("forest", "_forest"), table("detectable", "_detectable")),
                      datasets=lambda cfg: (DATASET,))


@dataclass(frozen=True)
class Config(HeadKnobs):
    """The positive control's knobs on top of the comparison's (:class:`~attnknn_lib.experiments.
    fixed_embedding.HeadKnobs`) and the shared recipe (whose k, heads and entropy weight are Attn-KNN's)."""

    seeds: tuple[int, ...] = knob((0, 1, 2, 3, 4), "seeds: each draws its own cluster centres and points")
    # the one budget of the confirmatory declaration: every learner on NCA's grid, rows, epochs and patience
    train_queries: int = knob(0, "training queries per head (0: every memory row, each query's own row excluded)")
    head_epochs: int = knob(100, "most epochs per head, NCA's; it stops earlier at a plateau (head_patience)")
    head_lrs: tuple[float, ...] = knob((0.003, 0.01, 0.03), "learning-rate grid of the heads, NCA's, extended past "
                                                            "an end while the best sits there")
    nonlinear_metric: bool = knob(True, "also train the nonlinear learned metric (an MLP map trained as NCA is)")
    probe_as_heads: bool = knob(True, "the linear probe trained as the heads are (their optimiser, learning rates, "
                                      "queries, epochs and patience); lbfgs's probe then stays as a diagnostic")
    wide_heads: tuple[str, ...] = knob(("attnknn", "label_bias", "self_attention"),
                                       "heads also trained at k_w, the tuned vote's k clipped to [wide_k_min, "
                                       "wide_k_max]")
    nuisance_scales: tuple[float, ...] = knob((0.0, 0.5, 1.0, 1.25, 1.5, 2.0),
                                              "the knob: expected norm of the nuisance block against the "
                                              "informative block's 1 (0: no room to win; 1 to 1.5 more "
                                              "finely, where the room inside k appears)")
    num_classes: int = knob(10, "classes of the generated task")
    clusters_per_class: int = knob(20, "small clusters per class, interleaved with the other classes'")
    informative_dims: int = knob(8, "dimensions that carry the cluster (and so the class)")
    nuisance_dims: int = knob(24, "dimensions of pure noise that the retrieval cannot ignore")
    cluster_sd: float = knob(0.15, "s.d. of a point around its cluster centre, per informative dimension")
    n_memory: int = knob(20000, "labelled memory rows")
    n_val: int = knob(5000, "validation queries (tuning, calibration, epoch selection)")
    n_test: int = knob(5000, "test queries (read once per reported number)")

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "seeds", int_csv("seeds", self.seeds))
        object.__setattr__(self, "nuisance_scales", float_csv("nuisance_scales", self.nuisance_scales, 0.0, 100.0))
        self.check_dims("informative_dims + nuisance_dims", self.informative_dims + self.nuisance_dims)
        self.task(self.nuisance_scales[0])  # validates the generator's knobs before any work
        if self.k >= self.n_memory:
            raise ConfigError(f"k={self.k} is not allowed; give k < n_memory={self.n_memory}")
        if self.train_queries > self.n_memory:
            raise ConfigError(f"train_queries={self.train_queries} is not allowed; give at most n_memory="
                              f"{self.n_memory}")

    def task(self, nuisance_scale: float) -> ClusterTask:
        return ClusterTask(nuisance_scale, self.num_classes, self.clusters_per_class, self.informative_dims,
                           self.nuisance_dims, self.cluster_sd, self.n_memory, self.n_val, self.n_test)


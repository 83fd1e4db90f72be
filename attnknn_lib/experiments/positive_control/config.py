"""positive_control: its name, notebook, config and output names (the declaration reads them)."""

from __future__ import annotations

from dataclasses import dataclass

from attnknn_lib.base.errors import ConfigError, check_range
from attnknn_lib.base.knobs import csv, float_csv, int_csv, knob
from attnknn_lib.data.synthetic import ClusterTask
from attnknn_lib.evaluation.reference import REFERENCE_K
from attnknn_lib.evaluation.verdicts import MARGINS
from attnknn_lib.experiments.declaration import Artifacts, figure, record, table
from attnknn_lib.experiments.shared import ExperimentConfig

NAME = "positive_control"
NOTEBOOK = "08_positive_control.ipynb"
DATASET = "clusters"  # the generated task's name in file names (it is no dataset of the registry)
HEADS = {  # name -> (label, what it is)
    "attnknn": ("Attn-KNN", "the paper's multi-head attention with the prototype's loss (entropy bonus 0.01)"),
    "blind_none": ("label-blind, no entropy term", "the same attention without the entropy bonus"),
    "label_aware": ("label-aware scores", "scores from distances, ranks, label shares and agreement"),
    "readout": ("TabR-style readout", "values E[y] + MLP(q - n) and an MLP readout, not a vote"),
}
ENDPOINTS = (("accuracy", "raw"), ("nll", "calibrated"), ("brier", "calibrated"))
"""What each head is judged on against the reference: accuracy as voted, NLL and Brier after the
calibrator fitted on validation (proper scores; ECE is only described)."""

ARTIFACTS = Artifacts(NAME, (record(), table("headroom", "_headroom"), table("verdicts", "_verdicts"),
                             figure("figure", "")), datasets=lambda cfg: (DATASET,))


@dataclass(frozen=True)
class Config(ExperimentConfig):
    """The positive control's knobs on top of the shared recipe (whose k, heads and entropy weight
    are Attn-KNN's)."""

    seeds: tuple[int, ...] = knob((0, 1, 2, 3, 4), "seeds: each draws its own cluster centres and points")
    nuisance_scales: tuple[float, ...] = knob((0.0, 0.5, 1.0, 1.5, 2.0),
                                              "the knob: expected norm of the nuisance block against the "
                                              "informative block's 1 (0: no room to win)")
    num_classes: int = knob(10, "classes of the generated task")
    clusters_per_class: int = knob(20, "small clusters per class, interleaved with the other classes'")
    informative_dims: int = knob(8, "dimensions that carry the cluster (and so the class)")
    nuisance_dims: int = knob(24, "dimensions of pure noise that the retrieval cannot ignore")
    cluster_sd: float = knob(0.15, "s.d. of a point around its cluster centre, per informative dimension")
    n_memory: int = knob(20000, "labelled memory rows")
    n_val: int = knob(5000, "validation queries (tuning, calibration, epoch selection)")
    n_test: int = knob(5000, "test queries (read once per reported number)")
    heads: tuple[str, ...] = knob(("attnknn", "label_aware", "readout"), "heads trained at each level on the "
                                                                         "generated memory (among those of HEADS)")
    train_queries: int = knob(12000, "training queries per head (a seeded subset of the memory, each query's own row "
                                           "excluded from its neighbours)")
    head_epochs: int = knob(24, "most epochs per head; it stops earlier at a plateau (head_patience)")
    head_patience: int = knob(4, "a head stops after this many epochs without a better validation score")
    head_batch_size: int = knob(256, "training queries per step of a head")
    head_lr: float = knob(0.01, "AdamW learning rate of the heads")
    loo_k: int = knob(16, "neighbours of a memory row behind its leave-one-out agreement")
    reference_k: int = knob(REFERENCE_K, "neighbours searched for the strongest rule that learns nothing, doubled "
                                         "while its chosen k is the largest searched")
    moved_share: float = knob(0.9, "declared before the run: a head 'moves from uniform' when its mean effective k "
                                   "on test is below this share of k")
    margin_accuracy: float = knob(MARGINS["accuracy"], "equivalence margin of accuracy differences")
    margin_nll: float = knob(MARGINS["nll"], "equivalence margin of NLL differences")
    margin_brier: float = knob(MARGINS["brier"], "equivalence margin of Brier differences")

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "seeds", int_csv("seeds", self.seeds))
        object.__setattr__(self, "nuisance_scales", float_csv("nuisance_scales", self.nuisance_scales, 0.0, 100.0))
        object.__setattr__(self, "heads", csv(self.heads))
        for h in self.heads:
            if h not in HEADS:
                raise ConfigError(f"heads={h!r} is not allowed; choose among: {', '.join(HEADS)}")
        for name in ("train_queries", "head_epochs", "head_patience", "head_batch_size", "loo_k", "reference_k"):
            check_range(name, getattr(self, name), 1, None)
        check_range("moved_share", self.moved_share, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
        for name in ("head_lr", "margin_accuracy", "margin_nll", "margin_brier"):
            check_range(name, getattr(self, name), 0.0, None)
        dims = self.informative_dims + self.nuisance_dims
        if dims % self.num_heads:
            raise ConfigError(f"informative_dims + nuisance_dims = {dims} is not allowed with num_heads="
                              f"{self.num_heads}; give a multiple of num_heads (the attention splits the "
                              f"dimensions into heads)")
        self.task(self.nuisance_scales[0])  # validates the generator's knobs before any work
        if self.k >= self.n_memory:
            raise ConfigError(f"k={self.k} is not allowed; give k < n_memory={self.n_memory}")
        if self.train_queries > self.n_memory:
            raise ConfigError(f"train_queries={self.train_queries} is not allowed; give at most n_memory="
                              f"{self.n_memory}")

    def task(self, nuisance_scale: float) -> ClusterTask:
        return ClusterTask(nuisance_scale, self.num_classes, self.clusters_per_class, self.informative_dims,
                           self.nuisance_dims, self.cluster_sd, self.n_memory, self.n_val, self.n_test)

    def margin(self, metric: str) -> float:
        return getattr(self, f"margin_{metric}")

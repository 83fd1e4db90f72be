"""headroom_regimes: its name, notebook, config and output names (the declaration reads them)."""

from __future__ import annotations

from dataclasses import dataclass

from attnknn_lib.base.errors import ConfigError, check_range
from attnknn_lib.base.knobs import choice_csv, int_csv, knob
from attnknn_lib.experiments.common.fixed_embedding import HeadKnobs
from attnknn_lib.experiments.framework.declaration import Artifacts, figure, record, table

NAME = "headroom_regimes"
NOTEBOOK = "09_headroom_regimes.ipynb"
DATASET = "fashion_mnist"
OFFICIAL_TEST = 10000  # rows of Fashion-MNIST's official test set, split into one block per seed
CANDIDATES = {  # name -> (label, what the embedding is)
    "pixels_pca": ("PCA of pixels", "the pixels' principal components, fitted on the memory (no label is used)"),
    "few_labels": ("CNN on 1 % of labels", "a small CNN trained on a small labelled share of the memory, while the "
                                           "memory (and every head) holds every label"),
    "other_classes": ("CNN on other classes", "a small CNN trained on half the classes, its frozen features used for "
                                              "the other half (the memory, validation and test hold those only)"),
}
GATE_LEARNERS = {  # name -> what it reads; the gate reads validation only, every learner cross-fitted
    "geometry": "distances and ranks of the retrieved neighbours (the best geometry-only vote)",
    "learner": "labels, ranks, distances and agreements of the retrieved neighbours (the label-only learner)",
    "nca": "the coordinates: a linear metric learned on the memory (NCA), then the rule re-tuned in it",
}
ARTIFACTS = Artifacts(NAME, (record(), table("headroom", "_headroom"), table("verdicts", "_verdicts"),
                             figure("figure", ""), figure("forest", "_forest"), table("detectable", "_detectable")),
                      datasets=lambda cfg: (DATASET,))


@dataclass(frozen=True)
class Config(HeadKnobs):
    """The real regimes' knobs on top of the comparison's (:class:`~attnknn_lib.experiments.
    fixed_embedding.HeadKnobs`) and the shared recipe (k, heads, the CNN's widths and learning rate)."""

    seeds: tuple[int, ...] = knob((0, 1, 2, 3, 4), "seeds: each draws its validation split, its labelled share, its "
                                                   "source classes, the embedders' initialisation and its own block "
                                                   "of test rows")
    candidates: tuple[str, ...] = knob(tuple(CANDIDATES), "candidate embeddings (among those of CANDIDATES)")
    # the one budget of the positive control and the confirmatory declaration: every learner on NCA's grid,
    # rows, epochs and patience (the lbfgs probe left out, as the declaration's amendment 1 leaves it)
    train_queries: int = knob(0, "training queries per head (0: every memory row, each query's own row excluded)")
    head_epochs: int = knob(100, "most epochs per head, NCA's; it stops earlier at a plateau (head_patience)")
    head_lrs: tuple[float, ...] = knob((0.003, 0.01, 0.03), "learning-rate grid of the heads, NCA's, extended past "
                                                            "an end while the best sits there")
    probe_as_heads: bool = knob(True, "the linear probe trained as the heads are (their optimiser, learning rates, "
                                      "queries, epochs and patience)")
    lbfgs_probe: bool = knob(False, "the lbfgs probe as a diagnostic (left out: a third of a unit's time, no "
                                    "verdict)")
    nonlinear_metric: bool = knob(True, "also train the nonlinear learned metric (an MLP map trained as NCA is)")
    wide_heads: tuple[str, ...] = knob(("attnknn", "label_bias", "self_attention"),
                                       "heads also trained at k_w, the tuned vote's k clipped to [wide_k_min, "
                                       "wide_k_max]")
    test_rows: int = knob(2000, "test rows per seed: disjoint blocks of the official test set, so seeds are "
                                "independent")
    pca_dims: int = knob(64, "principal components of the pixels kept (pixels_pca)")
    label_share: float = knob(0.01, "labelled share of the memory the few-label CNN trains on (few_labels)")
    few_label_epochs: int = knob(120, "epochs of the few-label CNN (it sees few rows per epoch; enough that its "
                                      "validation accuracy reaches a plateau, reported per seed)")
    source_classes: int = knob(5, "classes the transfer CNN trains on; the rest are evaluated (other_classes)")
    transfer_epochs: int = knob(16, "epochs of the transfer CNN (enough that its validation accuracy reaches a "
                                    "plateau, reported per seed)")
    embedder_val: int = knob(1000, "validation rows behind each embedder's epoch choice")
    room_margin: float = knob(0.01, "declared before the run: a candidate passes the gate when a gate learner "
                                    "(geometry-only ceiling, label-only learner, NCA) is at least this far above "
                                    "the strongest rule in cross-fitted validation accuracy, mean over seeds")

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "seeds", int_csv("seeds", self.seeds))
        object.__setattr__(self, "candidates", choice_csv("candidates", self.candidates, CANDIDATES))
        for name in ("test_rows", "pca_dims", "few_label_epochs", "transfer_epochs", "embedder_val"):
            check_range(name, getattr(self, name), 1, None)
        check_range("label_share", self.label_share, 0.0, 1.0, low_inclusive=False)
        check_range("source_classes", self.source_classes, 2, 8)
        check_range("room_margin", self.room_margin, 0.0, None)
        if min(self.seeds) < 0 or (max(self.seeds) + 1) * self.test_rows > OFFICIAL_TEST:
            raise ConfigError(f"seeds={','.join(map(str, self.seeds))} with test_rows={self.test_rows} is not "
                              f"allowed; each seed s reads test rows [s * test_rows, (s + 1) * test_rows) of "
                              f"{OFFICIAL_TEST}, so give (largest seed + 1) * test_rows <= {OFFICIAL_TEST}")
        self.check_dims("pca_dims", self.pca_dims)

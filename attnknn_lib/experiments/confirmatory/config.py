"""confirmatory: its name, notebook, config and output names (the declaration reads them).

The defaults are the declaration's (``docs/confirmatory_declaration.md``): its candidates, 12 seeds on
the whole official test set, the gate's margin and the one budget of every learner. A run with other
values is a run of this code, not the declared experiment; the record keeps its config.
"""

from __future__ import annotations

from dataclasses import dataclass

from attnknn_lib.base.errors import ConfigError, check_range
from attnknn_lib.base.knobs import csv, int_csv, knob
from attnknn_lib.experiments.common.fixed_embedding import HeadKnobs
from attnknn_lib.experiments.framework.declaration import Artifacts, figure, record, table
from attnknn_lib.training.candidate_embeddings import CANDIDATES

NAME = "confirmatory"
NOTEBOOK = "10_confirmatory.ipynb"
DATASET = "fashion_mnist"
LABELS = {"random_projection": "random projection of pixels", "autoencoder": "autoencoder code",
          "early_cnn": "CNN stopped after one epoch"}  # each declared candidate's name for a reader
ARTIFACTS = Artifacts(NAME, (record(), table("gate", "_gate"), table("verdicts", "_verdicts"),
                             figure("forest", "_forest")),
                      datasets=lambda cfg: (DATASET,))


@dataclass(frozen=True)
class Config(HeadKnobs):
    """The confirmatory experiment's knobs on top of the comparison's (:class:`~attnknn_lib.experiments.
    common.fixed_embedding.HeadKnobs`), at the declared values."""

    seeds: tuple[int, ...] = knob(tuple(range(12)), "seeds: each draws its validation split, the embedders' and "
                                                    "every learner's randomness and the gate's halves; every seed "
                                                    "reads the same test rows")
    candidates: tuple[str, ...] = knob(CANDIDATES, "candidate embeddings (among those of the declaration)")
    # the one budget of the declaration: every learner on NCA's grid, rows, epochs and patience
    train_queries: int = knob(0, "training queries per head (0: every memory row, each query's own row excluded)")
    head_epochs: int = knob(100, "most epochs per head, NCA's; it stops earlier at a plateau (head_patience)")
    head_lrs: tuple[float, ...] = knob((0.003, 0.01, 0.03), "learning-rate grid of the heads, NCA's, extended past "
                                                            "an end while the best sits there")
    probe_as_heads: bool = knob(True, "the linear probe trained as the heads are (their optimiser, learning rates, "
                                      "queries, epochs and patience); lbfgs's probe then stays as a diagnostic")
    nonlinear_metric: bool = knob(True, "also train the nonlinear learned metric (an MLP map trained as NCA is)")
    wide_heads: tuple[str, ...] = knob(("attnknn", "label_bias", "self_attention"),
                                       "heads also trained at k_w, the tuned vote's k clipped to [wide_k_min, "
                                       "wide_k_max]")
    autoencoder_epochs: int = knob(30, "epochs of the autoencoder, its epoch chosen on validation pixels")
    bootstrap: int = knob(1000, "paired bootstrap resamples of the shared test rows (the intervals' test term)")
    room_margin: float = knob(0.01, "declared before the run: a candidate passes the gate when a gate learner is at "
                                    "least this far above the tuned vote in cross-fitted validation accuracy, mean "
                                    "over seeds")

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "seeds", int_csv("seeds", self.seeds))
        object.__setattr__(self, "candidates", csv(self.candidates))
        for c in self.candidates:
            if c not in CANDIDATES:
                raise ConfigError(f"candidates={c!r} is not allowed; choose among: {', '.join(CANDIDATES)}")
        if min(self.seeds) < 0:
            raise ConfigError(f"seeds={','.join(map(str, self.seeds))} is not allowed; give seeds >= 0")
        for name in ("autoencoder_epochs", "bootstrap"):
            check_range(name, getattr(self, name), 1, None)
        check_range("room_margin", self.room_margin, 0.0, None)

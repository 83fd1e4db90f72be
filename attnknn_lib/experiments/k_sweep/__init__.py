"""k-sweep (notebook ``02_k_sweep``): how each voting rule depends on the number of neighbours k.

On main's trained Attn-KNN models (every seed), with the memory of its embedding: uniform,
distance and cosine kNN (tau and T tuned on validation at each k) and Attn-KNN, at every k of the
grid plus k = round(sqrt(n)). Attn-KNN is evaluated twice: as trained (its attention saw k = the
recipe's k), and with a fresh attention trained at that k on the frozen embedding, so the curves
separate "more neighbours" from "attention trained for them". Per k: test metrics raw and
calibrated (mean +- s.d. over seeds, per-seed bootstrap intervals), and the paired difference
Attn-KNN minus the best baseline (chosen on validation at that k), seed-level differences and intervals.
"""

from attnknn_lib.experiments.framework.declaration import Experiment, Views
from attnknn_lib.experiments.k_sweep import measure, views
from attnknn_lib.experiments.k_sweep.config import ARTIFACTS, NAME, NOTEBOOK, Config

EXPERIMENT = Experiment(
    name=NAME, notebook=NOTEBOOK, Config=Config, measurement=measure.MEASUREMENT, artifacts=ARTIFACTS,
    views=Views(macros=views.macros, readme_lines=views.readme_lines, readme_section="Robustness"),
    question="every rule at k in {1, 3, 5, 10, 20, 50} and round(sqrt(n)); Attn-KNN as trained and with its "
             "attention retrained at each k on the frozen embedding (to a plateau)",
    models="main's",
)

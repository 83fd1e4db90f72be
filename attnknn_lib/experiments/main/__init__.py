"""Main comparison (notebook ``01_main``): Attn-KNN against tuned kNN baselines and a CNN, over seeds.

For each dataset and seed: load the trained Attn-KNN and CNN (workflow jobs; trained here only
when the notebook runs alone), embed train / val / test (every TTA view), evaluate every method
of :mod:`attnknn_lib.evaluation.methods` and score it with bootstrap intervals. Across seeds: mean and
standard deviation of every metric, and the paired difference Attn-KNN minus the best baseline
(and minus the CNN) per seed and pooled over seeds (:func:`attnknn_lib.evaluation.bootstrap.paired_bootstrap_diff`).
On the primary dataset, for the first seed, the attention components are ablated on the frozen
Attn-KNN embedding. Writes ``results/main_<dataset>.json``, LaTeX tables, figures and the ``.npz``
artifacts from which every number can be recomputed.
"""

from attnknn_lib.experiments.framework.declaration import Experiment, Views
from attnknn_lib.experiments.main import measure, views
from attnknn_lib.experiments.main.config import ARTIFACTS, NAME, NOTEBOOK, Config
from attnknn_lib.experiments.main.views import dataset_answer

EXPERIMENT = Experiment(
    name=NAME, notebook=NOTEBOOK, Config=Config, measurement=measure.MEASUREMENT, artifacts=ARTIFACTS,
    # the main table leads the README's results block (no heading); its bullet leads the answer
    views=Views(macros=views.macros, readme_lines=views.readme_lines, answer_lines=dataset_answer.answer_lines),
    question="Attn-KNN against tuned uniform / distance / cosine kNN and a CNN, five datasets (Fashion-MNIST: 5 "
             "seeds on one split; the four tabular sets: 10 stratified hold-out splits, each with its own model "
             "seed), seed- or split-level verdicts against declared margins, a CNN trained with MixUp as a "
             "control, ablation",
    models="trains Attn-KNN and CNN per dataset and seed",
)

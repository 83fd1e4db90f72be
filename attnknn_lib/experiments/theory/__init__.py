"""Theory (notebook ``06_theory``): what the classic results and top-k attention say about our models.

* Error rate and NLL of uniform kNN and Attn-KNN against k (k = round(sqrt(n)) marked), with the
  Cover-Hart 1-NN bound drawn from a Bayes-error *proxy*: the error of the ensemble of main's CNNs
  (an upper estimate of the Bayes error, so the line is a reference, not a bound).
* Embedding geometry across training, from main's training histories: norms before the L2
  normalisation, per-head temperatures, attention entropy per epoch; and how far the trained
  attention's weights are from uniform on the test set (KL to uniform, effective number of
  neighbours exp(H)).
* Top-k attention as an approximation of dense softmax attention ("kNN Attention Demystified",
  Haris, ICLR 2025): queries = test embeddings, keys = the memory's embeddings, values = one-hot
  labels; the error of keeping the top k against k, with the bound 2 x the dropped softmax mass,
  and the same with sampled tail rows (:mod:`attnknn_lib.knn.topk`); then Attn-KNN's own
  vote, which *is* top-k softmax attention with labels as values, truncated to its k nearest
  neighbours against the same scores over the whole memory. Last, the cost of dense against top-k
  attention as n grows (synthetic unit vectors).
"""

from attnknn_lib.experiments.framework.declaration import Experiment, Views
from attnknn_lib.experiments.theory import measure, views
from attnknn_lib.experiments.theory.config import ARTIFACTS, NAME, NOTEBOOK, Config

EXPERIMENT = Experiment(
    name=NAME, notebook=NOTEBOOK, Config=Config, measurement=measure.MEASUREMENT, artifacts=ARTIFACTS, views=Views(macros=views.macros, readme_lines=views.readme_lines, readme_section="Cost and theory"),
    question="error and NLL against k with sqrt(n) and the Cover-Hart line (CNN-ensemble error as the Bayes proxy); norms, "
             "temperatures and attention entropy across training; top-k vs dense softmax attention on real embeddings, for "
             "Attn-KNN's own scores, and their cost against n",
    models="main's",
)

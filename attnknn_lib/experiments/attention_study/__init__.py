"""Attention study (notebook ``07_attention_study``): can an attention over the k neighbours learn, and how much is there to win?

On main's trained Attn-KNN embedding (every seed, frozen), in four memory settings (clean labels;
symmetric 30 %; asymmetric c -> c + 1 30 % and 40 %, noise in the memory's labels only, validation
and test labels clean), and on the memory of Attn-KNN retrained on a long-tailed subset (its own
embedding; the long-tail experiment's models, :func:`long_tail_runs`):

1. **Headroom** per k: recall@k (the ceiling of any convex reweighting), the uniform vote, the
   shares whose k neighbours all agree, the fixable share split by the vote gap
   (:mod:`attnknn_lib.knn.headroom`); two ceilings tuned on validation and scored on test: the best
   geometry-only rule (uniform / distance / cosine / rank decay, and k) and the best label-aware
   rule (keep the neighbours whose own neighbours back their label).
2. **Diagnostics** of the prototype attention as main trained it (its per-epoch history): the share
   of training queries whose vote carries a gradient against the same share on validation and
   test, the entropy term's gradient over the NLL's, the spread of scores within a neighbourhood,
   per-head entropy against the entropy of the averaged weights, temperatures.
3. **Variants** trained on the frozen neighbourhoods (:mod:`attnknn_lib.models.neighbour_heads`,
   :mod:`attnknn_lib.training.head_fitting`; training queries never retrieve themselves), each against the
   tuned kNN rule at the same k with seed-level verdicts (:mod:`attnknn_lib.evaluation.verdicts`),
   its effective k, the share of the fixable headroom it captured, and under noise its
   flipped/clean weight ratio and the AUROC of its weight for "this neighbour is flipped". The
   variant with the best validation accuracy is the setting's "best variant".
4. **The tuned vote** per memory (:mod:`attnknn_lib.evaluation.reference`):
   vote weighting, k (searched until the choice is not the largest k searched), label-consistency
   filter and prior correction tuned jointly on validation; every variant is also compared with it
   (``verdicts_reference``), the comparisons at a fixed k being secondary.
"""

from attnknn_lib.experiments.attention_study import measure, views
from attnknn_lib.experiments.attention_study.config import ARTIFACTS, NAME, NOTEBOOK, Config
from attnknn_lib.experiments.framework.declaration import Experiment, Views

EXPERIMENT = Experiment(
    name=NAME, notebook=NOTEBOOK, Config=Config, measurement=measure.MEASUREMENT, artifacts=ARTIFACTS,
    views=Views(macros=views.macros, readme_lines=views.readme_lines, readme_section="Can the attention learn? (attention study)",
                answer_lines=views.answer_lines),
    question=("can an attention over the k neighbours learn, and how much is there to win: headroom of any "
              "reweighting per k on a clean memory, noisy ones and a long-tailed one; diagnostics of the prototype "
              "attention during training; nine attention variants trained on the frozen embedding, each against the "
              "tuned vote with seed-level verdicts; learnable headroom; Attn-KNN retrained "
              "end to end without the entropy bonus; the core comparison again on digits (10 hold-out splits)"),
    models="main's + 3 retrained without the entropy bonus",
)

"""attention_study: the training runs it needs and the analysis that writes its record.

The modules, lowest first: :mod:`.pairing` (paired differences and seed-level verdicts),
:mod:`.training_runs`, :mod:`.memory`, :mod:`.ceilings` (the rules that learn nothing),
:mod:`.variants`, :mod:`.learnable_headroom`, :mod:`.variants_at_k`, :mod:`.controls`,
:mod:`.gallery`, :mod:`.part_names`, :mod:`.seed_settings`, :mod:`.summary` and :mod:`.dispatch`
(:func:`run_part`, :func:`run`). This package re-exports what the declaration, the views and the
tests read.
"""

from attnknn_lib.evaluation.verdicts import HEADLINE_BOOT
from attnknn_lib.experiments.attention_study.measure.controls import END_TO_END, SECOND_DIFFS, SECOND_METHODS
from attnknn_lib.experiments.attention_study.measure.dispatch import run, run_part
from attnknn_lib.experiments.attention_study.measure.gallery import gallery_queries
from attnknn_lib.experiments.attention_study.measure.learnable_headroom import LEARNERS, fold_queries, gbm_learner
from attnknn_lib.experiments.attention_study.measure.memory import memory_setting
from attnknn_lib.experiments.attention_study.measure.pairing import COMPARED, PAIR, _paired, drop_pairs, seed_verdicts
from attnknn_lib.experiments.attention_study.measure.part_names import Part, parts
from attnknn_lib.experiments.attention_study.measure.training_runs import end_to_end_runs, runs, second_runs
from attnknn_lib.experiments.attention_study.measure.variants import (
    AS_TRAINED,
    COLLAPSE,
    DIFFERENCE,
    MAIN_ATTNKNN,
    _fit_searched,
    reached_plateau,
)
from attnknn_lib.experiments.framework.declaration import Measurement
from attnknn_lib.training.metric_learning import LR_EXTENSIONS, LR_STEP  # the learning-rate rule every learner shares

__all__ = [
    "AS_TRAINED", "COLLAPSE", "COMPARED", "DIFFERENCE", "MAIN_ATTNKNN", "END_TO_END", "HEADLINE_BOOT", "LEARNERS", "LR_EXTENSIONS", "LR_STEP", "PAIR",
    "SECOND_DIFFS", "SECOND_METHODS", "Part", "_fit_searched", "_paired", "drop_pairs", "end_to_end_runs",
    "fold_queries", "gallery_queries", "gbm_learner", "memory_setting", "parts",
    "reached_plateau", "run", "run_part", "runs", "second_runs", "seed_verdicts",
]


MEASUREMENT = Measurement(runs=runs, run=run, parts=parts, run_part=run_part)

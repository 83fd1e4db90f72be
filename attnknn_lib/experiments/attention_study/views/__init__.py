"""Attention-study views: tables, figures, macros, README lines and the notebook's findings, from a record.

One module per kind of output, each reading the record the measurement writes
(``results/attention_study_<dataset>.json``): :mod:`.labels` (names of settings, variants, verdicts),
:mod:`.cells` (a difference as a cell or a clause), :mod:`.frames` (the notebook's pandas tables),
:mod:`.plots` (the figures), :mod:`.outputs` (``write_outputs``: the LaTeX tables with their captions
and the figures), :mod:`.sentences` (one-sentence readings and the plain answer), :mod:`.paper_macros`
(the paper's numbers), :mod:`.answer` (the README's answer bullets) and :mod:`.text` (README lines,
the findings' detailed bullets, findings). This package re-exports
them all, so ``views.<name>`` reads as it did when the views were one module.
"""

from attnknn_lib.experiments.attention_study.views.answer import answer_lines
from attnknn_lib.experiments.attention_study.views.cells import (
    bracket,
    diff_cell,
    filter_cell,
    interval_text,
    one_line,
)
from attnknn_lib.experiments.attention_study.views.frames import (
    best_variant_frame,
    ceilings_frame,
    collapse_frame,
    diagnostics_frame,
    end_to_end_frame,
    gradient_shares,
    headroom_frame,
    learnable_frame,
    reference_frame,
    second_frame,
    variants_by_setting,
    variants_frame,
)
from attnknn_lib.experiments.attention_study.views.labels import (
    MEMORY_SETTING_TITLES,
    RETRAINED,
    SHORT,
    VERDICT_MARK,
    below_budget,
    counts_toward_answer,
    is_noise,
    setting_title,
    short_setting,
    variant_label,
)
from attnknn_lib.experiments.attention_study.views.outputs import write_outputs
from attnknn_lib.experiments.attention_study.views.paper_macros import macros, study_macros
from attnknn_lib.experiments.attention_study.views.plots import (
    curves_figure,
    diagnostics_figure,
    headroom_figure,
    variants_figure,
)
from attnknn_lib.experiments.attention_study.views.sentences import (
    UNIFORM_SHARE,
    attnknn_line,
    budget_text,
    budgets,
    collapse_reading,
    end_to_end_reading,
    plain_answer,
    proper_line,
    second_learnable,
    second_line,
)
from attnknn_lib.experiments.attention_study.views.text import GLOSSARY, finding_bullets, findings, readme_lines

__all__ = [
    # labels
    "MEMORY_SETTING_TITLES", "RETRAINED", "SHORT", "VERDICT_MARK", "below_budget", "counts_toward_answer", "is_noise",
    "setting_title", "short_setting", "variant_label",
    # cells
    "bracket", "diff_cell", "filter_cell", "interval_text", "one_line",
    # frames
    "best_variant_frame", "ceilings_frame", "collapse_frame", "diagnostics_frame", "end_to_end_frame",
    "gradient_shares", "headroom_frame", "learnable_frame", "reference_frame", "second_frame", "variants_by_setting",
    "variants_frame",
    # plots and outputs
    "curves_figure", "diagnostics_figure", "headroom_figure", "variants_figure",
    "write_outputs",
    # sentences
    "UNIFORM_SHARE", "attnknn_line", "budget_text", "budgets", "collapse_reading", "end_to_end_reading",
    "plain_answer", "proper_line", "second_learnable", "second_line",
    # macros and text
    "GLOSSARY", "answer_lines", "finding_bullets", "findings", "macros", "readme_lines", "study_macros",
]

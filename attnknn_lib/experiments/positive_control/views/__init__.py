"""Positive-control views: tables, the figure, macros, README lines and findings read off its record
(no measuring).

:mod:`.control_tables` (the notebook's tables, the figure and ``write_outputs``: the LaTeX tables with their
captions, the figures), :mod:`.control_macros` (the paper's numbers) and :mod:`.control_text` (the findings, the
README's lines and answer bullet). This package re-exports them, so ``views.<name>`` reads as it did
when the views were one module.
"""

from attnknn_lib.experiments.positive_control.views.control_macros import macros, pc_macros
from attnknn_lib.experiments.positive_control.views.control_tables import (
    declared,
    diagnostic_frame,
    figure,
    headroom_frame,
    resolution_frame,
    shares_frame,
    verdict_frame,
    write_outputs,
)
from attnknn_lib.experiments.positive_control.views.control_text import (
    answer_lines,
    finding_lines,
    findings,
    readme_lines,
)

__all__ = ["answer_lines", "declared", "diagnostic_frame", "figure", "finding_lines", "findings", "headroom_frame", "macros",
           "pc_macros", "readme_lines", "resolution_frame", "shares_frame", "verdict_frame", "write_outputs"]

"""Weaker-embedding views: tables, the figure, macros, README lines and findings read off its record
(no measuring).

:mod:`.regime_family` (the one Holm family of every learner that every view reads, and the wins it counts),
:mod:`.regime_tables` (the notebook's tables, the figure and ``write_outputs``: the LaTeX tables with their
captions, the figures), :mod:`.regime_macros` (the paper's numbers) and :mod:`.regime_text` (the findings, the
README's lines and answer bullet). This package re-exports them, so ``views.<name>`` reads as it did
when the views were one module.
"""

from attnknn_lib.experiments.headroom_regimes.views.regime_family import one_family
from attnknn_lib.experiments.headroom_regimes.views.regime_macros import macros, regime_macros
from attnknn_lib.experiments.headroom_regimes.views.regime_tables import (
    embedder_frame,
    figure,
    headroom_frame,
    verdict_frame,
    write_outputs,
)
from attnknn_lib.experiments.headroom_regimes.views.regime_text import (
    answer_lines,
    finding_lines,
    findings,
    readme_lines,
)

__all__ = ["answer_lines", "embedder_frame", "figure", "finding_lines", "findings", "headroom_frame", "macros",
           "one_family", "readme_lines", "regime_macros", "verdict_frame", "write_outputs"]

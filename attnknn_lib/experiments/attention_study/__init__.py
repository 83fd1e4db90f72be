"""Attention study: the headroom of any reweighting of the k neighbours, diagnostics of the prototype
attention, and attention variants trained on the frozen embedding.

``measure`` runs the analyses into a record; ``views`` turns a record into tables, figures,
macros, README lines and the notebook's findings. The notebook (07) and the workflow use the names
re-exported here.
"""

from attnknn_lib.experiments.attention_study.measure import (  # noqa: F401 - the experiment's interface
    NAME,
    NOTEBOOK,
    VARIANTS,
    Config,
    ceilings,
    diagnostics,
    end_to_end_runs,
    headroom_table,
    long_tail_runs,
    long_tail_setting,
    outputs,
    parse_setting,
    run,
    runs,
)
from attnknn_lib.experiments.attention_study.views import (  # noqa: F401 - the experiment's interface
    README_SECTION,
    answer_lines,
    best_variant_frame,
    ceilings_frame,
    diagnostics_frame,
    end_to_end_frame,
    end_to_end_reading,
    findings,
    gallery_figure,
    gradient_shares,
    headroom_frame,
    macros,
    readme_lines,
    variants_frame,
    write_outputs,
)

"""Theory: error against k, embedding-norm stability, learned temperatures, top-k truncation.

``measure`` runs the analyses into a record; ``views`` turns a record into figures, tables,
macros and README lines. The notebook (06) and the workflow use the names re-exported here.
"""

from attnknn_lib.experiments.theory.measure import (  # noqa: F401 - the experiment's interface
    METHODS,
    NAME,
    NOTEBOOK,
    TIMED,
    Config,
    attention_costs,
    attnknn_truncation,
    cover_hart_bound,
    error_fit,
    geometry,
    k_curves,
    outputs,
    run,
    runs,
    softmax_truncation,
    truncation_ks,
    weight_spread,
)
from attnknn_lib.experiments.theory.views import (  # noqa: F401 - the experiment's interface
    README_SECTION,
    findings,
    fits_frame,
    geometry_figure,
    geometry_frame,
    k_figure,
    macros,
    readme_lines,
    summary_frame,
    table_frame,
    topk_figure,
    write_outputs,
)

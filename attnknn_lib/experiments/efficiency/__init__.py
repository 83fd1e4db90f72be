"""Efficiency: index build and search time, per-query attention overhead, memory, training time.

``measure`` runs the measurements into a record; ``views`` turns a record into figures, tables,
macros and README lines. The notebook (05) and the workflow use the names re-exported here.
"""

from attnknn_lib.experiments.efficiency.measure import (  # noqa: F401 - the experiment's interface
    NAME,
    NOTEBOOK,
    STAGES,
    TIMED,
    Config,
    add_memory_limits,
    gemm_yardstick,
    measure_indexes,
    outputs,
    prediction_costs,
    run,
    runs,
    search_engines,
    synthetic_scaling,
    training_times,
)
from attnknn_lib.experiments.efficiency.views import (  # noqa: F401 - the experiment's interface
    README_SECTION,
    cost_frame,
    figure,
    findings,
    index_frame,
    macros,
    readme_lines,
    s_range,
    scaling_figure,
    slopes_frame,
    summary_frame,
    throughput_frame,
    training_frame,
    write_outputs,
)

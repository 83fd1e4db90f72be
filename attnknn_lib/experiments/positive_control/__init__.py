"""The generated task, a positive control (notebook ``08_positive_control``): can this implementation
of the attention win where a learned weighting has room to win?

A generated task whose room to win is one knob (:mod:`attnknn_lib.data.synthetic`): classes made of
small interleaved clusters in a few informative dimensions, plus nuisance dimensions of growing
scale that the retrieval cannot ignore and a query/key projection can. At each scale: the
headroom before any head is trained, the tuned vote, the NLL-tuned vote,
the learnable headroom, and Attn-KNN with the attention study's heads against both
references, with their effective k. Expected: at scale 0 the weights stay near uniform and tie
the tuned vote; with room, the attention sharpens and wins. If it does not, the learner is suspect.
"""

from attnknn_lib.experiments.framework.declaration import Experiment, Views
from attnknn_lib.experiments.positive_control import measure, views
from attnknn_lib.experiments.positive_control.config import ARTIFACTS, NAME, NOTEBOOK, Config

EXPERIMENT = Experiment(
    name=NAME, notebook=NOTEBOOK, Config=Config, measurement=measure.MEASUREMENT, artifacts=ARTIFACTS,
    views=Views(macros=views.macros, readme_lines=views.readme_lines, readme_section="Where could the attention win?",
                answer_lines=views.answer_lines),
    question="a generated task whose room to win is one knob (nuisance dimensions the retrieval cannot ignore): "
             "the room to win, the tuned vote, the learnable room, NCA (a learned metric with the same vote), the linear probe, "
             "the query-only control, and the attention head (its vote settings tuned, and at k = 16) and the study's "
             "other heads against the tuned vote and "
             "against NCA with their effective k and the share of the room they capture, from no room to much room "
             "(5 seeds per level)",
    models="none of the workflow: the heads train in the notebook on generated embeddings",
)

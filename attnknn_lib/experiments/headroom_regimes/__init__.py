"""Real regimes with room (notebook ``09_headroom_regimes``): is there data on this machine where a
learned neighbour weighting has room to win, and does Attn-KNN win there?

Three candidate embeddings of Fashion-MNIST with room to learn (:data:`~.config.CANDIDATES`): PCA of
the pixels, a CNN trained on 1 % of the labels while the memory holds every label, and a CNN
trained on other classes than the ones it is evaluated on. On each, before any head is trained:
the headroom table, the tuned vote, the NLL-tuned vote and the
learnable headroom; then Attn-KNN and the study's heads against both references, with their
effective k (5 seeds, each with its own test rows).
"""

from attnknn_lib.experiments.framework.declaration import Experiment, Views
from attnknn_lib.experiments.headroom_regimes import measure, views
from attnknn_lib.experiments.headroom_regimes.config import ARTIFACTS, NAME, NOTEBOOK, Config

EXPERIMENT = Experiment(
    name=NAME, notebook=NOTEBOOK, Config=Config, measurement=measure.MEASUREMENT, artifacts=ARTIFACTS,
    views=Views(macros=views.macros, readme_lines=views.readme_lines, readme_section="Is there a real regime with room?",
                answer_lines=views.answer_lines),
    question="three candidate embeddings of Fashion-MNIST with room to learn (PCA of pixels, a CNN on 1 % of the "
             "labels, a CNN on other classes): the gate on validation, the tuned vote, the learnable room, NCA, the "
             "linear probe, then the attention head (its vote settings tuned, and at k = 16) and the study's other heads "
             "against the tuned vote and against NCA (5 seeds, each its own test rows)",
    models="none of the workflow: the candidate embedders and the heads train in the notebook",
)

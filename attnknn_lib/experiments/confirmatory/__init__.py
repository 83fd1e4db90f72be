"""The confirmatory experiment (notebook ``10_confirmatory``): on frozen Fashion-MNIST embeddings declared
before anything measured them, does learned attention over a query's k nearest neighbours beat the tuned
vote, and a learned metric with the same vote?

Declared in ``docs/confirmatory_declaration.md`` (committed before this code): three candidate embeddings
(:data:`~attnknn_lib.training.candidate_embeddings.CANDIDATES`: a random projection of the pixels, an
autoencoder's code, a CNN stopped after one epoch), the gate on validation, every learner on one budget,
12 seeds on the whole test set, one Holm family per endpoint and the minimum detectable differences. Its
run is far beyond this machine's session (the declaration's estimate: 20 to 35 h of job time on two
cores), so it is declared *awaiting*: the default run leaves it out and ``./run_all.sh status`` says how
to run it (``--only confirmatory``, on more cores, a cluster or a GPU).
"""

from attnknn_lib.experiments.confirmatory import measure, views
from attnknn_lib.experiments.confirmatory.config import ARTIFACTS, NAME, NOTEBOOK, Config
from attnknn_lib.experiments.framework.declaration import Experiment, Views

EXPERIMENT = Experiment(
    name=NAME, notebook=NOTEBOOK, Config=Config, measurement=measure.MEASUREMENT, artifacts=ARTIFACTS,
    views=Views(macros=views.macros, readme_lines=views.readme_lines, readme_section="The declared test"),
    question="three frozen embeddings declared before any measurement (a random projection of pixels, an "
             "autoencoder's code, a CNN stopped after one epoch): the gate on validation, then every learner under "
             "one budget (NCA, the nonlinear metric, the linear probe, the attention head trained at k and at k_w, "
             "its label-conditioned and self-attention variants, the study's heads) against the tuned vote and the "
             "attention against each learned metric (12 seeds, the whole test set, Holm per endpoint)",
    models="none of the workflow: the embedders and every learner train in the notebook's part jobs",
    awaiting="its declared run takes about 20 to 35 h of job time on two cores (the declaration's estimate), more "
             "than a session here: run it where there are more cores, a cluster or a GPU",
)

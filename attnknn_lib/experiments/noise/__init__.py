"""Label noise (notebook ``03_noise``): do the kNN rules and the CNN keep their accuracy when labels are wrong?

Symmetric noise (a flipped label moves to any other class) and asymmetric noise (c -> c + 1) at
each rate, in two settings:

* ``bank``: noise only in the memory labels; main's models, trained on clean labels, are
  unchanged (the prototype's setting). The CNN does not use the memory, so only its calibrator
  (fitted on the noisy validation labels) changes.
* ``trained``: Attn-KNN and the CNN retrained on the noisy training labels with main's recipe (the
  whole training set, all epochs; rate 0 is main's own models), with the memory labelled the same way.

In both, validation labels are noisy too (the user's labels are), so every knob, the best
baseline and every calibrator are chosen on noisy labels; the test labels are clean. For each
cell the tuned vote (:func:`attnknn_lib.experiments.common.shared.reference_of`),
tuned on the noisy validation labels, is the reference of every verdict. For each
rule the weight it puts on flipped neighbours is compared with the weight on clean ones:
``ratio = mean weight of a flipped neighbour / mean weight of a clean neighbour`` over the test
queries' k neighbours (uniform voting: 1 by construction; below 1: the tuned vote down-weights them).
"""

from attnknn_lib.experiments.framework.declaration import Experiment, Views
from attnknn_lib.experiments.noise import measure, views
from attnknn_lib.experiments.noise.config import ARTIFACTS, NAME, NOTEBOOK, Config

EXPERIMENT = Experiment(
    name=NAME, notebook=NOTEBOOK, Config=Config, measurement=measure.MEASUREMENT, artifacts=ARTIFACTS,
    views=Views(macros=views.macros, readme_lines=views.readme_lines, readme_section="Robustness"),
    question="symmetric and asymmetric label noise, 0-40 %: in the memory bank only (main's models) and retrained on "
             "noisy labels; the weight each rule gives flipped neighbours",
    models="main's + retrained",
)

"""Long tail (notebook ``04_long_tail``): the rules on a class-imbalanced memory.

The training rows are subsampled with the exponential profile (the class of rank r keeps
n_max * ratio^(r/(C-1)) rows; ratio = smallest / largest class; which class gets which rank is drawn
per model seed, so the tail is not always the same classes) in two settings: ``bank`` (main's models, the memory
built from the imbalanced subset) and ``trained`` (Attn-KNN and the CNN retrained on the imbalanced
subset). Validation and test stay balanced, so every knob is tuned for balanced accuracy. A
standard remedy is added as a reference: a prior correction (each class's vote divided by its
share of the memory to the power beta, the post-hoc logit adjustment of Menon et al. 2021; for the
CNN the same correction of its softmax), beta chosen on validation, on the best kNN baseline, Attn-KNN and the CNN. Per-class
test accuracy is reported against the class's size in the memory, and as head / middle / tail
thirds of the classes by size.
"""

from attnknn_lib.experiments.framework.declaration import Experiment, Views
from attnknn_lib.experiments.long_tail import measure, views
from attnknn_lib.experiments.long_tail.config import ARTIFACTS, NAME, NOTEBOOK, Config

EXPERIMENT = Experiment(
    name=NAME, notebook=NOTEBOOK, Config=Config, measurement=measure.MEASUREMENT, artifacts=ARTIFACTS,
    views=Views(macros=views.macros, readme_lines=views.readme_lines, readme_section="Robustness"),
    question="imbalance ratios 1, 0.1, 0.01: memory from the imbalanced subset (main's models) and retrained on it; "
             "head / tail accuracy; a prior correction (logit adjustment) as the reference remedy",
    models="main's + retrained",
)

"""main: its name, notebook, config and output names (the declaration reads them)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from attnknn_lib.base.errors import ConfigError, check_choice, check_range
from attnknn_lib.base.knobs import csv, int_csv, knob
from attnknn_lib.data.registry import DATASET_NAMES, REGISTRY
from attnknn_lib.data.spec import DataSpec
from attnknn_lib.evaluation.methods import (
    K_ENSEMBLE,
)
from attnknn_lib.evaluation.verdicts import HEADLINE_BOOT, MARGINS
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.experiments.common.learned_metric import NcaKnobs
from attnknn_lib.experiments.framework.declaration import Artifacts, figure, record, table

NAME = "main"
NOTEBOOK = "01_main.ipynb"
# attention variants of the ablation: name -> switches on top of the main configuration
ABLATIONS: dict[str, dict] = {
    "default": {},
    "no_distance_bias": {"distance_bias": False},
    "fixed_temperature": {"learn_temperature": False},
    "label_bias": {"label_bias": True},
    "prototypes": {"prototypes": True},
    "neighbour_self_attention": {"neighbour_self_attention": True},
    "all_components": {"label_bias": True, "prototypes": True, "neighbour_self_attention": True},
}
RELIABILITY_METHODS = ("uniform", "distance", "attnknn", "attnknn_tta", "cnn")
SUMMARY_METHODS = ("uniform", "distance", "cosine", "attnknn", "attnknn_tta", "cnn")
COMPARISONS = {"attnknn_vs_reference": ("attnknn", "reference"),  # the tuned vote
               "attnknn_vs_best_baseline": ("attnknn", "best baseline"), "attnknn_vs_cnn": ("attnknn", "cnn"),
               # the same training with the attention replaced by a fixed softmax vote (primary dataset only)
               "attnknn_vs_fixed_vote": ("attnknn", "fixed_vote"),
               # Attn-KNN with the tuned vote's knobs (k, filter, prior chosen on validation) against the tuned vote
               "attnknn_tuned_vs_reference": ("attnknn_tuned", "reference"),
               # the calibration endpoint: calibrated NLL and Brier against the NLL-tuned vote
               "attnknn_tuned_vs_reference_nll": ("attnknn_tuned_nll", "reference_nll"),
               "attnknn_vs_reference_nll": ("attnknn", "reference_nll")}
COMPARISONS.update({  # the learned-metric family against the tuned vote, and attention against the learned metric
    "nca_vs_reference": ("nca", "reference"), "linear_probe_vs_reference": ("linear_probe", "reference"),
    "attnknn_tuned_vs_nca": ("attnknn_tuned", "nca"), "attnknn_tuned_vs_nca_nll": ("attnknn_tuned_nll", "nca_nll")})
CALIBRATION_COMPARISONS = ("attnknn_tuned_vs_reference_nll", "attnknn_vs_reference_nll", "attnknn_tuned_vs_nca_nll")
"""Comparisons read on the calibration endpoint only (NLL and Brier after calibration): their
reference is tuned for it, so their accuracy difference is no claim."""
ARTIFACTS = Artifacts(NAME, (
    record(), table("table"),  # per dataset
    # the reliability diagram on the primary dataset only: a tabular test split of 30-180 rows leaves
    # most of the fifteen bins empty
    figure("reliability", "_reliability", "primary", drawn_from="figure_data"),
    table("paired", "_paired", "primary"), table("seeds", "_seeds", "primary"),
    figure("curves", "_curves", "primary"), figure("confusion", "_confusion", "primary", drawn_from="figure_data"),
    table("knobs", "_knobs", "primary"),  # each seed's choices of the tuned vote and of Attn-KNN with its knobs
    table("ablation", "_ablation", "primary", when=lambda cfg: cfg.ablation),
    table("replay", "_replay", "primary", when=lambda cfg: cfg.replay),
    table("summary", "_summary", "experiment"),  # every dataset in one table
    table("detectable", "_detectable", "primary"),  # its block of the paper's table of detectable differences
), datasets=lambda cfg: cfg.datasets, primary=lambda cfg: cfg.primary)


@dataclass(frozen=True)
class Config(NcaKnobs):
    """The main experiment's own knobs on top of the shared recipe."""

    datasets: tuple[str, ...] = knob(("fashion_mnist", "digits", "iris", "wine", "breast_cancer"),
                                     "comma-separated dataset names")
    primary: str = knob("fashion_mnist", "dataset of the ablation, training curves and confusion matrix")
    seeds: tuple[int, ...] = knob((0, 1, 2, 3, 4), "training seeds (comma-separated)")
    tta_views: int = knob(6, "test-time augmentation views, 1 to 6")
    n_boot: int = knob(HEADLINE_BOOT, "bootstrap resamples for the 95 % intervals")
    ablation: bool = knob(True, "ablate the attention components on the primary dataset (first seed)")
    ablation_epochs: int = knob(12, "most epochs per ablation variant (main's recipe epochs); it stops earlier at a "
                                    "plateau (ablation_patience)")
    ablation_patience: int = knob(2, "an ablation variant stops after this many epochs without a better validation "
                                     "score")
    mixup_control: float = knob(0.2, "MixUp alpha of a control CNN on the primary dataset (0: no control)")
    control_seeds: int = knob(3, "the control CNN is trained for the first n seeds")
    learned_metrics: bool = knob(True, "train the learned metrics with the same vote on every replicate: NCA (the "
                                       "rule re-tuned in its space) and the linear probe")
    fixed_vote_control: bool = knob(True, "train the end-to-end control on the primary dataset, every seed: Attn-KNN's "
                                          "recipe with the attention replaced by a fixed softmax vote over the "
                                          "neighbours' distances (one learned temperature)")
    replay: bool = knob(True, "prototype replay on the primary dataset's first seed: re-introduce its defects one at a time")
    small_data_splits: int = knob(10, "tabular data sets: stratified hold-out splits, each with its own split and "
                                      "model seed (0: the seeds on one split)")
    margin_accuracy: float = knob(MARGINS["accuracy"], "equivalence margin of accuracy differences (0.0025 is 0.25 pp)")
    margin_nll: float = knob(MARGINS["nll"], "equivalence margin of NLL differences")

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "datasets", csv(self.datasets))
        object.__setattr__(self, "seeds", int_csv("seeds", self.seeds))
        if not self.datasets:
            raise ConfigError("datasets='' is empty; give at least one of: " + ", ".join(DATASET_NAMES))
        for name in self.datasets:
            check_choice("dataset", name, DATASET_NAMES)
        check_choice("primary", self.primary, self.datasets)
        check_range("tta_views", self.tta_views, 1, 6)
        check_range("ablation_epochs", self.ablation_epochs, 1, None)
        check_range("ablation_patience", self.ablation_patience, 1, None)
        check_range("n_boot", self.n_boot, 1, None)
        check_range("k", self.k, 1, max(K_ENSEMBLE))
        check_range("control_seeds", self.control_seeds, 1, None)
        check_range("small_data_splits", self.small_data_splits, 0, None)
        for name in ("mixup_control", "margin_accuracy", "margin_nll"):
            check_range(name, getattr(self, name), 0.0, None)

    def margin(self, metric: str) -> float | None:
        """The declared equivalence margin of a metric (the config's, else the library's; None for
        ECE, which is described only)."""
        return getattr(self, f"margin_{metric}", MARGINS.get(metric))


    def replicates(self, name: str) -> list[tuple[int, DataSpec]]:
        """(model seed, data) of each replicate of dataset ``name``: the seeds on one fixed split for
        image data; for tabular data (tens to hundreds of test points), ``small_data_splits``
        stratified hold-out splits, split r with split seed r and model seed r, so the comparison
        counts the split's sampling error (:func:`~attnknn_lib.evaluation.verdicts.split_level`)."""
        if REGISTRY[name].kind == "image" or not self.small_data_splits:
            return [(s, core.data_spec(self, name)) for s in self.seeds]
        return [(r, core.data_spec(self, name, split_seed=r)) for r in range(self.small_data_splits)]

    def by_splits(self, name: str) -> bool:
        return REGISTRY[name].kind != "image" and bool(self.small_data_splits)

    def replay_runs(self):
        """The replay's two Attn-KNN runs on the primary dataset's first seed, otherwise the recipe's
        run: one trained with self-matches (the prototype's defect), and one that keeps every
        epoch's weights, so the replay can choose the checkpoint on test (the other defect that
        needs training). The second trains like the recipe's run; only what it saves differs."""
        if not self.replay:
            return []
        run = core.model_runs(self, core.data_spec(self, self.primary), self.seeds[:1], kinds=("attnknn",))[0]
        return [replace(run, train={**run.train, "exclude_self": False}),
                replace(run, train={**run.train, "keep_epochs": True})]

    def fixed_vote_runs(self):
        """The end-to-end control's runs: Attn-KNN's run of every seed of the primary dataset with
        ``fixed_vote`` on (:class:`~attnknn_lib.models.AttentionConfig`); none when switched off."""
        if not self.fixed_vote_control:
            return []
        return [replace(run, attention={**run.attention, "fixed_vote": True})
                for run in core.model_runs(self, core.data_spec(self, self.primary), self.seeds, kinds=("attnknn",))]

    def control_runs(self):
        """The control CNN's runs: the recipe with ``mixup_control`` as its MixUp alpha, on the
        primary dataset, first ``control_seeds`` seeds; none if that is the recipe's own alpha."""
        if not self.mixup_control or self.mixup_control == self.mixup_alpha:
            return []
        recipe = replace(self.recipe(), mixup_alpha=self.mixup_control)
        return core.model_runs(recipe, core.data_spec(self, self.primary), self.seeds[:self.control_seeds],
                               kinds=("cnn",))

"""attention_study: its name, notebook, config and output names (the declaration reads them)."""

from __future__ import annotations

from dataclasses import dataclass

from attnknn_lib.base.errors import ConfigError, check_choice, check_range
from attnknn_lib.base.knobs import csv, float_csv, int_csv, knob
from attnknn_lib.data.label_noise import NOISE_KINDS
from attnknn_lib.data.registry import DATASET_NAMES, REGISTRY
from attnknn_lib.evaluation.reference import REFERENCE_K
from attnknn_lib.evaluation.verdicts import MARGINS
from attnknn_lib.experiments.common.learned_metric import NcaKnobs
from attnknn_lib.experiments.framework.declaration import Artifacts, figure, record, table

NAME = "attention_study"
NOTEBOOK = "07_attention_study.ipynb"
VARIANTS = {  # name -> (label, what it tests)
    "blind_bonus": ("label-blind, entropy bonus", "the prototype's attention and loss (entropy weight 0.01)"),
    "blind_none": ("label-blind, no entropy term", "the bonus pulls the weights to uniform"),
    "blind_penalty": ("label-blind, entropy penalty", "weights pushed away from uniform"),
    "blind_heldout": ("label-blind, held-out queries", "training neighbourhoods purer than test ones"),
    "label_aware": ("label-aware scores", "scores that can see labels and their consistency"),
    "label_aware_heldout": ("label-aware, held-out queries", "label-aware scores taught by clean labels"),
    "readout": ("TabR-style readout", "values and an MLP readout, not a vote"),
    "query_only": ("query alone (readout's control)", "what the readout gets without neighbours"),
    "adaptive_k": ("learned mixture over k", "a per-query k against the best fixed k (not main's adaptive k)"),
}

ARTIFACTS = Artifacts(NAME, (
    record(), *(table(t, f"_{t}") for t in ("headroom", "variants", "best", "reference", "learnable", "diagnostics")),
    table("learned", "_learned", when=lambda cfg: cfg.learned_metrics),
    table("collapse", "_collapse", when=lambda cfg: bool(cfg.collapse_seeds) and "clean" in cfg.settings),
    table("second", "_second", when=lambda cfg: bool(cfg.second_datasets)),
    *(figure(f"{f}_figure", f"_{f}") for f in ("headroom", "diagnostics", "variants")),
    figure("curves_figure", "_curves", when=lambda cfg: bool(cfg.variant_settings)),  # the heads' learning curves
    table("detectable", "_detectable")))  # its block of the paper's table of detectable differences


@dataclass(frozen=True)
class Config(NcaKnobs):
    """The attention study's knobs on top of the shared recipe (which names main's models)."""

    dataset: str = knob("fashion_mnist", "dataset whose trained main models are studied")
    learned_metrics: bool = knob(True, "on every memory setting, the learned metrics with the same vote (NCA with the "
                                       "rule re-tuned in its space, the linear probe), trained on that memory's labels")
    seeds: tuple[int, ...] = knob((0, 1, 2, 3, 4), "seeds of main's models (comma-separated)")
    settings: tuple[str, ...] = knob(("clean", "symmetric/0.3", "asymmetric/0.3", "asymmetric/0.4"),
                                     "memory settings: clean or kind/rate (noise in the memory's labels)")
    headroom_ks: tuple[int, ...] = knob((1, 3, 5, 10, 16, 32, 64), "k of the headroom table")
    variant_ks: tuple[int, ...] = knob((5, 16), "k at which the variants are trained")
    variant_settings: tuple[str, ...] = knob(("clean", "symmetric/0.3", "asymmetric/0.3", "asymmetric/0.4"),
                                             "settings in which the variants are trained (a subset of settings)")
    variants: tuple[str, ...] = knob(tuple(VARIANTS), "variants to train")
    # the one budget of the positive control and the weaker embeddings: every variant and the linear probe on
    # NCA's learning-rate grid, every memory row as a training query, NCA's epoch cap and patience
    train_queries: int = knob(0, "training queries per variant (0: every memory row, each query's own row "
                                 "excluded; else a seeded subset)")
    head_epochs: int = knob(100, "most epochs per variant and learning rate, NCA's; it stops earlier at a plateau "
                                 "(head_patience)")
    head_patience: int = knob(5, "a variant stops after this many epochs without a better validation score")
    head_batch_size: int = knob(256, "training queries per step of a variant (the positive control's heads')")
    head_lrs: tuple[float, ...] = knob((0.003, 0.01, 0.03), "learning-rate grid of every variant and of the linear "
                                                            "probe, NCA's, extended past an end while the best sits "
                                                            "there")
    head_lr: float = knob(0.01, "AdamW learning rate around which the collapse sweep moves the rate (lr / 10, "
                                "lr x 10)")
    probe_as_heads: bool = knob(True, "the linear probe trained as the variants are (their optimiser, learning "
                                      "rates, queries, epochs and patience), in place of lbfgs's")
    loo_k: int = knob(16, "neighbours of a memory row behind its leave-one-out agreement")
    noise_seed: int = knob(0, "seed offset of the memory's noise draw: seed s draws with offset + s")
    reference_k: int = knob(REFERENCE_K, "neighbours searched for the strongest non-learned rule, doubled while its "
                                         "chosen k is the largest searched")
    long_tail_ratio: float = knob(0.01, "a memory of Attn-KNN retrained on a long-tailed subset with this imbalance "
                                        "ratio, as in the long-tail experiment (0: none)")
    long_tail_seeds: tuple[int, ...] = knob((0, 1, 2, 3, 4), "seeds of the long-tailed models (among seeds)")
    long_tail_max_train: int = knob(0, "training rows before the imbalance (0 keeps the recipe's); the "
                                       "long-tail experiment's default, so its models are shared")
    long_tail_epochs: int = knob(0, "epochs of the long-tailed models (0 keeps the recipe's: main's budget); the "
                                    "long-tail experiment's default")
    end_to_end_seeds: int = knob(5, "Attn-KNN retrained end to end without the entropy bonus for the first n "
                                    "seeds, all if fewer (training jobs of the workflow; 0: none)")
    collapse_seeds: int = knob(5, "seeds (the first n) of the sweep of what could hold the attention at uniform "
                                  "weights (0: none)")
    second_datasets: tuple[str, ...] = knob(("digits",), "tabular datasets of the second study: main's Attn-KNN of "
                                                         "each hold-out split against the strongest rule, per setting")
    second_splits: int = knob(10, "stratified hold-out splits of the second study (split r: main's model of seed r)")
    n_boot: int = knob(200, "bootstrap resamples for the intervals (main's Attn-KNN against the strongest rule "
                            "takes main's default, as main reports it)")
    margin_accuracy: float = knob(MARGINS["accuracy"], "equivalence margin of accuracy differences")
    margin_nll: float = knob(MARGINS["nll"], "equivalence margin of NLL differences")
    margin_brier: float = knob(MARGINS["brier"], "equivalence margin of Brier differences")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("seeds", "headroom_ks", "variant_ks", "long_tail_seeds"):
            object.__setattr__(self, name, int_csv(name, getattr(self, name)))
        for name in ("settings", "variant_settings", "variants", "second_datasets"):
            object.__setattr__(self, name, csv(getattr(self, name)))
        for name in self.second_datasets:
            check_choice("second_datasets", name, tuple(d for d in DATASET_NAMES if REGISTRY[d].kind == "tabular"))
        check_range("second_splits", self.second_splits, 2, None)
        check_choice("dataset", self.dataset, DATASET_NAMES)
        for s in self.settings:
            parse_setting(s)
        for s in self.variant_settings:
            check_choice("variant_settings", s, self.settings)
        for v in self.variants:
            check_choice("variants", v, tuple(VARIANTS))
        for name in ("headroom_ks", "variant_ks"):
            if not getattr(self, name) or min(getattr(self, name)) < 1:
                raise ConfigError(f"{name}={getattr(self, name)!r} is not allowed; give positive integers")
        object.__setattr__(self, "head_lrs", float_csv("head_lrs", self.head_lrs, 1e-6, 10.0))
        check_range("train_queries", self.train_queries, 0, None)
        for name in ("head_epochs", "head_batch_size", "loo_k", "n_boot", "reference_k", "head_patience"):
            check_range(name, getattr(self, name), 1, None)
        check_range("end_to_end_seeds", self.end_to_end_seeds, 0, None)
        check_range("collapse_seeds", self.collapse_seeds, 0, None)
        check_range("long_tail_ratio", self.long_tail_ratio, 0.0, 1.0, high_inclusive=False)
        for name in ("long_tail_max_train", "long_tail_epochs"):
            check_range(name, getattr(self, name), 0, None)
        if self.long_tail_ratio and not set(self.long_tail_seeds) <= set(self.seeds):
            raise ConfigError(f"long_tail_seeds={','.join(map(str, self.long_tail_seeds))} is not allowed; give "
                              f"seeds among seeds={','.join(map(str, self.seeds))}")
        if self.k > self.k_max:
            raise ConfigError(f"k={self.k} is not allowed here; give k <= {self.k_max}, the most neighbours the study "
                              f"reads (the largest of headroom_ks and variant_ks)")
        for name in ("head_lr", "margin_accuracy", "margin_nll", "margin_brier"):
            check_range(name, getattr(self, name), 0.0, None)

    def margin(self, metric: str) -> float | None:
        """The declared margin of a judged metric; None for ECE, which is described only."""
        return getattr(self, f"margin_{metric}", None)

    @property
    def k_max(self) -> int:
        """The most neighbours any part reads (adaptive k mixes up to the largest headroom k)."""
        return max(*self.headroom_ks, *self.variant_ks)


def parse_setting(setting: str) -> tuple[str, float]:
    """'clean' -> ('none', 0); 'asymmetric/0.4' -> ('asymmetric', 0.4); else one clear error."""
    if setting == "clean":
        return "none", 0.0
    kind, _, rate = setting.partition("/")
    try:
        r = float(rate)
    except ValueError:
        r = -1.0
    if kind not in NOISE_KINDS or not 0 < r < 1:
        raise ConfigError(f"setting={setting!r} is not allowed; give clean or kind/rate with kind in "
                          f"{', '.join(NOISE_KINDS)} and 0 < rate < 1, e.g. asymmetric/0.4")
    return kind, r

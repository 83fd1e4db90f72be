"""The training runs the study needs: main's Attn-KNN, the long-tailed retrains, the end-to-end
controls and the second datasets' splits."""

from __future__ import annotations

from dataclasses import replace

from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.experiments.attention_study.config import Config
from attnknn_lib.experiments.common import shared as core


def runs(cfg: Config):
    """Main's Attn-KNN runs of the dataset (shared with main: trained once), then the end-to-end
    runs without the entropy bonus (:func:`end_to_end_runs`)."""
    return core.model_runs(cfg, core.data_spec(cfg, cfg.dataset), cfg.seeds, kinds=("attnknn",)) + \
        long_tail_runs(cfg) + end_to_end_runs(cfg) + [r for name in cfg.second_datasets for r in second_runs(cfg, name)]


def second_runs(cfg: Config, name: str):
    """Main's Attn-KNN of each stratified hold-out split of tabular ``name`` (split r, seed r: the
    runs main trains with the same recipe, so they are trained once)."""
    return [core.model_runs(cfg, core.data_spec(cfg, name, split_seed=r), (r,), kinds=("attnknn",))[0]
            for r in range(cfg.second_splits)]


LONG_TAIL_PREP_SEED = 0  # the long-tail experiment's default imbalance_seed: seed s draws class order s


def long_tail_setting(cfg: Config) -> str | None:
    """The long-tailed memory's name in the record, e.g. 'long_tail/0.01'; None when it is off."""
    return f"long_tail/{cfg.long_tail_ratio:g}" if cfg.long_tail_ratio else None


def long_tail_runs(cfg: Config):
    """Attn-KNN retrained on the long-tailed subset, one per ``long_tail_seeds``: the data and recipe
    of the long-tail experiment's setting ``trained`` at ``long_tail_ratio`` (same run ids with the
    default knobs, so those models are trained once)."""
    if not cfg.long_tail_ratio:
        return []
    recipe = cfg.recipe()
    if cfg.long_tail_epochs:
        key = "epochs" if REGISTRY[cfg.dataset].kind == "image" else "tabular_epochs"
        recipe = replace(recipe, **{key: cfg.long_tail_epochs})
    base = core.data_spec(cfg, cfg.dataset, **({"max_train": cfg.long_tail_max_train} if cfg.long_tail_max_train
                                                else {}))
    return [core.model_runs(recipe, replace(base, imbalance=cfg.long_tail_ratio, prep_seed=LONG_TAIL_PREP_SEED + s),
                            (s,), kinds=("attnknn",))[0] for s in cfg.long_tail_seeds]


NO_BONUS = 0.0  # the end-to-end control's entropy weight: no pull towards uniform weights


def end_to_end_runs(cfg: Config):
    """Main's Attn-KNN recipe with the entropy bonus off, first ``end_to_end_seeds`` seeds: does
    joint training itself drive the attention to uniform weights? None if the recipe has no bonus."""
    if not cfg.end_to_end_seeds or cfg.entropy_weight == NO_BONUS:
        return []
    recipe = replace(cfg.recipe(), entropy_weight=NO_BONUS)
    return core.model_runs(recipe, core.data_spec(cfg, cfg.dataset), cfg.seeds[:cfg.end_to_end_seeds],
                           kinds=("attnknn",))


def _long_tail_run(cfg: Config, seed: int):
    return next((r for r in long_tail_runs(cfg) if r.seed == seed), None)


def _end_to_end_run(cfg: Config, seed: int):
    return next((r for r in end_to_end_runs(cfg) if r.seed == seed), None)

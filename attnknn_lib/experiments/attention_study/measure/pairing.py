"""Paired differences on one seed's test points, and the seed-level verdicts drawn from them.

A difference keeps its probabilities under :data:`PAIR` until the pooled bootstrap has read them
(:func:`pooled_test_se`); :func:`drop_pairs` removes them before the record is written."""

from __future__ import annotations

import numpy as np

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.evaluation.bootstrap import paired_bootstrap_diff
from attnknn_lib.evaluation.verdicts import resolvable, seed_level
from attnknn_lib.experiments.attention_study.config import Config

COMPARED = (("accuracy", "raw"), ("ece", "calibrated"), ("nll", "calibrated"), ("brier", "calibrated"))
PROPER = (("nll", "calibrated"), ("brier", "calibrated"))  # judged against the NLL-tuned vote
PAIR = "_pair"  # a per-seed difference's probabilities, kept for the pooled bootstrap; not written to the record
POOLED_BOOT_SEED = 0  # the pooled bootstrap's one draw of test resamples, shared by every seed (as in main)


def _paired(cfg: Config, a: np.ndarray, b: np.ndarray, labels: np.ndarray, seed: int,
            n_boot: int | None = None) -> dict:
    """A minus B paired on one seed's test points (:func:`~attnknn_lib.evaluation.bootstrap.paired_bootstrap_diff`,
    ``n_boot`` resamples, default the config's), holding the two probability arrays, the test labels
    and the resample count under :data:`PAIR` for :func:`pooled_test_se`."""
    n_boot = cfg.n_boot if n_boot is None else n_boot
    return {**paired_bootstrap_diff([a], [b], labels, n_boot=n_boot, seed=seed), PAIR: (a, b, labels, n_boot)}


def pooled_test_se(diffs: list[dict]) -> dict[str, float]:
    """The test points' share of a seed-level interval: the s.d. of the mean difference over seeds
    under one set of test resamples applied to every seed (the paired bootstrap over S runs). Every
    seed is scored on the same test points, so their sampling error is shared across seeds; this is
    the estimate main's verdicts use, so a comparison made in both experiments gets one interval."""
    pairs = [d[PAIR] for d in diffs]
    labels = pairs[0][2]
    if any(not np.array_equal(p[2], labels) for p in pairs):
        raise ConfigError("the pooled bootstrap needs every seed scored on the same test points; these differ")
    if len({p[3] for p in pairs}) > 1:
        raise ConfigError(f"the pooled bootstrap needs one resample count; got {sorted({p[3] for p in pairs})}")
    pooled = paired_bootstrap_diff([p[0] for p in pairs], [p[1] for p in pairs], labels, n_boot=pairs[0][3],
                                   seed=POOLED_BOOT_SEED)
    return {metric: v["se"] for metric, v in pooled.items()}


def drop_pairs(obj):
    """``obj`` with every :data:`PAIR` entry removed, in place (the record holds numbers, not arrays)."""
    if isinstance(obj, dict):
        obj.pop(PAIR, None)
        for v in obj.values():
            drop_pairs(v)
    elif isinstance(obj, list):
        for v in obj:
            drop_pairs(v)
    return obj


RESOLVED_AT = (3, 5)  # seed counts at which each endpoint's smallest resolvable difference is reported


def seed_verdicts(cfg: Config, diffs: list[dict], compared: tuple = COMPARED) -> dict:
    """Seed-level verdicts (``compared``: accuracy raw, ECE, NLL and Brier calibrated) from one paired
    difference per seed (``{"raw": ..., "calibrated": ...}``, each from :func:`_paired`): the per-seed
    values and, as the test points' share of the interval, the pooled paired bootstrap's s.e.
    (:func:`pooled_test_se`); with the smallest difference the interval resolves at 3 and 5 seeds
    (:func:`~attnknn_lib.evaluation.verdicts.resolvable`, from the measured spreads)."""
    se = {split: pooled_test_se([d[split] for d in diffs]) for split in dict.fromkeys(s for _, s in compared)}
    out = {}
    for metric, split in compared:
        v = seed_level([d[split][metric]["value"] for d in diffs], se[split][metric], metric, margin=cfg.margin(metric))
        if v["n_seeds"] > 1:
            v["resolvable"] = {str(n): resolvable(v["seed_sd"], v["test_se"], n) for n in RESOLVED_AT}
        out[metric] = v
    return out

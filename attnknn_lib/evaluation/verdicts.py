"""Seed-level verdicts: is method A better than, worse than or equivalent to B, or is it too early to say?

Seeds are the unit of replication. For a metric m, seed s gives the paired difference on the same
test points d_s = m(A_s) - m(B_s). Across S seeds:

    d_bar = (1/S) sum_s d_s
    se^2  = s_d^2 / S + se_test^2        s_d: s.d. of the d_s (ddof 1); se_test: the paired
                                         bootstrap's s.d. of d_bar over resampled test points
    CI    = d_bar -/+ t_{S-1, 0.975} se

Why this and not a bootstrap over seeds: with 3 to 5 seeds a resample of seeds has few distinct
values and its percentile interval is too narrow, while the t interval is exact for normal d_s.
Why the extra term: every seed is scored on the same test set, so the test set's sampling error
is shared by all d_s and does not show up in s_d; the paired bootstrap over test points measures
it. With one seed there is no seed variance to count: the verdict is "inconclusive".

Small data sets replicate over splits instead: J stratified hold-out splits, each with its own
model seed, so every d_j has its own test points and the test set's sampling error is inside the
spread of the d_j. The splits overlap, which makes that spread too small; the corrected resampled
t interval (Nadeau and Bengio, 2003) inflates it by the test / train size ratio:

    se^2 = s_d^2 (1/J + n_test / n_train),   CI = d_bar -/+ t_{J-1, 0.975} se   (:func:`split_level`)

The verdict uses a margin declared before any run (``MARGINS``; "better" means higher accuracy
or lower ECE / NLL / Brier):

    equivalent    the whole interval lies inside (-margin, +margin)
    better        otherwise, the interval excludes 0 on the good side
    worse         otherwise, the interval excludes 0 on the bad side
    inconclusive  otherwise (or one seed)
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from attnknn_lib.base.errors import ConfigError

VERDICTS = ("better", "worse", "equivalent", "inconclusive")
HIGHER_IS_BETTER = {"accuracy": True, "macro_f1": True, "nll": False, "ece": False, "brier": False}
# Declared before any run: differences smaller than these do not matter for the paper's question.
MARGINS = {"accuracy": 0.0025, "macro_f1": 0.0025, "nll": 0.01, "ece": 0.002, "brier": 0.002}
# Test resamples of the pooled paired bootstrap behind a headline seed-level interval (main's default;
# the attention study's Attn-KNN against the strongest rule is main's comparison and uses it too).
HEADLINE_BOOT = 1000


def verdict(low: float, high: float, margin: float, higher_is_better: bool, n_seeds: int = 2) -> str:
    """The verdict for an interval [low, high] of A - B (see the module docstring)."""
    if margin < 0:
        raise ConfigError(f"margin={margin!r} is out of range; allowed: >= 0")
    if n_seeds < 2 or not (math.isfinite(low) and math.isfinite(high)):
        return "inconclusive"
    if -margin < low and high < margin:
        return "equivalent"
    if low > 0 or high < 0:
        return "better" if (low > 0) == higher_is_better else "worse"
    return "inconclusive"


def _t_level(diffs: list[float], metric: str, margin: float | None, level: float, se, what: str) -> dict:
    """Mean of the differences, its t interval (df n - 1, standard error ``se(sd, n)``) and the verdict."""
    if metric not in HIGHER_IS_BETTER:
        raise ConfigError(f"metric={metric!r} is not allowed; choose one of: {', '.join(HIGHER_IS_BETTER)}")
    d = np.asarray(diffs, dtype=np.float64)
    if d.size == 0:
        raise ConfigError(f"need at least one {what}'s difference")
    margin = MARGINS[metric] if margin is None else margin
    n = d.size
    mean = float(d.mean())
    sd = float(d.std(ddof=1)) if n > 1 else float("nan")
    if n > 1:
        half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * se(sd, n)
        low, high = mean - half, mean + half
    else:
        low = high = float("nan")
    return {"value": mean, "low": low, "high": high, "seed_sd": sd, "n_seeds": n, "per_seed": d.tolist(),
            "margin": margin, "verdict": verdict(low, high, margin, HIGHER_IS_BETTER[metric], n)}


def seed_level(per_seed: list[float], test_se: float, metric: str, margin: float | None = None,
               level: float = 0.95) -> dict:
    """The seed-level difference of one metric: ``per_seed`` paired differences d_s (A - B on the
    same test points, one per seed), ``test_se`` the paired bootstrap's s.d. of their mean over
    resampled test points. Returns value, low, high, the seeds' s.d., n_seeds, margin, verdict."""
    out = _t_level(per_seed, metric, margin, level, lambda sd, n: math.sqrt(sd ** 2 / n + test_se ** 2), "seed")
    return {**out, "test_se": float(test_se)}


def split_level(per_split: list[float], n_test: int, n_train: int, metric: str, margin: float | None = None,
                level: float = 0.95) -> dict:
    """The split-level difference of one metric over J resampled hold-out splits (differences
    ``per_split``, each on its own test points): the corrected resampled t interval of the module
    docstring, and its verdict. Same keys as :func:`seed_level` (``test_se`` 0: the test sets'
    error is in the spread); ``n_seeds`` counts the splits."""
    if n_test < 1 or n_train < 1:
        raise ConfigError(f"n_test={n_test!r} and n_train={n_train!r} must be >= 1")
    out = _t_level(per_split, metric, margin, level, lambda sd, n: sd * math.sqrt(1.0 / n + n_test / n_train),
                   "split")
    return {**out, "test_se": 0.0, "replication": "splits"}


def resolvable(seed_sd: float, test_se: float, n_seeds: int, level: float = 0.95) -> float:
    """The smallest difference a seed-level interval can resolve: its half-width

        h(S) = t_{S-1, (1 + level) / 2} sqrt(s_d^2 / S + se_test^2)

    at S seeds, from a measured seed s.d. ``seed_sd`` and test-set s.e. ``test_se`` (the shared test
    set's error does not shrink with S). A margin below h(S) can never be met: every interval at S
    seeds is wider than it, so "equivalent" is out of reach and the setting is underpowered there."""
    if n_seeds < 2:
        raise ConfigError(f"n_seeds={n_seeds!r} is out of range; allowed: >= 2 (one seed has no interval)")
    return float(stats.t.ppf(0.5 + level / 2, n_seeds - 1)) * math.sqrt(seed_sd ** 2 / n_seeds + test_se ** 2)

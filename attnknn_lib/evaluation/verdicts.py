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

    identical     every difference is exactly 0 and so is the interval's width: as a rule the
                  same predictions (a rule that coincides with another, e.g. every vote at k = 1;
                  on a tiny test set, the same score on every split), which is no evidence of
                  equivalence; counts of verdicts leave it out (``VERDICTS``)
    equivalent    the whole interval lies inside (-margin, +margin)
    better        otherwise, the interval excludes 0 on the good side
    worse         otherwise, the interval excludes 0 on the bad side
    inconclusive  otherwise (or one seed)

ECE is described, never judged (``DESCRIBED``): its difference keeps its interval, but no margin
and no verdict, so no count includes it (binned ECE is not a proper score; calibrated NLL and
Brier are the calibration endpoints).

Several tests behind one claim are a family; :func:`holm` controls the family-wise error of the
verdicts above with Holm's step-down method (see there).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from attnknn_lib.base.errors import ConfigError

VERDICTS = ("better", "worse", "equivalent", "inconclusive")  # the words a count of verdicts adds up
IDENTICAL = "identical"  # a zero-width interval from identical predictions: reported, never counted
HIGHER_IS_BETTER = {"accuracy": True, "macro_f1": True, "nll": False, "ece": False, "brier": False}
DESCRIBED = frozenset({"ece"})  # reported with their interval, never given a margin or a verdict
# Declared before any run: differences smaller than these do not matter for the paper's question.
MARGINS = {"accuracy": 0.0025, "macro_f1": 0.0025, "nll": 0.01, "brier": 0.002}
# Test resamples of the pooled paired bootstrap behind a headline seed-level interval (main's default;
# the attention study's Attn-KNN against the tuned vote is main's comparison and uses it too).
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
    """Mean of the differences, its t interval (df n - 1, standard error ``se(sd, n)``) and the
    verdict (none for a :data:`DESCRIBED` metric, whose ``margin`` is ignored)."""
    if metric not in HIGHER_IS_BETTER:
        raise ConfigError(f"metric={metric!r} is not allowed; choose one of: {', '.join(HIGHER_IS_BETTER)}")
    d = np.asarray(diffs, dtype=np.float64)
    if d.size == 0:
        raise ConfigError(f"need at least one {what}'s difference")
    n = d.size
    mean = float(d.mean())
    sd = float(d.std(ddof=1)) if n > 1 else float("nan")
    width = se(sd, n) if n > 1 else float("nan")
    if n > 1:
        half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * width
        low, high = mean - half, mean + half
    else:
        low = high = float("nan")
    out = {"value": mean, "low": low, "high": high, "seed_sd": sd, "n_seeds": n, "per_seed": d.tolist()}
    if metric in DESCRIBED:
        return out
    margin = MARGINS[metric] if margin is None else margin
    word = IDENTICAL if n > 1 and not d.any() and width == 0 else verdict(low, high, margin, HIGHER_IS_BETTER[metric], n)
    return {**out, "margin": margin, "verdict": word}


def seed_level(per_seed: list[float], test_se: float, metric: str, margin: float | None = None,
               level: float = 0.95) -> dict:
    """The seed-level difference of one metric: ``per_seed`` paired differences d_s (A - B on the
    same test points, one per seed), ``test_se`` the paired bootstrap's s.d. of their mean over
    resampled test points. Returns value, low, high, the seeds' s.d., n_seeds, margin, verdict."""
    out = _t_level(per_seed, metric, margin, level, lambda sd, n: math.sqrt(sd ** 2 / n + test_se ** 2), "seed")
    return {**out, "test_se": float(test_se)}


def seed_difference(a: list[float], b: list[float], metric: str, margin: float | None = None,
                    test_se: float = 0.0) -> dict:
    """The seed-level verdict of A - B from per-seed values of both (same seeds, same order):
    :func:`seed_level` on the paired per-seed differences. ``test_se`` is the test points' share of
    the error where the record has it (0: seeds only); ``margin`` None: the library's (``MARGINS``)."""
    diffs = (np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)).tolist()
    return seed_level(diffs, test_se, metric, margin)


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


def detectable(seed_sd: float, n: int, m: int = 1, alpha: float = 0.05, test_se: float = 0.0) -> float:
    """The smallest mean difference that reads "better" (or "worse") in a family of ``m`` tests at
    family-wise level ``alpha``, from a seed s.d. ``seed_sd`` over ``n`` seeds (and the test set's
    s.e. ``test_se``, as in :func:`resolvable`):

        d_min = t_{n-1, 1 - alpha / (2 m)} sqrt(s_d^2 / n + se_test^2)

    the first step of Holm's method (:func:`holm`), which is Bonferroni at alpha / m: the smallest
    p-value of the family is rejected when m p_diff <= alpha, i.e. |d_bar| / se >= t_{n-1, 1 - alpha / (2 m)}.
    For an uncorrected family (m = 1) it is the half-width of the (1 - alpha) interval,
    :func:`resolvable`'s h(n). A later Holm step needs less; a difference whose whole interval also
    lies inside the margin reads "equivalent" first (possible only where the half-width is below half
    the margin)."""
    if n < 2:
        raise ConfigError(f"n={n!r} is out of range; allowed: >= 2 (one seed has no interval)")
    if m < 1 or not 0 < alpha < 1:
        raise ConfigError(f"m={m!r} / alpha={alpha!r} out of range; allowed: m >= 1, 0 < alpha < 1")
    return float(stats.t.ppf(1 - alpha / (2 * m), n - 1)) * math.sqrt(seed_sd ** 2 / n + test_se ** 2)


def p_values(d: dict, level: float = 0.95) -> tuple[float, float]:
    """The two p-values behind the verdict of one seed- or split-level result ``d`` (value, low,
    high, n_seeds, margin), with the standard error and df of its own interval
    (se = (high - low) / (2 t_{S-1, (1 + level) / 2}), df = S - 1, T the t distribution's cdf):

        difference   p_diff = 2 (1 - T(|d_bar| / se))                       H0: the mean is 0
        equivalence  p_tost = max(1 - T((d_bar + m) / se), T((d_bar - m) / se))
                     (two one-sided tests, Schuirmann 1987)                  H0: |mean| >= m

    The unadjusted verdict is "better" / "worse" exactly when p_diff <= 1 - level and "equivalent"
    exactly when p_tost <= (1 - level) / 2 (each one-sided test at the interval's tail); both
    tests are symmetric, the metric's direction only names the verdict. Without an interval (one
    seed) both are 1; a zero-width interval gives 0 or 1."""
    n, mean, low, high, margin = d["n_seeds"], d["value"], d["low"], d["high"], d["margin"]
    if n < 2 or low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return 1.0, 1.0
    se = (high - low) / (2 * float(stats.t.ppf(0.5 + level / 2, n - 1)))
    if se <= 0:
        return (0.0 if mean != 0 else 1.0), (0.0 if abs(mean) < margin else 1.0)
    t = stats.t(n - 1)
    p_diff = float(2 * t.sf(abs(mean) / se))
    p_tost = float(max(t.sf((mean + margin) / se), t.cdf((mean - margin) / se)))
    return p_diff, p_tost


def holm_adjust(p: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values of one family of m tests: with p_(1) <= ... <= p_(m),

        p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))

    and H_(i) is rejected at family-wise level alpha exactly when p~_(i) <= alpha (Holm 1979)."""
    p = np.asarray(p, dtype=np.float64)
    if p.size and (np.isnan(p).any() or p.min() < 0 or p.max() > 1):
        raise ConfigError(f"p-values {p.tolist()} are out of range; allowed: 0..1")
    order = np.argsort(p, kind="stable")
    m = p.size
    stepped = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = stepped
    return out.tolist()


def holm(family: dict[str, dict], metric: str, level: float = 0.95) -> dict[str, dict]:
    """The verdicts of one family of comparisons of ``metric`` (several tests behind one claim, e.g.
    candidates x methods), each ``family[key]`` a result of :func:`seed_level` / :func:`split_level`,
    with the family-wise error controlled by Holm's method at 1 - ``level``. Each result gets its
    p-values (:func:`p_values`), their Holm adjustment over the family's m tests (difference
    and equivalence adjusted as two families of m), the unadjusted verdict kept as
    ``verdict_unadjusted``, and the adjusted verdict:

        equivalent    adjusted p_tost <= (1 - level) / 2
        better/worse  otherwise, adjusted p_diff <= 1 - level (the sign of d_bar names it)
        inconclusive  otherwise

    An ``identical`` result stays identical and is no test of the family (nor is a described
    metric's, which has no verdict to adjust); a family of one leaves every verdict unchanged.
    The intervals are the unadjusted 95 % ones."""
    if metric in DESCRIBED:
        raise ConfigError(f"metric={metric!r} is described, never judged; choose one of: "
                          f"{', '.join(m for m in HIGHER_IS_BETTER if m not in DESCRIBED)}")
    if metric not in HIGHER_IS_BETTER:
        raise ConfigError(f"metric={metric!r} is not allowed; choose one of: {', '.join(HIGHER_IS_BETTER)}")
    alpha = 1 - level
    tested = [key for key, d in family.items() if d["verdict"] != IDENTICAL]
    p = {key: p_values(family[key], level) for key in tested}
    adj_diff = dict(zip(tested, holm_adjust([p[key][0] for key in tested])))
    adj_tost = dict(zip(tested, holm_adjust([p[key][1] for key in tested])))
    out = {}
    for key, d in family.items():
        if key not in p:
            out[key] = {**d, "verdict_unadjusted": d["verdict"], "family_size": len(tested)}
            continue
        if adj_tost[key] <= alpha / 2:
            word = "equivalent"
        elif adj_diff[key] <= alpha:
            word = "better" if (d["value"] > 0) == HIGHER_IS_BETTER[metric] else "worse"
        else:
            word = "inconclusive"
        out[key] = {**d, "verdict_unadjusted": d["verdict"], "verdict": word, "family_size": len(tested),
                    "p_difference": p[key][0], "p_equivalence": p[key][1],
                    "p_difference_holm": adj_diff[key], "p_equivalence_holm": adj_tost[key]}
    return out


# ----------------------------------------------------------------------------- the confirmatory experiment's words
# docs/confirmatory_declaration.md adds one row to the table of verdicts: a difference that is
# significant *and* whose interval lies inside the margin. The functions below give its words; the
# ones above keep theirs (there that case reads "equivalent"), so every existing record stays as measured.

WITHIN_MARGIN = {True: "better, within the margin", False: "worse, within the margin"}  # keyed by "A is better"
CONFIRMATORY_VERDICTS = ("better", "worse", WITHIN_MARGIN[True], WITHIN_MARGIN[False], "equivalent", "inconclusive")
"""The confirmatory declaration's counted words (``identical`` is reported, never counted). Only "better"
counts as a win; "better, within the margin" is reported with its sign and never counted as one."""


def confirmatory_verdict(low: float, high: float, margin: float, higher_is_better: bool, n_seeds: int = 2) -> str:
    """The confirmatory declaration's word for a 95 % interval [low, high] of A - B and a ``margin``:

        inconclusive                one seed, or an end that is not finite
        identical                   low = high = 0 (a zero-width interval at zero: every per-seed
                                    difference exactly 0 and no test-row spread)
        better/worse, within the    the interval excludes 0 (low > 0 or high < 0) and lies inside
          margin                    (-margin, +margin)
        better / worse              it excludes 0 only
        equivalent                  it lies inside (-margin, +margin) only
        inconclusive                neither

    "better" means A's metric is the better one (higher if ``higher_is_better``, else lower). The
    interval form of the declaration's tests at level 0.95: the difference test's p <= 0.05 exactly
    when the interval excludes 0, the equivalence (TOST) p <= 0.025 exactly when it lies inside the
    margin (:func:`p_values`); the ends are strict, as in :func:`verdict`, which this function matches
    in every case but the new one (where :func:`verdict` says "equivalent")."""
    if margin < 0:
        raise ConfigError(f"margin={margin!r} is out of range; allowed: >= 0")
    if n_seeds < 2 or not (math.isfinite(low) and math.isfinite(high)):
        return "inconclusive"
    if low == 0 and high == 0:
        return IDENTICAL
    return _declared_word(low > 0 or high < 0, -margin < low and high < margin, (low > 0) == higher_is_better)


def _declared_word(different: bool, equivalent: bool, a_better: bool) -> str:
    """The declaration's table: both tests pass, the difference's alone, the equivalence's alone, neither."""
    if different and equivalent:
        return WITHIN_MARGIN[a_better]
    if different:
        return "better" if a_better else "worse"
    return "equivalent" if equivalent else "inconclusive"


def confirmatory_word(p_difference: float, p_equivalence: float, value: float, higher_is_better: bool,
                      level: float = 0.95) -> str:
    """The declaration's table of verdicts from one comparison's (Holm-adjusted) p-values, alpha = 1 - level:

        p_difference <= alpha and p_equivalence <= alpha / 2   "better, within the margin" / "worse, within the margin"
        p_difference <= alpha only                              "better" / "worse"
        p_equivalence <= alpha / 2 only                         "equivalent"
        neither                                                 "inconclusive"

    The sign of ``value`` (A - B) names better or worse, as in :func:`holm`."""
    alpha = 1 - level
    return _declared_word(p_difference <= alpha, p_equivalence <= alpha / 2, (value > 0) == higher_is_better)


def holm_confirmatory(family: dict[str, dict], metric: str, level: float = 0.95) -> dict[str, dict]:
    """:func:`holm` over one family, read with the confirmatory declaration's words: each tested result's
    ``verdict`` is :func:`confirmatory_word` of its Holm-adjusted p-values and ``verdict_unadjusted`` is
    :func:`confirmatory_verdict` of its interval; an ``identical`` result stays so, outside the family.
    The p-values, their adjustment and the family's size are :func:`holm`'s, unchanged."""
    out = holm(family, metric, level)
    higher = HIGHER_IS_BETTER[metric]
    for d in out.values():
        if "p_difference_holm" in d:
            d["verdict"] = confirmatory_word(d["p_difference_holm"], d["p_equivalence_holm"], d["value"], higher, level)
            d["verdict_unadjusted"] = confirmatory_verdict(d["low"], d["high"], d["margin"], higher, d["n_seeds"])
    return out

"""Bootstrap intervals of the metrics of :mod:`.metrics`, on seeded multinomial resamples of the test set.

A resample draws N test points with replacement: a count vector w (N,) with sum N, drawn as
multinomial(N, 1/N each) from ``numpy.random.default_rng(seed)``. Every metric of a resample is
``w @ per-sample statistic`` (:func:`weighted_metrics`), so R resamples are one matrix product. The
percentile interval at ``level`` is the ((1 - level)/2, (1 + level)/2) quantiles over the resamples.

The draw of R x N counts costs more than scoring them (96 ms against 16 ms for R = 200,
N = 10,000), and the experiments draw the same (N, R, seed) many times, so :func:`resample_counts`
keeps the last few draws (read-only): the same numbers as drawing again.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.evaluation.metrics import METRICS, N_BINS, NLL_EPS, bin_index, check_probs

RESAMPLE_CACHE = 6  # draws kept: a seed's own resamples and the pooled one, for a few test-set sizes


@lru_cache(maxsize=RESAMPLE_CACHE)
def resample_counts(n: int, n_boot: int, seed: int) -> np.ndarray:
    """``n_boot`` bootstrap count vectors over ``n`` points (R, N) float64, read-only: row r says how
    often each point is drawn in resample r (multinomial(n, 1/n each), ``default_rng(seed)``)."""
    counts = np.random.default_rng(seed).multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(np.float64)
    counts.flags.writeable = False
    return counts


def weighted_metrics(probs: np.ndarray, labels: np.ndarray, w: np.ndarray, n_bins: int = N_BINS) -> dict[str, np.ndarray]:
    """Every metric under sample weights ``w`` (R, N) (rows sum to N): one value per row.

    With ``w`` all ones this is the plain metric; with bootstrap counts it is the metric of each
    resample. Everything reduces to ``w @ per-sample statistic`` (one matrix product per metric).
    """
    n, c = probs.shape
    pred = probs.argmax(1)
    conf = probs.max(1)
    correct = (pred == labels).astype(np.float64)
    onehot = np.zeros_like(probs)
    onehot[np.arange(n), labels] = 1.0
    out = {
        "accuracy": w @ correct / n,
        "nll": w @ -np.log(np.maximum(probs[np.arange(n), labels], NLL_EPS)) / n,
        "brier": w @ ((probs - onehot) ** 2).sum(1) / n,
    }
    bins = np.eye(n_bins)[bin_index(conf, n_bins)]  # (N, n_bins)
    conf_sum, acc_sum = w @ (bins * conf[:, None]), w @ (bins * correct[:, None])  # (R, n_bins) per-bin sums
    out["ece"] = np.abs(acc_sum - conf_sum).sum(1) / n  # sum_b n_b/N |acc_b - conf_b| = sum_b |S_acc - S_conf| / N
    cells = np.eye(c * c)[labels * c + pred]  # (N, C*C): one confusion-matrix cell per sample
    cm = (w @ cells).reshape(-1, c, c)  # (R, C, C) counts[true, pred]
    tp = np.diagonal(cm, axis1=1, axis2=2)
    denom = cm.sum(1) + cm.sum(2)  # (2TP + FP + FN) per class
    f1 = np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0)
    out["macro_f1"] = (f1 * (denom > 0)).sum(1) / np.maximum((denom > 0).sum(1), 1)
    return {k: out[k] for k in METRICS}


def bootstrap_ci(probs: np.ndarray, labels: np.ndarray, n_boot: int = 1000, level: float = 0.95,
                 seed: int = 0) -> dict[str, dict[str, float]]:
    """Point estimate and percentile bootstrap interval of every metric, on the same resamples.

    Returns ``{metric: {"value", "low", "high"}}``. Each resample draws N test samples with
    replacement (multinomial counts, seeded); the interval is the (1 - level)/2 and
    (1 + level)/2 quantiles of the resampled metric.
    """
    probs, labels = check_probs(probs, labels)
    if n_boot < 1 or not 0 < level < 1:
        raise ConfigError(f"n_boot={n_boot!r} (>= 1) and level={level!r} (in (0, 1)) are out of range")
    n = len(labels)
    counts = resample_counts(n, n_boot, seed)  # (R, N)
    point = weighted_metrics(probs, labels, np.ones((1, n)))
    boot = weighted_metrics(probs, labels, counts)
    alpha = (1.0 - level) / 2.0
    out: dict[str, dict[str, float]] = {}
    for name in METRICS:
        low, high = np.quantile(boot[name], [alpha, 1.0 - alpha])
        out[name] = {"value": float(point[name][0]), "low": float(low), "high": float(high)}
    return out


def evaluate(probs: np.ndarray, labels: np.ndarray, n_boot: int = 0, seed: int = 0) -> dict[str, dict[str, float]]:
    """All metrics; with ``n_boot > 0`` each also gets a 95 % bootstrap interval."""
    if n_boot > 0:
        return bootstrap_ci(probs, labels, n_boot=n_boot, seed=seed)
    return {name: {"value": fn(probs, labels)} for name, fn in METRICS.items()}


def resampled_endpoints(probs: np.ndarray, labels: np.ndarray, counts: np.ndarray) -> dict[str, np.ndarray]:
    """Accuracy, NLL and Brier of ``probs`` (N, C) on every resample of ``counts`` (R, N) (rows sum to
    N), each (R,): ``counts @ per-point statistic / N``, the three proper endpoints of
    :func:`weighted_metrics` without its binned ECE and F1. The same ``counts`` applied to two methods
    (and to every seed that reads the same test points) pairs them: the resampled difference of a
    comparison, averaged over seeds, is a difference of these vectors."""
    (probs, labels) = check_probs(probs, labels)
    n = len(labels)
    onehot = np.eye(probs.shape[1])[labels]
    stats = np.stack([(probs.argmax(1) == labels).astype(np.float64),
                      -np.log(np.maximum(probs[np.arange(n), labels], NLL_EPS)),
                      ((probs - onehot) ** 2).sum(1)], axis=1)  # (N, 3)
    out = counts @ stats / n
    return {"accuracy": out[:, 0], "nll": out[:, 1], "brier": out[:, 2]}


def paired_bootstrap_diff(probs_a: list[np.ndarray], probs_b: list[np.ndarray], labels: np.ndarray,
                          n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> dict[str, dict[str, float]]:
    """Difference of every metric, A minus B, paired on the same test points, averaged over runs.

    ``probs_a[s]`` and ``probs_b[s]`` (N, C) are the two methods' probabilities in run (seed) s on
    the same test set ``labels`` (N,). Statistic: (1/S) sum_s [m(A_s) - m(B_s)]. Each bootstrap
    resample draws one multinomial count vector over the N test points and applies it to every
    run and both methods, so the interval reflects test-set sampling of a paired comparison
    (with S = 1, the classic paired bootstrap). Returns ``{metric: {"value", "low", "high", "se"}}``
    (se: the resamples' s.d., the test set's share of the seed-level interval in :mod:`.verdicts`).
    """
    if len(probs_a) != len(probs_b) or not probs_a:
        raise ConfigError(f"need the same number (>= 1) of runs for A and B; got {len(probs_a)} and {len(probs_b)}")
    labels = np.asarray(labels, dtype=np.int64)
    if n_boot < 1 or not 0 < level < 1:
        raise ConfigError(f"n_boot={n_boot!r} (>= 1) and level={level!r} (in (0, 1)) are out of range")
    n = len(labels)
    counts = resample_counts(n, n_boot, seed)
    ones = np.ones((1, n))
    point = {m: 0.0 for m in METRICS}
    boot = {m: np.zeros(n_boot) for m in METRICS}
    for pa, pb in zip(probs_a, probs_b):
        (pa, _), (pb, _) = check_probs(pa, labels), check_probs(pb, labels)
        wa, wb = weighted_metrics(pa, labels, counts), weighted_metrics(pb, labels, counts)
        pta, ptb = weighted_metrics(pa, labels, ones), weighted_metrics(pb, labels, ones)
        for m in METRICS:
            boot[m] += (wa[m] - wb[m]) / len(probs_a)
            point[m] += float(pta[m][0] - ptb[m][0]) / len(probs_a)
    alpha = (1.0 - level) / 2.0
    out = {}
    for m in METRICS:
        low, high = np.quantile(boot[m], [alpha, 1.0 - alpha])
        out[m] = {"value": point[m], "low": float(low), "high": float(high), "se": float(boot[m].std(ddof=1))}
    return out

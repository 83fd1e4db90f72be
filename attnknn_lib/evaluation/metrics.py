"""Classification and calibration metrics as pure functions of ``probs`` (N, C) and ``labels`` (N,).

Conventions
-----------
* prediction = argmax_c p_c (ties go to the lowest class index, NumPy's rule);
  confidence = max_c p_c.
* NLL = mean_i -log(max(p_{i,y_i}, NLL_EPS)); NLL_EPS = 1e-8 bounds the penalty of a vote
  that gives the true class zero probability (reported raw; compare methods after calibration).
* ECE (15 equal-width bins) = sum_b (n_b / N) |acc_b - conf_b|. Bin b covers confidences in
  (b/15, (b+1)/15] (right-closed; a confidence of exactly 0 goes to the first bin), so a
  confidence of 1.0 lands in the last bin.
* Brier = mean_i sum_c (p_ic - [y_i = c])^2 (multi-class form, range [0, 2]).
* macro-F1 = mean over classes present in labels or predictions of 2TP / (2TP + FP + FN)
  (scikit-learn's ``average="macro"`` with ``zero_division=0``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attnknn_lib.base.errors import ConfigError

NLL_EPS = 1e-8
N_BINS = 15


def _check(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    if probs.ndim != 2 or labels.shape != (len(probs),) or len(probs) == 0:
        raise ConfigError(f"need probs (N, C) and labels (N,) with N >= 1; got {probs.shape} and {labels.shape}")
    if not np.isfinite(probs).all():
        bad = int((~np.isfinite(probs)).any(1).sum())
        raise ConfigError(f"probs hold NaN or inf in {bad} of {len(probs)} rows; metrics need finite probabilities "
                          "(check the model's outputs)")
    return probs, labels


def accuracy(probs: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of argmax predictions equal to the label."""
    probs, labels = _check(probs, labels)
    return float((probs.argmax(1) == labels).mean())


def confusion_matrix(probs: np.ndarray, labels: np.ndarray, num_classes: int | None = None) -> np.ndarray:
    """counts[true, predicted] (C, C)."""
    probs, labels = _check(probs, labels)
    c = num_classes or probs.shape[1]
    return np.bincount(labels * c + probs.argmax(1), minlength=c * c).reshape(c, c)


def per_class_accuracy(probs: np.ndarray, labels: np.ndarray, num_classes: int | None = None) -> np.ndarray:
    """Recall of each class: acc_c = #{i: y_i = c, argmax p_i = c} / #{i: y_i = c} (NaN for a class with no sample)."""
    cm = confusion_matrix(probs, labels, num_classes)
    support = cm.sum(1)
    return np.where(support > 0, np.diag(cm) / np.maximum(support, 1), np.nan)


def macro_f1(probs: np.ndarray, labels: np.ndarray) -> float:
    """Unweighted mean of per-class F1 = 2TP / (2TP + FP + FN) over classes that occur."""
    cm = confusion_matrix(probs, labels)
    tp = np.diag(cm).astype(np.float64)
    fp, fn = cm.sum(0) - tp, cm.sum(1) - tp
    present = (cm.sum(0) + cm.sum(1)) > 0
    denom = 2 * tp + fp + fn
    f1 = np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0)
    return float(f1[present].mean())


def nll(probs: np.ndarray, labels: np.ndarray, eps: float = NLL_EPS) -> float:
    """mean -log(max(p_true, eps))."""
    probs, labels = _check(probs, labels)
    return float(-np.log(np.maximum(probs[np.arange(len(labels)), labels], eps)).mean())


def brier(probs: np.ndarray, labels: np.ndarray) -> float:
    """mean_i sum_c (p_ic - onehot_ic)^2."""
    probs, labels = _check(probs, labels)
    onehot = np.zeros_like(probs)
    onehot[np.arange(len(labels)), labels] = 1.0
    return float(((probs - onehot) ** 2).sum(1).mean())


def _bin_index(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    # right-closed bins (b/n, (b+1)/n]; 0 joins the first bin
    return np.clip(np.ceil(confidence * n_bins).astype(np.int64) - 1, 0, n_bins - 1)


def reliability_bins(probs: np.ndarray, labels: np.ndarray, n_bins: int = N_BINS) -> dict[str, np.ndarray]:
    """Per bin: lower/upper edge, sample count, mean confidence and accuracy (NaN if empty)."""
    probs, labels = _check(probs, labels)
    if n_bins < 1:
        raise ConfigError(f"n_bins={n_bins!r} is out of range; allowed: >= 1")
    conf = probs.max(1)
    correct = (probs.argmax(1) == labels).astype(np.float64)
    b = _bin_index(conf, n_bins)
    count = np.bincount(b, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(b, weights=conf, minlength=n_bins) / count
        acc = np.bincount(b, weights=correct, minlength=n_bins) / count
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    return {"lower": edges[:-1], "upper": edges[1:], "count": count, "confidence": mean_conf, "accuracy": acc}


def ece(probs: np.ndarray, labels: np.ndarray, n_bins: int = N_BINS) -> float:
    """sum_b (n_b / N) |acc_b - conf_b| over equal-width confidence bins (see module docstring)."""
    bins = reliability_bins(probs, labels, n_bins)
    used = bins["count"] > 0
    w = bins["count"][used] / bins["count"].sum()
    return float((w * np.abs(bins["accuracy"][used] - bins["confidence"][used])).sum())


METRICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "accuracy": accuracy, "macro_f1": macro_f1, "nll": nll, "ece": ece, "brier": brier,
}


def _weighted(probs: np.ndarray, labels: np.ndarray, w: np.ndarray, n_bins: int = N_BINS) -> dict[str, np.ndarray]:
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
    bins = np.eye(n_bins)[_bin_index(conf, n_bins)]  # (N, n_bins)
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
    probs, labels = _check(probs, labels)
    if n_boot < 1 or not 0 < level < 1:
        raise ConfigError(f"n_boot={n_boot!r} (>= 1) and level={level!r} (in (0, 1)) are out of range")
    n = len(labels)
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(np.float64)  # (R, N)
    point = _weighted(probs, labels, np.ones((1, n)))
    boot = _weighted(probs, labels, counts)
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
    counts = np.random.default_rng(seed).multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(np.float64)
    ones = np.ones((1, n))
    point = {m: 0.0 for m in METRICS}
    boot = {m: np.zeros(n_boot) for m in METRICS}
    for pa, pb in zip(probs_a, probs_b):
        (pa, _), (pb, _) = _check(pa, labels), _check(pb, labels)
        wa, wb = _weighted(pa, labels, counts), _weighted(pb, labels, counts)
        pta, ptb = _weighted(pa, labels, ones), _weighted(pb, labels, ones)
        for m in METRICS:
            boot[m] += (wa[m] - wb[m]) / len(probs_a)
            point[m] += float(pta[m][0] - ptb[m][0]) / len(probs_a)
    alpha = (1.0 - level) / 2.0
    out = {}
    for m in METRICS:
        low, high = np.quantile(boot[m], [alpha, 1.0 - alpha])
        out[m] = {"value": point[m], "low": float(low), "high": float(high), "se": float(boot[m].std(ddof=1))}
    return out

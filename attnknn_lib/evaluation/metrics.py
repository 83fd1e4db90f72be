"""Classification and calibration metrics as pure functions of ``probs`` (N, C) and ``labels`` (N,).

Bootstrap intervals of these metrics are in :mod:`.bootstrap` (not a training source: changing how
intervals are computed retrains no model).

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


def check_probs(probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``probs`` as float64 (N, C) and ``labels`` as int64 (N,), or one line on what is wrong."""
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
    probs, labels = check_probs(probs, labels)
    return float((probs.argmax(1) == labels).mean())


def confusion_matrix(probs: np.ndarray, labels: np.ndarray, num_classes: int | None = None) -> np.ndarray:
    """counts[true, predicted] (C, C)."""
    probs, labels = check_probs(probs, labels)
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
    probs, labels = check_probs(probs, labels)
    return float(-np.log(np.maximum(probs[np.arange(len(labels)), labels], eps)).mean())


def brier(probs: np.ndarray, labels: np.ndarray) -> float:
    """mean_i sum_c (p_ic - onehot_ic)^2."""
    probs, labels = check_probs(probs, labels)
    onehot = np.zeros_like(probs)
    onehot[np.arange(len(labels)), labels] = 1.0
    return float(((probs - onehot) ** 2).sum(1).mean())


def bin_index(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    # right-closed bins (b/n, (b+1)/n]; 0 joins the first bin
    return np.clip(np.ceil(confidence * n_bins).astype(np.int64) - 1, 0, n_bins - 1)


def reliability_bins(probs: np.ndarray, labels: np.ndarray, n_bins: int = N_BINS) -> dict[str, np.ndarray]:
    """Per bin: lower/upper edge, sample count, mean confidence and accuracy (NaN if empty)."""
    probs, labels = check_probs(probs, labels)
    if n_bins < 1:
        raise ConfigError(f"n_bins={n_bins!r} is out of range; allowed: >= 1")
    conf = probs.max(1)
    correct = (probs.argmax(1) == labels).astype(np.float64)
    b = bin_index(conf, n_bins)
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

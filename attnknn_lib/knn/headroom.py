"""How much any reweighting of a query's k retrieved neighbours can gain: pure functions of their labels.

A convex reweighting of k neighbours can only predict a label that is among them, so
recall@k (the true label among the first k) is the ceiling of every weighted vote at k. The
uniform vote's accuracy is the floor we start from; the *fixable* share is recall@k minus that
accuracy, split by how many votes the true class is behind the winner (a query the uniform vote
loses by one vote needs a small reweighting, one it loses by ten a large one). Queries whose k
neighbours all agree cannot be moved by any weights: right ones stay right, wrong ones stay wrong.

Two realistic ceilings (rules tuned on validation): geometry-only weights (distance, cosine,
rank decay) and a label-aware rule that keeps only neighbours whose own neighbours agree with
their label (:func:`consistency_weights`, the leave-one-out agreement of :func:`loo_agreement`).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

from attnknn_lib.knn.votes import uniform_weights, vote

VOTE_GAPS = (1, 2, 4)  # votes the true class is behind, for the fixable split


def label_recall(labels: np.ndarray, target: np.ndarray, k: int) -> np.ndarray:
    """(N,) bool: the true label is among the first k neighbour labels (N, K >= k)."""
    return (labels[:, :k] == np.asarray(target)[:, None]).any(axis=1)


def vote_gap(labels: np.ndarray, target: np.ndarray, num_classes: int, k: int) -> np.ndarray:
    """(N,) votes of the strongest class minus votes of the true class among the first k (0: the
    true class is at least tied for the lead)."""
    lab = labels[:, :k]
    counts = np.stack([(lab == c).sum(axis=1) for c in range(num_classes)], axis=1)  # (N, C)
    return counts.max(axis=1) - counts[np.arange(len(lab)), np.asarray(target)]


def headroom(labels: np.ndarray, target: np.ndarray, num_classes: int, k: int) -> dict:
    """At k: recall@k, the uniform vote's accuracy (neutral ties), the shares of queries whose k
    neighbours all agree (right / wrong), the fixable share (recall - accuracy) and its part
    within 1, 2, 4 votes of the winner. Shares of all queries."""
    lab = labels[:, :k]
    y = np.asarray(target)
    correct = vote(uniform_weights(lab.shape), lab, num_classes).argmax(axis=1) == y
    recall = label_recall(labels, y, k)
    agree = (lab == lab[:, :1]).all(axis=1)
    fixable = recall & ~correct
    gap = vote_gap(labels, y, num_classes, k)
    return {"k": k, "recall": float(recall.mean()), "uniform_accuracy": float(correct.mean()),
            "all_agree_right": float((agree & (lab[:, 0] == y)).mean()),
            "all_agree_wrong": float((agree & (lab[:, 0] != y)).mean()),
            "fixable": float(fixable.mean()),
            "fixable_within": {str(m): float((fixable & (gap <= m)).mean()) for m in VOTE_GAPS}}


def captured(accuracy: float, uniform_accuracy: float, recall: float) -> float | None:
    """Share of the fixable headroom a rule captured: (acc - acc_uniform) / (recall - acc_uniform);
    None when there is no headroom."""
    room = recall - uniform_accuracy
    return None if room <= 0 else (accuracy - uniform_accuracy) / room


def loo_agreement(neighbour_labels: np.ndarray, own_labels: np.ndarray) -> np.ndarray:
    """(M,) share of each memory row's nearest other rows (M, K; itself excluded) that carry its label."""
    return (neighbour_labels == np.asarray(own_labels)[:, None]).mean(axis=1)


def loo_agreement_without(query_rows: np.ndarray, neighbour_rows: np.ndarray, row_neighbours: np.ndarray,
                          labels: np.ndarray, loo_k: int) -> np.ndarray:
    """(N, K) leave-one-out agreement of each neighbour of N queries that are memory rows, with the
    query itself left out too, so a training query's features never contain its own label.

    Neighbour j of query q agrees by the share of j's ``loo_k`` nearest other rows, q excluded, that
    carry j's label. ``row_neighbours`` (M, >= loo_k + 1) are every row's nearest other rows, nearest
    first: dropping q (where it is among them) and keeping the first ``loo_k`` of the rest gives a
    value from exactly ``loo_k`` rows, as for a query outside the memory (:func:`loo_agreement`)."""
    q = np.asarray(query_rows)[:, None, None]  # (N, 1, 1)
    nb = np.asarray(row_neighbours)[np.asarray(neighbour_rows)][:, :, :loo_k + 1]  # (N, K, loo_k + 1)
    if nb.shape[2] < loo_k + 1:
        raise ValueError(f"row_neighbours has {nb.shape[2]} columns; loo_k={loo_k} needs {loo_k + 1}")
    keep = nb != q
    keep &= np.cumsum(keep, axis=2) <= loo_k  # the first loo_k rows other than q
    own = np.asarray(labels)[np.asarray(neighbour_rows)][:, :, None]
    return ((np.asarray(labels)[nb] == own) & keep).sum(axis=2) / loo_k


def rank_weights(shape: tuple[int, int], decay: float) -> np.ndarray:
    """w_j proportional to exp(-j / decay) for ranks j = 0..k-1 (nearest first), rows sum to 1."""
    w = np.exp(-np.arange(shape[1]) / decay)
    return np.broadcast_to(w / w.sum(), shape).copy()


def consistency_weights(loo: np.ndarray, threshold: float) -> np.ndarray:
    """w_j proportional to [loo_j >= threshold] (the neighbour's own neighbours back its label);
    a row where no neighbour passes falls back to uniform weights."""
    keep = (np.asarray(loo) >= threshold).astype(np.float64)
    empty = keep.sum(axis=1) == 0
    keep[empty] = 1.0
    return keep / keep.sum(axis=1, keepdims=True)


def flip_detection(weights: np.ndarray, flipped: np.ndarray) -> dict:
    """How a rule's neighbour weights (B, k) treat flipped neighbours (``flipped`` (B, k) bool):
    ratio = mean weight of a flipped neighbour / mean weight of a clean one (1: blind, < 1: it
    down-weights them), and AUROC = P(w_flipped < w_clean) + P(=) / 2 over all pairs of a flipped
    and a clean neighbour (0.5: blind, 1: every flipped neighbour weighs less than every clean one)."""
    w, f = np.asarray(weights, dtype=np.float64).ravel(), np.asarray(flipped, dtype=bool).ravel()
    n_pos, n_neg = int(f.sum()), int((~f).sum())
    if not n_pos or not n_neg:
        return {"ratio": None, "auroc": None}
    ranks = rankdata(-w)  # low weight = high score for "flipped"; ties get their mean rank
    auroc = (ranks[f].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    return {"ratio": float(w[f].mean() / w[~f].mean()), "auroc": float(auroc)}

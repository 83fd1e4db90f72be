"""Learnable headroom: what a learner that reads nothing but the k neighbours can gain over the
strongest non-learned rule (:mod:`attnknn_lib.evaluation.reference`).

The learner is gradient boosting (scikit-learn's ``HistGradientBoostingClassifier``) on
per-neighbour features, one row per (query, class c) of the k neighbours, target [c = y]:

    share_k'(c)     uniform vote share of c among the first k' neighbours, k' in 1, 2, 4, ..., k
    rank share(c)   sum_j exp(-j / d) [y_j = c] / sum_j exp(-j / d), d in :data:`DECAYS`
    dist share(c)   softmax over -r_j / median_r of the neighbours, summed over c's
    filter share(c) uniform vote among neighbours with loo_j >= 0.5 (all when none passes)
    first(c)        rank (0-based; k when absent) of c's first neighbour, and its distance minus the
                    nearest's over the median distance (-1 when absent)
    loo(c)          mean leave-one-out agreement of c's neighbours (0 when absent)
    prior(c)        c's share of the memory; and per query r_1 and the largest share at k

p(c | q) is the classifier's score normalised over c. It is trained on clean held-out queries
(the validation split, true labels), cross-fitted: two halves, each model fit on most of one
half, its configuration and number of boosting rounds picked on the rest of that half
(:data:`SELECT_SHARE`), and applied to the other half; test probabilities are the two models'
mean. No validation prediction comes from a model that saw or was selected on that query, so its
validation accuracy is comparable with any other method's.

The tuning budget is :data:`GRID` x the boosting rounds (each round is a configuration scored).
A choice at the last round is an open edge: the rounds are doubled, up to :data:`MAX_ROUNDS`.
"""

from __future__ import annotations

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier

from attnknn_lib.evaluation.metrics import accuracy, nll
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.knn.votes import break_ties, prefix_class_scores

DECAYS = (2.0, 8.0)
GRID = ({"learning_rate": 0.1, "max_leaf_nodes": 15}, {"learning_rate": 0.3, "max_leaf_nodes": 7})
ROUNDS = 100
MAX_ROUNDS = 400
SELECT_SHARE = 0.2
FILTER_THETA = 0.5


def ladder(k: int) -> list[int]:
    """1, 2, 4, ... below k, then k."""
    out, j = [], 1
    while j < k:
        out.append(j)
        j *= 2
    return out + [k]


def class_features(hood: Neighbourhood, prior: np.ndarray, num_classes: int, k: int) -> np.ndarray:
    """(N, C, F) features of every (query, class) from the first k neighbours (see module docstring)."""
    lab = np.asarray(hood.labels[:, :k], dtype=np.int64)
    n = len(lab)
    r = np.sqrt(np.maximum(np.asarray(hood.sq_dist[:, :k], dtype=np.float64), 0.0))
    ks = ladder(k)
    shares = prefix_class_scores(np.ones(lab.shape), lab, ks, num_classes) / np.asarray(ks)[:, None, None]
    feats = [shares.transpose(1, 2, 0)]  # (N, C, L)
    for d in DECAYS:
        w = np.broadcast_to(np.exp(-np.arange(k) / d), lab.shape)
        feats.append((prefix_class_scores(w, lab, [k], num_classes)[0] / w[0].sum())[:, :, None])
    scale = np.median(r, axis=1, keepdims=True) + 1e-12
    z = -(r - r[:, :1]) / scale
    w = np.exp(z)
    feats.append((prefix_class_scores(w, lab, [k], num_classes)[0] / w.sum(1, keepdims=True))[:, :, None])
    keep = np.asarray(hood.loo[:, :k]) >= FILTER_THETA
    keep[~keep.any(1)] = True
    kept = prefix_class_scores(keep.astype(np.float64), lab, [k], num_classes)[0]
    feats.append((kept / kept.sum(1, keepdims=True))[:, :, None])
    onehot = lab[:, :, None] == np.arange(num_classes)[None, None, :]  # (N, k, C)
    present = onehot.any(1)
    first = np.where(present, onehot.argmax(1), k).astype(np.float64)  # (N, C)
    first_r = (np.take_along_axis(r, np.minimum(first, k - 1).astype(np.int64), axis=1) - r[:, :1]) / scale
    feats.append(first[:, :, None])
    feats.append(np.where(present, first_r, -1.0)[:, :, None])
    loo_sum = (onehot * np.asarray(hood.loo[:, :k])[:, :, None]).sum(1)
    feats.append(np.where(present, loo_sum / np.maximum(onehot.sum(1), 1), 0.0)[:, :, None])
    feats.append(np.broadcast_to(np.asarray(prior, dtype=np.float64)[None, :, None], (n, num_classes, 1)))
    feats.append(np.broadcast_to(r[:, :1, None], (n, num_classes, 1)))
    feats.append(np.broadcast_to(shares[-1].max(1)[:, None, None], (n, num_classes, 1)))
    return np.concatenate(feats, axis=2).astype(np.float32)


def _rows(x: np.ndarray, y: np.ndarray | None = None):
    n, c, f = x.shape
    flat = x.reshape(n * c, f)
    return flat if y is None else (flat, (np.arange(c)[None, :] == np.asarray(y)[:, None]).ravel().astype(np.int64))


def _probs(scores: np.ndarray, n: int, c: int) -> np.ndarray:
    s = np.clip(scores.reshape(n, c), 1e-12, None)
    return s / s.sum(1, keepdims=True)


def _fit_one(x: np.ndarray, y: np.ndarray, sel_x: np.ndarray, sel_y: np.ndarray, sel_labels: np.ndarray,
             seed: int) -> tuple:
    """The best (model, rounds, config, key) of :data:`GRID` over boosting rounds, picked on (sel_x, sel_y)
    (accuracy with ties broken as in every vote, then lower NLL); rounds doubled while the best is the
    last one. Returns it, the rounds searched and the distinct (config, rounds) pairs scored."""
    n_sel, c = sel_x.shape[:2]
    rounds, done, best, scored = ROUNDS, 0, None, 0
    while True:
        for cfg in GRID:
            model = HistGradientBoostingClassifier(max_iter=rounds, early_stopping=False, random_state=seed,
                                                   **cfg).fit(*_rows(x, y))
            for it, sp in enumerate(model.staged_predict_proba(_rows(sel_x)), start=1):
                if it <= done:  # scored in an earlier, shorter search: same model up to here
                    continue
                p = break_ties(_probs(sp[:, 1], n_sel, c), sel_labels)
                key = (accuracy(p, sel_y), -nll(p, sel_y))
                scored += 1
                if best is None or key > best[3]:
                    best = (model, it, cfg, key)
        if best[1] < rounds or rounds >= MAX_ROUNDS:
            return best, rounds, scored
        done, rounds = rounds, 2 * rounds


def _predict(model, rounds: int, x: np.ndarray, labels: np.ndarray) -> np.ndarray:
    n, c = x.shape[:2]
    for it, sp in enumerate(model.staged_predict_proba(_rows(x)), start=1):
        if it == rounds:
            return break_ties(_probs(sp[:, 1], n, c), labels)
    raise ValueError(f"the model has fewer than {rounds} rounds")


def learned_rule(val: Neighbourhood, val_y: np.ndarray, test: Neighbourhood, prior: np.ndarray, num_classes: int,
                 k: int, seed: int) -> dict:
    """The cross-fitted learner at k: out-of-fold validation probabilities, test probabilities (mean of
    the two fold models), and per fold its configuration, rounds, rounds searched and configurations
    scored (the tuning budget), with ``edge`` when a fold's rounds still sit at :data:`MAX_ROUNDS`."""
    val_y = np.asarray(val_y)
    xv = class_features(val, prior, num_classes, k)
    xt = class_features(test, prior, num_classes, k)
    halves = np.array_split(np.random.default_rng(seed).permutation(len(val_y)), 2)
    pv = np.zeros((len(val_y), num_classes))
    pts, folds = [], []
    for a, b in ((0, 1), (1, 0)):
        n_sel = max(1, int(round(SELECT_SHARE * len(halves[a]))))
        fit, sel = halves[a][n_sel:], halves[a][:n_sel]
        (model, rounds, cfg, _), searched, scored = _fit_one(xv[fit], val_y[fit], xv[sel], val_y[sel],
                                                            val.labels[sel, :k], seed + a)
        pv[halves[b]] = _predict(model, rounds, xv[halves[b]], val.labels[halves[b], :k])
        pts.append(_predict(model, rounds, xt, test.labels[:, :k]))
        folds.append({**cfg, "rounds": rounds, "rounds_searched": searched, "configs": scored,
                      "edge": rounds == searched == MAX_ROUNDS})
    return {"val": pv, "test": break_ties(np.mean(pts, 0), test.labels[:, :k]), "folds": folds,
            "configs": sum(f["configs"] for f in folds), "features": int(xv.shape[2])}

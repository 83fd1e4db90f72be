"""Neighbour voting rules: weights over the k neighbours of each query -> class probabilities.

All functions are pure and vectorised over a batch of queries (arrays, no I/O). Every weight
rule returns rows that sum to 1, so :func:`vote` returns proper probability vectors:

    p(c | q) = sum_j w_j [y_j = c]

uniform:   w_j = 1 / k
distance:  w_j = softmax_j(-r_j / tau)          r_j = ||q - n_j|| Euclidean distance
cosine:    w_j = softmax_j(s_j / T)             s_j cosine similarity (DINO's exp(s/T), normalised)
attention: w_j from the learned attention module (already normalised)

ties:      when several classes share the largest vote (within TIE_TOL), the class of the nearest
           neighbour among them wins: it gets TIE_EPS more before renormalising (break_ties).
           argmax alone would hand every tie to the lowest class index, which under c -> c+1
           label noise is the true class of an even split (an artefact, not robustness).

prior correction (a remedy for long-tailed memories, applied to any rule's probabilities; the
           post-hoc logit adjustment of Menon et al. 2021 with the memory's class shares as prior):
           p'(c | q) = p(c | q) / pi_c^beta / sum_c' p(c' | q) / pi_c'^beta
           pi_c the share of class c in the memory, beta >= 0 tuned on validation

For unit vectors ||q - n||^2 = 2 - 2s, so a softmax over *squared* distances would be the cosine
rule with T = tau / 2; the distance rule therefore uses the plain Euclidean distance (as in the
method description), which gives a different weighting family.
"""

from __future__ import annotations

import numpy as np

from attnknn_lib.base.errors import ConfigError

RULES = ("uniform", "distance", "cosine")
TIE_TOL = 1e-12  # votes closer than this count as tied (sums of equal weights differ by rounding)
MAX_BETA = 10.0  # beyond this, every vote goes to the rarest class present (a bound, not a tuning grid)
TIE_EPS = 1e-9  # what the tie's winner gets: decides argmax, moves NLL / ECE by at most ~1e-9


def softmax_rows(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax of a (B, m) array: exp(z_j - max z) / sum_i exp(z_i - max z)."""
    z = z - z.max(axis=1, keepdims=True)  # stable: the largest term is exp(0) = 1
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def weight_entropy(weights: np.ndarray) -> np.ndarray:
    """Per-row entropy H_i = -sum_j w_ij log w_ij of (B, k) weights, with 0 log 0 = 0; ln k for uniform."""
    w = np.clip(np.asarray(weights, dtype=np.float64), 1e-300, None)  # w log w -> 0 as w -> 0
    return -(w * np.log(w)).sum(axis=1)


def effective_neighbours(weights: np.ndarray) -> np.ndarray:
    """Per-row effective number of neighbours exp(H_i): k for uniform weights, 1 for a one-hot row."""
    return np.exp(weight_entropy(weights))


def score_range(scores: np.ndarray) -> float:
    """Mean within-neighbourhood score range of attention scores (N, H, K) (the softmax's inputs,
    temperature included):

        range = (1 / (N H)) sum_{i, h} (max_j s_ihj - min_j s_ihj)

    0 for uniform weights; a range r lets the largest weight be at most e^r times the smallest."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 3 or s.shape[-1] < 1:
        raise ConfigError(f"scores of shape {s.shape} are not allowed; give (queries, heads, neighbours)")
    return float((s.max(-1) - s.min(-1)).mean())


def uniform_weights(shape: tuple[int, int]) -> np.ndarray:
    """w_j = 1/k for a (B, k) neighbour block."""
    b, k = shape
    return np.full((b, k), 1.0 / k)


def distance_weights(dist: np.ndarray, tau: float) -> np.ndarray:
    """w_j = exp(-r_j / tau) / sum_i exp(-r_i / tau); dist (B, k) Euclidean distances."""
    if tau <= 0:
        raise ConfigError(f"tau={tau!r} is out of range; allowed: > 0")
    return softmax_rows(-np.asarray(dist, dtype=np.float64) / tau)


def cosine_weights(similarity: np.ndarray, temperature: float) -> np.ndarray:
    """w_j = exp(s_j / T) / sum_i exp(s_i / T); similarity (B, k)."""
    if temperature <= 0:
        raise ConfigError(f"temperature={temperature!r} is out of range; allowed: > 0")
    return softmax_rows(np.asarray(similarity, dtype=np.float64) / temperature)


def cosine_from_sq_dist(sq_dist: np.ndarray) -> np.ndarray:
    """Cosine similarity of unit vectors from their squared distance: s = 1 - d / 2."""
    return 1.0 - np.asarray(sq_dist, dtype=np.float64) / 2.0


def vote_has_gradient(labels: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Queries whose vote NLL has a gradient in the weights: (B,) bool from neighbour labels (B, k)
    and true labels (B,).

    d(-log p_y) / d s_j = -w_j ([y_j = y] - p_y) / p_y for softmax scores s: zero for every j when
    all k neighbours carry y (p_y = 1), and zero again when none does (p_y is clamped at its floor).
    So only queries with the true label present *and* a mixed neighbourhood can teach the weights.
    """
    labels = np.asarray(labels)
    target = np.asarray(target)[:, None]
    present = (labels == target).any(axis=1)
    pure = (labels == labels[:, :1]).all(axis=1)
    return present & ~pure


def break_ties(probs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Rows of ``probs`` (B, C) whose largest value is shared by several classes (within TIE_TOL):
    the tied class of the nearest neighbour (first column of ``labels`` (B, k), nearest first)
    gets TIE_EPS more, then the row is renormalised. Other rows are returned unchanged."""
    p = np.array(probs, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    tied = p >= p.max(axis=1, keepdims=True) - TIE_TOL  # (B, C)
    rows = np.flatnonzero(tied.sum(axis=1) > 1)
    if rows.size:
        lab = labels[rows]  # (r, k)
        first = tied[rows[:, None], lab].argmax(axis=1)  # rank of the nearest neighbour of a tied class
        winner = lab[np.arange(rows.size), first]
        p[rows, winner] += TIE_EPS
        p[rows] /= p[rows].sum(axis=1, keepdims=True)
    return p


def vote(weights: np.ndarray, labels: np.ndarray, num_classes: int) -> np.ndarray:
    """p(c) = sum_j w_j [y_j = c]: weights (B, k), labels (B, k), nearest first -> probabilities
    (B, C), ties broken by the nearest neighbour (:func:`break_ties`).

    One weighted bincount over ``row * C + label`` (no (B, k, C) one-hot buffer).
    """
    weights = np.asarray(weights, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    if weights.shape != labels.shape or weights.ndim != 2:
        raise ConfigError(f"weights {weights.shape} and labels {labels.shape} must both be (B, k)")
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise ConfigError(f"neighbour labels must lie in 0..{num_classes - 1}; got {labels.min()}..{labels.max()}")
    b = weights.shape[0]
    flat = (np.arange(b)[:, None] * num_classes + labels).ravel()
    probs = np.bincount(flat, weights=weights.ravel(), minlength=b * num_classes).reshape(b, num_classes)
    return break_ties(probs, labels)


def knn_probs(rule: str, sq_dist: np.ndarray, labels: np.ndarray, num_classes: int,
              param: float | None = None, k: int | None = None) -> np.ndarray:
    """Probabilities of rule ``rule`` from the first ``k`` (default all) neighbours, given their
    squared distances ``sq_dist`` (B, K) (as the memory returns them) and labels (B, K).

    ``param`` is tau for ``distance`` and T for ``cosine``; unused for ``uniform``.
    """
    if rule not in RULES:
        raise ConfigError(f"rule={rule!r} is not allowed; choose one of: {', '.join(RULES)}")
    k = sq_dist.shape[1] if k is None else k
    if not 1 <= k <= sq_dist.shape[1]:
        raise ConfigError(f"k={k!r} is out of range; allowed: 1..{sq_dist.shape[1]} (neighbours searched)")
    d, y = sq_dist[:, :k], labels[:, :k]
    if rule == "uniform":
        w = uniform_weights(d.shape)
    elif param is None:
        raise ConfigError(f"rule={rule!r} needs its temperature (param)")
    elif rule == "distance":
        w = distance_weights(np.sqrt(np.maximum(d, 0.0)), param)
    else:
        w = cosine_weights(cosine_from_sq_dist(d), param)
    return vote(w, y, num_classes)


def prior_correction(probs: np.ndarray, prior: np.ndarray, beta: float) -> np.ndarray:
    """p'(c) = p(c) pi_c^-beta / sum_c' p(c') pi_c'^-beta for probs (B, C) and class shares prior (C,).

    beta = 0 leaves the probabilities unchanged; beta = 1 divides each class's vote by its share
    of the memory (every class then counts as if the memory were balanced); beta > 1 favours rare
    classes further (it can pay when the rare classes' neighbours are also sparser). A class absent from
    the memory (pi_c = 0) gets no vote anyway and stays at 0.
    """
    probs = np.asarray(probs, dtype=np.float64)
    prior = np.asarray(prior, dtype=np.float64)
    if prior.shape != probs.shape[1:] or (prior < 0).any():
        raise ConfigError(f"prior must be {probs.shape[1:]} non-negative class shares; got shape {prior.shape}")
    if not 0.0 <= beta <= MAX_BETA:
        raise ConfigError(f"beta={beta!r} is out of range; allowed: 0..{MAX_BETA:g}")
    scale = np.where(prior > 0, np.maximum(prior, 1e-12) ** -beta, 0.0)  # (C,)
    p = probs * scale
    total = p.sum(axis=1, keepdims=True)
    return np.where(total > 0, p / np.where(total > 0, total, 1.0), probs)



def prefix_class_scores(weights: np.ndarray, labels: np.ndarray, ks, num_classes: int) -> np.ndarray:
    """S_k(c) = sum_{j <= k} w_j [y_j = c] for every k of ``ks``: weights and labels (N, K),
    nearest first -> (L, N, C) for the L values of ``ks`` (each in 1..K, any order).

    Normalised over c, S_k is the vote of the first k neighbours with those weights. One weighted
    bincount gives the class sums of each block of neighbours between consecutive k, and a
    cumulative sum over the blocks gives every prefix, so all L votes cost about one.
    """
    weights = np.asarray(weights, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    ks = np.asarray(list(ks), dtype=np.int64)
    if weights.shape != labels.shape or weights.ndim != 2:
        raise ConfigError(f"weights {weights.shape} and labels {labels.shape} must both be (N, K)")
    if ks.size == 0 or ks.min() < 1 or ks.max() > weights.shape[1]:
        raise ConfigError(f"ks must lie in 1..{weights.shape[1]} (neighbours given); got {ks.tolist()}")
    order = np.unique(ks)  # sorted, distinct
    n, width, blocks = weights.shape[0], int(order[-1]), len(order)
    block = np.searchsorted(order, np.arange(1, width + 1))  # (width,) block of each neighbour rank
    flat = ((np.arange(n)[:, None] * blocks + block[None, :]) * num_classes + labels[:, :width]).ravel()
    sums = np.bincount(flat, weights=weights[:, :width].ravel(), minlength=n * blocks * num_classes)
    prefix = np.cumsum(sums.reshape(n, blocks, num_classes), axis=1)  # (N, blocks, C)
    return prefix[:, np.searchsorted(order, ks), :].transpose(1, 0, 2)

"""Top-k softmax attention (the hard top-k of KVT and ConvNN-Attention), the dense attention it
approximates, and a sampling estimator of the part that top-k drops.

Softmax attention of a query with scores s_j = scale * <q, k_j> over n keys and values v_j:

    a(q)   = sum_j p_j v_j,            p_j = exp(s_j) / sum_i exp(s_i)              (dense)
    a_k(q) = sum_{j in T} e_j v_j / sum_{j in T} e_j,   e_j = exp(s_j), T = the k largest s_j

With values in the probability simplex (one-hot labels) the truncation error is bounded by the
softmax mass that top-k drops, m_k = sum_{j not in T} p_j: since a = (1 - m_k) a_k + m_k a_rest,

    || a_k - a ||_1 = m_k || a_k - a_rest ||_1 <= 2 m_k.

Attn-KNN's vote is this with labels as values, its learned scores, and T = the k nearest
neighbours (for unit vectors and a dot-product score the two sets coincide).

Sampled tail: T exactly, plus l rows drawn uniformly (with replacement) from the other n - k, each
standing for (n - k) / l rows, in both the numerator and the normaliser:

    a_hat = (sum_T e_j v_j + (n-k)/l sum_S e_j v_j) / (sum_T e_j + (n-k)/l sum_S e_j)

This is the top-k-plus-uniform-samples estimate of the partition function (Mussmann et al., 2017)
that "kNN Attention Demystified" (Haris, ICLR 2025) builds on; its lazy Gumbel sampler, which draws
exact samples from the softmax, is not implemented here.
"""

from __future__ import annotations

import torch

from attnknn_lib.base.errors import ConfigError


def _check_k(k: int | None, n: int) -> int:
    if k is None:
        return n
    if not 1 <= k <= n:
        raise ConfigError(f"k={k!r} is out of range; allowed: 1..{n} keys")
    return int(k)


def topk_weights(scores: torch.Tensor, k: int | None = None) -> torch.Tensor:
    """Softmax over the k largest scores of each row (the rest get weight 0); k = None or k = n is
    the dense softmax. scores (..., n) -> weights (..., n), rows summing to 1."""
    n = scores.shape[-1]
    k = _check_k(k, n)
    if k == n:
        return scores.softmax(-1)
    top = scores.topk(k, dim=-1)
    return torch.zeros_like(scores).scatter_(-1, top.indices, top.values.softmax(-1))


def topk_attention(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, k: int | None = None,
                   scale: float = 1.0) -> torch.Tensor:
    """a_k(q) = sum_{j in top-k(s)} softmax(s_top)_j v_j with scores s = scale q.K^T, for each query:
    query (B, D), keys (n, D), values (n, C) -> (B, C); k = None (or n) is dense softmax attention.
    Only the k kept values are gathered, so the cost past the scores is O(B k C), not O(B n C)."""
    scores = scale * query @ keys.T  # (B, n)
    if k is None or k == scores.shape[-1]:
        return scores.softmax(-1) @ values  # (B, C)
    top = scores.topk(_check_k(k, scores.shape[-1]), dim=-1)  # values, indices: (B, k)
    return torch.einsum("bk,bkc->bc", top.values.softmax(-1), values[top.indices])  # values[...]: (B, k, C)


def tail_mass(scores: torch.Tensor, k: int) -> torch.Tensor:
    """m_k = softmax mass outside the k largest scores of each row: (..., n) -> (...)."""
    k = _check_k(k, scores.shape[-1])
    p = scores.softmax(-1)
    return (1.0 - p.topk(k, dim=-1).values.sum(-1)).clamp_min(0.0)


def tail_masses(scores: torch.Tensor, ks: list[int], order: torch.Tensor | None = None) -> dict[int, torch.Tensor]:
    """m_k for several k from one sort: the softmax mass outside the first k keys of ``order``
    (default: descending score). scores (B, n) -> {k: (B,)}."""
    n = scores.shape[-1]
    ks = [_check_k(k, n) for k in ks]
    if order is None:
        order = scores.argsort(dim=-1, descending=True)
    kept = scores.softmax(-1).gather(-1, order).cumsum(-1)  # (B, n)
    return {k: (1.0 - kept[:, k - 1]).clamp_min(0.0) for k in ks}


def _weighted_sum(w: torch.Tensor, rows: torch.Tensor, values: torch.Tensor, num_classes: int | None) -> torch.Tensor:
    """sum_j w_j v_{rows_j} per query: w, rows (B, m); ``values`` (n, C) rows, or class labels (n,)
    with ``num_classes`` (one-hot values summed by class, no (B, m, C) buffer)."""
    if values.dim() == 1:
        return torch.zeros(len(w), num_classes, dtype=w.dtype, device=w.device).scatter_add_(1, values[rows], w)
    return (w.unsqueeze(-1) * values[rows]).sum(1)


def prefix_outputs(scores: torch.Tensor, values: torch.Tensor, ks: list[int], order: torch.Tensor | None = None,
                   num_classes: int | None = None) -> dict[int, torch.Tensor]:
    """a_k for several k from one sort: scores (B, n), values (n, C) -> {k: (B, C)}. ``order`` (B, n)
    ranks the keys (default: by descending score; Attn-KNN ranks them by distance). With class
    labels (n,) as ``values`` and ``num_classes``, the values are their one-hot vectors."""
    n = scores.shape[-1]
    ks = [_check_k(k, n) for k in ks]
    if order is None:
        order = scores.argsort(dim=-1, descending=True)
    s = scores.gather(-1, order)
    e = (s - s.max(-1, keepdim=True).values).exp()  # (B, n); scaling by a row constant cancels
    z = e.cumsum(-1)
    return {k: _weighted_sum(e[:, :k], order[:, :k], values, num_classes) / z[:, k - 1:k] for k in ks}


def sampled_tail_attention(scores: torch.Tensor, values: torch.Tensor, k: int, n_samples: int,
                           generator: torch.Generator | None = None, order: torch.Tensor | None = None,
                           num_classes: int | None = None) -> torch.Tensor:
    """a_hat: the top k exactly plus ``n_samples`` uniform draws from the other n - k rows, each
    weighted (n - k) / n_samples. scores (B, n), values (n, C) -> (B, C); ``order`` and class
    labels as values as for :func:`prefix_outputs` (pass ``order`` to sort once for several k)."""
    n = scores.shape[-1]
    k = _check_k(k, n)
    if n_samples < 1:
        raise ConfigError(f"n_samples={n_samples!r} is out of range; allowed: >= 1")
    if k == n:
        return prefix_outputs(scores, values, [n], order, num_classes)[n]
    if order is None:
        order = scores.argsort(dim=-1, descending=True)
    s = scores.gather(-1, order)
    e = (s - s.max(-1, keepdim=True).values).exp()  # (B, n)
    pos = k + torch.randint(0, n - k, (len(scores), n_samples), generator=generator).to(scores.device)
    w = torch.cat([e[:, :k], e.gather(-1, pos) * ((n - k) / n_samples)], dim=1)  # (B, k + l)
    rows = torch.cat([order[:, :k], order.gather(-1, pos)], dim=1)
    return _weighted_sum(w, rows, values, num_classes) / w.sum(-1, keepdim=True)


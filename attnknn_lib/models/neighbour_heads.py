"""Heads over a query's k retrieved neighbours, trained on a frozen embedding (the attention study).

Every head maps one batch of neighbourhoods to ``(probs (B, C), weights (B, K))``: class
probabilities and the weight it gives each neighbour (what the diagnostics read). A batch is a
:class:`NeighbourBatch`: the query (B, D), its neighbours' embeddings (B, K, D), squared distances
(B, K) and labels (B, K), nearest first, and each neighbour's leave-one-out agreement (B, K): the
share of *its own* k nearest memory rows that carry its label (a label-consistency signal a
label-blind score cannot see).

* :class:`BlindAttention` - the prototype's multi-head attention (scores from geometry only);
* :class:`LabelAwareAttention` - scores from per-neighbour features (distance, rank, the share of
  the k that carry its label, its leave-one-out agreement) plus <W q, E[y_j]>, an embedding of its
  label read against the query;
* :class:`NeighbourReadout` - a TabR-style readout (Gorishniy et al. 2024): weights
  softmax(-d_j / T), values E[y_j] + MLP(q - n_j), logits = MLP([q, sum_j w_j v_j]);
  :class:`QueryOnly` is its control, the same output MLP fed the query alone, and
  :class:`LinearProbe` the linear probe on the query, trained as the heads are;
* :class:`AdaptiveK` - a mixture over k in {1, 2, 4, ...} of uniform votes, its mixing weights
  predicted from the distances and label counts at each k;
* :class:`DifferenceAttention` - a label-blind score read from the difference q - n_j (TabR's
  idea applied to the weights): s_j = MLP(q - n_j), w = softmax(s), p = weighted_vote(w).

Heads whose weights are a softmax of scores expose them as ``scores(nb) -> (B, H, K)`` (H = 1 for a
single-score head), what the within-neighbourhood score range reads.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from attnknn_lib.models.classifiers import weighted_vote
from attnknn_lib.models.neighbour_attention import MultiHeadNeighbourAttention


class NeighbourBatch(NamedTuple):
    query: torch.Tensor  # (B, D) unit vectors
    neighbours: torch.Tensor  # (B, K, D)
    sq_dist: torch.Tensor  # (B, K), nearest first
    labels: torch.Tensor  # (B, K) int64
    loo_agreement: torch.Tensor  # (B, K) in [0, 1]


def label_share(labels: torch.Tensor) -> torch.Tensor:
    """a_j = share of the k neighbours that carry y_j: labels (B, K) -> (B, K)."""
    return (labels.unsqueeze(2) == labels.unsqueeze(1)).float().mean(-1)


def _mlp(d_in: int, hidden: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Linear(hidden, d_out))


class BlindAttention(nn.Module):
    """The prototype's label-blind attention, as a head: weights from :class:`MultiHeadNeighbourAttention`."""

    def __init__(self, attention: MultiHeadNeighbourAttention):
        super().__init__()
        self.attention = attention
        self.num_classes = attention.cfg.num_classes

    def forward(self, nb: NeighbourBatch) -> tuple[torch.Tensor, torch.Tensor]:
        weights, _ = self.attention(nb.query, nb.neighbours, nb.sq_dist, nb.labels)
        return weighted_vote(weights, nb.labels, self.num_classes), weights

    def scores(self, nb: NeighbourBatch) -> torch.Tensor:
        """Per-head scores (B, H, K) before the softmax."""
        return self.attention.scores(nb.query, nb.neighbours, nb.sq_dist, nb.labels)


class DifferenceAttention(nn.Module):
    """s_j = MLP(q - n_j) (one score per neighbour from the query-neighbour difference, TabR's
    value feature used as a score), w = softmax(s), p = weighted_vote(w). Label-blind like the
    prototype's head, but its score is any learned function of the difference vector, not a dot
    product over a temperature. The last layer starts at zero: training starts from the uniform vote."""

    def __init__(self, num_classes: int, embed_dim: int, hidden: int = 64):
        super().__init__()
        self.num_classes = num_classes
        self.score = _mlp(embed_dim, hidden, 1)
        nn.init.zeros_(self.score[-1].weight)
        nn.init.zeros_(self.score[-1].bias)

    def scores(self, nb: NeighbourBatch) -> torch.Tensor:
        """Scores (B, 1, K): one head."""
        return self.score(nb.query.unsqueeze(1) - nb.neighbours).squeeze(-1).unsqueeze(1)

    def forward(self, nb: NeighbourBatch) -> tuple[torch.Tensor, torch.Tensor]:
        weights = self.scores(nb).squeeze(1).softmax(-1)
        return weighted_vote(weights, nb.labels, self.num_classes), weights


class LabelAwareAttention(nn.Module):
    """s_j = MLP(d_j, rank_j / K, a_j, loo_j) + <W q, E[y_j]> / sqrt(d); w = softmax(s); p = weighted_vote(w).

    The last layers start at zero, so training starts from the uniform vote and every departure
    from it is learned."""

    def __init__(self, num_classes: int, embed_dim: int, hidden: int = 32, label_dim: int = 16):
        super().__init__()
        self.num_classes, self.label_dim = num_classes, label_dim
        self.features = _mlp(4, hidden, 1)
        self.query = nn.Linear(embed_dim, label_dim)
        self.label = nn.Embedding(num_classes, label_dim)
        for layer in (self.features[-1], self.query):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, nb: NeighbourBatch) -> tuple[torch.Tensor, torch.Tensor]:
        k = nb.labels.shape[1]
        rank = torch.arange(k, device=nb.labels.device, dtype=nb.sq_dist.dtype).expand_as(nb.sq_dist) / k
        feats = torch.stack([nb.sq_dist, rank, label_share(nb.labels), nb.loo_agreement], -1)  # (B, K, 4)
        scores = self.features(feats).squeeze(-1)
        scores = scores + (self.label(nb.labels) * self.query(nb.query).unsqueeze(1)).sum(-1) / math.sqrt(self.label_dim)
        weights = scores.softmax(-1)
        return weighted_vote(weights, nb.labels, self.num_classes), weights


class NeighbourReadout(nn.Module):
    """TabR-style: w = softmax(-d / T) (T learned), v_j = E[y_j] + MLP(q - n_j),
    logits = MLP([q, sum_j w_j v_j]). Its prediction is not a vote: the readout can override the
    neighbours, which is why :class:`QueryOnly` is its control."""

    def __init__(self, num_classes: int, embed_dim: int, hidden: int = 128):
        super().__init__()
        self.log_t = nn.Parameter(torch.tensor(math.log(0.1)))
        self.label = nn.Embedding(num_classes, embed_dim)
        self.diff = _mlp(embed_dim, hidden, embed_dim)
        self.out = _mlp(2 * embed_dim, hidden, num_classes)

    def forward(self, nb: NeighbourBatch) -> tuple[torch.Tensor, torch.Tensor]:
        weights = (-nb.sq_dist / self.log_t.exp()).softmax(-1)  # (B, K)
        values = self.label(nb.labels) + self.diff(nb.query.unsqueeze(1) - nb.neighbours)  # (B, K, D)
        context = (weights.unsqueeze(-1) * values).sum(1)
        return self.out(torch.cat([nb.query, context], -1)).softmax(-1), weights


class QueryOnly(nn.Module):
    """The readout's control: the same output MLP on the query alone (no neighbours); its weights
    are uniform by convention."""

    def __init__(self, num_classes: int, embed_dim: int, hidden: int = 128):
        super().__init__()
        self.out = _mlp(embed_dim, hidden, num_classes)

    def forward(self, nb: NeighbourBatch) -> tuple[torch.Tensor, torch.Tensor]:
        k = nb.labels.shape[1]
        return self.out(nb.query).softmax(-1), nb.sq_dist.new_full(nb.sq_dist.shape, 1.0 / k)


class LinearProbe(nn.Module):
    """Softmax regression on the standardised query (no neighbours): p = softmax(W (q - mu) / sd + b),
    mu and sd the memory's per-dimension mean and s.d. (fixed; a zero s.d. reads as 1); its weights
    are uniform by convention. The linear probe trained as the heads are."""

    def __init__(self, num_classes: int, embed_dim: int, memory: torch.Tensor | None = None):
        super().__init__()
        mean = memory.mean(0) if memory is not None else torch.zeros(embed_dim)
        sd = memory.std(0, unbiased=False) if memory is not None else torch.ones(embed_dim)
        self.register_buffer("mean", mean.float())
        self.register_buffer("sd", torch.where(sd > 0, sd, torch.ones_like(sd)).float())
        self.out = nn.Linear(embed_dim, num_classes)

    def forward(self, nb: NeighbourBatch) -> tuple[torch.Tensor, torch.Tensor]:
        k = nb.labels.shape[1]
        return self.out((nb.query - self.mean) / self.sd).softmax(-1), nb.sq_dist.new_full(nb.sq_dist.shape, 1.0 / k)


def k_ladder(k_max: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to k_max (k_max itself included)."""
    ks = [2 ** i for i in range(int(math.log2(k_max)) + 1)]
    return tuple(ks if ks[-1] == k_max else ks + [k_max])


class AdaptiveK(nn.Module):
    """p = sum_i pi_i p_uniform(k_i) over k_i in :func:`k_ladder`, with pi = softmax(MLP(x)) and x
    per query: the squared distance of the k_i-th neighbour and the top label's share among the
    first k_i, for every k_i. Each neighbour's weight is sum_i pi_i [rank < k_i] / k_i. The last
    layer starts at zero: the initial mixture is the mean over k."""

    def __init__(self, num_classes: int, k_max: int, hidden: int = 32):
        super().__init__()
        self.num_classes, self.ks = num_classes, k_ladder(k_max)
        self.gate = _mlp(2 * len(self.ks), hidden, len(self.ks))
        nn.init.zeros_(self.gate[-1].weight)
        nn.init.zeros_(self.gate[-1].bias)

    def forward(self, nb: NeighbourBatch) -> tuple[torch.Tensor, torch.Tensor]:
        onehot = F.one_hot(nb.labels, self.num_classes).float()  # (B, K, C)
        counts = onehot.cumsum(1)  # (B, K, C): votes among the first j + 1
        idx = torch.tensor([k - 1 for k in self.ks], device=nb.labels.device)
        sizes = torch.tensor(self.ks, device=nb.labels.device, dtype=onehot.dtype)
        votes = counts[:, idx] / sizes.view(1, -1, 1)  # (B, n_k, C) uniform vote at each k
        x = torch.cat([nb.sq_dist[:, idx], votes.max(-1).values], -1)
        pi = self.gate(x).softmax(-1)  # (B, n_k)
        probs = (pi.unsqueeze(-1) * votes).sum(1)
        rank = torch.arange(nb.labels.shape[1], device=nb.labels.device)
        inside = (rank.view(1, -1) < sizes.view(-1, 1)).to(onehot.dtype) / sizes.view(-1, 1)  # (n_k, K)
        return probs, pi @ inside

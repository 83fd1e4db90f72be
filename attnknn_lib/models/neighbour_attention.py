"""Multi-head neighbour attention (MHNA): one weight per neighbour of a query.

For query q and neighbours n_1..n_k (unit vectors) with labels y_j and squared distances
d_j = ||q - n_j||^2, head h scores neighbour j as

    s_hj = <W_q q, W_k n_j>_h / (sqrt(d_head) * tau_h)      scaled dot product, learned temperature
         + b_h(d_j)                                         distance-bias MLP           (distance_bias)
         + l_h(a_j)                                         label-conditioned bias      (label_bias)
         + gamma * cos(n_j, P[y_j])                         class-prototype alignment   (prototypes)

and the weight is w_j = mean_h softmax_j(s_hj). With ``fixed_vote`` the attention is replaced by a
fixed softmax vote over the neighbours' distances, s_j = -d_j / tau, with one learned temperature
and nothing else (no projections, no bias): the end-to-end control that is trained like Attn-KNN,
so "the attention" can be told from "the training". ``a_j`` is the share of the k neighbours that
carry label y_j. (The prototype added a label bias that was the same for every neighbour of a
query, which cancels in the softmax; this per-neighbour form can change the weights.) With
``neighbour_self_attention`` the neighbours first attend to each other (one residual
multi-head self-attention layer) before the keys are computed. ``tau_h`` lies in
[tau_min, tau_max] through a sigmoid, or stays at ``tau_init`` when ``learn_temperature`` is off.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from attnknn_lib.base.errors import ConfigError, check_range


@dataclass(frozen=True)
class AttentionConfig:
    num_classes: int
    embed_dim: int = 128  # must match the embedder's output
    num_heads: int = 4  # prototype setting
    tau_init: float = 0.5  # prototype setting
    tau_min: float = 0.05  # bounds keep the softmax from collapsing to one neighbour or going flat
    tau_max: float = 2.0
    learn_temperature: bool = True
    distance_bias: bool = True
    label_bias: bool = False  # prototype-v2 components: off by default, switched on for ablations
    prototypes: bool = False
    neighbour_self_attention: bool = False
    bias_hidden: int = 32  # width of the small bias MLPs
    fixed_vote: bool = False  # the end-to-end control: softmax(-d / tau), one learned tau

    def __post_init__(self) -> None:
        if self.num_classes < 2:
            raise ConfigError(f"num_classes={self.num_classes!r} is out of range; allowed: >= 2")
        if self.num_heads < 1 or self.embed_dim % self.num_heads:
            raise ConfigError(f"embed_dim={self.embed_dim} must be a positive multiple of num_heads={self.num_heads}")
        check_range("tau_min", self.tau_min, 0.0, None, low_inclusive=False)
        check_range("tau_max", self.tau_max, self.tau_min, None, low_inclusive=False)
        check_range("tau_init", self.tau_init, self.tau_min, self.tau_max, low_inclusive=False, high_inclusive=False)
        check_range("bias_hidden", self.bias_hidden, 1, None)
        if self.fixed_vote and (self.label_bias or self.prototypes or self.neighbour_self_attention):
            raise ConfigError("fixed_vote=True is not allowed with label_bias, prototypes or neighbour_self_attention; "
                              "the fixed vote reads distances only")

    def to_dict(self) -> dict:
        return asdict(self)


def _bias_mlp(hidden: int, heads: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(1, hidden), nn.GELU(), nn.Linear(hidden, heads))


class MultiHeadNeighbourAttention(nn.Module):
    def __init__(self, cfg: AttentionConfig):
        super().__init__()
        self.cfg = cfg
        d, h = cfg.embed_dim, cfg.num_heads
        self.head_dim = d // h
        self.q_proj = nn.Linear(d, d)
        self.k_proj = nn.Linear(d, d)
        span = cfg.tau_max - cfg.tau_min
        raw = math.log((cfg.tau_init - cfg.tau_min) / (cfg.tau_max - cfg.tau_init))  # sigmoid^-1
        n_tau = 1 if cfg.fixed_vote else h  # the fixed vote has one temperature
        if cfg.learn_temperature:
            self.tau_raw = nn.Parameter(torch.full((n_tau,), raw))
        else:
            self.register_buffer("tau_raw", torch.full((n_tau,), raw))
        self._tau_min, self._tau_span = cfg.tau_min, span
        self.dist_bias = _bias_mlp(cfg.bias_hidden, h) if cfg.distance_bias and not cfg.fixed_vote else None
        self.label_bias = _bias_mlp(cfg.bias_hidden, h) if cfg.label_bias else None
        if cfg.prototypes:
            self.prototypes = nn.Parameter(torch.randn(cfg.num_classes, d) * 0.1)
            self.proto_scale = nn.Parameter(torch.ones(()))
        else:
            self.prototypes = None
        if cfg.neighbour_self_attention:
            self.self_attn = nn.MultiheadAttention(d, h, batch_first=True)
            self.self_norm = nn.LayerNorm(d)
        else:
            self.self_attn = None
        for m in (self.q_proj, self.k_proj):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)

    def temperatures(self) -> torch.Tensor:
        """Per-head temperatures ``(H,)`` in [tau_min, tau_max] (``(1,)`` for the fixed vote)."""
        return self._tau_min + self._tau_span * torch.sigmoid(self.tau_raw)

    def _geometry_scores(self, query: torch.Tensor, keys: torch.Tensor, sq_dist: torch.Tensor) -> torch.Tensor:
        """The label-free part of s_hj (dot product over temperature, distance bias). query (B, D);
        keys = ``k_proj`` of the neighbours, (B, K, D) per query or (K, D) shared by every query;
        sq_dist (B, K) -> (B, H, K)."""
        B, K = sq_dist.shape
        H, hd = self.cfg.num_heads, self.head_dim
        if self.cfg.fixed_vote:  # the same vote in every head: -d_j / tau
            return (-sq_dist / self.temperatures()).unsqueeze(1).expand(B, H, K)  # (B, H, K)
        q = self.q_proj(query).view(B, H, 1, hd)  # (B, H, 1, hd)
        k = keys.view(-1, K, H, hd).transpose(1, 2)  # (B or 1, H, K, hd)
        tau = self.temperatures().view(1, H, 1)
        scores = (q @ k.transpose(-2, -1)).squeeze(2) / (math.sqrt(hd) * tau)  # (B, H, K)
        if self.dist_bias is not None:
            scores = scores + self.dist_bias(sq_dist.unsqueeze(-1)).transpose(1, 2)  # (B, K, H) -> (B, H, K)
        return scores

    def keys(self, rows: torch.Tensor) -> torch.Tensor:
        """Projected keys W_k n of memory rows (n, D) -> (n, D): compute once, score many queries."""
        return self.k_proj(rows)

    def dense_scores(self, query: torch.Tensor, memory_keys: torch.Tensor, sq_dist: torch.Tensor) -> torch.Tensor:
        """Per-head scores s_hj of every memory row, not only the k retrieved: query (B, D),
        memory_keys = :meth:`keys` of the memory (n, D), sq_dist (B, n) -> (B, H, n). Only the
        label-free configuration has them: the label bias, the prototypes and the neighbour
        self-attention depend on which neighbours came back."""
        c = self.cfg
        if c.label_bias or c.prototypes or c.neighbour_self_attention:
            raise ConfigError("dense_scores: only the attention without label_bias, prototypes and "
                              "neighbour_self_attention scores a row independently of the retrieved set")
        return self._geometry_scores(query, memory_keys, sq_dist)

    def forward(self, query: torch.Tensor, neighbours: torch.Tensor, sq_dist: torch.Tensor,
                neighbour_labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """query (B, D), neighbours (B, K, D), sq_dist (B, K), neighbour_labels (B, K) ->
        (weights (B, K), per-head weights (B, H, K)); each row sums to 1."""
        head_weights = self.scores(query, neighbours, sq_dist, neighbour_labels).softmax(dim=-1)  # (B, H, K)
        return head_weights.mean(dim=1), head_weights

    def scores(self, query: torch.Tensor, neighbours: torch.Tensor, sq_dist: torch.Tensor,
               neighbour_labels: torch.Tensor) -> torch.Tensor:
        """The per-head scores s_hj (B, H, K) whose softmax over j gives the weights (temperature,
        distance and label biases, prototypes included): what a diagnostic reads before the softmax."""
        if self.self_attn is not None:
            refined, _ = self.self_attn(neighbours, neighbours, neighbours, need_weights=False)
            neighbours = self.self_norm(neighbours + refined)  # (B, K, D)
        scores = self._geometry_scores(query, self.k_proj(neighbours), sq_dist)  # (B, H, K)
        if self.label_bias is not None:
            agree = (neighbour_labels.unsqueeze(2) == neighbour_labels.unsqueeze(1)).float().mean(-1)  # (B, K)
            scores = scores + self.label_bias(agree.unsqueeze(-1)).transpose(1, 2)  # (B, H, K)
        if self.prototypes is not None:
            protos = F.normalize(self.prototypes, dim=-1)[neighbour_labels]  # (B, K, D)
            align = (F.normalize(neighbours, dim=-1) * protos).sum(-1)  # (B, K)
            scores = scores + self.proto_scale * align.unsqueeze(1)  # same for every head
        return scores

"""The two trainable classifiers: Attn-KNN (attention-weighted neighbour vote) and the CNN
baseline (same backbone, linear softmax head)."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.models.embedder import Embedder
from attnknn_lib.models.neighbour_attention import MultiHeadNeighbourAttention


class AttnKNNOutput(NamedTuple):
    probs: torch.Tensor  # (B, C) attention-weighted vote, rows sum to 1
    weights: torch.Tensor  # (B, K) attention weight per neighbour (mean over heads)
    head_weights: torch.Tensor  # (B, H, K)
    embedding: torch.Tensor  # (B, D) unit-norm query embedding


def weighted_vote(weights: torch.Tensor, neighbour_labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """p(c) = sum_j w_j [y_j = c]: weights (B, K), labels (B, K) -> (B, C), differentiable in w."""
    out = weights.new_zeros(weights.shape[0], num_classes)
    return out.scatter_add_(1, neighbour_labels, weights)  # (B, C)


def attend(attention: MultiHeadNeighbourAttention, query_emb: torch.Tensor, neighbour_emb: torch.Tensor,
           neighbour_labels: torch.Tensor) -> AttnKNNOutput:
    """Attention-weighted vote from embeddings: query (B, D), neighbours (B, K, D), labels (B, K).

    Distances are recomputed from the embeddings (d = 2 - 2 q.n for unit vectors), so the
    distance bias sees the same quantity in training (bank slightly stale) and at test time,
    and gradients flow through it to the query's embedder.
    """
    sq_dist = (2.0 - 2.0 * (neighbour_emb @ query_emb.unsqueeze(-1)).squeeze(-1)).clamp_min(0.0)  # (B, K)
    weights, head_weights = attention(query_emb, neighbour_emb, sq_dist, neighbour_labels)
    return AttnKNNOutput(weighted_vote(weights, neighbour_labels, attention.cfg.num_classes), weights, head_weights, query_emb)


class AttnKNN(nn.Module):
    """Embeds a query, attends over its neighbours' (memory) embeddings and votes."""

    def __init__(self, embedder: Embedder, attention: MultiHeadNeighbourAttention):
        super().__init__()
        if attention.cfg.embed_dim != embedder.embed_dim:
            raise ConfigError(f"attention embed_dim={attention.cfg.embed_dim} differs from the embedder's "
                              f"embed_dim={embedder.embed_dim}")
        self.embedder = embedder
        self.attention = attention
        self.num_classes = attention.cfg.num_classes

    def attend(self, query_emb: torch.Tensor, neighbour_emb: torch.Tensor,
               neighbour_labels: torch.Tensor) -> AttnKNNOutput:
        """Vote from embeddings: query (B, D), neighbours (B, K, D), labels (B, K)."""
        return attend(self.attention, query_emb, neighbour_emb, neighbour_labels)

    def forward(self, x: torch.Tensor, neighbour_emb: torch.Tensor, neighbour_labels: torch.Tensor) -> AttnKNNOutput:
        return self.attend(self.embedder(x), neighbour_emb, neighbour_labels)


class CNNClassifier(nn.Module):
    """Backbone + linear head; returns logits (B, C). The accuracy reference for the kNN methods."""

    def __init__(self, backbone: nn.Module, num_classes: int):
        super().__init__()
        self.backbone = backbone
        self.fc = nn.Linear(backbone.out_dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.backbone(x))  # (B, C) logits

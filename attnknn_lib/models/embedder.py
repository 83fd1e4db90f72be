"""Embedder = backbone -> projection head (Linear, LayerNorm, GELU, Linear) -> L2 normalisation."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ProjectionHead(nn.Module):
    def __init__(self, in_dim: int, embed_dim: int = 128, hidden: int = 256):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.LayerNorm(hidden), nn.GELU(), nn.Linear(hidden, embed_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # (B, embed_dim)


class Embedder(nn.Module):
    """Maps inputs to unit vectors, so squared L2 distance = 2 - 2 * cosine similarity."""

    def __init__(self, backbone: nn.Module, embed_dim: int = 128, hidden: int = 256):
        super().__init__()
        self.backbone = backbone
        self.head = ProjectionHead(backbone.out_dim, embed_dim, hidden)
        self.embed_dim = embed_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.head(self.backbone(x)), dim=-1)  # (B, embed_dim), unit norm

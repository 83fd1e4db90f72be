"""Training a neighbour head (:mod:`attnknn_lib.models.neighbour_heads`) on frozen neighbourhoods.

The embedding is fixed, so each query's k neighbours are searched once (a training query's own
row excluded) and stored in a :class:`~attnknn_lib.knn.neighbourhood.Neighbourhood`; the head sees mini-batches of them. Loss:
NLL of the head's probabilities (floored as in :func:`~attnknn_lib.models.losses.vote_nll`) minus
``entropy_weight`` x the entropy of its neighbour weights (+: a bonus toward uniform, the
prototype's; -: a penalty). The epoch with the best validation accuracy (ties: lower NLL) is kept;
the test set plays no part. Predictions are re-voted in float64 with neutral ties
(:func:`attnknn_lib.knn.votes.vote`) for heads whose output is a vote of their weights.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import nn

from attnknn_lib.base.runtime import seed_everything
from attnknn_lib.data.transforms import batches
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.knn.votes import break_ties, vote
from attnknn_lib.models.losses import attention_entropy, vote_nll
from attnknn_lib.models.neighbour_heads import LinearProbe, NeighbourBatch, NeighbourReadout, QueryOnly
from attnknn_lib.training.loops import TrainResult, _Selection  # the one selection rule of every training


def batch(data: Neighbourhood, memory: torch.Tensor, idx) -> NeighbourBatch:
    """Queries ``idx`` of a frozen neighbourhood as the tensors a head reads (neighbour embeddings
    gathered from ``memory``, (M, D))."""
    rows = torch.as_tensor(data.rows[idx])
    return NeighbourBatch(torch.as_tensor(data.query[idx]), memory[rows], torch.as_tensor(data.sq_dist[idx]),
                          torch.as_tensor(data.labels[idx], dtype=torch.long),
                          torch.as_tensor(data.loo[idx], dtype=torch.float32))


def is_vote(head: nn.Module) -> bool:
    """Whether the head's probabilities are the vote of its neighbour weights."""
    return not isinstance(head, NeighbourReadout | QueryOnly | LinearProbe)


def predict(head: nn.Module, data: Neighbourhood, memory: torch.Tensor, num_classes: int,
            batch_size: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """(probs (N, C) float64 with neutral ties, weights (N, K)) of ``head`` in eval mode."""
    was = head.training
    head.eval()
    probs, weights = [], []
    with torch.no_grad():
        for s in range(0, len(data), batch_size):
            idx = np.arange(s, min(s + batch_size, len(data)))
            p, w = head(batch(data, memory, idx))
            w = w.double().numpy()
            labels = data.labels[idx]
            probs.append(vote(w, labels, num_classes) if is_vote(head) else break_ties(p.double().numpy(), labels))
            weights.append(w)
    head.train(was)
    return np.concatenate(probs), np.concatenate(weights)


def head_scores(head: nn.Module, data: Neighbourhood, memory: torch.Tensor, batch_size: int = 4096) -> np.ndarray:
    """The scores (N, H, K) that ``head`` (one with ``scores(nb)``) gives each query's neighbours
    before the softmax, in eval mode."""
    was = head.training
    head.eval()
    out = []
    with torch.no_grad():
        for s in range(0, len(data), batch_size):
            out.append(head.scores(batch(data, memory, np.arange(s, min(s + batch_size, len(data))))).double().numpy())
    head.train(was)
    return np.concatenate(out)


def train_head(head: nn.Module, train: Neighbourhood, val: Neighbourhood, memory: torch.Tensor, num_classes: int,
               epochs: int = 3, lr: float = 3e-3, batch_size: int = 512, entropy_weight: float = 0.0,
               seed: int = 0, name: str = "head", patience: int | None = None) -> TrainResult:
    """Train ``head`` on ``train`` (AdamW, clipped gradients), keep the best validation epoch.
    ``patience``: stop once the best epoch lies that many epochs back (a plateau); None runs every epoch."""
    seed_everything(seed)
    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    target = torch.as_tensor(train.target, dtype=torch.long)
    selection = _Selection(name, head, val.target, progress=False)
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        head.train()
        total = 0.0
        for idx in batches(len(train), batch_size, shuffle=True, generator=gen):
            idx = idx.numpy()
            probs, weights = head(batch(train, memory, idx))
            loss = vote_nll(probs, target[idx]) - entropy_weight * attention_entropy(weights)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            total += loss.item() * len(idx)
        val_probs, _ = predict(head, val, memory, num_classes)
        selection.add({"epoch": epoch, "train_loss": total / len(train)}, val_probs, t0)
        if patience is not None and epoch - selection.best["epoch"] >= patience:
            break
    return selection.result()

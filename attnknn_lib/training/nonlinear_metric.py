"""A nonlinear learned metric in the manner of ModernNCA (Ye et al. 2024): an MLP embedding trained
through NCA's leave-one-out soft vote over sampled candidates, then re-retrieval in the learned space.

The map nests linear NCA (:mod:`~attnknn_lib.training.metric_learning`) so that it starts where NCA
starts and can only add to it:

    z = A x + W2 gelu(W1 x + b1)        A (D, D) = identity, W1 (H, D), W2 (D, H) = 0 at the start

At initialisation z = x: the plain vote's geometry. The loss, the candidate sampling (each step's
queries scored against ``candidates`` memory rows drawn at random, the query's own row masked), the
per-epoch selection (the uniform k-vote of validation's nearest memory rows in the mapped space;
validation accuracy, then lower NLL), the patience and the learning-rate grid extended past an end
where the best sits are NCA's, so the two learned metrics have one budget. The MLP adds a weight
decay on its own weights only (``mlp_decay``; A is not decayed, as in NCA: decay pulls it toward 0,
not toward the identity) and dropout on its hidden layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.base.runtime import seed_everything
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.votes import knn_probs
from attnknn_lib.training.metric_learning import (
    check_budget,
    search_info,
    search_learning_rates,
    train_through_soft_vote,
)


class ResidualMetric(nn.Module):
    """z = A x + W2 gelu(W1 x + b1), equal to x at initialisation (see the module docstring)."""

    def __init__(self, dims: int, hidden: int, dropout: float):
        super().__init__()
        self.linear = nn.Linear(dims, dims, bias=False)
        self.hidden = nn.Linear(dims, hidden)
        self.out = nn.Linear(hidden, dims, bias=False)
        self.drop = nn.Dropout(dropout)
        with torch.no_grad():
            self.linear.weight.copy_(torch.eye(dims))
            self.out.weight.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, D) -> (B, D)
        return self.linear(x) + self.out(self.drop(nn.functional.gelu(self.hidden(x))))

    @torch.no_grad()
    def embed(self, x: np.ndarray, chunk: int = 8192) -> np.ndarray:
        """The mapped rows (float32), in evaluation mode (no dropout)."""
        was = self.training
        self.eval()
        xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        out = torch.cat([self(xt[s:s + chunk]) for s in range(0, len(xt), chunk)]).numpy()
        self.train(was)
        return np.ascontiguousarray(out, dtype=np.float32)


@dataclass(frozen=True)
class MetricFit:
    """A trained map and what its training did (the fields of NCA's ``info``)."""

    model: ResidualMetric
    info: dict


def mapped_vote(model: ResidualMetric, memory: np.ndarray, memory_y: np.ndarray, queries: np.ndarray, k: int,
                num_classes: int) -> np.ndarray:
    """The uniform vote of each query's k nearest memory rows in the mapped space (exact search)."""
    bank = MemoryBank().build(model.embed(memory), memory_y)
    nb = bank.search(model.embed(queries), k)
    return knn_probs("uniform", nb.sq_dist, nb.labels, num_classes)


def _train(x: np.ndarray, y: np.ndarray, val_x: np.ndarray, val_y: np.ndarray, num_classes: int, k: int, lr: float,
           epochs: int, patience: int, batch_size: int, candidates: int, hidden: int, dropout: float,
           mlp_decay: float, seed: int) -> tuple[ResidualMetric, list, int]:
    """One learning rate: (the best epoch's map, history, best epoch)."""
    seed_everything(seed)
    model = ResidualMetric(x.shape[1], hidden, dropout)
    opt = torch.optim.AdamW([{"params": model.linear.parameters(), "weight_decay": 0.0},
                             {"params": [*model.hidden.parameters(), *model.out.parameters()],
                              "weight_decay": mlp_decay}], lr=lr)
    return train_through_soft_vote(model, opt, x, y, val_y, num_classes, epochs, patience, batch_size, candidates,
                                   seed, "mlp metric", lambda m: mapped_vote(m, x, y, val_x, k, num_classes))


def fit_mlp_metric(x: np.ndarray, y: np.ndarray, val_x: np.ndarray, val_y: np.ndarray, num_classes: int, k: int,
                   lrs: tuple[float, ...], epochs: int, patience: int, batch_size: int, candidates: int, seed: int,
                   hidden: int = 256, dropout: float = 0.1, mlp_decay: float = 1e-4) -> MetricFit:
    """The map trained on memory rows ``x`` (M, D) with labels ``y``, its epoch and learning rate
    chosen on validation as NCA's are (:func:`~attnknn_lib.training.metric_learning.fit_nca`);
    ``info`` has NCA's fields plus ``hidden``, ``dropout`` and ``mlp_decay``."""
    check_budget(lrs, k, len(y), epochs=epochs, patience=patience, batch_size=batch_size, candidates=candidates,
                 hidden=hidden)
    if not 0.0 <= dropout < 1.0 or mlp_decay < 0:
        raise ConfigError(f"dropout={dropout!r}, mlp_decay={mlp_decay!r}: allowed dropout in [0, 1), decay >= 0")
    best, grid, at_end, fits = search_learning_rates(
        lambda lr: _train(x, y, val_x, val_y, num_classes, k, lr, epochs, patience, batch_size, candidates, hidden,
                          dropout, mlp_decay, seed), lrs, lambda fit: fit[1][fit[2] - 1])
    info = search_info(fits, best, grid, at_end, patience, candidates, len(y))
    return MetricFit(fits[best][0], {**info, "hidden": hidden, "dropout": dropout, "mlp_decay": mlp_decay})

"""Inference with trained models: embeddings, the attention vote over the memory, CNN softmax.

Training (validation during model selection), evaluation and the experiments all call these, so
they sit below the training loops."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from attnknn_lib.base.progress import bar as progress_bar
from attnknn_lib.base.runtime import channels_last, to_device
from attnknn_lib.data.transforms import View, batches
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.knn.votes import vote
from attnknn_lib.models.classifiers import CNNClassifier, attend
from attnknn_lib.models.neighbour_attention import MultiHeadNeighbourAttention


@torch.no_grad()
def embed(module: nn.Module, x: torch.Tensor, batch_size: int = 1024, device: torch.device | str = "cpu",
          view: View | None = None, desc: str = "embed") -> np.ndarray:
    """Outputs of ``module`` (eval mode) for every row of ``x`` in order, optionally of a TTA
    ``view`` of each batch: (N, D) float32."""
    was_training = module.training
    module.eval()
    if x.dim() == 4:
        channels_last(module)
    out = []
    for idx in progress_bar(list(batches(len(x), batch_size)), desc=desc):
        xb = x[idx]
        if view is not None:
            xb = view(xb)
        out.append(module(to_device(xb, device)).float().cpu())
    module.train(was_training)
    return torch.cat(out).numpy().astype(np.float32)


@contextmanager
def head_norms(embedder: nn.Module):
    """Inside the ``with`` block, every forward pass of the embedder appends the Euclidean norms
    of its projection head's outputs (before the L2 normalisation) to the yielded list: the
    embedding geometry across training, at no extra forward pass."""
    found: list[torch.Tensor] = []
    hook = embedder.head.register_forward_hook(lambda _m, _i, out: found.append(out.detach().float().norm(dim=-1).cpu()))
    try:
        yield found
    finally:
        hook.remove()


def attnknn_probs(attention: MultiHeadNeighbourAttention, bank: MemoryBank, queries: np.ndarray, k: int,
                  neighbours: Neighbourhood | None = None, device: torch.device | str | None = None,
                  batch_size: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Attention vote for query embeddings (N, D) over their k nearest memory rows (searched here
    unless ``neighbours`` with at least k columns is given): (probs (N, C), weights (N, k)). Ties
    go to the nearest neighbour's class, as in every vote (:func:`attnknn_lib.knn.votes.break_ties`)."""
    nb = bank.search(queries, k) if neighbours is None else neighbours
    device = device or next(attention.parameters()).device  # where the module is (CUDA in the paper profile)
    was_training = attention.training
    attention.eval()
    probs, weights = [], []
    with torch.no_grad():
        for s in range(0, len(queries), batch_size):
            rows = nb.rows[s:s + batch_size, :k]
            q = torch.from_numpy(queries[s:s + batch_size]).to(device)
            n = torch.from_numpy(bank.gather(rows)).to(device)  # (b, k, D)
            y = torch.from_numpy(nb.labels[s:s + batch_size, :k]).to(device)
            w = attend(attention, q, n, y).weights.double().cpu()
            # re-voted in float64: float32 sums of equal votes can differ by ~1e-8, above the tie tolerance
            probs.append(torch.from_numpy(vote(w.numpy(), y.cpu().numpy(), attention.cfg.num_classes)))
            weights.append(w)
    attention.train(was_training)
    return torch.cat(probs).numpy(), torch.cat(weights).numpy()


def cnn_probs(model: CNNClassifier, x: torch.Tensor, batch_size: int = 1024, device: torch.device | str = "cpu",
              view: View | None = None) -> np.ndarray:
    """Softmax probabilities (N, C) of the CNN for every row of ``x`` (optionally a TTA view)."""
    logits = embed(model, x, batch_size, device, view, desc="CNN")
    return torch.from_numpy(logits).double().softmax(-1).numpy()

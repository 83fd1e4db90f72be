"""An attention's per-head log-weights over any number of neighbours: what
:mod:`attnknn_lib.evaluation.tuned_attention` restricts to the first k and tunes.

The attention reads the K nearest memory rows of each query (its forward pass takes any K) and
returns each head's softmax over them; their logarithms are the scores s_hj up to a constant per
query and head. Queries are taken in blocks so that one block holds at most :data:`NEIGHBOUR_BUDGET`
neighbour embeddings (K can be thousands). An attention whose scores read the neighbours' labels
(label bias, prototypes) or each other (neighbour self-attention) gives scores that depend on the K
read: restricted to k, they are those of the attention reading K, not k.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from attnknn_lib.evaluation.tuned_attention import HeadScores, Scorer
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.models.classifiers import attend
from attnknn_lib.models.neighbour_attention import MultiHeadNeighbourAttention

NEIGHBOUR_BUDGET = 1 << 18  # neighbour embeddings per block (128-dim float32: 128 MB)
TINY = 1e-300  # a head weight that underflowed to 0 in float32 gets log TINY (~ -690), not -inf


@torch.no_grad()
def head_log_weights(attention: MultiHeadNeighbourAttention, bank: MemoryBank, queries: np.ndarray,
                     rows: np.ndarray, labels: np.ndarray | None = None,
                     device: torch.device | str | None = None) -> np.ndarray:
    """log softmax_j(s_hj) of every head (N, H, K) float32 for query embeddings (N, D) over the
    memory rows ``rows`` (N, K), nearest first; ``labels`` (M,): the memory labels the attention reads
    (the memory's by default)."""
    labels = bank.labels if labels is None else np.asarray(labels, dtype=np.int64)
    device = device or next(attention.parameters()).device
    was_training = attention.training
    attention.eval()
    n, k = rows.shape
    step = max(1, NEIGHBOUR_BUDGET // max(k, 1))
    out = np.empty((n, attention.cfg.num_heads, k), dtype=np.float32)
    for s in range(0, n, step):
        r = rows[s:s + step]
        q = torch.from_numpy(np.ascontiguousarray(queries[s:s + step], dtype=np.float32)).to(device)
        nb = torch.from_numpy(bank.gather(r)).to(device)
        y = torch.from_numpy(labels[r]).to(device)
        w = attend(attention, q, nb, y).head_weights.double().clamp_min(TINY)
        out[s:s + len(r)] = w.log().float().cpu().numpy()
    attention.train(was_training)
    return out


def attention_scorer(attention: MultiHeadNeighbourAttention, bank: MemoryBank, queries: dict[str, np.ndarray],
                     search: Callable[[str, int], tuple[np.ndarray, np.ndarray]], labels: np.ndarray,
                     loo: np.ndarray | None = None, cache: dict | None = None,
                     device: torch.device | str | None = None) -> Scorer:
    """``scorer(split, K)`` -> :class:`HeadScores` of the split's queries over their K nearest rows
    (``search(split, K)`` gives the rows), labelled ``labels`` (M,), with each row's leave-one-out
    agreement ``loo`` (M,) when given. Each split is scored at most once more, at the widest K asked
    for; ``cache`` (a dict the caller keeps) shares the log-weights between memories that differ only
    in their labels, when the attention's scores do not read labels."""
    cache = {} if cache is None else cache
    cfg = attention.cfg
    reads_labels = cfg.label_bias or cfg.prototypes
    labels = np.asarray(labels, dtype=np.int64)

    def scorer(split: str, k: int) -> HeadScores:
        key = (split, id(labels) if reads_labels else None)
        if key not in cache or cache[key][0].shape[1] < k:
            rows, _ = search(split, k)
            cache[key] = (rows, head_log_weights(attention, bank, queries[split], rows, labels, device))
        rows, lw = cache[key]
        r = rows[:, :k]
        return HeadScores(lw[:, :, :k], labels[r], None if loo is None else np.asarray(loo)[r])
    return scorer

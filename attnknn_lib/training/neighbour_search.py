"""The neighbours of a training query, searched in torch at every step: exact, never its own rows, optionally a bf16 scan re-ranked in fp32."""

from __future__ import annotations

import torch


def training_neighbours(q: torch.Tensor, mem: torch.Tensor, own: torch.Tensor, k: int,
                       mem_bf16: torch.Tensor | None = None) -> torch.Tensor:
    """Rows of the k most similar memory entries for each training query, never one of its own rows.

    q (B, D) and mem (N, D) are unit vectors, so the largest inner products are the nearest
    neighbours (exact search, as FAISS Flat). ``own`` (B, m) are the query's own rows: their
    similarity is set to -inf before the top-k, which removes self-matches exactly.

    With ``mem_bf16`` (a bf16 copy of ``mem``) the scan runs in bf16 and keeps 2k candidates, which
    are re-ranked with fp32 inner products: the exact top-k unless a true neighbour ranks below 2k
    in bf16 (bf16 keeps 8 bits of mantissa, so sims near 1 are rounded by up to 0.004). Measured on
    two cores (one thread, B = 256, N = 54k, D = 128): 75 ms exact, 25 ms with the bf16 scan, top-16
    recall 1.000 against the exact search; bf16 alone (no re-rank) had recall 0.979.
    """
    with torch.autocast(q.device.type, enabled=False):  # the fp32 parts stay fp32 under amp
        return _top_k_rows(q.float(), mem, own, k, mem_bf16)


def _mask_own(sims: torch.Tensor, own: torch.Tensor) -> None:
    """sims[b, own[b, j]] = -inf in place. An indexed assignment, not ``scatter_``: the same
    values, but ``scatter_`` passed over the whole (B, N) matrix (30 ms against 0.01 ms at B = 256,
    N = 54k, one thread; torch 2.14), a third of a training step's neighbour search."""
    if own.numel():
        sims[torch.arange(len(sims), device=sims.device)[:, None].expand_as(own), own] = float("-inf")


def _top_k_rows(q: torch.Tensor, mem: torch.Tensor, own: torch.Tensor, k: int,
                mem_bf16: torch.Tensor | None) -> torch.Tensor:
    if mem_bf16 is None:
        sims = q @ mem.T  # (B, N)
        _mask_own(sims, own)
        return sims.topk(k, dim=1).indices  # (B, k), nearest first
    sims = q.to(torch.bfloat16) @ mem_bf16.T
    _mask_own(sims, own)
    cand = sims.topk(min(2 * k, sims.shape[1]), dim=1).indices  # (B, 2k)
    exact = (mem[cand] @ q[:, :, None]).squeeze(-1)  # (B, 2k) fp32 sims of the candidates
    exact = exact.masked_fill(torch.isinf(sims.gather(1, cand)), float("-inf"))  # own rows stay out
    return cand.gather(1, exact.topk(k, dim=1).indices)

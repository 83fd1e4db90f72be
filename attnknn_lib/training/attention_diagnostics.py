"""What tells, during training, whether Attn-KNN's attention can learn: gradient share, entropies, score spread, the entropy term's pull."""

from __future__ import annotations

import torch
from torch import nn

from attnknn_lib.knn.votes import vote_has_gradient

DIAGNOSE_EVERY = 25  # steps between two measurements of the entropy term's gradient against the NLL's


class _AttentionDiagnostics:
    """Per-epoch means of what tells whether the attention can learn (issue: the weights stayed at
    their initialisation): the share of training queries whose vote carries a gradient
    (:func:`~attnknn_lib.knn.votes.vote_has_gradient`), the mean per-head entropy against the entropy
    of the head-averaged weights, the spread (s.d. over the k) of the scores within a neighbourhood
    (log head weights: a softmax shifts scores, it does not scale them), and every ``DIAGNOSE_EVERY``
    steps ||grad H|| / ||grad NLL|| over the attention's parameters (the entropy term's pull is
    ``entropy_weight`` times that)."""

    def __init__(self, attention: nn.Module):
        self.params = [p for p in attention.parameters() if p.requires_grad]
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def _add(self, key: str, value: float, n: int) -> None:
        self.sums[key] = self.sums.get(key, 0.0) + value * n
        self.counts[key] = self.counts.get(key, 0) + n

    def batch(self, out, neigh_labels: torch.Tensor, y: torch.Tensor, knn: torch.Tensor, ent: torch.Tensor,
              step: int) -> None:
        n = len(y)
        with torch.no_grad():
            hw = out.head_weights.float().clamp_min(1e-12)  # (B, H, K)
            self._add("gradient_share", float(vote_has_gradient(neigh_labels.cpu().numpy(), y.cpu().numpy()).mean()), n)
            self._add("head_entropy", float(-(hw * hw.log()).sum(-1).mean()), n)
            self._add("score_spread", float(hw.log().std(-1).mean()), n)
        if self.params and step % DIAGNOSE_EVERY == 0:
            g_nll = torch.autograd.grad(knn, self.params, retain_graph=True, allow_unused=True)
            g_ent = torch.autograd.grad(ent, self.params, retain_graph=True, allow_unused=True)
            norm = lambda gs: float(torch.sqrt(sum((g.float() ** 2).sum() for g in gs if g is not None)))  # noqa: E731
            self._add("entropy_grad_ratio", norm(g_ent) / max(norm(g_nll), 1e-12), 1)

    def epoch(self) -> dict[str, float]:
        out = {f"diag_{k}": self.sums[k] / max(self.counts[k], 1) for k in self.sums}
        self.sums, self.counts = {}, {}
        return out

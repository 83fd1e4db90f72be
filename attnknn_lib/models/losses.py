"""Training losses of Attn-KNN (design brief §2): kNN NLL + supervised contrastive - entropy bonus."""

from __future__ import annotations

import torch
import torch.nn.functional as F

PROB_EPS = 1e-8  # floor under a vote probability before the log (a vote can be exactly 0)


def vote_nll(probs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """mean_i -log max(p_i[y_i], eps) of vote probabilities (B, C)."""
    return F.nll_loss(probs.clamp_min(PROB_EPS).log(), target)


def supervised_contrastive(emb: torch.Tensor, labels: torch.Tensor, temperature: float = 0.07) -> torch.Tensor:
    """SupCon (Khosla et al. 2020) on unit embeddings (B, D):

        L = mean over anchors i with a positive of  -1/|P(i)| sum_{p in P(i)} log softmax_{a != i}(z_i . z_a / T)_p

    P(i) = other samples of the batch with label y_i. Anchors without positives are skipped.
    """
    b = emb.shape[0]
    logits = emb @ emb.T / temperature  # (B, B)
    self_mask = torch.eye(b, dtype=torch.bool, device=emb.device)
    logits = logits.masked_fill(self_mask, float("-inf"))
    log_prob = logits - torch.logsumexp(logits, dim=1, keepdim=True)
    pos = (labels[:, None] == labels[None, :]) & ~self_mask  # (B, B)
    n_pos = pos.sum(1)
    has = n_pos > 0
    if not has.any():
        return emb.new_zeros(())
    mean_log_prob_pos = log_prob.masked_fill(~pos, 0.0).sum(1)[has] / n_pos[has]
    return -mean_log_prob_pos.mean()


def attention_entropy(weights: torch.Tensor) -> torch.Tensor:
    """mean_i H(w_i) = -mean_i sum_j w_ij log w_ij over (B, K) attention weights."""
    return -(weights * weights.clamp_min(PROB_EPS).log()).sum(-1).mean()


def mixup(x: torch.Tensor, alpha: float, generator: torch.Generator | None = None
          ) -> tuple[torch.Tensor, torch.Tensor, float]:
    """MixUp: x' = lam x + (1 - lam) x[perm], lam ~ Beta(alpha, alpha) folded to lam >= 0.5, so the
    first label stays dominant (it is the one the contrastive loss uses). Returns (x', perm, lam)."""
    b = x.shape[0]
    perm = torch.randperm(b, generator=generator)
    if alpha <= 0:
        return x, perm, 1.0
    lam = float(torch.distributions.Beta(alpha, alpha).sample())
    lam = max(lam, 1.0 - lam)
    return lam * x + (1.0 - lam) * x[perm.to(x.device)], perm, lam

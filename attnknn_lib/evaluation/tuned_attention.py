"""Attention with the tuned vote's knobs: an attention's per-head weights over K neighbours, restricted
to the first k, filtered and prior-corrected, with k, the filter and the prior chosen on validation
exactly as the tuned vote chooses them (:mod:`attnknn_lib.evaluation.reference`).

Head h gives neighbour j (nearest first) the log-weight s_hj (its score, up to a constant per
query and head, which cancels below). With keep_j = [loo_j >= theta] (theta None: every neighbour)

    S_hk(c) = sum_{j <= k} keep_j e^{s_hj - m_h} [y_j = c]        m_h = max_{j <= k_top} s_hj
    p_k(c)  = mean_h S_hk(c) / sum_c' S_hk(c')                     (each head's softmax over its first k)
    p'(c)   = p_k(c) pi_c^-beta / sum_c' p_k(c') pi_c'^-beta       (the tuned vote's prior correction)

(k_top: the largest k asked for; any constant per query and head cancels in the ratio). For
k = K and theta None this is the attention's own vote mean_h softmax_j(s_hj). Every S_hk of the
ladder comes from one cumulative sum over the neighbours (:func:`~attnknn_lib.knn.votes.prefix_class_scores`),
so the whole grid costs about one vote over K. A row where no neighbour of the first k passes the
filter falls back to all of them (as in the tuned vote); s_hj - m_h is clipped at -700 so that no
weight underflows to 0 (a neighbour e^-700 below the head's largest weight moves nothing).

Selection (``SELECTIONS``): the highest validation accuracy (ties between classes broken by the
nearest tied neighbour), then the lower validation NLL; or the lowest validation NLL, then the
higher accuracy. The grids are the tuned vote's: k from :data:`K_LADDER` (up to the K neighbours
read, K itself always scored), theta from :data:`THETAS`, beta from :data:`BETAS` (extended by 0.5
past an open top edge, up to :data:`MAX_EXTENSIONS` times; not tuned on a memory whose class shares
differ by less than :data:`BALANCED`). A choice at the largest k read is an open edge: the caller
reads more neighbours (:func:`tuned_attention_methods` doubles K) and tunes again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.evaluation.calibration import fit_calibrator
from attnknn_lib.evaluation.methods import MethodProbs
from attnknn_lib.evaluation.metrics import accuracy, nll
from attnknn_lib.evaluation.reference import (
    BALANCED,
    BETAS,
    K_LADDER,
    MAX_EXTENSIONS,
    NLL_K_MAX,
    SELECTIONS,
    THETAS,
    _key,
    knob_text,
)
from attnknn_lib.knn.votes import MAX_BETA, break_ties, prefix_class_scores, prior_correction

LOG_FLOOR = -700.0  # e^-700 ~ 1e-304: the smallest shifted log-weight kept (no weight underflows to 0)
CHUNK = 1024  # queries per block of the prefix sums, at most
CELLS = 1 << 23  # (query, head, neighbour) cells per block: bounds each float64 buffer at 64 MB whatever K is


@dataclass(frozen=True)
class HeadScores:
    """An attention's per-head log-weights over the K nearest memory rows of N queries, nearest first."""

    log_weights: np.ndarray  # (N, H, K) s_hj, up to a constant per query and head
    labels: np.ndarray  # (N, K) memory labels of the neighbours
    loo: np.ndarray | None = None  # (N, K) leave-one-out agreement of each neighbour's memory row

    def __post_init__(self) -> None:
        lw, lab = np.shape(self.log_weights), np.shape(self.labels)
        if len(lw) != 3 or lw[0] != lab[0] or lw[2] != lab[1] or len(lab) != 2:
            raise ConfigError(f"log_weights {lw} must be (N, H, K) and labels {lab} (N, K)")
        if self.loo is not None and np.shape(self.loo) != lab:
            raise ConfigError(f"loo {np.shape(self.loo)} must match labels {lab}")

    @property
    def k_max(self) -> int:
        return self.labels.shape[1]


@dataclass(frozen=True)
class AttentionChoice:
    """One configuration of the attention's knobs, and how it did on validation."""

    k: int
    theta: float | None
    beta: float
    val_accuracy: float = float("nan")
    val_nll: float = float("nan")

    def label(self) -> str:
        return ", ".join([f"attention, k={self.k}", *knob_text(self.theta, self.beta)])

    def to_dict(self) -> dict:
        return asdict(self)


def prefix_head_probs(scores: HeadScores, ks, theta: float | None, num_classes: int,
                      chunk: int = CHUNK) -> np.ndarray:
    """p_k (L, N, C) for every k of ``ks`` (each in 1..K): the heads' softmaxes restricted to the
    first k neighbours (kept by the filter ``theta``), averaged over heads (module docstring)."""
    if theta is not None and scores.loo is None:
        raise ConfigError(f"theta={theta!r} needs the neighbours' leave-one-out agreement (loo); none was given")
    ks = [int(k) for k in ks]
    n, h, _ = scores.log_weights.shape
    width = max(ks)
    out = np.empty((len(ks), n, num_classes))
    chunk = max(1, min(chunk, CELLS // (h * width)))
    for s in range(0, n, chunk):
        lw = np.asarray(scores.log_weights[s:s + chunk, :, :width], dtype=np.float64)
        w = np.exp(np.maximum(lw - lw.max(axis=2, keepdims=True), LOG_FLOOR))  # (b, H, width)
        b = w.shape[0]
        lab = np.repeat(scores.labels[s:s + chunk, :width], h, axis=0)  # (b * H, width), query-major
        sums = prefix_class_scores(w.reshape(b * h, width), lab, ks, num_classes)  # (L, b * H, C)
        if theta is not None:
            keep = (scores.loo[s:s + chunk, :width] >= theta)[:, None, :]
            kept = prefix_class_scores((w * keep).reshape(b * h, width), lab, ks, num_classes)
            sums = np.where(kept.sum(axis=2, keepdims=True) <= 0, sums, kept)  # none passes: all of them vote
        p = sums / sums.sum(axis=2, keepdims=True)
        out[:, s:s + b] = p.reshape(len(ks), b, h, num_classes).mean(axis=2)
    return out


def attention_probs(choice: AttentionChoice, scores: HeadScores, prior: np.ndarray, num_classes: int) -> np.ndarray:
    """Probabilities (N, C) of one configuration (ties broken by the nearest tied neighbour)."""
    if not 1 <= choice.k <= scores.k_max:
        raise ConfigError(f"k={choice.k} is out of range; allowed: 1..{scores.k_max} (neighbours read)")
    p = prefix_head_probs(scores, [choice.k], choice.theta, num_classes)[0]
    p = prior_correction(p, np.asarray(prior, dtype=np.float64), choice.beta) if choice.beta else p
    return break_ties(p, scores.labels[:, :choice.k])


def tune_attention(val: HeadScores, target: np.ndarray, prior: np.ndarray, num_classes: int,
                   ks: tuple[int, ...] = K_LADDER, thetas: tuple = THETAS, betas: tuple[float, ...] = BETAS,
                   selects: tuple[str, ...] = SELECTIONS) -> dict[str, dict]:
    """The best (k, theta, beta) on validation per selection of ``selects`` (module docstring):
    ``{select: {"choice": AttentionChoice, "configs": configurations scored, "edges": knobs whose
    choice sits on an open edge ("k": the largest k read; "beta"), "grids": the final grids}}``.
    The first selection drives the extension of beta; the others choose among the same configurations."""
    for select in selects:
        if select not in SELECTIONS:
            raise ConfigError(f"select={select!r} is not allowed; choose one of: {', '.join(SELECTIONS)}")
    target = np.asarray(target)
    prior = np.asarray(prior, dtype=np.float64)
    present = prior[prior > 0]
    if present.size and present.max() / present.min() < BALANCED:
        betas = (0.0,)
    if val.loo is None:
        thetas = (None,)
    k_list = sorted({k for k in ks if k <= val.k_max} | {val.k_max})
    probs = {theta: prefix_head_probs(val, k_list, theta, num_classes) for theta in thetas}
    best: dict = {select: None for select in selects}
    done: set = set()
    betas = tuple(betas)
    for _ in range(MAX_EXTENSIONS + 1):
        for theta, by_k in probs.items():
            for i, k in enumerate(k_list):
                for beta in betas:
                    if (theta, k, beta) in done:
                        continue
                    done.add((theta, k, beta))
                    p = prior_correction(by_k[i], prior, beta) if beta else by_k[i]
                    p = break_ties(p, val.labels[:, :k])
                    acc, loss = accuracy(p, target), nll(p, target)
                    for select, current in best.items():
                        key = _key(select, acc, loss)
                        if current is None or key > current[1]:
                            best[select] = (AttentionChoice(k, theta, beta, acc, loss), key)
        top = best[selects[0]][0].beta
        if not (0 < top == max(betas) and top + 0.5 <= MAX_BETA):
            break
        betas = betas + (top + 0.5,)
    out = {}
    for select, (choice, _) in best.items():
        edges = (["k"] if choice.k == k_list[-1] else []) + (["beta"] if 0 < choice.beta == max(betas) else [])
        out[select] = {"choice": choice, "configs": len(done), "edges": edges,
                       "grids": {"k": k_list, "theta": list(thetas), "beta": list(betas)}}
    return out


Scorer = Callable[[str, int], HeadScores]
"""``scorer(split, K)``: the attention's :class:`HeadScores` of the split's queries ("val" or
"test") over their K nearest memory rows."""


def tuned_attention_methods(scorer: Scorer, val_y: np.ndarray, prior: np.ndarray, num_classes: int,
                            k_start: int, memory_size: int, k_cap: int = NLL_K_MAX,
                            selects: tuple[str, ...] = SELECTIONS, **space) -> dict[str, MethodProbs]:
    """The attention with its knobs tuned on validation, per selection: validation and test
    probabilities, and in ``info`` the choice, its label, the configurations scored, the open edges
    and the neighbours read. K starts at ``k_start`` (the tuned vote's search depth) and doubles while
    a selection's choice sits at the largest k read, up to ``min(memory_size, k_cap)`` (``k_cap``
    bounds the (queries x heads x K) log-weights); at the whole memory "k" is a bounded end, not an
    edge. ``space`` narrows the grids (``ks``, ``thetas``, ``betas`` of :func:`tune_attention`)."""
    top = min(memory_size, k_cap)
    kk = min(max(k_start, 1), top)
    while True:
        val = scorer("val", kk)
        tuned = tune_attention(val, val_y, prior, num_classes, selects=selects, **space)
        if not any("k" in t["edges"] for t in tuned.values()) or kk >= top:
            break
        kk = min(2 * kk, top)
    out = {}
    test = None
    for select, t in tuned.items():
        choice: AttentionChoice = t["choice"]
        edges = [e for e in t["edges"] if not (e == "k" and kk >= memory_size)]
        test = test if test is not None and test.k_max >= choice.k else scorer("test", max(c["choice"].k
                                                                                          for c in tuned.values()))
        info = {"choice": choice.to_dict(), "label": choice.label(), "configs": t["configs"], "edges": edges,
                "k_searched": kk, "grids": t["grids"]}
        out[select] = MethodProbs(attention_probs(choice, val, prior, num_classes),
                                  attention_probs(choice, test, prior, num_classes), info)
    return out


def tuned_attentions(scorer: Scorer, val_y: np.ndarray, prior: np.ndarray, num_classes: int, k_start: int,
                     memory_size: int, k_cap: int = NLL_K_MAX) -> tuple[MethodProbs, MethodProbs]:
    """The attention of an accuracy claim and that of a calibration claim, from one search, chosen as
    :func:`~attnknn_lib.evaluation.reference.references` chooses the tuned vote's: the first tuned on
    validation accuracy; the second whichever of the accuracy and NLL selections has the lower
    validation NLL after its own calibrator (fitted on validation), ``info["tuned_on"]`` naming it and
    ``info["candidates"]`` giving both."""
    val_y = np.asarray(val_y)
    found = tuned_attention_methods(scorer, val_y, prior, num_classes, k_start, memory_size, k_cap)
    cal_nll = {sel: nll(fit_calibrator(m.val, val_y).apply(m.val), val_y) for sel, m in found.items()}
    pick = min(SELECTIONS, key=lambda s: (cal_nll[s], SELECTIONS.index(s)))
    best = found[pick]
    return found["accuracy"], MethodProbs(best.val, best.test, {**best.info, "tuned_on": pick, "candidates": {
        sel: {"label": m.info["label"], "val_nll_calibrated": cal_nll[sel]} for sel, m in found.items()}})

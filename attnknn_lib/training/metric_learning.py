"""Neighbourhood Components Analysis (NCA; Goldberger, Roweis, Hinton and Salakhutdinov, 2004): a linear
metric learned through the leave-one-out softmax vote, trained to a plateau on validation.

The map is z = A x with A (D, D) initialised at the identity, so training starts at the plain
vote's geometry. For a memory row i against candidate rows j != i (leave-one-out):

    p_ij   = exp(-||A x_i - A x_j||^2) / sum_{l != i} exp(-||A x_i - A x_l||^2)
    loss_i = -log sum_{j: y_j = y_i} p_ij

No temperature: the scale of A is the vote's inverse temperature, which NCA learns.

**Candidates.** Each step draws ``batch_size`` memory rows as queries (one pass over the shuffled
memory per epoch) and scores them against ``candidates`` memory rows drawn at random for that step
(the whole memory when it has no more rows; the query's own row is masked). This is ModernNCA's
stochastic neighbour sampling (Ye et al. 2024): the cost of a step is then independent of the
memory's size (a 54,000-row memory would cost 100 x more per epoch in full), and each step's
softmax still sees thousands of rows, far more than the vote's k. A row with no candidate of its
class in the draw adds a constant (its p_i is floored), no gradient.

**Selection.** Per epoch the whole memory and validation are mapped, validation's ``k`` nearest
memory rows are searched in the mapped space (exact), and the epoch is scored by the uniform k-vote
there: validation accuracy, then lower NLL (:func:`~attnknn_lib.training.loops.selection_key`, the
heads' rule). Training stops ``patience`` epochs after the best one (a plateau). The learning rate
(AdamW, no weight decay: decay pulls A toward zero, not toward the identity it starts from) is
searched over a grid extended by :data:`LR_STEP` past an end while the best sits there, as the
study's learners search theirs. Seeded: one seed gives one A.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.base.runtime import seed_everything
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.votes import knn_probs
from attnknn_lib.training.loops import _Selection, selection_key

LR_STEP = 3.0  # factor by which the learning-rate grid is extended past an end where the best sits
LR_EXTENSIONS = 2  # times it is extended
T = TypeVar("T")


def search_learning_rates(fit: Callable[[float], T], lrs: tuple[float, ...] | list[float],
                          best_row: Callable[[T], dict]) -> tuple[float, list[float], bool, dict[float, T]]:
    """The learning-rate search every learner shares: ``fit(lr)`` for each rate of ``lrs``, then, while
    the best (by :func:`~attnknn_lib.training.loops.selection_key` of ``best_row(fit)``, the row of its
    chosen epoch) sits at an end of the grid, one more rate :data:`LR_STEP` times past that end, at
    most :data:`LR_EXTENSIONS` times. Returns (the best rate, the grid searched, whether the best is
    still at an end, every fit by rate)."""
    grid, fits = sorted(lrs), {}
    for extension in range(LR_EXTENSIONS + 1):
        for lr in grid:
            if lr not in fits:
                fits[lr] = fit(lr)
        best = max(grid, key=lambda r: selection_key(best_row(fits[r])))
        at_end = len(grid) > 1 and best in (grid[0], grid[-1])
        if not at_end or extension == LR_EXTENSIONS:
            break
        grid = [best / LR_STEP, *grid] if best == grid[0] else [*grid, best * LR_STEP]
    return best, grid, at_end, fits


@dataclass(frozen=True)
class NcaFit:
    """A trained map and what its training did."""

    matrix: np.ndarray  # A (D, D): z = x @ A.T
    info: dict  # lr, lrs searched, per-lr best scores, chosen run's history, plateau, edge


def nca_loss(z_query: torch.Tensor, y_query: torch.Tensor, z_cand: torch.Tensor, onehot_cand: torch.Tensor,
             own: torch.Tensor) -> torch.Tensor:
    """Mean over queries of -log p_i, p_i = sum_{j: y_j = y_i} softmax_j(-||z_i - z_j||^2) over the
    candidates (B, S) but each query's own one: ``own`` (B,) its position among the candidates, -1
    when it was not drawn. ``onehot_cand`` (S, C) are the candidates' labels; p_i is floored at
    1e-12 (a query with no candidate of its class adds a constant, no gradient)."""
    logits = -(z_query.pow(2).sum(1, keepdim=True) + z_cand.pow(2).sum(1) - 2.0 * z_query @ z_cand.T)
    drawn = torch.nonzero(own >= 0).squeeze(1)
    if len(drawn):  # leave-one-out: a query never votes for itself
        logits = logits.index_put((drawn, own[drawn]), torch.tensor(float("-inf")))
    p = (logits.softmax(1) @ onehot_cand).gather(1, y_query[:, None]).squeeze(1)
    return -p.clamp_min(1e-12).log().mean()


def mapped_vote(matrix: np.ndarray, memory: np.ndarray, memory_y: np.ndarray, queries: np.ndarray, k: int,
                num_classes: int) -> np.ndarray:
    """The uniform vote of each query's k nearest memory rows after the map (exact search)."""
    bank = MemoryBank().build(np.ascontiguousarray(memory @ matrix.T, dtype=np.float32), memory_y)
    nb = bank.search(np.ascontiguousarray(queries @ matrix.T, dtype=np.float32), k)
    return knn_probs("uniform", nb.sq_dist, nb.labels, num_classes)


def check_budget(lrs: tuple[float, ...], k: int, memory_rows: int, **counts: int) -> None:
    """One line for a learned metric's bad budget, before any work: positive rates, every count at
    least 1, k below the memory's rows."""
    if not lrs or min(lrs) <= 0:
        raise ConfigError(f"lrs={lrs!r} is not allowed; give positive learning rates")
    for name, v in {"k": k, **counts}.items():
        if v < 1:
            raise ConfigError(f"{name}={v!r} is out of range; allowed: 1 or more")
    if k >= memory_rows:
        raise ConfigError(f"k={k} is not allowed; give k < memory rows ({memory_rows})")


def train_through_soft_vote(model: torch.nn.Module, opt: torch.optim.Optimizer, x: np.ndarray, y: np.ndarray,
                            val_y: np.ndarray, num_classes: int, epochs: int, patience: int, batch_size: int,
                            candidates: int, seed: int, name: str,
                            val_vote: Callable[[torch.nn.Module], np.ndarray]) -> tuple[torch.nn.Module, list, int]:
    """The epochs every learned metric shares: per epoch one pass over the shuffled memory in
    batches of ``batch_size`` queries, each batch scored by :func:`nca_loss` against ``candidates``
    rows drawn for it (the query's own row masked); then ``val_vote(model)``, validation's
    probabilities under the map, scores the epoch, and training stops ``patience`` epochs after the
    best one. Returns (the best epoch's model, history, best epoch)."""
    xt, yt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)), torch.as_tensor(y, dtype=torch.long)
    onehot = torch.nn.functional.one_hot(yt, num_classes).float()
    m = len(y)
    position = torch.full((m,), -1, dtype=torch.long)  # a memory row's position among this step's candidates
    gen = torch.Generator().manual_seed(seed)
    selection = _Selection(name, model, val_y, progress=False)
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        total = 0.0
        model.train()
        order = torch.randperm(m, generator=gen)
        for s in range(0, m, batch_size):
            q = order[s:s + batch_size]
            cand = torch.arange(m) if candidates >= m else torch.randperm(m, generator=gen)[:candidates]
            position.fill_(-1)
            position[cand] = torch.arange(len(cand))
            loss = nca_loss(model(xt[q]), yt[q], model(xt[cand]), onehot[cand], position[q])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item() * len(q)
        selection.add({"epoch": epoch, "train_loss": total / m}, val_vote(model), t0)
        if epoch - selection.best["epoch"] >= patience:
            break
    res = selection.result()
    return res.model, res.history, res.best_epoch


def search_info(fits: dict[float, tuple], best: float, grid: list[float], at_end: bool, patience: int,
                candidates: int, memory_rows: int) -> dict:
    """What a learned metric's search did (``fits``: rate -> (model, history, best epoch)): the chosen
    ``lr``, the ``lrs`` searched, each rate's best validation score, the chosen run's ``history``,
    ``best_epoch``, ``plateau``, ``edge`` and ``configs`` (epochs scored over every rate)."""
    _, history, best_epoch = fits[best]
    scores = {f"{r:g}": {f: fits[r][1][fits[r][2] - 1][f] for f in ("val_accuracy", "val_nll")} for r in grid}
    return {"lr": best, "lrs": grid, "scores": scores, "best_epoch": best_epoch, "epochs_run": len(history),
            "plateau": len(history) - best_epoch >= patience, "edge": at_end,
            "configs": sum(len(f[1]) for f in fits.values()), "candidates": min(candidates, memory_rows),
            "history": [{f: row[f] for f in ("epoch", "train_loss", "val_accuracy", "val_nll")} for row in history]}


def _train(x: np.ndarray, y: np.ndarray, val_x: np.ndarray, val_y: np.ndarray, num_classes: int, k: int, lr: float,
           epochs: int, patience: int, batch_size: int, candidates: int, seed: int) -> tuple[np.ndarray, list, int]:
    """One learning rate: (best A, history, best epoch)."""
    seed_everything(seed)
    dims = x.shape[1]
    lin = torch.nn.Linear(dims, dims, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.eye(dims))
    opt = torch.optim.AdamW(lin.parameters(), lr=lr, weight_decay=0.0)
    model, history, best_epoch = train_through_soft_vote(
        lin, opt, x, y, val_y, num_classes, epochs, patience, batch_size, candidates, seed, "nca",
        lambda m: mapped_vote(m.weight.detach().numpy().astype(np.float64), x, y, val_x, k, num_classes))
    return model.weight.detach().numpy().astype(np.float64), history, best_epoch


def fit_nca(x: np.ndarray, y: np.ndarray, val_x: np.ndarray, val_y: np.ndarray, num_classes: int, k: int,
            lrs: tuple[float, ...], epochs: int, patience: int, batch_size: int, candidates: int,
            seed: int) -> NcaFit:
    """A trained on memory rows ``x`` (M, D) with labels ``y``, its epoch and learning rate chosen on
    validation (see the module docstring). ``info``: the chosen ``lr``, the ``lrs`` searched, each
    rate's best validation score, the chosen run's per-epoch ``history``, its ``best_epoch``,
    ``plateau`` (its best epoch at least ``patience`` before its last), ``edge`` (the chosen rate
    still at an end of the grid) and ``configs`` (epochs scored over every rate)."""
    check_budget(lrs, k, len(y), epochs=epochs, patience=patience, batch_size=batch_size, candidates=candidates)
    best, grid, at_end, fits = search_learning_rates(
        lambda lr: _train(x, y, val_x, val_y, num_classes, k, lr, epochs, patience, batch_size, candidates, seed),
        lrs, lambda fit: fit[1][fit[2] - 1])
    return NcaFit(fits[best][0], search_info(fits, best, grid, at_end, patience, candidates, len(y)))

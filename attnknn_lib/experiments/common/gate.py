"""The gate: the room a candidate embedding offers, measured on validation alone, before any
attention head is trained (declared in ``docs/regimes_declaration.md`` for the exploratory regimes,
in ``docs/confirmatory_declaration.md`` for the confirmatory experiment, which adds the nonlinear
learned metric to the gate's learners).

The validation rows are split in two seeded halves A and B. Every method of the gate is
*cross-fitted*: whatever it tunes or learns from validation labels it takes from one half, and it
predicts the other, so each validation row is predicted by a method that never saw its label:

    acc_m = (1 / N) sum_i [argmax p_m^{(-h(i))}(x_i) = y_i]     h(i): the half that holds row i

Methods: the tuned vote (its full search: rule, k, filter, prior), the geometry-only vote (no
filter, no prior, at most the heads' k), the label-only learner of the learnable headroom (it
cross-fits itself) and each learned metric given (NCA, the nonlinear metric): a map learned on the
memory whose epoch and learning rate are chosen on a held-out slice of the memory, never on
validation, and in whose space the tuned vote is re-tuned on one half and scored on the other. The
room of a learner is its cross-fitted accuracy minus the tuned vote's; a candidate passes when the
largest room, as a mean over seeds (:func:`gate_summary`), reaches the declared margin.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attnknn_lib.evaluation.learnable import learned_rule
from attnknn_lib.evaluation.metrics import accuracy
from attnknn_lib.evaluation.reference import reference_probs, tune_reference
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.headroom import loo_agreement
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.training.metric_learning import fit_nca
from attnknn_lib.training.nonlinear_metric import fit_mlp_metric

Mapper = Callable[[np.ndarray], np.ndarray]
"""A learned metric's map of rows (N, D) -> (N, D'), fitted without validation labels."""


HOLD_OUT = 0.1  # share of the memory that picks the gate's NCA epoch and learning rate (never validation)


def held_out(memory_y: np.ndarray, num_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(fit rows, held-out rows) of the memory: a seeded :data:`HOLD_OUT` share (at least one row per
    class's worth) picks a learned metric's epoch and learning rate, never validation."""
    order = np.random.default_rng([seed, 13]).permutation(len(memory_y))
    n_hold = max(num_classes, int(round(HOLD_OUT * len(memory_y))))
    return np.sort(order[n_hold:]), np.sort(order[:n_hold])


def nca_map(memory_x: np.ndarray, memory_y: np.ndarray, num_classes: int, seed: int, k: int, **training) -> Mapper:
    """The gate's NCA: trained on the memory without its :func:`held_out` share, which picks its
    epoch and learning rate (``training``: :func:`~attnknn_lib.training.metric_learning.fit_nca`'s
    lrs, epochs, patience, batch_size, candidates); the map divides by the mapped memory's mean norm,
    as the comparison's NCA does, so the tuned vote's grids see unit-scale distances."""
    fit_rows, hold = held_out(memory_y, num_classes, seed)
    fit = fit_nca(memory_x[fit_rows], memory_y[fit_rows], memory_x[hold], memory_y[hold], num_classes, k,
                  seed=seed, **training)
    scale = float(np.linalg.norm(memory_x @ fit.matrix.T, axis=1).mean())
    return lambda x: (x @ fit.matrix.T) / scale


def mlp_metric_map(memory_x: np.ndarray, memory_y: np.ndarray, num_classes: int, seed: int, k: int,
                   hidden: int, **training) -> Mapper:
    """The gate's nonlinear learned metric (:func:`~attnknn_lib.training.nonlinear_metric.fit_mlp_metric`,
    ``hidden`` units, NCA's ``training``), fitted and scaled as :func:`nca_map`."""
    fit_rows, hold = held_out(memory_y, num_classes, seed)
    fit = fit_mlp_metric(memory_x[fit_rows], memory_y[fit_rows], memory_x[hold], memory_y[hold], num_classes, k,
                         seed=seed, hidden=hidden, **training)
    scale = float(np.linalg.norm(fit.model.embed(memory_x).astype(np.float64), axis=1).mean())
    return lambda x: fit.model.embed(x).astype(np.float64) / scale


def halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two seeded halves of ``n`` validation rows (sorted row numbers)."""
    a, b = np.array_split(np.random.default_rng([seed, 11]).permutation(n), 2)
    return np.sort(a), np.sort(b)


def cross_fitted_rule(val: Neighbourhood, y: np.ndarray, prior: np.ndarray, num_classes: int,
                      parts: tuple[np.ndarray, np.ndarray], **search) -> np.ndarray:
    """Out-of-fold probabilities (N, C) of the tuned vote (:func:`~attnknn_lib.evaluation.reference.
    tune_reference`, ``search`` its grids) on one half and applied to the other."""
    out = np.zeros((len(y), num_classes))
    for fit, apply in (parts, parts[::-1]):
        choice = tune_reference(val.take(fit), y[fit], prior, num_classes, **search)["choice"]
        out[apply] = reference_probs(choice, val.take(apply), prior, num_classes)
    return out


def _hood(memory_x: np.ndarray, memory_y: np.ndarray, queries: np.ndarray, k: int, loo_k: int) -> Neighbourhood:
    """The queries' ``k`` nearest memory rows with labels and each row's leave-one-out agreement."""
    bank = MemoryBank().build(memory_x, memory_y)
    own = bank.search_excluding(memory_x, loo_k, np.arange(len(memory_y)))
    loo = loo_agreement(memory_y[own.rows], memory_y)
    nb = bank.search(queries, min(k, len(memory_y)))
    return Neighbourhood(memory_y[nb.rows], nb.sq_dist.astype(np.float64), nb.rows, loo[nb.rows])


def gate(memory_x: np.ndarray, memory_y: np.ndarray, val_x: np.ndarray, val_y: np.ndarray, num_classes: int,
         seed: int, k: int, k_search: int, loo_k: int, metrics: dict[str, Mapper] | None = None) -> dict:
    """Cross-fitted validation accuracy of the tuned vote and of each gate learner, and each learner's
    room over the tuned vote (see the module docstring). ``k``: the heads' k (the geometry vote reads at
    most these); ``k_search``: neighbours the tuned vote searches; ``metrics``: each learned metric's map
    by its name in the gate (``nca``, ``mlp_metric``; none: no learned metric in the gate)."""
    val_y = np.asarray(val_y)
    prior = np.bincount(memory_y, minlength=num_classes) / len(memory_y)
    parts = halves(len(val_y), seed)
    hood = _hood(memory_x, memory_y, val_x, k_search, loo_k)
    probs = {"reference": cross_fitted_rule(hood, val_y, prior, num_classes, parts),
             "geometry": cross_fitted_rule(hood.take(np.arange(len(val_y)), k), val_y, prior, num_classes, parts,
                                           thetas=(None,), betas=(0.0,))}
    k_learn = min(k, hood.k_max)
    fit = learned_rule(hood.take(np.arange(len(val_y)), k_learn), val_y, hood.take(parts[0][:1], k_learn), prior,
                       num_classes, k_learn, seed)
    probs["learner"] = fit["val"]  # out of fold: the learner cross-fits itself on two halves
    for name, mapper in (metrics or {}).items():
        mapped = _hood(np.ascontiguousarray(mapper(memory_x), dtype=np.float32), memory_y,
                       np.ascontiguousarray(mapper(val_x), dtype=np.float32), k_search, loo_k)
        probs[name] = cross_fitted_rule(mapped, val_y, prior, num_classes, parts)
    acc = {m: float(accuracy(p, val_y)) for m, p in probs.items()}
    room = {m: acc[m] - acc["reference"] for m in acc if m != "reference"}
    return {"val_accuracy": acc, "room": room, "largest": max(room.values()), "k_learner": k_learn,
            "halves": [len(p) for p in parts]}


def gate_summary(per_seed: dict[str, dict], room_margin: float) -> dict:
    """The gate over seeds (each seed's :func:`gate` under ``"gate"``): each learner's mean
    cross-fitted validation room over the tuned vote, the largest, and whether it reaches the declared
    ``room_margin`` (the candidate passes)."""
    learners = next(iter(per_seed.values()))["gate"]["room"]
    means = {m: float(np.mean([p["gate"]["room"][m] for p in per_seed.values()])) for m in learners}
    largest = max(means.values())
    return {"room": means, "largest": largest, "best": max(means, key=means.get), "passed": largest >= room_margin}

"""Did a training run converge? The plateau rule applied to its per-epoch validation history.

A run has reached a plateau when the epoch selected on validation is not the last one, or when
validation accuracy over the last third of the epochs (``ceil(E / 3)`` epochs) moves by at most
``tol`` (0.002 is 0.2 percentage points). A run that is still climbing at its last epoch is compared
at an operating point set by its training length, not by the method.
"""

from __future__ import annotations

import math

PLATEAU_TOL = 0.002


def plateau(history: list[dict], best_epoch: int, tol: float = PLATEAU_TOL, key: str = "val_accuracy") -> dict:
    """The plateau rule on one run: ``{"epochs", "best_epoch", "tail_epochs", "tail_range", "plateau"}``.

    tail_range = max - min of ``key`` over the last ceil(E / 3) epochs; plateau = best_epoch < E or
    tail_range <= tol (a 1e-12 slack absorbs float noise at the boundary).
    """
    if not history:
        raise ValueError("plateau() needs at least one epoch of history")
    epochs = len(history)
    tail = [row[key] for row in history[-math.ceil(epochs / 3):]]
    spread = max(tail) - min(tail)
    return {"epochs": epochs, "best_epoch": int(best_epoch), "tail_epochs": len(tail), "tail_range": spread,
            "plateau": bool(best_epoch < epochs or spread <= tol + 1e-12)}

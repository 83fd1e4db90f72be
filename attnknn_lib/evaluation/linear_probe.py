"""The linear probe: the parametric reference on a fixed embedding.

Multinomial logistic regression on the memory's rows (scikit-learn's ``LogisticRegression``, lbfgs),
the features standardised with the memory's means and s.d. (so one L2 strength means the same on
every dimension):

    p(c | x) = softmax_c(W z + b),  z = (x - mu) / sd,  minimise  sum_i -log p(y_i | x_i) + ||W||^2 / (2 C)

C is tuned on validation (accuracy, then lower NLL) over :data:`C_GRID`, extended by :data:`C_STEP`
past an end while the best sits there (at most :data:`C_EXTENSIONS` times); test is read once, with
the chosen C.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.evaluation.metrics import accuracy, nll

C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0)  # inverse L2 strengths
C_STEP = 10.0  # factor by which the grid is extended past an end where the best sits
C_EXTENSIONS = 2  # times it is extended
MAX_ITER = 1000


def _probs(model: LogisticRegression, z: np.ndarray, num_classes: int) -> np.ndarray:
    """(N, C) probabilities over every class (a class absent from the memory gets 0)."""
    out = np.zeros((len(z), num_classes))
    out[:, model.classes_] = model.predict_proba(z)
    return out


def linear_probe(x: np.ndarray, y: np.ndarray, val_x: np.ndarray, val_y: np.ndarray, test_x: np.ndarray,
                 num_classes: int, seed: int, cs: tuple[float, ...] = C_GRID) -> tuple[np.ndarray, np.ndarray, dict]:
    """(validation probabilities, test probabilities, info) of the probe trained on ``x`` (M, D),
    ``y`` (M,) with C chosen on validation. ``info``: the chosen ``C``, the ``cs`` searched, each
    C's validation accuracy and NLL, ``edge`` (the chosen C still at an end of the grid) and
    ``converged`` (lbfgs stopped before ``MAX_ITER`` for the chosen C)."""
    if not cs or min(cs) <= 0:
        raise ConfigError(f"cs={cs!r} is not allowed; give positive inverse L2 strengths")
    mu, sd = x.mean(0), x.std(0)
    sd = np.where(sd > 0, sd, 1.0)

    def z(a: np.ndarray) -> np.ndarray:
        return (np.asarray(a, dtype=np.float64) - mu) / sd

    zx, zv = z(x), z(val_x)
    grid, fits = sorted(cs), {}
    for extension in range(C_EXTENSIONS + 1):
        for c in grid:
            if c in fits:
                continue
            model = LogisticRegression(C=c, max_iter=MAX_ITER, random_state=seed)
            with warnings.catch_warnings():  # not converging is recorded in info, not printed
                warnings.simplefilter("ignore", ConvergenceWarning)
                model.fit(zx, y)
            pv = _probs(model, zv, num_classes)
            fits[c] = (model, pv, accuracy(pv, val_y), nll(pv, val_y))
        best = max(grid, key=lambda c: (fits[c][2], -fits[c][3]))
        at_end = best in (grid[0], grid[-1])
        if not at_end or extension == C_EXTENSIONS:
            break
        grid = [best / C_STEP, *grid] if best == grid[0] else [*grid, best * C_STEP]
    model, pv = fits[best][:2]
    info = {"C": best, "cs": grid, "edge": at_end, "converged": bool(np.max(model.n_iter_) < MAX_ITER),
            "scores": {f"{c:g}": {"val_accuracy": fits[c][2], "val_nll": fits[c][3]} for c in grid}}
    return pv, _probs(model, z(test_x), num_classes), info

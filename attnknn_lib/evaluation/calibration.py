"""Post-hoc calibration fitted on validation, the same for every method.

A calibrator maps probabilities p (N, C) to

    p'_c = softmax_c( log((1 - s) p_c + s / C) / T )

with temperature T > 0 and smoothing s in [0, 1). With s = 0 this is exactly temperature
scaling of a network's logits (softmax is shift-invariant, so log softmax(z) / T and z / T give
the same result). kNN votes can put probability 0 on a class; log(0) = -inf survives any T, so
for them the smoothing s is fitted as well (the "fitted smoothing" of design brief §4.4).
Both are chosen by minimising validation NLL plus a weak prior toward the identity,
``PRIOR * (log T)^2``: when the validation NLL is flat in T (e.g. a small validation set that the
method classifies perfectly with probabilities 0/1), the fit returns T = 1, s = 0 instead of
an arbitrary bound such as T = 100 that would flatten the test probabilities. The test set is
never used.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.evaluation.metrics import NLL_EPS, nll
from attnknn_lib.knn.votes import softmax_rows

T_BOUNDS = (0.01, 100.0)
PRIOR = 1e-4  # weight of (log T)^2: negligible next to any real NLL difference
SMOOTHING_GRID = (0.0,) + tuple(np.logspace(-4, np.log10(0.3), 14))


@dataclass(frozen=True)
class Calibrator:
    temperature: float = 1.0
    smoothing: float = 0.0

    def __post_init__(self) -> None:
        if not self.temperature > 0 or not 0 <= self.smoothing < 1:
            raise ConfigError(f"temperature={self.temperature!r} (> 0) or smoothing={self.smoothing!r} "
                              "(in [0, 1)) is out of range")

    def apply(self, probs: np.ndarray) -> np.ndarray:
        """Calibrated probabilities (N, C); rows sum to 1."""
        probs = np.asarray(probs, dtype=np.float64)
        mixed = (1.0 - self.smoothing) * probs + self.smoothing / probs.shape[1]
        with np.errstate(divide="ignore"):
            return softmax_rows(np.log(mixed) / self.temperature)

    def to_dict(self) -> dict:
        return asdict(self)


def _calibrated_nll(log_mixed: np.ndarray, labels: np.ndarray, temperature: float) -> float:
    """NLL of ``softmax(log_mixed / T)``, as :func:`~attnknn_lib.evaluation.metrics.nll` computes it (true-class
    probability clipped at NLL_EPS), from the log-probabilities alone: the search calls this
    hundreds of times, so it skips building the calibrated matrix."""
    z = log_mixed / temperature  # (N, C); -inf where a vote gave a class 0 and s = 0
    top = z.max(axis=1, keepdims=True)
    log_norm = top[:, 0] + np.log(np.exp(z - top).sum(axis=1))
    with np.errstate(invalid="ignore"):
        p_true = np.exp(z[np.arange(len(labels)), labels] - log_norm)
    return float(-np.log(np.maximum(p_true, NLL_EPS)).mean())


def fit_temperature(probs: np.ndarray, labels: np.ndarray, smoothing: float = 0.0) -> Calibrator:
    """The T in ``T_BOUNDS`` minimising NLL + PRIOR (log T)^2 (bounded 1-D search over log T) at
    fixed smoothing."""
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    with np.errstate(divide="ignore"):
        log_mixed = np.log((1.0 - smoothing) * probs + smoothing / probs.shape[1])

    def objective(log_t: float) -> float:
        return _calibrated_nll(log_mixed, labels, float(np.exp(log_t))) + PRIOR * log_t ** 2

    res = minimize_scalar(objective, bounds=tuple(np.log(T_BOUNDS)), method="bounded", options={"xatol": 1e-4})
    return Calibrator(float(np.exp(res.x)), smoothing)


def fit_calibrator(probs: np.ndarray, labels: np.ndarray, fit_smoothing: bool = True) -> Calibrator:
    """Temperature (and, if ``fit_smoothing``, smoothing from ``SMOOTHING_GRID``) by validation NLL."""
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    grid = SMOOTHING_GRID if fit_smoothing else (0.0,)
    fits = [fit_temperature(probs, labels, s) for s in grid]
    # ties (flat NLL) go to the first, i.e. the smallest smoothing
    return min(fits, key=lambda c: nll(c.apply(probs), labels) + PRIOR * np.log(c.temperature) ** 2)

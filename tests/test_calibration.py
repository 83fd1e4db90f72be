"""Post-hoc calibration: recovers a known temperature; makes kNN votes comparable; keeps predictions."""

from __future__ import annotations

import numpy as np
import pytest

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.evaluation.calibration import Calibrator, fit_calibrator
from attnknn_lib.evaluation.metrics import accuracy, ece, nll
from attnknn_lib.knn.votes import knn_probs


def _softmax(z):
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _overconfident(n: int, seed: int, t_true: float = 3.0):
    """Labels drawn from softmax(z); the model reports softmax(t_true * z): over-confident by t_true."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 1.5, (n, 5))
    y = np.array([rng.choice(5, p=row) for row in _softmax(z)])
    return _softmax(t_true * z), y


def test_temperature_scaling_recovers_the_true_temperature():
    p, y = _overconfident(6000, 0)
    cal = fit_calibrator(p, y, fit_smoothing=False)
    assert cal.smoothing == 0 and cal.temperature == pytest.approx(3.0, rel=0.1)
    p_test, y_test = _overconfident(6000, 1)
    assert ece(cal.apply(p_test), y_test) < 0.3 * ece(p_test, y_test)
    with_smoothing = fit_calibrator(p, y)
    assert nll(with_smoothing.apply(p), y) <= nll(cal.apply(p), y) + 1e-9


def test_fitted_smoothing_makes_zero_probability_votes_finite_and_keeps_the_argmax():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 3000)
    # three neighbours, each with the true label 40 % of the time (else a random one): about 9 %
    # of the votes give the true class probability 0
    neigh = np.where(rng.random((3000, 3)) < 0.4, y[:, None], rng.integers(0, 4, (3000, 3)))
    p = knn_probs("uniform", np.zeros((3000, 3)), neigh, 4)
    assert nll(p, y) > 1.0  # dominated by the log(1e-8) clip
    cal = fit_calibrator(p[:1500], y[:1500])
    assert cal.smoothing > 0
    q = cal.apply(p[1500:])
    assert nll(q, y[1500:]) < 0.5 * nll(p[1500:], y[1500:])
    np.testing.assert_allclose(q.sum(1), 1)
    assert accuracy(q, y[1500:]) == accuracy(p[1500:], y[1500:])


def test_identity_calibrator_and_bad_values():
    p = np.array([[0.2, 0.8], [0.6, 0.4]])
    np.testing.assert_allclose(Calibrator().apply(p), p)
    with pytest.raises(ConfigError, match="temperature=0"):
        Calibrator(temperature=0)
    with pytest.raises(ConfigError, match="smoothing=1"):
        Calibrator(smoothing=1)


def test_perfectly_separated_validation_leaves_probabilities_unchanged():
    """Flat validation NLL (every vote right with probability 1) must not flatten the test votes."""
    val = np.eye(2)[[0, 1, 1, 0, 1]]
    cal = fit_calibrator(val, np.array([0, 1, 1, 0, 1]))
    assert cal.temperature == pytest.approx(1.0, abs=1e-3) and cal.smoothing == 0.0
    test = np.array([[0.75, 0.25], [0.5, 0.5]])
    np.testing.assert_allclose(cal.apply(test), test, atol=1e-3)

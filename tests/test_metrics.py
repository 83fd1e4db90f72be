"""Metrics: hand-computed values, the documented bin rule, agreement with scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.evaluation.bootstrap import bootstrap_ci, evaluate, resample_counts
from attnknn_lib.evaluation.metrics import (
    METRICS,
    NLL_EPS,
    accuracy,
    brier,
    confusion_matrix,
    ece,
    macro_f1,
    nll,
    reliability_bins,
)


def _random_probs(n: int = 500, c: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 2, (n, c))
    p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    y = np.array([rng.choice(c, p=row) for row in p])
    return p, y


def test_ece_by_hand_one_sample_per_bin():
    p = np.array([[0.9, 0.1], [0.82, 0.18], [0.3, 0.7], [0.62, 0.38]])
    y = np.array([0, 1, 1, 0])  # correct, wrong, correct, correct
    # bins 13, 12, 10, 9: ECE = mean(|1-.9|, |0-.82|, |1-.7|, |1-.62|) = 1.6 / 4
    assert ece(p, y) == pytest.approx(0.4)


def test_ece_by_hand_shared_bin():
    p = np.array([[0.9, 0.1], [0.91, 0.09], [0.5, 0.5], [0.5, 0.5]])
    y = np.array([0, 1, 0, 1])
    # bin 13: acc 0.5, conf 0.905 (weight 1/2); bin 7: acc 0.5 (argmax tie -> class 0), conf 0.5
    assert ece(p, y) == pytest.approx(0.5 * 0.405)


def test_bins_are_right_closed():
    p = np.array([[1.0, 0.0, 0.0], [0.6, 0.4, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    bins = reliability_bins(p, np.zeros(3, dtype=int))
    assert np.flatnonzero(bins["count"]).tolist() == [4, 8, 14]  # 1/3 -> (4/15, 5/15], 0.6 -> (8/15, 9/15]
    assert bins["count"].sum() == 3 and len(bins["lower"]) == 15
    assert np.isnan(bins["accuracy"][0]) and bins["accuracy"][14] == 1.0


def test_perfectly_calibrated_confidence_has_zero_ece():
    p = np.tile([0.75, 0.25], (8, 1))
    y = np.array([0, 0, 0, 1, 0, 0, 0, 1])
    assert ece(p, y) == pytest.approx(0.0)


def test_nll_and_brier_by_hand():
    p = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    y = np.array([0, 0])
    assert nll(p, y) == pytest.approx((-np.log(0.5) - np.log(NLL_EPS)) / 2)
    assert brier(p, y) == pytest.approx(((0.25 + 0.25) + (1 + 1)) / 2)


def test_metrics_agree_with_scikit_learn():
    p, y = _random_probs()
    pred = p.argmax(1)
    assert accuracy(p, y) == pytest.approx(skm.accuracy_score(y, pred))
    assert macro_f1(p, y) == pytest.approx(skm.f1_score(y, pred, average="macro"))
    assert nll(p, y) == pytest.approx(skm.log_loss(y, p, labels=range(4)))
    assert brier(p, y) == pytest.approx(skm.brier_score_loss(y, p, labels=range(4), scale_by_half=False))
    np.testing.assert_array_equal(confusion_matrix(p, y), skm.confusion_matrix(y, pred, labels=range(4)))


def test_macro_f1_skips_classes_absent_from_labels_and_predictions_like_sklearn():
    p = np.eye(4)[[0, 1, 1, 0]]
    y = np.array([0, 1, 0, 0])
    assert macro_f1(p, y) == pytest.approx(skm.f1_score(y, p.argmax(1), average="macro"))


def test_bootstrap_interval_has_the_binomial_width_and_is_seeded():
    p, y = _random_probs(n=2000, c=3, seed=1)
    ci = bootstrap_ci(p, y, n_boot=1000, seed=0)
    acc = ci["accuracy"]
    assert acc["low"] < acc["value"] < acc["high"]
    expected = 2 * 1.96 * np.sqrt(acc["value"] * (1 - acc["value"]) / len(y))
    assert acc["high"] - acc["low"] == pytest.approx(expected, rel=0.15)
    assert bootstrap_ci(p, y, n_boot=200, seed=0) == bootstrap_ci(p, y, n_boot=200, seed=0)
    assert set(ci) == {"accuracy", "macro_f1", "nll", "ece", "brier"}
    assert set(evaluate(p, y)["ece"]) == {"value"}


def test_bootstrap_point_estimates_equal_the_plain_metrics():
    p, y = _random_probs(n=300, c=5, seed=2)
    ci = bootstrap_ci(p, y, n_boot=50)
    for name, fn in METRICS.items():
        assert ci[name]["value"] == pytest.approx(fn(p, y)), name
        assert ci[name]["low"] <= ci[name]["high"]


def test_bootstrap_of_ten_thousand_samples_brackets_every_metric():
    """The size the experiments bootstrap (its time is measured by ./run_all.sh bench, not here)."""
    p, y = _random_probs(n=10000, c=10, seed=3)
    ci = bootstrap_ci(p, y, n_boot=1000)
    for name, fn in METRICS.items():
        assert ci[name]["low"] < ci[name]["high"], name
        if name != "ece":  # ECE is biased upward under resampling, so its interval may sit above the estimate
            assert ci[name]["low"] <= fn(p, y) <= ci[name]["high"], name
    assert ci["ece"]["high"] - ci["ece"]["low"] < 0.02  # 10,000 samples resolve ECE to about a point


def test_bad_shapes_are_named():
    with pytest.raises(ConfigError, match=r"need probs \(N, C\) and labels \(N,\)"):
        accuracy(np.ones(3), np.zeros(3, dtype=int))


def test_metrics_reject_nan_or_inf_probabilities_in_one_line():
    from attnknn_lib.base.errors import ConfigError
    from attnknn_lib.evaluation.metrics import accuracy, ece

    probs = np.array([[0.5, 0.5], [np.nan, 1.0], [0.2, np.inf]])
    for fn in (accuracy, ece):
        with pytest.raises(ConfigError, match="NaN or inf in 2 of 3 rows"):
            fn(probs, np.array([0, 1, 1]))


def test_paired_bootstrap_difference_is_the_mean_paired_difference_with_an_interval_around_it():
    from attnknn_lib.evaluation.bootstrap import paired_bootstrap_diff

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 400)
    a = [rng.dirichlet(np.ones(3), 400) for _ in range(3)]
    b = [rng.dirichlet(np.ones(3), 400) for _ in range(3)]
    d = paired_bootstrap_diff(a, b, y, n_boot=500)
    expected = np.mean([accuracy(pa, y) - accuracy(pb, y) for pa, pb in zip(a, b)])
    assert d["accuracy"]["value"] == pytest.approx(expected)
    assert d["accuracy"]["low"] < d["accuracy"]["value"] < d["accuracy"]["high"]
    same = paired_bootstrap_diff(a, a, y, n_boot=200)
    assert all(same[m]["low"] == same[m]["high"] == same[m]["value"] == 0 for m in same)  # paired: no noise left


def test_kept_resamples_are_the_fresh_draw_and_cannot_be_changed():
    resample_counts.cache_clear()
    kept = resample_counts(50, 7, 3)
    fresh = np.random.default_rng(3).multinomial(50, np.full(50, 1 / 50), size=7)
    np.testing.assert_array_equal(kept, fresh)
    assert resample_counts(50, 7, 3) is kept and resample_counts(50, 7, 4) is not kept
    with pytest.raises(ValueError):
        kept[0, 0] = 1.0

"""Learnable headroom: the per-class neighbour features, and a learner that is cross-fitted (no
validation prediction from a model that saw the query) and finds a signal no vote uses."""

from __future__ import annotations

import numpy as np

from attnknn_lib.evaluation.learnable import class_features, ladder, learned_rule
from attnknn_lib.knn.headroom import loo_agreement, loo_agreement_without
from attnknn_lib.knn.neighbourhood import Neighbourhood


def _hoods(n: int, k: int = 8, c: int = 3, seed: int = 0):
    """Neighbour labels carry the target only where the neighbour's agreement is high: a vote is
    near chance, a learner that reads agreement per class is not."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, c, n)
    loo = rng.random((n, k))
    lab = np.where(loo > 0.8, y[:, None], rng.integers(0, c, (n, k)))
    sq = np.sort(rng.random((n, k)), axis=1)
    return Neighbourhood(lab, sq, loo=loo), y


def test_ladder_doubles_to_k():
    assert ladder(1) == [1] and ladder(16) == [1, 2, 4, 8, 16] and ladder(12) == [1, 2, 4, 8, 12]


def test_class_features_have_one_row_per_query_and_class_and_uniform_shares_sum_to_one():
    hood, _ = _hoods(50)
    x = class_features(hood, np.full(3, 1 / 3), 3, 8)
    assert x.shape[:2] == (50, 3) and np.isfinite(x).all()
    np.testing.assert_allclose(x[:, :, len(ladder(8)) - 1].sum(1), 1.0, atol=1e-6)  # share at k


def test_the_learner_is_cross_fitted_and_beats_the_uniform_vote_where_agreement_carries_the_label():
    val, vy = _hoods(1200, seed=1)
    test, ty = _hoods(600, seed=2)
    out = learned_rule(val, vy, test, np.full(3, 1 / 3), 3, 8, seed=0)
    assert out["val"].shape == (1200, 3) and out["test"].shape == (600, 3)
    np.testing.assert_allclose(out["val"].sum(1), 1.0, atol=1e-6)
    assert (out["val"].sum(1) > 0).all()  # every validation query predicted by the other half's model
    counts = np.stack([(test.labels == c).sum(1) for c in range(3)], 1)
    uniform = (counts.argmax(1) == ty).mean()
    assert (out["test"].argmax(1) == ty).mean() > uniform + 0.05
    assert len(out["folds"]) == 2 and all(f["configs"] > 0 for f in out["folds"])


def test_leave_one_out_agreement_of_a_training_querys_neighbours_leaves_the_query_out():
    labels = np.array([0, 0, 1, 0, 1])
    rows = np.array([[1, 2, 3, 4], [0, 3, 2, 4], [3, 0, 1, 4], [1, 0, 2, 4], [2, 3, 0, 1]])  # nearest other rows
    plain = loo_agreement(labels[rows[:, :2]], labels)
    # query 0 with neighbours 1 and 3: row 1's nearest are 0, 3 -> without 0: 3, 2 -> agreement 1/2
    got = loo_agreement_without(np.array([0]), np.array([[1, 3]]), rows, labels, 2)
    np.testing.assert_allclose(got, [[0.5, 0.5]])
    assert plain[1] == 1.0  # with the query counted, row 1 would look fully consistent
    # a query among no neighbour's nearest rows gets the plain values
    np.testing.assert_allclose(loo_agreement_without(np.array([4]), np.array([[0, 1]]), rows, labels, 2),
                               [[plain[0], plain[1]]])

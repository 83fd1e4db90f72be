"""Voting rules: hand-computed votes, limits of the temperatures, DINO's formula."""

from __future__ import annotations

import numpy as np
import pytest

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.knn.votes import (
    TIE_EPS,
    break_ties,
    cosine_from_sq_dist,
    cosine_weights,
    distance_weights,
    knn_probs,
    uniform_weights,
    vote,
)

D = np.array([[0.1, 0.2, 0.4, 1.0], [0.0, 0.5, 0.5, 2.0]])
Y = np.array([[1, 0, 1, 2], [2, 2, 0, 0]])


def test_uniform_vote_counts_labels():
    p = knn_probs("uniform", D, Y, 3)
    np.testing.assert_allclose(p, [[0.25, 0.5, 0.25], [0.5, 0.0, 0.5]])


def test_a_tie_goes_to_the_class_of_the_nearest_neighbour_not_the_lowest_index():
    # 8-8 between classes 3 and 4, nearest neighbour of class 4: argmax alone would pick 3
    y = np.array([[4, 3] * 8, [3, 4] * 8])
    p = vote(uniform_weights(y.shape), y, 6)
    assert p.argmax(1).tolist() == [4, 3]
    np.testing.assert_allclose(p.sum(1), 1)
    np.testing.assert_allclose(p[:, 3:5], 0.5, atol=2 * TIE_EPS)  # the probabilities barely move
    # a three-way tie among the first neighbours' classes, and a row without a tie stays as it is
    probs = np.array([[0.3, 0.3, 0.3, 0.1], [0.1, 0.6, 0.2, 0.1]])
    labels = np.array([[3, 2, 0, 1], [0, 1, 2, 3]])
    out = break_ties(probs, labels)
    assert out.argmax(1).tolist() == [2, 1]
    np.testing.assert_array_equal(out[1], probs[1])


def test_distance_vote_matches_hand_computation():
    w = np.exp(-np.sqrt(D[0]) / 0.5)  # Euclidean distance, not squared
    w /= w.sum()
    p = knn_probs("distance", D, Y, 3, param=0.5)
    np.testing.assert_allclose(p[0], [w[1], w[0] + w[2], w[3]])
    np.testing.assert_allclose(p.sum(1), 1)


def test_distance_temperature_limits_are_uniform_and_nearest_neighbour():
    np.testing.assert_allclose(distance_weights(D, 1e6), uniform_weights(D.shape), atol=1e-5)
    np.testing.assert_allclose(distance_weights(D[:1], 1e-4), [[1, 0, 0, 0]], atol=1e-6)


def test_cosine_vote_is_dinos_exp_sim_over_t_normalised():
    sims = cosine_from_sq_dist(D)
    np.testing.assert_allclose(sims[1], [1.0, 0.75, 0.75, 0.0])
    t = 0.07
    dino = np.exp(sims / t)  # DINO eval_knn weights before normalisation
    np.testing.assert_allclose(cosine_weights(sims, t), dino / dino.sum(1, keepdims=True))
    # large similarities would overflow exp without the max shift
    assert np.isfinite(cosine_weights(np.array([[1.0, 0.99]]), 1e-3)).all()


def test_vote_equals_one_hot_sum_and_uses_only_the_first_k():
    rng = np.random.default_rng(0)
    w = rng.random((50, 9))
    w /= w.sum(1, keepdims=True)
    y = rng.integers(0, 5, (50, 9))
    np.testing.assert_allclose(vote(w, y, 5), np.einsum("bk,bkc->bc", w, np.eye(5)[y]))
    np.testing.assert_allclose(knn_probs("uniform", D, Y, 3, k=1), [[0, 1, 0], [0, 0, 1]])


def test_bad_inputs_are_named():
    with pytest.raises(ConfigError, match="rule='majority' is not allowed"):
        knn_probs("majority", D, Y, 3)
    with pytest.raises(ConfigError, match=r"k=5 is out of range; allowed: 1..4"):
        knn_probs("uniform", D, Y, 3, k=5)
    with pytest.raises(ConfigError, match="needs its temperature"):
        knn_probs("cosine", D, Y, 3)
    with pytest.raises(ConfigError, match="tau=0 is out of range"):
        distance_weights(D, 0)
    with pytest.raises(ConfigError, match=r"neighbour labels must lie in 0..1"):
        vote(np.ones((2, 4)) / 4, Y, 2)

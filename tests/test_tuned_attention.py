"""Attention with the rule's knobs: its restriction to the first k is each head's softmax over them,
equal scores are the uniform reference (filter and prior included), the search chooses on validation
as the reference does and reads more neighbours while its choice sits at the largest k."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.evaluation.head_scores import attention_scorer, head_log_weights
from attnknn_lib.evaluation.inference import attnknn_probs
from attnknn_lib.evaluation.metrics import accuracy
from attnknn_lib.evaluation.reference import Choice, reference_probs, tune_reference
from attnknn_lib.evaluation.tuned_attention import (
    AttentionChoice,
    HeadScores,
    attention_probs,
    prefix_head_probs,
    tune_attention,
    tuned_attention_methods,
)
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.knn.votes import softmax_rows, vote
from attnknn_lib.models.neighbour_attention import AttentionConfig, MultiHeadNeighbourAttention


def _data(n: int = 300, k: int = 48, c: int = 3, heads: int = 2, noise: float = 0.4, seed: int = 0,
          equal: bool = False):
    """Queries whose true class holds the majority of their neighbours (each label flipped with
    probability ``noise``), random per-head scores (all equal with ``equal``) and agreements."""
    rng = np.random.default_rng(seed)
    target = rng.integers(0, c, n)
    labels = np.where(rng.random((n, k)) < noise, rng.integers(0, c, (n, k)), target[:, None])
    lw = np.zeros((n, heads, k)) if equal else rng.normal(size=(n, heads, k))
    return HeadScores(lw, labels, rng.random((n, k))), target


def test_one_head_restricted_to_k_is_its_softmax_over_the_first_k():
    scores, _ = _data(heads=1)
    ks = [1, 4, 16, 48]
    got = prefix_head_probs(scores, ks, None, 3)
    for i, k in enumerate(ks):
        want = vote(softmax_rows(scores.log_weights[:, 0, :k]), scores.labels[:, :k], 3)
        np.testing.assert_allclose(got[i], want, atol=1e-8)


def test_several_heads_average_their_restricted_softmaxes():
    scores, _ = _data(heads=3)
    got = prefix_head_probs(scores, [12], None, 3, chunk=7)[0]  # blocks of 7 queries: the chunking changes nothing
    want = np.mean([vote(softmax_rows(scores.log_weights[:, h, :12]), scores.labels[:, :12], 3)
                    for h in range(3)], axis=0)
    np.testing.assert_allclose(got, want, atol=1e-8)


@pytest.mark.parametrize("k, theta, beta", [(1, None, 0.0), (8, None, 0.0), (16, 0.5, 0.0), (24, None, 1.0),
                                            (48, 0.75, 0.5)])
def test_equal_scores_are_the_uniform_reference_with_its_filter_and_prior(k, theta, beta):
    scores, _ = _data(equal=True)
    prior = np.array([0.6, 0.3, 0.1])
    hood = Neighbourhood(scores.labels, np.zeros(scores.labels.shape), loo=scores.loo)
    want = reference_probs(Choice("uniform", None, k, theta, beta), hood, prior, 3)
    np.testing.assert_allclose(attention_probs(AttentionChoice(k, theta, beta), scores, prior, 3), want, atol=1e-12)


def test_a_row_that_no_neighbour_passes_falls_back_to_every_neighbour():
    scores, _ = _data(heads=2)
    blocked = HeadScores(scores.log_weights, scores.labels, np.zeros_like(scores.loo))  # nobody reaches theta
    np.testing.assert_allclose(prefix_head_probs(blocked, [16], 0.5, 3), prefix_head_probs(scores, [16], None, 3))


def test_equal_scores_choose_what_the_uniform_reference_chooses():
    val, target = _data(equal=True, noise=0.5)
    prior = np.array([0.6, 0.3, 0.1])
    hood = Neighbourhood(val.labels, np.zeros(val.labels.shape), loo=val.loo)
    ref = tune_reference(hood, target, prior, 3, rules=("uniform",))
    got = tune_attention(val, target, prior, 3, selects=("accuracy",))["accuracy"]
    assert (got["choice"].k, got["choice"].theta, got["choice"].beta) == \
        (ref["choice"].k, ref["choice"].theta, ref["choice"].beta)
    assert got["choice"].val_accuracy == pytest.approx(ref["choice"].val_accuracy)


def test_the_choice_is_the_best_on_validation_and_nll_selection_has_the_lowest_nll():
    val, target = _data()
    prior = np.bincount(val.labels.ravel(), minlength=3) / val.labels.size
    tuned = tune_attention(val, target, prior, 3)
    acc = tuned["accuracy"]["choice"]
    for k in (1, 4, 16):
        p = attention_probs(AttentionChoice(k, None, 0.0), val, prior, 3)
        assert accuracy(p, target) <= acc.val_accuracy + 1e-12
    assert tuned["nll"]["choice"].val_nll <= acc.val_nll + 1e-12
    assert tuned["accuracy"]["configs"] == tuned["nll"]["configs"] > 0


def test_a_choice_at_the_largest_k_read_is_an_edge_and_the_search_reads_more():
    full, target = _data(k=256, noise=0.6, heads=2, seed=3)  # the more neighbours vote, the better
    prior = np.full(3, 1 / 3)
    asked = []

    def scorer(split: str, k: int) -> HeadScores:
        asked.append((split, k))
        return HeadScores(full.log_weights[:, :, :k], full.labels[:, :k], full.loo[:, :k])

    assert "k" in tune_attention(scorer("val", 8), target, prior, 3)["accuracy"]["edges"]
    out = tuned_attention_methods(scorer, target, prior, 3, k_start=8, memory_size=256)
    assert ("val", 16) in asked and max(k for _, k in asked) <= 256
    info = out["accuracy"].info
    assert info["k_searched"] > 8 and info["choice"]["k"] <= info["k_searched"]
    if info["k_searched"] == 256:  # the whole memory: a bounded end, not an edge
        assert "k" not in info["edges"]
    assert out["accuracy"].test.shape == (300, 3)


def test_bad_input_is_one_clear_error():
    val, target = _data()
    with pytest.raises(ConfigError, match="select"):
        tune_attention(val, target, np.full(3, 1 / 3), 3, selects=("ece",))
    with pytest.raises(ConfigError, match="loo"):
        prefix_head_probs(HeadScores(val.log_weights, val.labels), [4], 0.5, 3)
    with pytest.raises(ConfigError, match="k=99"):
        attention_probs(AttentionChoice(99, None, 0.0), val, np.full(3, 1 / 3), 3)


def test_head_log_weights_restricted_to_k_give_the_attention_vote_at_k():
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    mem = rng.normal(size=(200, 16)).astype(np.float32)
    mem /= np.linalg.norm(mem, axis=1, keepdims=True)
    q = rng.normal(size=(40, 16)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    bank = MemoryBank().build(mem, rng.integers(0, 3, 200))
    att = MultiHeadNeighbourAttention(AttentionConfig(3, 16, 2))
    nb = bank.search(q, 64)
    lw = head_log_weights(att, bank, q, nb.rows)
    assert lw.shape == (40, 2, 64)
    scores = HeadScores(lw, bank.labels[nb.rows])
    want, _ = attnknn_probs(att, bank, q, 8, neighbours=nb)
    np.testing.assert_allclose(attention_probs(AttentionChoice(8, None, 0.0), scores, np.full(3, 1 / 3), 3),
                               want, atol=1e-5)
    cache: dict = {}
    scorer = attention_scorer(att, bank, {"val": q}, lambda s, k: (nb.rows[:, :k], nb.sq_dist[:, :k]),
                              bank.labels, cache=cache)
    np.testing.assert_allclose(scorer("val", 64).log_weights, lw, atol=1e-6)
    first = cache[("val", None)][1]
    narrower = scorer("val", 32)  # read from the wider scoring, not scored again
    assert cache[("val", None)][1] is first and narrower.log_weights.shape == (40, 2, 32)
    np.testing.assert_array_equal(narrower.labels, bank.labels[nb.rows[:, :32]])

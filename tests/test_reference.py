"""The strongest non-learned reference: its votes equal the library's rules, its choice is the best
on validation, and a choice on an open edge of a grid extends the grid or is reported."""

from __future__ import annotations

import numpy as np
import pytest

from attnknn_lib.evaluation.metrics import accuracy
from attnknn_lib.evaluation.reference import Choice, reference_probs, tune_reference
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.knn.votes import knn_probs, prefix_class_scores, prior_correction, vote


def _hood(n: int = 400, k: int = 64, c: int = 3, noise: float = 0.35, seed: int = 0):
    """Queries whose true class holds the majority of their neighbours, each neighbour's label
    flipped with probability ``noise``: the more neighbours vote, the better."""
    rng = np.random.default_rng(seed)
    target = rng.integers(0, c, n)
    labels = np.where(rng.random((n, k)) < noise, rng.integers(0, c, (n, k)), target[:, None])
    sq = np.sort(rng.random((n, k)) * 2, axis=1)
    loo = rng.random((n, k))
    return Neighbourhood(labels, sq, loo=loo), target


def test_prefix_scores_are_the_votes_of_the_first_k_neighbours():
    hood, _ = _hood()
    w = np.random.default_rng(1).random(hood.labels.shape)
    s = prefix_class_scores(w, hood.labels, [1, 5, 64], 3)  # (L, N, C)
    for i, k in enumerate([1, 5, 64]):
        np.testing.assert_allclose(s[i] / s[i].sum(1, keepdims=True),
                                   vote(w[:, :k] / w[:, :k].sum(1, keepdims=True), hood.labels[:, :k], 3), atol=1e-8)


@pytest.mark.parametrize("rule, param", [("uniform", None), ("distance", 0.2), ("cosine", 0.07)])
def test_reference_probabilities_equal_the_library_rules(rule, param):
    hood, _ = _hood()
    prior = np.array([0.5, 0.3, 0.2])
    got = reference_probs(Choice(rule, param, 16, None, 0.0), hood, prior, 3)
    np.testing.assert_allclose(got, knn_probs(rule, hood.sq_dist, hood.labels, 3, param, 16), atol=1e-8)
    corrected = reference_probs(Choice(rule, param, 16, None, 1.5), hood, prior, 3)
    expected = prior_correction(knn_probs(rule, hood.sq_dist, hood.labels, 3, param, 16), prior, 1.5)
    assert accuracy(corrected, np.zeros(len(corrected), int)) == accuracy(expected, np.zeros(len(expected), int))


def test_the_filter_drops_neighbours_whose_own_neighbours_disagree_and_falls_back_when_none_pass():
    labels = np.array([[0, 1, 1], [2, 2, 0]])
    hood = Neighbourhood(labels, np.zeros((2, 3)), loo=np.array([[0.9, 0.1, 0.2], [0.0, 0.1, 0.2]]))
    p = reference_probs(Choice("uniform", None, 3, 0.5, 0.0), hood, np.full(3, 1 / 3), 3)
    assert p[0].argmax() == 0  # only the first neighbour passes
    assert p[1].argmax() == 2  # none passes: all three vote


def test_tuning_picks_the_best_validation_accuracy_and_flags_the_largest_k_searched():
    hood, target = _hood(k=64, noise=0.6)  # so noisy that every added neighbour helps
    out = tune_reference(hood, target, np.full(3, 1 / 3), 3)
    choice = out["choice"]
    assert choice.k == 64 and "k" in out["edges"]
    assert choice.val_accuracy == accuracy(reference_probs(choice, hood, np.full(3, 1 / 3), 3), target)
    assert out["configs"] > 1000  # rules x temperatures x k x filters x priors
    brute = max(accuracy(knn_probs("uniform", hood.sq_dist, hood.labels, 3, None, k), target) for k in (1, 8, 32))
    assert choice.val_accuracy >= brute


def test_a_prior_exponent_on_the_edge_of_its_grid_extends_it():
    rng = np.random.default_rng(3)
    n, k = 600, 24
    target = rng.integers(0, 2, n)  # balanced queries, a memory where class 0 is 9x more common
    labels = np.where(rng.random((n, k)) < 0.75, 0, target[:, None])
    hood = Neighbourhood(labels, np.sort(rng.random((n, k)), 1), loo=np.ones((n, k)))
    out = tune_reference(hood, target, np.array([0.9, 0.1]), 2)
    assert out["choice"].beta > 0
    assert max(out["grids"]["beta"]) > out["choice"].beta or "beta" in out["edges"]


def test_a_balanced_memory_tunes_no_prior_exponent():
    hood, target = _hood(k=16)
    out = tune_reference(hood, target, np.array([0.36, 0.33, 0.31]), 3)
    assert out["grids"]["beta"] == [0.0] and out["choice"].beta == 0.0


def test_a_temperature_on_the_end_of_its_grid_extends_the_grid():
    from attnknn_lib.evaluation.reference import _extend

    assert _extend((0.1, 1.0), 1.0, 2.5) == (0.1, 1.0, 2.5)
    assert _extend((0.1, 1.0), 0.1, 2.5) == (0.04, 0.1, 1.0)
    assert _extend((0.1, 0.5, 1.0), 0.5, 2.5) is None


def test_the_reference_searches_more_neighbours_while_its_choice_is_the_largest_k():
    from attnknn_lib.evaluation.reference import reference_method

    rng = np.random.default_rng(0)
    memory_y = rng.integers(0, 2, 3000)
    memory = rng.normal(size=(3000, 2)) * 0.05 + memory_y[:, None]  # two tight clusters
    memory_labels = np.where(rng.random(3000) < 0.45, 1 - memory_y, memory_y)  # nearly half flipped
    queries = {"val": rng.integers(0, 2, 300), "test": rng.integers(0, 2, 200)}
    points = {s: rng.normal(size=(len(y), 2)) * 0.05 + y[:, None] for s, y in queries.items()}
    searched = []

    def search(split: str, k: int):
        searched.append((split, k))
        sq = ((points[split][:, None, :] - memory[None]) ** 2).sum(-1)
        rows = np.argsort(sq, axis=1)[:, :k]
        return rows, np.take_along_axis(sq, rows, 1)

    ref = reference_method(search, memory_labels, np.ones(3000), queries["val"], 2, k_start=16)
    assert [k for s, k in searched if s == "val"][:3] == [16, 32, 64]  # every extra neighbour helped
    assert ref.info["k_searched"] > 16 and ref.info["choice"]["k"] > 16
    assert ref.test.shape == (200, 2) and accuracy(ref.test, queries["test"]) > 0.8


def test_the_nll_tuned_reference_searches_on_past_the_accuracy_tuned_ones_largest_k(monkeypatch):
    """Two overlapping classes with a few flipped labels: accuracy settles on a small k, while the
    NLL of a wider vote keeps falling, so the NLL selection doubles k on its own until its choice
    leaves the edge; the accuracy choice is the one it makes alone."""
    from attnknn_lib.evaluation import reference
    from attnknn_lib.evaluation.reference import reference_method, reference_methods

    rng = np.random.default_rng(1)
    memory_y = rng.integers(0, 2, 2000)
    memory = rng.normal(size=(2000, 2)) * 0.1 + 0.15 * memory_y[:, None]
    labels = np.where(rng.random(2000) < 0.05, 1 - memory_y, memory_y)
    queries = {"val": rng.integers(0, 2, 300), "test": rng.integers(0, 2, 200)}
    points = {s: rng.normal(size=(len(y), 2)) * 0.1 + 0.15 * y[:, None] for s, y in queries.items()}

    def search(split: str, k: int):
        sq = ((points[split][:, None, :] - memory[None]) ** 2).sum(-1)
        rows = np.argsort(sq, axis=1)[:, :k]
        return rows, np.take_along_axis(sq, rows, 1)

    both = reference_methods(search, labels, np.ones(2000), queries["val"], 2, 8, ("accuracy", "nll"))
    alone = reference_method(search, labels, np.ones(2000), queries["val"], 2, k_start=8)
    ref, by_nll = both["accuracy"].info, both["nll"].info
    assert ref["label"] == alone.info["label"] and ref["k_searched"] == alone.info["k_searched"]
    assert by_nll["k_searched"] > ref["k_searched"] and by_nll["choice"]["k"] > ref["k_searched"]
    assert "k" not in by_nll["edges"] and both["nll"].test.shape == (200, 2)
    # capped below where it stopped on its own: it stops at the cap and keeps k among its open edges
    monkeypatch.setattr(reference, "NLL_K_MAX", ref["k_searched"] * 2)
    capped = reference_methods(search, labels, np.ones(2000), queries["val"], 2, 8, ("accuracy", "nll"))["nll"].info
    assert by_nll["k_searched"] > ref["k_searched"] * 2  # so the cap binds
    assert capped["k_searched"] == ref["k_searched"] * 2 and "k" in capped["edges"]


def test_past_its_cap_a_chunked_nll_search_goes_on_in_blocks_and_chooses_as_the_uncapped_one(monkeypatch):
    """The cap on the NLL search exists for memory: searched in blocks of queries, it goes on past it with
    the same choice, edges and probabilities as a search that holds every neighbour at once."""
    from attnknn_lib.evaluation import reference
    from attnknn_lib.evaluation.reference import reference_methods

    rng = np.random.default_rng(1)
    memory_y = rng.integers(0, 2, 2000)
    memory = rng.normal(size=(2000, 2)) * 0.1 + 0.15 * memory_y[:, None]
    labels = np.where(rng.random(2000) < 0.05, 1 - memory_y, memory_y)
    queries = {"val": rng.integers(0, 2, 300), "test": rng.integers(0, 2, 200)}
    points = {s: rng.normal(size=(len(y), 2)) * 0.1 + 0.15 * y[:, None] for s, y in queries.items()}
    widest = []

    def search(split: str, k: int, idx=None):
        q = points[split] if idx is None else points[split][idx]
        widest.append(k * len(q))
        sq = ((q[:, None, :] - memory[None]) ** 2).sum(-1)
        rows = np.argsort(sq, axis=1)[:, :k]
        return rows, np.take_along_axis(sq, rows, 1)

    free = reference_methods(search, labels, np.ones(2000), queries["val"], 2, 8, ("accuracy", "nll"))
    k_free = free["nll"].info["k_searched"]
    cap = free["accuracy"].info["k_searched"] * 2
    assert k_free > cap  # so a cap here binds
    monkeypatch.setattr(reference, "NLL_K_MAX", cap)
    monkeypatch.setattr(reference, "CHUNK_CELLS", 300 * cap)
    widest.clear()
    chunked = reference_methods(search, labels, np.ones(2000), queries["val"], 2, 8, ("accuracy", "nll"),
                                chunked=True)
    assert max(widest) <= 300 * cap  # never more cells at once than the cap's
    got, want = chunked["nll"].info, free["nll"].info
    assert (got["label"], got["k_searched"], got["edges"], got["configs"]) == \
        (want["label"], want["k_searched"], want["edges"], want["configs"])
    for split in ("val", "test"):
        np.testing.assert_allclose(getattr(chunked["nll"], split), getattr(free["nll"], split), atol=1e-12)
    assert chunked["accuracy"].info["label"] == free["accuracy"].info["label"]


def test_the_label_filter_baseline_searches_only_its_corner_of_the_reference_space():
    from attnknn_lib.evaluation.reference import FILTER
    hood, target = _hood()
    full = tune_reference(hood, target, np.full(3, 1 / 3), 3)
    filt = tune_reference(hood, target, np.full(3, 1 / 3), 3, **FILTER)
    assert filt["choice"].rule == "uniform" and filt["choice"].theta in FILTER["thetas"]
    assert filt["configs"] < full["configs"]
    assert filt["choice"].val_accuracy <= full["choice"].val_accuracy  # a subset of the reference's grid


def test_the_search_shares_a_pairs_unfiltered_scores_across_thresholds_bit_for_bit():
    from attnknn_lib.evaluation import reference as ref

    rng = np.random.default_rng(3)
    n, k, c = 50, 40, 4
    hood = Neighbourhood(labels=rng.integers(0, c, (n, k)), sq_dist=np.sort(rng.uniform(0, 2, (n, k)), axis=1),
                             loo=rng.integers(0, 9, (n, k)) / 8)
    prior = np.full(c, 1 / c)
    ks = [1, 4, 16, 40]
    shared = ref._unfiltered(hood, "cosine", 0.1, ks, c)
    for theta in (None, 0.5, 1.0):
        alone = ref._probs(hood, "cosine", 0.1, theta, ks, prior, c, (0.0, 1.0))
        reused = ref._probs(hood, "cosine", 0.1, theta, ks, prior, c, (0.0, 1.0), shared)
        for a, b in zip(alone, reused):
            assert all(np.array_equal(a[beta], b[beta]) for beta in a)

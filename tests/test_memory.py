"""FAISS memory bank: agrees with brute force; training search never returns the query itself."""

from __future__ import annotations

import numpy as np
import pytest

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.knn.bank import INDEX_TYPES, MemoryBank


def _unit(n: int, d: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _brute(bank: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    d = ((queries[:, None, :].astype(np.float64) - bank[None].astype(np.float64)) ** 2).sum(-1)  # (B, N)
    idx = np.argsort(d, axis=1, kind="stable")[:, :k]
    return idx, np.take_along_axis(d, idx, 1)


BANK, LABELS, QUERIES = _unit(2000, 32, 0), np.arange(2000) % 7, _unit(300, 32, 1)


@pytest.mark.parametrize("index_type", ["flat_l2", "flat_ip"])
def test_exact_indexes_return_brute_force_neighbours_and_squared_distances(index_type):
    mb = MemoryBank(index_type, batch_size=64).build(BANK, LABELS)  # several query chunks
    nb = mb.search(QUERIES, 10)
    idx, dist = _brute(BANK, QUERIES, 10)
    np.testing.assert_array_equal(nb.rows, idx)
    np.testing.assert_allclose(nb.sq_dist, dist, atol=1e-4)
    np.testing.assert_array_equal(nb.labels, LABELS[idx])


@pytest.mark.parametrize("index_type,options", [("hnsw", {"ef_search": 128}), ("ivf_flat", {"nprobe": 25})])
def test_approximate_indexes_recall_most_true_neighbours(index_type, options):
    # uniform random unit vectors are the hardest case for IVF: half of its 51 lists must be probed
    mb = MemoryBank(index_type, **options).build(BANK, LABELS)
    nb = mb.search(QUERIES, 10)
    idx, _ = _brute(BANK, QUERIES, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(nb.rows, idx)])
    assert recall >= 0.9, recall
    assert np.all(np.diff(nb.sq_dist, axis=1) >= -1e-6)  # nearest first


def test_ivf_with_all_lists_probed_is_exact():
    mb = MemoryBank("ivf_flat", nlist=16, nprobe=16).build(BANK, LABELS)
    np.testing.assert_array_equal(mb.search(QUERIES, 5).rows, _brute(BANK, QUERIES, 5)[0])


@pytest.mark.parametrize("index_type", INDEX_TYPES)
def test_training_search_excludes_each_querys_own_row(index_type):
    mb = MemoryBank(index_type, ef_search=128, nprobe=45).build(BANK, LABELS)
    rows = np.arange(0, 2000, 7)
    nb = mb.search_excluding(BANK[rows], 10, rows)
    assert nb.rows.shape == (len(rows), 10)
    assert not np.any(nb.rows == rows[:, None])
    if index_type.startswith("flat"):
        idx, _ = _brute(BANK, BANK[rows], 11)
        np.testing.assert_array_equal(nb.rows, idx[:, 1:])  # exactly the next ten


def test_self_exclusion_survives_exact_duplicates():
    bank = np.repeat(_unit(50, 8, 2), 2, axis=0)  # rows 2i and 2i+1 are identical: distance 0 ties
    mb = MemoryBank("flat_l2").build(bank, np.zeros(100, dtype=np.int64))
    rows = np.arange(100)
    nb = mb.search_excluding(bank, 3, rows)
    assert not np.any(nb.rows == rows[:, None])
    np.testing.assert_array_equal(nb.rows[:, 0], rows ^ 1)  # the twin comes first, at distance 0
    np.testing.assert_allclose(nb.sq_dist[:, 0], 0, atol=1e-6)


def test_exclusion_of_several_rows_per_query():
    mb = MemoryBank("flat_l2").build(BANK, LABELS)
    rows = np.stack([np.arange(10), np.arange(10) + 100], axis=1)  # e.g. the two images of a MixUp pair
    nb = mb.search_excluding(BANK[:10], 5, rows)
    idx, _ = _brute(BANK, BANK[:10], 7)
    for r in range(10):
        assert rows[r, 0] not in nb.rows[r] and rows[r, 1] not in nb.rows[r]
        expected = [i for i in idx[r] if i not in rows[r]][:5]
        assert nb.rows[r].tolist() == expected


def test_bad_requests_name_the_value_and_the_range():
    mb = MemoryBank()
    with pytest.raises(ConfigError, match="memory bank is empty"):
        mb.search(QUERIES, 3)
    mb.build(BANK[:20], LABELS[:20])
    with pytest.raises(ConfigError, match=r"k=21 is out of range; allowed: 1..20"):
        mb.search(QUERIES, 21)
    with pytest.raises(ConfigError, match=r"k=20 is out of range; allowed: 1..19"):
        mb.search_excluding(BANK[:2], 20, np.array([0, 1]))
    with pytest.raises(ConfigError, match="index_type='lsh' is not allowed"):
        MemoryBank("lsh")
    assert mb.gather(np.array([[0, 3]])).shape == (1, 2, 32)


def test_index_knobs_reach_faiss_and_ivf_lists_follow_one_rule():
    from attnknn_lib.knn.bank import build_index, ivf_lists

    x = np.random.default_rng(0).standard_normal((400, 8)).astype(np.float32)
    hnsw = build_index(x, "hnsw", hnsw_m=16, ef_construction=100, ef_search=48)
    assert (hnsw.hnsw.efConstruction, hnsw.hnsw.efSearch) == (100, 48)
    assert MemoryBank("hnsw", ef_construction=80).build(x, np.zeros(400)).index.hnsw.efConstruction == 80
    assert ivf_lists(100_000) == 1265 and ivf_lists(10_000) == 256 and ivf_lists(400) == 10 and ivf_lists(10) == 1 and ivf_lists(10_000, 50) == 50
    assert build_index(x, "ivf_flat", nprobe=99).nprobe == 10  # never more lists probed than exist

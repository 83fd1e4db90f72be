"""Efficiency and theory: index measurements, timing helpers, the theory notebook's pure pieces."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from experiment_api import api

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.base.timing import loglog_fit
from attnknn_lib.knn.index_costs import IndexSetting, build, recall_at_k, unit_vectors
from attnknn_lib.models import AttentionConfig, MultiHeadNeighbourAttention

efficiency = api("efficiency")
theory = api("theory")


def test_recall_counts_shared_ids_whatever_their_order_and_padding_as_a_miss():
    exact = np.array([[1, 2, 3], [4, 5, 6]])
    assert recall_at_k(np.array([[3, 2, 1], [6, 5, 4]]), exact) == 1.0
    assert recall_at_k(np.array([[1, 9, 9], [-1, -1, 4]]), exact) == pytest.approx(2 / 6)
    with pytest.raises(ConfigError):
        recall_at_k(np.zeros((2, 2)), exact)


def test_loglog_fit_recovers_a_power_law_and_ignores_non_positive_points():
    x = np.array([10, 100, 1000, 10_000])
    fit = loglog_fit(x, 3.0 * x ** 0.5)
    assert fit["slope"] == pytest.approx(0.5) and fit["r2"] == pytest.approx(1.0)
    assert loglog_fit([1, 10, 100], [0.0, 2.0, 20.0])["slope"] == pytest.approx(1.0)
    assert math.isnan(loglog_fit([1], [1])["slope"])


def test_gemm_yardstick_times_gemm_and_exact_search_in_the_same_run():
    cfg = efficiency.Config(gemm_size=128, repeats=1, recall_k=5)
    g = efficiency.gemm_yardstick(cfg, unit_vectors(3000, 16, seed=0), unit_vectors(200, 16, seed=1))
    assert g["gemm_gflops"] > 0 and g["flat_search_gflops"] > 0 and g["same_shape"] == [200, 3000, 16]
    assert g["flat_search_over_gemm"] == pytest.approx(g["flat_search_gflops"] / g["gemm_gflops"])


def test_index_measurements_on_a_small_bank():
    cfg = efficiency.Config(ef_search=(16, 128), ef_construction=(40,), nprobe=(1, 64), repeats=1, recall_k=5,
                            synthetic_sizes=(500, 1000))
    bank, queries = unit_vectors(2000, 16, seed=0), unit_vectors(50, 16, seed=1)
    rows = efficiency.measure_indexes(cfg, bank, queries, cfg.settings(), single=5)
    by = {r["label"]: r for r in rows}
    assert by["Flat L2"]["recall"] == 1.0 and by["Flat IP"]["recall"] == 1.0  # unit vectors: same neighbours
    assert by["HNSW M=32 efC=40 efS=128"]["recall"] >= by["HNSW M=32 efC=40 efS=16"]["recall"] - 1e-9
    assert by["IVF-Flat nprobe=64"]["recall"] >= by["IVF-Flat nprobe=1"]["recall"]
    assert by["Flat L2"]["bytes_per_vector"] >= 4 * 16 and by["HNSW M=32 efC=40 efS=16"]["bytes_per_vector"] > 4 * 16
    assert all(r["batched_us"] > 0 and r["single_us"] > 0 and r["build_s"] >= 0 for r in rows)
    efficiency.add_memory_limits(rows, 16, ram=10 ** 9)
    flat = by["Flat L2"]
    assert flat["bank_bytes_per_vector"] == flat["bytes_per_vector"] + 4 * 16 + 12
    assert flat["max_n_in_ram"] == int(10 ** 9 // flat["bank_bytes_per_vector"])


def test_training_times_are_medians_per_epoch_and_their_ratio():
    hist = lambda secs: [{"seconds": s, "train_seconds": s - 1} for s in secs]  # noqa: E731
    t = efficiency.training_times({"attnknn": [hist([10, 12]), hist([11])], "cnn": [hist([5, 5.5, 6])]})
    assert t["attnknn"]["seconds_per_epoch"] == 11 and t["cnn"]["seconds_per_epoch"] == 5.5
    assert t["attnknn_over_cnn"] == pytest.approx(2.0) and t["attnknn"]["epochs"] == 3


@pytest.mark.parametrize("bad", [{"ef_search": "0"}, {"synthetic_sizes": "10"}, {"queries": 0}, {"nprobe": "1,-2"}])
def test_efficiency_config_refuses_bad_values(bad):
    with pytest.raises(ConfigError):
        efficiency.Config(**bad)


def test_cover_hart_bound_and_weight_spread():
    assert theory.cover_hart_bound(0.1, 2) == pytest.approx(0.18)
    assert theory.cover_hart_bound(0.1, 10) <= 0.2
    uniform = theory.weight_spread(np.full((3, 8), 1 / 8))
    assert uniform["kl_uniform"] == pytest.approx(0.0, abs=1e-12) and uniform["effective_k"] == pytest.approx(8)
    peaked = theory.weight_spread(np.eye(8)[:3])
    assert peaked["effective_k"] == pytest.approx(1.0) and peaked["kl_uniform"] == pytest.approx(math.log(8))


def test_truncation_grid_holds_powers_of_two_sqrt_n_training_k_and_n():
    ks = theory.truncation_ks(1000, 32, 16)
    assert ks[0] == 1 and ks[-1] == 1000 and 32 in ks and 16 in ks and 512 in ks and ks == sorted(set(ks))


def _attention(seed=0, **kw):
    torch.manual_seed(seed)
    return MultiHeadNeighbourAttention(AttentionConfig(num_classes=3, embed_dim=8, num_heads=2, **kw)).eval()


def test_dense_scores_restricted_to_the_k_nearest_give_the_module_weights():
    att = _attention()
    g = torch.Generator().manual_seed(0)
    memory = F.normalize(torch.randn(40, 8, generator=g), dim=-1)
    q = F.normalize(torch.randn(5, 8, generator=g), dim=-1)
    sq = (2 - 2 * q @ memory.T).clamp_min(0)
    with torch.no_grad():
        scores = att.dense_scores(q, att.keys(memory), sq)  # (5, H, 40)
        order = sq.argsort(-1)[:, :6]
        w, heads = att(q, memory[order], sq.gather(1, order), torch.zeros(5, 6, dtype=torch.long))
    assert torch.allclose(scores.gather(2, order[:, None, :].expand(-1, 2, -1)).softmax(-1), heads, atol=1e-6)
    with pytest.raises(ConfigError):
        _attention(label_bias=True).dense_scores(q, memory, sq)


def test_attnknn_truncation_is_exact_at_n_and_its_vote_at_k_is_the_module_vote():
    att = _attention()
    g = torch.Generator().manual_seed(1)
    memory = F.normalize(torch.randn(60, 8, generator=g), dim=-1)
    labels = torch.randint(0, 3, (60,), generator=g)
    q = F.normalize(torch.randn(7, 8, generator=g), dim=-1)
    y = np.random.default_rng(0).integers(0, 3, 7)
    out = theory.attnknn_truncation(att, memory, labels, q, y, [1, 6, 60], 3, chunk=4)
    assert out["error"][-1] == pytest.approx(0.0, abs=1e-9) and out["error"][0] > 0
    assert all(0 <= a <= 1 for a in out["accuracy"])


def test_softmax_truncation_errors_respect_the_dropped_mass_bound():
    g = torch.Generator().manual_seed(2)
    memory = F.normalize(torch.randn(300, 8, generator=g, dtype=torch.float64), dim=-1)
    labels = torch.randint(0, 4, (300,), generator=g)
    q = F.normalize(torch.randn(20, 8, generator=g, dtype=torch.float64), dim=-1)
    out = theory.softmax_truncation(memory, labels, 4, q, [1, 4, 16, 64, 300], (0.1, 1.0), seed=0, chunk=8)
    for e in out.values():
        assert all(err <= 2 * m + 1e-9 for err, m in zip(e["error"], e["tail_mass"]))
        assert e["error"][-1] == pytest.approx(0.0, abs=1e-12) and e["sampled_ks"] == [1, 4, 16, 64]
    assert out["0.1"]["error"][2] < out["1"]["error"][2]  # a sharper softmax loses less to truncation


@pytest.mark.parametrize("bad", [{"temperatures": "0"}, {"k_values": "0,5"}, {"cost_sizes": "2"},
                                 {"truncation_queries": 0}])
def test_theory_config_refuses_bad_values(bad):
    with pytest.raises(ConfigError):
        theory.Config(**bad)


def test_hnsw_build_honours_ef_construction():
    index, seconds = build(IndexSetting("hnsw", ef_construction=77), unit_vectors(300, 8))
    assert index.hnsw.efConstruction == 77 and seconds >= 0

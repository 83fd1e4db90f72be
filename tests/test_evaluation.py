"""Evaluation: knobs tuned on validation, best baseline, adaptive k, scores with calibrators."""

from __future__ import annotations

import numpy as np
import torch

from attnknn_lib.data.registry import Dataset, DataSplit
from attnknn_lib.evaluation.methods import T_GRID, TAU_GRID, Embedded, attnknn_methods, knn_methods, score
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.models import AttentionConfig, MultiHeadNeighbourAttention


def _clusters(n: int, c: int, d: int, noise: float, seed: int):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((c, d))
    y = np.arange(n) % c
    x = centers[y] + noise * rng.standard_normal((n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), y


def _embedded(views=("original", "hflip")):
    xb, yb = _clusters(600, 3, 8, 0.9, 0)
    xv, yv = _clusters(300, 3, 8, 0.9, 1)
    xt, yt = _clusters(300, 3, 8, 0.9, 2)
    split = lambda x, y: DataSplit(x, y, np.arange(len(y)))  # noqa: E731
    ds = Dataset("toy", "tabular", 3, (8,), ("a", "b", "c"), split(xb, yb), split(xv, yv), split(xt, yt))
    bank = MemoryBank().build(xb, yb)
    emb = Embedded(bank, {}, {}, {})
    for v in views:
        shift = 0.0 if v == "original" else 0.05
        for s, x in (("val", xv), ("test", xt)):
            e = x + shift
            e = (e / np.linalg.norm(e, axis=1, keepdims=True)).astype(np.float32)
            getattr(emb, s)[v] = e
            emb.neighbours[(s, v)] = bank.search(e, 20)
    return ds, emb


def test_knn_temperatures_are_tuned_on_validation_nll():
    ds, emb = _embedded()
    out = knn_methods(emb, ds, 10)
    assert out["distance"].info["param"] in TAU_GRID and out["cosine"].info["param"] in T_GRID
    curve = out["distance"].info["val_nll_curve"]
    assert out["distance"].info["param"] == float(min(curve, key=curve.get))
    assert out["best_baseline_tta"].info["baseline"] in ("uniform", "distance", "cosine")
    for m in out.values():
        np.testing.assert_allclose(m.test.sum(1), 1)


def test_attnknn_methods_include_tta_ensemble_and_adaptive_k():
    ds, emb = _embedded()
    torch.manual_seed(0)
    att = MultiHeadNeighbourAttention(AttentionConfig(num_classes=3, embed_dim=8, num_heads=2))
    out = attnknn_methods(att, emb, 10)
    assert set(out) == {"attnknn", "attnknn_tta", "attnknn_kens", "attnknn_adaptive"}
    counts = out["attnknn_adaptive"].info["chosen_k_counts"]["test"]
    assert sum(counts.values()) == 300 and set(counts) == {5, 10, 20}
    # near-uniform attention over 20 neighbours has ~20 effective neighbours: k = 20 is chosen
    assert counts[20] > counts[5]


def test_single_view_data_gets_no_tta_methods():
    ds, emb = _embedded(views=("original",))
    assert "best_baseline_tta" not in knn_methods(emb, ds, 10)


def test_score_reports_raw_and_calibrated_with_intervals():
    ds, emb = _embedded()
    out = score(knn_methods(emb, ds, 10), ds, n_boot=50)
    u = out["uniform"]
    assert set(u) == {"label", "info", "calibrator", "val", "test_raw", "test_calibrated"}
    assert u["test_raw"]["accuracy"]["low"] <= u["test_raw"]["accuracy"]["value"] <= u["test_raw"]["accuracy"]["high"]
    assert u["test_calibrated"]["accuracy"]["value"] == u["test_raw"]["accuracy"]["value"]  # calibration keeps argmax
    assert u["val"]["nll_calibrated"] <= u["val"]["nll"]


def test_averaged_votes_that_tie_go_to_the_nearest_neighbours_class():
    from attnknn_lib.evaluation.methods import _mean_vote

    ds, emb = _embedded()
    # two views that each prefer a different class average to an exact 0.5 / 0.5 tie
    a = np.tile([0.75, 0.25, 0.0], (300, 1))
    b = np.tile([0.25, 0.75, 0.0], (300, 1))
    nearest = emb.neighbours[("test", "original")].labels[:, 0]
    out = _mean_vote([a, b], emb, "test")
    tied = np.isin(nearest, (0, 1))
    assert (out.argmax(1)[tied] == nearest[tied]).all()


def test_a_tied_attention_vote_goes_to_the_nearest_neighbours_class():
    from attnknn_lib.evaluation.inference import attnknn_probs

    ds, emb = _embedded()
    torch.manual_seed(0)
    att = MultiHeadNeighbourAttention(AttentionConfig(num_classes=3, embed_dim=8, num_heads=2, distance_bias=False))
    with torch.no_grad():  # zero projections: every neighbour gets exactly 1/k
        for p in att.parameters():
            p.zero_()
    nb = emb.neighbours[("test", "original")]
    probs, w = attnknn_probs(att, emb.bank, emb.test["original"], 4, neighbours=nb)
    np.testing.assert_allclose(w, 0.25)
    lab = nb.labels[:, :4]
    counts = np.stack([(lab == c).sum(1) for c in range(3)], 1)
    tie = (np.sort(counts, 1)[:, -1] == np.sort(counts, 1)[:, -2])
    assert tie.any()
    assert (probs.argmax(1)[tie] == lab[tie, 0]).all()

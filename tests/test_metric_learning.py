"""The learned-metric family on a fixed embedding: the NCA loss and its training, the mapped space
the rule is tuned in, the linear probe, and how the comparison summarises attention against NCA."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.evaluation.linear_probe import linear_probe
from attnknn_lib.evaluation.metrics import accuracy
from attnknn_lib.experiments.common.fixed_embedding import HeadKnobs, summarise
from attnknn_lib.experiments.common.learned_metric import mapped
from attnknn_lib.training.metric_learning import fit_nca, mapped_vote, nca_loss


def _nuisance_task(n: int, seed: int, noise: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    """Two informative dimensions carry 4 classes (the quadrants, well apart); six nuisance
    dimensions of much larger scale hide them from the plain Euclidean vote."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, n)
    centres = np.array([[1, 1], [1, -1], [-1, 1], [-1, -1]], dtype=float)
    x = np.concatenate([centres[y] + 0.2 * rng.normal(size=(n, 2)), noise * rng.normal(size=(n, 6))], 1)
    return x.astype(np.float32), y


def test_nca_loss_is_minus_log_of_the_softmax_mass_on_the_queries_class_without_its_own_row():
    zq = torch.tensor([[0.0, 0.0], [1.0, 0.0]])
    zc = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    yq, yc = torch.tensor([0, 1]), torch.tensor([0, 0, 1])
    onehot = torch.nn.functional.one_hot(yc, 2).float()
    own = torch.tensor([0, 2])  # each query is itself a candidate: left out
    got = nca_loss(zq, yq, zc, onehot, own)
    # query 0: candidates 1 (d=1, class 0) and 2 (d=1, class 1) -> p = 1/2; query 1: 0 (d=1, class 0),
    # 1 (d=2, class 0), no other of class 1 -> p floored
    expected = (-np.log(0.5) - np.log(1e-12)) / 2
    assert got.item() == pytest.approx(expected, rel=1e-5)
    not_drawn = nca_loss(zq[:1], yq[:1], zc, onehot, torch.tensor([-1]))  # its own row counts if it was not drawn
    p = np.exp(0) / (np.exp(0) + 2 * np.exp(-1))
    assert not_drawn.item() == pytest.approx(-np.log(p + np.exp(-1) / (1 + 2 * np.exp(-1))), rel=1e-5)


@pytest.fixture
def one_thread():
    """Tiny tensors: on a busy machine two threads' barriers cost more than the work (20 x here)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_nca_learns_to_ignore_nuisance_dimensions_and_beats_the_plain_vote_seeded(one_thread):
    x, y = _nuisance_task(1500, 0)
    vx, vy = _nuisance_task(500, 1)
    fit = fit_nca(x, y, vx, vy, 4, 8, (0.03, 0.1, 0.3), 15, 3, 256, 512, seed=0)
    plain = accuracy(mapped_vote(np.eye(8), x, y, vx, 8, 4), vy)
    learned = accuracy(mapped_vote(fit.matrix, x, y, vx, 8, 4), vy)
    assert learned > plain + 0.2 and learned > 0.9
    info = fit.info
    assert info["history"][info["best_epoch"] - 1]["val_accuracy"] == pytest.approx(learned)
    assert info["lr"] in info["lrs"] and set(info["scores"]) == {f"{r:g}" for r in info["lrs"]}
    assert info["configs"] >= len(info["lrs"]) and info["candidates"] == 512
    assert info["plateau"] == (info["epochs_run"] - info["best_epoch"] >= 3)
    again = fit_nca(x, y, vx, vy, 4, 8, (info["lr"],), 15, 3, 256, 512, seed=0)
    np.testing.assert_allclose(again.matrix, fit.matrix, atol=1e-6)  # seeded: one seed, one map


def test_nca_starts_at_the_identity_so_a_tiny_step_keeps_the_plain_geometry():
    x, y = _nuisance_task(400, 2)
    fit = fit_nca(x, y, x[:100], y[:100], 4, 4, (1e-6,), 1, 1, 128, 400, seed=0)
    np.testing.assert_allclose(fit.matrix, np.eye(8), atol=1e-4)


def test_nca_refuses_bad_knobs_in_one_line():
    x, y = _nuisance_task(100, 0)
    with pytest.raises(ConfigError, match="lrs"):
        fit_nca(x, y, x, y, 4, 4, (0.0,), 2, 1, 32, 64, 0)
    with pytest.raises(ConfigError, match="candidates"):
        fit_nca(x, y, x, y, 4, 4, (0.01,), 2, 1, 32, 0, 0)
    with pytest.raises(ConfigError, match="k=100"):
        fit_nca(x, y, x, y, 4, 100, (0.01,), 2, 1, 32, 64, 0)


def test_the_mapped_space_is_divided_by_one_scale_that_keeps_neighbours_and_is_one_at_the_identity():
    rng = np.random.default_rng(0)
    mem = rng.normal(size=(50, 4))
    mem /= np.linalg.norm(mem, axis=1, keepdims=True)
    q = rng.normal(size=(5, 4))
    scale, (m1, q1) = mapped(np.eye(4), mem, q)
    assert scale == pytest.approx(1.0) and np.allclose(m1, mem, atol=1e-6)
    a = np.diag([3.0, 1.0, 0.5, 2.0])
    scale, (m2, q2) = mapped(a, mem, q)
    assert np.linalg.norm(m2, axis=1).mean() == pytest.approx(1.0, rel=1e-5)
    raw = ((q @ a.T)[:, None] - (mem @ a.T)[None]) ** 2
    got = (q2[:, None] - m2[None]) ** 2
    np.testing.assert_array_equal(raw.sum(-1).argsort(1), got.sum(-1).argsort(1))  # the same neighbours


def test_linear_probe_tunes_c_on_validation_extends_its_grid_and_gives_every_class_a_column():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 600)
    x = rng.normal(size=(600, 5)) + 2.0 * np.eye(5)[y]
    vx, vy = x[:200] + 0.1, y[:200]
    pv, pt, info = linear_probe(x, y, vx, vy, x[:50], 4, seed=0)  # class 3 never occurs
    assert pv.shape == (200, 4) and pt.shape == (50, 4) and np.allclose(pt.sum(1), 1) and (pt[:, 3] == 0).all()
    assert accuracy(pv, vy) > 0.85 and info["C"] in info["cs"] and info["converged"]
    best = max(info["scores"].values(), key=lambda s: (s["val_accuracy"], -s["val_nll"]))
    assert info["scores"][f"{info['C']:g}"] == best
    _, _, edge = linear_probe(x, y, vx, vy, x[:50], 4, seed=0, cs=(1e-6, 1e-5))  # best at the top end: extended
    assert len(edge["cs"]) > 2 and max(edge["cs"]) > 1e-5
    with pytest.raises(ConfigError, match="cs"):
        linear_probe(x, y, vx, vy, x, 4, 0, cs=(0.0,))


def test_head_knobs_budget_and_refuse_bad_nca_knobs():
    cfg = HeadKnobs()
    assert cfg.train_queries == 16000 and cfg.head_epochs == 32 and cfg.head_patience == 5
    assert HeadKnobs(nca_lrs="0.01,0.1").nca_lrs == (0.01, 0.1)
    with pytest.raises(ConfigError, match="train_queries"):
        HeadKnobs(train_queries=-1)
    with pytest.raises(ConfigError, match="nca_candidates"):
        HeadKnobs(nca_candidates=0)
    with pytest.raises(ConfigError, match="nca_lrs"):
        HeadKnobs(nca_lrs="0")


def _scored(acc: float, nll: float) -> dict:
    return {"raw": {"accuracy": acc}, "calibrated": {"nll": nll, "brier": nll / 2, "ece": 0.01}, "info": {}}


def test_summarise_judges_a_head_against_nca_on_accuracy_and_against_both_nca_on_calibration():
    cfg = HeadKnobs()
    per_seed = {}
    for s, gap in enumerate((0.05, 0.06, 0.055)):
        d = {"accuracy": gap, "nll": -0.1, "brier": -0.05, "ece": 0.0}
        per_seed[str(s)] = {
            "diff": {"attnknn": {"reference": d, "reference_nll": d, "nca": {**d, "accuracy": -gap},
                                 "nca_nll": {**d, "accuracy": -gap}},
                     "nca": {"reference": d, "reference_nll": d}},
            "methods": {"reference": {**_scored(0.8, 0.5), "info": {"choice": {"k": 16}, "label": "uniform, k=16",
                                                                    "edges": []}},
                        "reference_nll": {**_scored(0.8, 0.5), "info": {"label": "uniform, k=32", "edges": []}},
                        "nca": _scored(0.9, 0.3), "attnknn": _scored(0.85, 0.4)},
            "headroom": {key: {"recall": 0.9, "uniform_accuracy": 0.8, "fixable": 0.1, "all_agree_right": 0.5}
                         for key in ("at_k", "at_reference_k")}}
    out = summarise(cfg, per_seed)
    att = out["diff"]["attnknn"]
    assert set(att) == {"reference", "reference_nll", "nca", "nca_nll"} and set(out["diff"]["nca"]) == {
        "reference", "reference_nll"}
    assert set(att["nca"]) == {"accuracy", "nll", "brier"} and set(att["nca_nll"]) == {"nll", "brier"}
    assert att["nca"]["accuracy"]["verdict"] == "worse" and att["reference"]["accuracy"]["verdict"] == "better"
    assert out["means"]["nca"]["accuracy"] == pytest.approx(0.9)

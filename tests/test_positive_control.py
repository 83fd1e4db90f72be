"""The positive control: its generator, the NLL-tuned reference, the resolvable difference, and the
property the experiment rests on (with room to win, the attention sharpens and beats the uniform vote)."""

from __future__ import annotations

import numpy as np
import pytest

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.data.synthetic import ClusterTask, generate
from attnknn_lib.evaluation.calibration import fit_calibrator
from attnknn_lib.evaluation.metrics import accuracy, nll
from attnknn_lib.evaluation.reference import (
    reference_method,
    reference_probs,
    references,
    tune_reference,
)
from attnknn_lib.evaluation.verdicts import resolvable, seed_level
from attnknn_lib.experiments.positive_control import EXPERIMENT
from attnknn_lib.experiments.positive_control import measure as pc
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.knn.votes import knn_probs

SMALL = dict(n_memory=2000, n_val=600, n_test=600, clusters_per_class=6)


def test_generated_points_are_unit_vectors_with_balanced_classes_and_a_seeded_draw():
    task = ClusterTask(1.0, **SMALL)
    a, b, c = generate(task, 0), generate(task, 0), generate(task, 1)
    assert a.memory.x.shape == (2000, task.dims) and a.memory.informative.shape == (2000, task.informative_dims)
    np.testing.assert_allclose(np.linalg.norm(a.memory.x, axis=1), 1.0, atol=1e-5)
    counts = np.bincount(a.memory.y, minlength=task.num_classes)  # every cluster the same size +- 1
    assert counts.max() - counts.min() <= task.clusters_per_class and counts.sum() == 2000
    np.testing.assert_array_equal(a.memory.y, a.memory.cluster // task.clusters_per_class)
    np.testing.assert_array_equal(a.test.x, b.test.x)
    assert not np.array_equal(a.test.x, c.test.x)


def test_without_nuisance_the_retrieval_sees_the_informative_block_and_the_levels_share_their_points():
    zero, one = generate(ClusterTask(0.0, **SMALL), 3), generate(ClusterTask(1.0, **SMALL), 3)
    np.testing.assert_allclose(zero.val.x[:, :8], zero.val.informative, atol=1e-6)
    assert np.abs(zero.val.x[:, 8:]).max() == 0
    np.testing.assert_array_equal(zero.val.cluster, one.val.cluster)  # only the nuisance scale differs
    np.testing.assert_allclose(zero.val.informative, one.val.informative, atol=1e-6)


def test_the_knob_moves_the_room_the_uniform_vote_loses_and_the_oracle_weights_keep():
    def at(scale):
        t = generate(ClusterTask(scale, **SMALL), 0)
        nb = MemoryBank().build(t.memory.x, t.memory.y).search(t.test.x, 16)
        d_inf = pc.informative_sq_dist(t, t.test.informative, nb.rows)
        return (accuracy(knn_probs("uniform", nb.sq_dist, nb.labels, 10), t.test.y),
                accuracy(knn_probs("distance", d_inf, nb.labels, 10, 0.05), t.test.y))
    (u0, o0), (u2, o2) = at(0.0), at(2.0)
    assert u0 > 0.85 and o0 - u0 < 0.03  # no room: uniform weights are near the oracle's
    assert u0 - u2 > 0.3 and o2 - u2 > 0.15  # room: the retrieval mixes classes, the oracle weights recover much


def test_resolvable_is_the_half_width_of_the_seed_level_interval():
    d = [0.01, 0.013, 0.008, 0.012, 0.011]
    v = seed_level(d, 0.002, "accuracy")
    assert resolvable(v["seed_sd"], 0.002, 5) == pytest.approx((v["high"] - v["low"]) / 2)
    assert resolvable(0.01, 0.0, 3) > resolvable(0.01, 0.0, 5)
    with pytest.raises(ConfigError, match="n_seeds"):
        resolvable(0.01, 0.0, 1)


def _memory(seed=0):
    t = generate(ClusterTask(1.5, **SMALL), seed)
    bank = MemoryBank().build(t.memory.x, t.memory.y)
    own = bank.search_excluding(t.memory.x, 16, np.arange(2000))
    loo = (t.memory.y[own.rows] == t.memory.y[:, None]).mean(1)
    queries = {"val": t.val.x, "test": t.test.x}
    return t, loo, lambda split, k: (lambda nb: (nb.rows, nb.sq_dist))(bank.search(queries[split], k))


def test_the_reference_tuned_on_nll_has_the_lowest_validation_nll_of_its_grid():
    t, loo, search = _memory()
    rows, sq = search("val", 64)
    hood = Neighbourhood(t.memory.y[rows], sq, loo=loo[rows])
    prior = np.full(10, 0.1)
    by_nll = tune_reference(hood, t.val.y, prior, 10, ks=(1, 4, 16, 64), select="nll")["choice"]
    by_acc = tune_reference(hood, t.val.y, prior, 10, ks=(1, 4, 16, 64))["choice"]
    assert by_nll.val_nll <= by_acc.val_nll and by_acc.val_accuracy >= by_nll.val_accuracy
    assert nll(reference_probs(by_nll, hood, prior, 10), t.val.y) == pytest.approx(by_nll.val_nll)
    with pytest.raises(ConfigError, match="select"):
        tune_reference(hood, t.val.y, prior, 10, select="ece")


def test_the_calibration_reference_is_the_candidate_with_the_lower_calibrated_validation_nll():
    t, loo, search = _memory()
    ref, cal = references(search, t.memory.y, loo, t.val.y, 10, 64)
    alone = reference_method(search, t.memory.y, loo, t.val.y, 10, 64)  # the accuracy search on its own
    assert ref.info["label"] == alone.info["label"] and np.array_equal(ref.test, alone.test)
    cands = cal.info["candidates"]
    assert cal.info["tuned_on"] == min(cands, key=lambda s: cands[s]["val_nll_calibrated"])
    got = nll(fit_calibrator(cal.val, t.val.y).apply(cal.val), t.val.y)
    assert got == pytest.approx(min(c["val_nll_calibrated"] for c in cands.values()))


def test_config_refuses_dimensions_the_heads_cannot_split_and_unknown_heads():
    with pytest.raises(ConfigError, match="multiple of num_heads"):
        EXPERIMENT.Config(nuisance_dims=23)
    with pytest.raises(ConfigError, match="heads"):
        EXPERIMENT.Config(heads="attnknn,oracle")
    with pytest.raises(ConfigError, match="nuisance_scale"):
        EXPERIMENT.Config(nuisance_scales="-1")


@pytest.mark.slow
def test_with_room_to_win_attnknn_sharpens_and_beats_the_uniform_vote():
    """The property the positive control rests on, on a small task with clear room: if this fails,
    the learner is broken, whatever the experiments elsewhere say."""
    cfg = EXPERIMENT.Config(profile="smoke", seeds="0", nuisance_scales="1.5", cluster_sd=0.05, n_memory=4000,
                            n_val=1000, n_test=1000, clusters_per_class=10, train_queries=4000, head_epochs=12,
                            heads="attnknn", reference_k=64)
    out = pc.level_seed(cfg, 1.5, 0)
    att, hr = out["methods"]["attnknn"], out["headroom"]["at_k"]
    assert att["info"]["effective_k"] < cfg.moved_share * cfg.k
    assert att["raw"]["accuracy"] > hr["uniform_accuracy"] + 0.05
    assert out["diff"]["attnknn"]["reference"]["accuracy"] > 0

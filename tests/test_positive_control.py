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
from attnknn_lib.experiments.common.fixed_embedding_views import OPTIONAL_LEARNERS
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
    the learner is broken, whatever the experiments elsewhere say. (Half the rows of its first version
    and NCA's smoke epochs: a third of the time, and still about ten points above the uniform vote.)"""
    cfg = EXPERIMENT.Config(profile="smoke", seeds="0", nuisance_scales="1.5", cluster_sd=0.05, n_memory=2000,
                            n_val=500, n_test=500, clusters_per_class=10, train_queries=2000, head_epochs=12,
                            heads="attnknn", reference_k=64, nca_epochs=3, head_lrs="0.01", nonlinear_metric=False,
                            wide_heads="", probe_as_heads=False)  # the property alone, not the one budget's learners
    out = pc.level_seed(cfg, 1.5, 0)
    att, hr = out["methods"]["attnknn"], out["headroom"]["at_k"]
    assert att["info"]["effective_k"] < cfg.moved_share * cfg.k
    assert att["raw"]["accuracy"] > hr["uniform_accuracy"] + 0.05
    assert out["diff"]["attnknn"]["reference"]["accuracy"] > 0
    # with the rule's knobs: k, filter and prior chosen on validation, its k = 16 choice the head as trained
    tuned, tuned_nll = out["methods"]["attnknn_tuned"], out["methods"]["attnknn_tuned_nll"]
    assert tuned["info"]["choice"]["k"] in tuned["info"]["grids"]["k"] and cfg.k in tuned["info"]["grids"]["k"]
    assert tuned["val_accuracy"] >= att["val_accuracy"] - 1.0 / cfg.n_val  # k = 16 as trained is in its grid (up to a near tie)
    assert tuned_nll["info"]["tuned_on"] in ("accuracy", "nll")
    assert set(out["diff"]["attnknn_tuned"]) == {"reference", "reference_nll", "nca", "nca_nll"}



def test_one_budget_the_wide_heads_and_the_nonlinear_metric_are_measured_beside_the_heads():
    """Opted in: every head over a learning-rate grid, Attn-KNN and both variants trained again at k_w
    (the tuned vote's k clipped to [wide_k_min, wide_k_max], here 32), Attn-KNN at k_w read with the tuned
    vote's knobs, the nonlinear learned metric beside NCA, and every attention method compared with both
    learned metrics."""
    cfg = EXPERIMENT.Config(profile="smoke", seeds="0", nuisance_scales="1.5", cluster_sd=0.05, n_memory=800,
                            n_val=200, n_test=200, clusters_per_class=5, train_queries=0, head_epochs=1,
                            heads="attnknn", head_lrs="0.01,0.03", reference_k=64, nca_epochs=1, nca_lrs="0.01",
                            nonlinear_metric=True, mlp_hidden=16,
                            wide_heads="attnknn,label_bias,self_attention", wide_k_min=32, wide_k_max=48)
    out = pc.compare(cfg, *(lambda t: (t.memory, t.val, t.test))(generate(cfg.task(1.5), 0)), cfg.num_classes, 0)
    methods = out["methods"]
    k_ref = methods["reference"]["info"]["choice"]["k"]
    k_w = min(max(k_ref, 32), 48)
    for name in ("attnknn_wide", "attnknn_label_wide", "attnknn_self_wide", "attnknn_wide_tuned"):
        assert methods[name]["info"]["k_trained"] == k_w > cfg.k, name
    assert {0.01, 0.03} <= set(methods["attnknn_wide"]["info"]["lrs"]) and methods["attnknn"]["info"]["configs"] >= 2
    assert {"mlp_metric", "mlp_metric_nll"} <= set(methods)
    for name in ("attnknn", "attnknn_tuned", "attnknn_wide", "attnknn_label_wide", "attnknn_wide_tuned"):
        assert set(out["diff"][name]) == {"reference", "reference_nll", "nca", "nca_nll", "mlp_metric",
                                          "mlp_metric_nll"}, name
    with pytest.raises(ConfigError, match="wide_heads='prototypes' is not allowed"):
        EXPERIMENT.Config(wide_heads="prototypes")


# ----------------------------------------------------------------------------- the learned metric, shares, diagnostic

def _method(acc: float) -> dict:
    return {"val_accuracy": acc, "raw": {"accuracy": acc},
            "calibrated": {"nll": 1.0 - acc, "brier": (1.0 - acc) / 2, "ece": 0.01}, "info": {}}


def _fake_seed(seed: int, ref: float, gains: dict[str, float]) -> dict:
    """One seed's comparison output as :func:`compare` shapes it, with given accuracy gains over the rule."""
    methods = {"reference": {**_method(ref), "info": {"choice": {"k": 64}, "label": "uniform, k=64", "edges": []}},
               "reference_nll": {**_method(ref), "info": {"label": "uniform, k=64", "edges": []}}}
    methods.update({n: _method(ref + g) for n, g in gains.items()})
    for h in ("attnknn", "label_aware"):
        methods[h]["info"] = {"effective_k": 6.0}

    def d(a: str, b: str) -> dict:
        ma, mb = methods[a], methods[b]
        return {"accuracy": ma["raw"]["accuracy"] - mb["raw"]["accuracy"],
                **{m: ma["calibrated"][m] - mb["calibrated"][m] for m in ("nll", "brier", "ece")}}
    diff = {n: {r: d(n, r) for r in ("reference", "reference_nll")} for n in gains}
    for h in ("attnknn", "label_aware", "attnknn_tuned", "attnknn_tuned_nll"):
        if h in gains:
            diff[h].update({r: d(h, "nca") for r in ("nca", "nca_nll")})
    for h in ("attnknn_tuned", "attnknn_tuned_nll"):
        if h in gains:
            methods[h]["info"] = {"choice": {"k": 32 + 16 * seed}, "edges": ["k"] * (seed == 2)}
    room = {"recall": 0.9, "uniform_accuracy": ref, "fixable": 0.1, "all_agree_right": 0.5}
    diag = {"retrieved_vs_informative": 0.2, "uniform_accuracy": ref - 0.05,
            **{v: {"accuracy": ref + g, "weights_vs_informative": r, "weights_vs_retrieved": 0.5}
               for v, g, r in (("as_retrieved", -0.01, 0.4), ("informative", 0.15, 0.95))}}
    return {"methods": methods, "diff": diff, "headroom": {"at_k": room, "at_reference_k": room},
            "label_aware_diagnostic": diag}


GAINS = {"attnknn": 0.08, "label_aware": -0.01, "learner": 0.0, "geometry": -0.02, "nca": 0.2, "nca_nll": 0.2,
         "linear_probe": -0.4, "query_only": 0.1, "oracle_inside_k": 0.16, "oracle_reference_k": 0.2,
         "oracle_retrieval": 0.25}


def test_shares_divide_each_gain_over_the_rule_by_the_oracles_room_per_seed_and_over_the_means():
    per_seed = {"0": _fake_seed(0, 0.6, GAINS), "1": _fake_seed(1, 0.7, {**GAINS, "oracle_retrieval": 0.15})}
    sh = pc.shares(per_seed, 0.0025)
    assert sh["retrieval"]["room"] == pytest.approx([0.25, 0.15])
    nca = sh["retrieval"]["methods"]["nca"]
    assert nca["per_seed"] == pytest.approx([0.8, 0.2 / 0.15]) and nca["mean"] == pytest.approx((0.8 + 0.2 / 0.15) / 2)
    assert nca["of_means"] == pytest.approx(0.2 / 0.2)
    assert sh["inside_k"]["methods"]["attnknn"]["of_means"] == pytest.approx(0.08 / 0.16)
    assert "reference" not in sh["retrieval"]["methods"] and "reference_nll" not in sh["inside_k"]["methods"]
    flat = pc.shares({"0": _fake_seed(0, 0.6, {**GAINS, "oracle_retrieval": 0.002}), "1": _fake_seed(1, 0.6, GAINS)},
                     0.0025)  # seed 0's room is below the margin: no share of it
    att = flat["retrieval"]["methods"]["attnknn"]
    assert att["per_seed"][0] is None and att["mean"] is None and att["of_means"] == pytest.approx(0.08 / 0.126)


def test_rank_correlation_is_one_for_the_same_order_minus_one_reversed_and_skips_constant_rows():
    w = np.array([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    score = np.array([[3.0, 2.0, 1.0], [3.0, 2.0, 1.0], [3.0, 2.0, 1.0]])
    assert pc.rank_correlation(w[:1], score[:1]) == pytest.approx(1.0)
    assert pc.rank_correlation(w[1:2], score[1:2]) == pytest.approx(-1.0)
    assert pc.rank_correlation(w, score) == pytest.approx(0.0)  # the constant row is left out
    assert np.isnan(pc.rank_correlation(w[2:], score[2:]))


def test_the_label_aware_diagnostic_trains_the_head_on_both_distances_and_reports_its_weights():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: a busy machine's thread barriers cost more than the work
    try:
        cfg = EXPERIMENT.Config(profile="smoke", seeds="0", nuisance_scales="1.5", n_memory=600, n_val=200, n_test=200,
                                clusters_per_class=4, train_queries=300, head_epochs=2)
        out = pc.label_aware_diagnostic(cfg, generate(cfg.task(1.5), 0), 0)
    finally:
        torch.set_num_threads(before)
    assert set(out) == {"retrieved_vs_informative", "uniform_accuracy", "as_retrieved", "informative"}
    for v in ("as_retrieved", "informative"):
        assert 0 <= out[v]["accuracy"] <= 1 and -1 <= out[v]["weights_vs_informative"] <= 1
        assert out[v]["epochs_run"] <= 2
    # with the informative distance as its feature, the head's weights follow it (its score is that distance)
    assert out["informative"]["weights_vs_informative"] > out["as_retrieved"]["weights_vs_informative"]


def _record(gains: dict | None = None) -> dict:
    cfg = EXPERIMENT.Config(heads="attnknn,label_aware", seeds="0,1,2", nuisance_scales="0,1.5")
    levels = {}
    for scale, ref in ((0.0, 0.9), (1.5, 0.6)):
        per_seed = {str(s): _fake_seed(s, ref + 0.01 * s, gains or GAINS) for s in range(3)}
        levels[f"{scale:g}"] = {"nuisance_scale": scale, "per_seed": per_seed,
                                "summary": pc.summarise_level(cfg, per_seed)}
    return {"experiment": "positive_control", "dataset": "clusters", "config": {}, "results": {
        "k": 16, "seeds": [0, 1, 2], "heads": {"attnknn": "Attn-KNN", "label_aware": "label-aware scores"},
        "moved_threshold": 14.4, "levels": levels, "task": {"num_classes": 10, "clusters_per_class": 20,
                                                          "informative_dims": 8, "nuisance_dims": 24}}}


def test_views_show_the_learned_metric_the_shares_and_the_diagnostic_read_off_the_record():
    from attnknn_lib.experiments.positive_control import views

    record = _record()
    verdicts = views.verdict_frame(record)
    assert "s = 1.5, attention head vs NCA" in verdicts.index and "s = 1.5, NCA (learned metric)" in verdicts.index
    assert verdicts.loc["s = 1.5, attention head vs NCA", "verdict"] == "worse"  # 0.08 below NCA's 0.2 in every seed
    assert verdicts.loc["s = 1.5, NCA (learned metric)", "verdict"] == "better"
    assert len(verdicts) == 2 * (2 + 4 + 2)  # per scale: 2 heads, learner, NCA, probe, control; 2 heads vs NCA
    shares = views.shares_frame(record)
    assert shares.loc["attention head", "s = 1.5"] == "32 / 50"  # 0.08 / 0.25, 0.08 / 0.16
    assert shares.loc["NCA", "s = 1.5"] == "80 / 125"
    diag = views.diagnostic_frame(record)
    assert diag.loc["1.5", "label-aware, informative distances"] == "76.00"  # mean ref 0.61 + 0.15
    assert "NCA: re-retrieval in a learned linear map" in views.headroom_frame(record).columns
    m = views.pc_macros(record)
    assert m["PositiveControlMaxAttnknnVsNcaAccVerdict"] == "worse" and m["PositiveControlMaxNcaShareRetrieval"] == "80"
    assert m["PositiveControlMaxLabelAwareInformativeAcc"] == "76.00" and m["PositiveControlNcaFirstBetter"] == "from $s = 0$ on"
    assert m["PositiveControlSecondNcaAcc"] == "--" and m["PositiveControlAttnknnThanNcaFirstBetter"] == "at no scale"
    assert m["PositiveControlAttnknnFirstBetter"] == "from $s = 0$ on"
    assert (m["PositiveControlScales"], m["PositiveControlFirstScales"]) == ("0, 1.5", "0, 1.5")
    assert (m["PositiveControlAddedScales"], m["PositiveControlAddedKept"]) == ("1.1, 1.25 and 1.4", "none")
    assert "PositiveControlNcaWins" not in m  # where each learner starts to win, no count of wins over the grid
    text = views.findings(record)
    assert "NCA, a linear metric learned with the same vote, is better than the tuned vote from s = 0 on" in text
    assert "given the informative distances of the same neighbours, 76.00 %" in text




def test_with_tuned_vote_settings_the_counted_attention_head_is_the_tuned_one_and_k16_a_diagnostic():
    from attnknn_lib.experiments.positive_control import views

    record = _record({**GAINS, "attnknn_tuned": 0.3, "attnknn_tuned_nll": 0.3})  # tuned: above NCA's 0.2
    m = views.pc_macros(record)
    assert m["PositiveControlAttnknnThanNcaFirstBetter"] == "from $s = 0$ on" and m["PositiveControlMaxAttnknnTunedK"] == "32\u201364"
    assert m["PositiveControlMaxAttnknnVsNcaAccVerdict"] == "better" and m["PositiveControlMaxAttnknnTunedAtCapWords"] == "one of three"
    assert m["PositiveControlMaxAttnknnAtKAccVerdict"] == "better" and m["PositiveControlMaxAttnknnAcc"] == "91.00"
    verdicts = views.verdict_frame(record)
    assert "s = 1.5, attention head, tuned (k 32\u201364)" in verdicts.index
    assert verdicts.loc["s = 1.5, attention head at k = 16 vs NCA", "verdict"] == "worse"
    assert views.shares_frame(record).loc["attention head, tuned", "s = 1.5"].startswith("120 / ")  # 0.3 / 0.25
    assert "its vote settings tuned as the tuned vote's are" in views.findings(record)
    assert "at k = 16, as trained" in views.findings(record)


@pytest.mark.parametrize("verdicts, words", [
    (["worse", "better", "better"], "from $s = 1$ on"),
    (["better", "worse", "better"], "first at $s = 0$, though not at every larger scale"),
    (["worse", "worse", "better"], "only at the largest scale, $s = 2$"),
    (["worse", "equivalent", "inconclusive"], "at no scale")])
def test_where_a_learner_starts_to_win_is_the_smallest_better_scale_and_whether_every_larger_one_is(verdicts, words):
    from attnknn_lib.experiments.common.fixed_embedding_views import first_better

    units = [(str(i), {"summary": {"diff": {"nca": {"reference": {"accuracy": {"verdict": v}}}}}})
             for i, v in enumerate(verdicts)]
    assert first_better(units, "nca", counted=False, latex=True) == words
    assert first_better(units, "nca", counted=False) == words.replace("$", "")  # plain in Markdown


def _declared_record(scales=(0.0, 0.5, 1.0, 1.25, 1.5, 2.0)) -> dict:
    """A record as the one budget measures it: every scale holds the declaration's 15 comparisons per
    endpoint, each a seed-level result over 5 seeds. NCA gains 0.6 pp (a t of about 4.6 per
    comparison: "better" on its own, not after Holm over 90); the rest gains nothing."""
    from attnknn_lib.evaluation.verdicts import seed_level
    from attnknn_lib.experiments.common.declared_family import declared_comparisons

    levels = {}
    for scale in scales:
        diff: dict = {}
        for metric in ("accuracy", "nll", "brier"):
            for m, r in declared_comparisons(metric):
                gain = 0.006 if m == "nca" else 0.0
                per_seed = [gain + 0.003 * (i - 2) / 2 for i in range(5)]
                diff.setdefault(m, {}).setdefault(r, {})[metric] = seed_level(per_seed, 0.0, metric)
        levels[f"{scale:g}"] = {"nuisance_scale": scale, "summary": {"diff": diff}}
    return {"config": {}, "results": {"levels": levels}}


def test_a_record_under_the_one_budget_is_read_in_the_declared_holm_family_of_every_scale():
    """The declaration: one Holm family per endpoint, 15 comparisons at each of 6 scales (m = 90), in its
    words; a record measured before (no nonlinear metric, no heads at k_w) is read unadjusted, as declared."""
    from attnknn_lib.experiments.positive_control import views

    record = _declared_record()
    nca = record["results"]["levels"]["2"]["summary"]["diff"]["nca"]["reference"]["accuracy"]
    assert nca["verdict"] == "better"  # on its own interval
    read = views.declared(record)
    assert read["results"]["multiplicity"]["family_sizes"] == {"accuracy": 90, "nll": 90, "brier": 90}
    adjusted = read["results"]["levels"]["2"]["summary"]["diff"]["nca"]["reference"]["accuracy"]
    assert adjusted["family_size"] == 90 and adjusted["verdict"] == "inconclusive"
    assert adjusted["verdict_unadjusted"] == "better" and (adjusted["low"], adjusted["high"]) == (nca["low"], nca["high"])
    assert views.declared(read)["results"]["levels"]["2"]["summary"]["diff"] == read["results"]["levels"]["2"]["summary"]["diff"]
    assert record["results"]["levels"]["2"]["summary"]["diff"]["nca"]["reference"]["accuracy"] is nca  # not mutated
    assert views.control_tables.multiplicity_words(record)[0] == "Holm-adjusted over the 90 declared comparisons per endpoint"
    old = _record()  # measured before the declaration: no nonlinear metric
    assert views.declared(old) is old and views.control_tables.multiplicity_words(old)[0] == "unadjusted"


def test_the_views_read_a_declared_record_with_its_words_and_mark_the_diagnostics_outside_the_family():
    """The committed record with every declared comparison added (copies of NCA's, one forced inside its
    margin so that Holm's words say "better, within the margin"): macros, tables and findings read it,
    every counted row is in the family of 15 per scale, and a row outside it is marked unadjusted."""
    import copy
    import json
    from pathlib import Path

    from attnknn_lib.experiments.common.declared_family import declared_comparisons
    from attnknn_lib.experiments.positive_control import views

    record = json.loads((Path(__file__).resolve().parents[1] / "results" / "positive_control_clusters.json").read_text())
    for lv in record["results"]["levels"].values():
        diff = lv["summary"]["diff"]
        for metric in ("accuracy", "nll", "brier"):
            s = "" if metric == "accuracy" else "_nll"
            for m, r in declared_comparisons(metric):
                diff.setdefault(m, {}).setdefault(r, {}).setdefault(metric, copy.deepcopy(diff[f"nca{s}"][f"reference{s}"][metric]))
        for m in ("attnknn", "attnknn_tuned", "attnknn_wide_tuned", "attnknn_label_wide", "attnknn_self_wide",
                  "label_aware", "readout"):
            for r in ("nca", "mlp_metric"):  # as the one budget measures them: every attention method vs each metric
                for metric, s in (("accuracy", ""), ("nll", "_nll"), ("brier", "_nll")):
                    diff.setdefault(m, {}).setdefault(f"{r}{s}", {}).setdefault(
                        metric, copy.deepcopy(diff[f"nca{s}"][f"reference{s}"][metric]))
        for m in ("attnknn_wide_tuned", "attnknn_label_wide", "attnknn_self_wide", "mlp_metric"):
            lv["summary"]["effective_k"].setdefault(m, 16.0)
            lv["summary"]["means"].setdefault(m, lv["summary"]["means"]["nca"])
    within = record["results"]["levels"]["2"]["summary"]["diff"]["mlp_metric"]["reference"]["accuracy"]
    within.update(value=0.0010, low=0.00099, high=0.00101, per_seed=[0.00099, 0.001, 0.001, 0.001, 0.00101])
    read = views.declared(record)
    assert read["results"]["multiplicity"]["family_sizes"]["accuracy"] == 15 * len(record["results"]["levels"])
    assert read["results"]["levels"]["2"]["summary"]["diff"]["mlp_metric"]["reference"]["accuracy"]["verdict"] \
        == "better, within the margin"
    table = views.verdict_frame(record, latex=True)
    assert "s = 2, attention head, k = 16$^\\dagger$" in table.index  # the head as trained: a diagnostic
    assert "s = 2, attention head, tuned" in table.index
    # the one budget's own numbers: its settings, the k_w each seed trained at, the learners it added
    record["config"].update(nonlinear_metric=True, head_lrs=[0.003, 0.01, 0.03], head_epochs=100, head_patience=5,
                            wide_k_min=32, wide_k_max=256, mlp_hidden=256)
    for lv in record["results"]["levels"].values():
        for i, p in enumerate(lv["per_seed"].values()):
            p["methods"]["attnknn_wide"] = {"info": {"k_trained": 64 * (1 + i % 2)}}
        lv["summary"]["effective_k"]["attnknn_wide"] = 40.0
    m = views.pc_macros(record)
    assert m["PositiveControlMultiplicity"].startswith("Holm-adjusted over the 90 declared comparisons")
    assert "unadjusted" in views.findings(record)
    assert (m["PositiveControlHeadLrs"], m["PositiveControlWideKMax"]) == ("0.003, 0.01 and 0.03", "256")
    assert m["PositiveControlMaxWideK"] == "64\u2013128" and m["PositiveControlMaxAttnknnWideEffK"] == "40.0"
    # the share of the retrieval room the head captures as trained and retrained at k_w ('--' where not measured)
    shares = views.control_tables._levels(record)[-1][1]["summary"]["shares"]["retrieval"]["methods"]
    assert m["PositiveControlMaxAttnknnAtKShareRetrieval"] == f"{100 * shares['attnknn']['of_means']:.0f}"
    assert m["PositiveControlMaxAttnknnWideShareRetrieval"] == (
        f"{100 * shares['attnknn_wide_tuned']['of_means']:.0f}" if "attnknn_wide_tuned" in shares else "--")
    assert m["PositiveControlMaxMlpMetricAccVerdict"] == "better, within the margin"
    largest = views.declared(record)["results"]["levels"]["2"]["summary"]["diff"]  # the Holm-adjusted verdicts
    assert m["PositiveControlMaxAttnknnWideVsMlpMetricAccVerdict"] == largest["attnknn_wide_tuned"]["mlp_metric"]["accuracy"]["verdict"]
    assert "The $k_w$ of the heads at $k_w$, per seed: s = 0: 64\u2013128;" in views.control_tables._wide_k_note(record)
    # a record measured before the one budget: none of the learners it added, none of its macros
    before = json.loads((Path(__file__).resolve().parents[1] / "results" / "positive_control_clusters.json").read_text())
    for lv in before["results"]["levels"].values():
        for learner in OPTIONAL_LEARNERS:
            lv["summary"]["diff"].pop(learner, None)
    old = views.pc_macros(before)
    assert not any(k in old for k in ("PositiveControlHeadLrs", "PositiveControlMlpMetricFirstBetter", "PositiveControlMaxWideK"))
    assert m["PositiveControlMaxAttnknnTunedAtCapCount"].isdigit()  # the paper's \\ifcase reads it
    for tag in ("Max", "Min"):  # the paper's \\ifcase on whether the head's weights moved from uniform
        assert m[f"PositiveControl{tag}AttnknnMovedCount"] in ("0", "1")


def test_a_verdict_table_taller_than_a_page_is_split_into_whole_scales_each_continuing_the_first():
    """26 rows at each of 6 scales (the one budget's learners, each attention method against both
    metrics) do not fit one page: whole scales per table, each under a heading row, at most PAGE_ROWS
    rows each, one label; the rows lose their scale prefix (the page's width)."""
    import pandas as pd

    from attnknn_lib.experiments.positive_control.views.control_tables import _scale_of
    from attnknn_lib.report.tables import PAGE_ROWS, paged_booktabs

    index = [f"s = {s:g}, learner {i}" for s in (0, 0.5, 1, 1.25, 1.5, 2) for i in range(26)]
    frame = pd.DataFrame({"accuracy": [f"+0.{i}" for i in range(len(index))]}, index=pd.Index(index, name="scale, method"))
    latex = paged_booktabs(frame, "The caption.", "tab:v", _scale_of, escape_index=False)
    tables = latex.split("\\end{table}")[:-1]
    assert len(tables) == 3 and all(t.count("\\\\") <= PAGE_ROWS + 1 for t in tables)  # rows + the header
    assert "\\label{tab:v}" in tables[0] and "The caption." in tables[0] and "\\label{tab:v-3}" in tables[2]
    assert "continued: s = 1.5; s = 2." in tables[2] and "\\textit{s = 1.25}" in tables[1]
    assert "learner 25 & +0.103" in tables[1] and "s = 1.25, learner" not in latex  # cells stay with their rows
    assert paged_booktabs(frame.iloc[:68], "c", "tab:v", _scale_of, escape_index=False).count("\\begin{table}") == 1


def test_findings_name_where_each_learner_of_the_one_budget_starts_to_win_in_one_short_bullet():
    from attnknn_lib.experiments.positive_control.views import control_text

    record = _record({**GAINS, "mlp_metric": 0.3, "attnknn_wide_tuned": 0.0, "attnknn_label_wide": -0.01,
                      "attnknn_self_wide": 0.0})
    bullet = [line for line in control_text.findings(record).splitlines() if "one budget added" in line]
    assert len(bullet) == 1 and len(bullet[0].split()) <= 70
    assert "the nonlinear metric (NCA's map plus an MLP), from s = 0 on" in bullet[0]
    assert "the head at k_w with self-attention among the neighbours, at no scale" in bullet[0]
    assert "one budget added" not in control_text.findings(_record())  # a record measured before it

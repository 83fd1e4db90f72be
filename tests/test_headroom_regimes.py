"""The real regimes: disjoint test blocks per seed, the candidate embeddings, the room and the
chosen head, and the config's refusals (the whole experiment runs in the smoke workflow test)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.data.registry import Dataset, DataSplit
from attnknn_lib.experiments.headroom_regimes import EXPERIMENT, views
from attnknn_lib.experiments.headroom_regimes import measure as hr


def _images(n: int, seed: int) -> DataSplit:
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 10
    x = rng.integers(0, 60, size=(n, 28, 28, 1), dtype=np.uint8)
    x[np.arange(n), y * 2, :, 0] = 250  # a class-dependent bright row: principal components see it
    return DataSplit(x, y.astype(np.int64), np.arange(n, dtype=np.int64))


def _dataset() -> Dataset:
    return Dataset("fashion_mnist", "image", 10, (1, 28, 28), tuple(map(str, range(10))), _images(400, 0),
                   _images(100, 1), _images(10000, 2), (0.1,), (0.3,))


def test_each_seed_reads_its_own_disjoint_block_of_the_test_set():
    ds = _dataset()
    blocks = [hr.test_block(ds, s, 2000) for s in range(5)]
    ids = [set(b.ids.tolist()) for b in blocks]
    assert all(len(i) == 2000 for i in ids) and len(set().union(*ids)) == 10000
    np.testing.assert_array_equal(hr.test_block(ds, 3, 2000).ids, blocks[3].ids)


def test_pca_rows_are_unit_vectors_of_the_memorys_components_and_keep_the_labels():
    ds = _dataset()
    rows = hr.pca_rows(ds, {"memory": ds.train, "val": ds.val, "test": ds.test}, 8)
    assert rows["memory"].x.shape == (400, 8) and rows["test"].x.shape == (10000, 8)
    np.testing.assert_allclose(np.linalg.norm(rows["val"].x, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(rows["val"].y, ds.val.y)
    centred = rows["memory"].x - rows["memory"].x.mean(0)
    nn = ((rows["test"].x[:200] @ rows["memory"].x.T).argmax(1))  # the class row survives the projection
    assert (ds.train.y[nn] == ds.test.y[:200]).mean() > 0.9 and np.isfinite(centred).all()


def test_the_labelled_share_is_stratified_with_every_class():
    y = np.repeat(np.arange(10), [500] * 9 + [50])
    idx = hr._stratified(y, 100, np.random.default_rng(0))
    counts = np.bincount(y[idx], minlength=10)
    assert counts.min() >= 1 and abs(counts[:9] - 10).max() <= 1 and len(set(idx)) == len(idx)


def test_room_is_the_larger_ceiling_above_the_rule_and_the_chosen_head_is_picked_on_validation():
    summary = {"means": {"reference": {"accuracy": 0.80}, "geometry": {"accuracy": 0.79},
                         "learner": {"accuracy": 0.815}}}
    assert hr.room(summary) == pytest.approx({"geometry": -0.01, "learner": 0.015, "largest": 0.015})
    cfg = EXPERIMENT.Config(heads="attnknn,label_aware,readout")
    per_seed = {s: {"methods": {"attnknn": {"val_accuracy": 0.99}, "label_aware": {"val_accuracy": v},
                                "readout": {"val_accuracy": 0.85}}} for s, v in (("0", 0.9), ("1", 0.7))}
    assert hr.chosen_head(cfg, per_seed) == "readout"  # mean 0.85 > 0.80; Attn-KNN is never the chosen head
    assert hr.chosen_head(EXPERIMENT.Config(heads="attnknn"), per_seed) is None


def test_config_refuses_overlapping_test_blocks_unknown_candidates_and_unsplittable_dimensions():
    with pytest.raises(ConfigError, match="test_rows"):
        EXPERIMENT.Config(seeds="0,5", test_rows=2000)
    with pytest.raises(ConfigError, match="candidates"):
        EXPERIMENT.Config(candidates="pixels_pca,imagenet")
    with pytest.raises(ConfigError, match="multiple of num_heads"):
        EXPERIMENT.Config(pca_dims=30)
    with pytest.raises(ConfigError, match="label_share"):
        EXPERIMENT.Config(label_share=0)


def _view_record() -> dict:
    """A record of two candidates as the measurement shapes it, with a vote head and the readout."""
    def diff(v):
        return {"value": v, "low": v - 0.01, "high": v + 0.01, "verdict": "better" if v > 0.01 else "inconclusive",
                "n_seeds": 5, "margin": 0.0025}

    def cand(label, room, att):
        methods = {m: {"accuracy": 0.8, "nll": 0.5, "brier": 0.3, "ece": 0.02}
                   for m in ("reference", "geometry", "learner", "nca", "linear_probe", "query_only")}
        d = {m: {"reference": {"accuracy": diff(att if m in ("attnknn", "readout") else 0.0), "nll": diff(0.0),
                               "brier": diff(0.0)},
                 "reference_nll": {"nll": diff(0.0), "brier": diff(0.0)}}
             for m in ("attnknn", "readout", "learner", "nca", "nca_nll", "linear_probe", "query_only")}
        for head in ("attnknn", "readout"):  # the heads against the learned metric too
            d[head].update({"nca": {"accuracy": diff(0.0), "nll": diff(0.0), "brier": diff(0.0)},
                            "nca_nll": {"nll": diff(0.0), "brier": diff(0.0)}})
        emb = {"num_classes": 10, "n_memory": 100, "dims": 64}
        return {"label": label, "room": {"largest": room - 0.005}, "gate": {"largest": room},
                "has_room": room >= 0.01, "chosen_head": "readout",
                "per_seed": {"0": {"embedding": emb}},
                "summary": {"means": methods, "diff": d, "effective_k": {"attnknn": 6.0, "readout": 15.0},
                            "moved": {"attnknn": True, "readout": False}, "reference_k": [8, 12],
                            "headroom": {"at_k": {"recall": 0.98, "fixable": 0.1}}}}
    record = {"experiment": "headroom_regimes", "dataset": "fashion_mnist",
              "config": {"pca_dims": 64, "label_share": 0.01, "source_classes": 5}, "results": {
        "k": 16, "seeds": [0, 1], "heads": {"attnknn": "Attn-KNN", "readout": "TabR-style readout"},
        "moved_threshold": 14.4, "room_margin": 0.01, "test_rows": 2000, "selected": ["pixels_pca"],
        "candidates": {"pixels_pca": cand("PCA of pixels", 0.02, 0.03), "few_labels": cand("CNN", 0.0, 0.0)}}}
    return record


def test_views_read_a_record_without_measuring():
    record = _view_record()
    frame = views.headroom_frame(record)
    assert list(frame["passes the gate"]) == ["yes", "no"] and list(frame["gate room, val. (pp)"]) == ["+2.00", "+0.00"]
    assert "1 of 2 candidate embeddings" in views.findings(record) and "beats the tuned vote on 1" in views.findings(
        record)
    m = views.regime_macros(record)
    assert m["HeadroomRegimesPcaAttnknnAccVerdict"] == "better" and m["HeadroomRegimesOtherRoom"] == "--"
    assert m["HeadroomRegimesPcaRoom"] == "+2.00" and m["HeadroomRegimesPcaTestRoom"] == "+1.50"
    assert m["HeadroomRegimesWithRoom"] == "1" and m["HeadroomRegimesPcaChosen"] == "readout head"
    assert m["HeadroomRegimesLabelShare"] == "1" and m["HeadroomRegimesPcaDims"] == "64"


def _with_tuned(record: dict, acc: float) -> dict:
    """``record`` with the attention head's tuned vote settings measured: accuracy ``acc`` over the rule."""
    for c in record["results"]["candidates"].values():
        d = c["summary"]["diff"]
        win = {"value": acc, "low": acc - 0.01, "high": acc + 0.01, "verdict": "better" if acc > 0.01 else "worse",
               "verdict_unadjusted": "better" if acc > 0 else "worse", "n_seeds": 5, "margin": 0.0025}
        flat = {"value": 0.0, "low": -0.01, "high": 0.01, "verdict": "inconclusive", "n_seeds": 5, "margin": 0.0025}
        d["attnknn_tuned"] = {"reference": {"accuracy": win, "nll": flat, "brier": flat},
                              "reference_nll": {"nll": flat, "brier": flat},
                              "nca": {"accuracy": flat, "nll": flat, "brier": flat}, "nca_nll": {"nll": flat, "brier": flat}}
        d["attnknn_tuned_nll"] = {"reference": {"accuracy": flat, "nll": flat, "brier": flat},
                                  "reference_nll": {"nll": flat, "brier": flat},
                                  "nca": {"accuracy": flat, "nll": flat, "brier": flat},
                                  "nca_nll": {"nll": flat, "brier": flat}}
        c["summary"]["means"]["attnknn_tuned"] = {"accuracy": 0.8 + acc, "nll": 0.5, "brier": 0.3, "ece": 0.02}
        for seed in c["per_seed"].values():
            seed["methods"] = {"attnknn_tuned": {"info": {"choice": {"k": 64}}},
                               "attnknn_tuned_nll": {"info": {"choice": {"k": 1024}}}}
    return record


def test_with_tuned_vote_settings_the_attention_head_counts_tuned_and_its_trained_k_stays_a_diagnostic():
    record = _with_tuned(_view_record(), -0.05)  # the head as trained wins on PCA (+3 pp); tuned, it loses
    m = views.regime_macros(record)
    assert m["HeadroomRegimesPcaAttnknnAccVerdict"] == "worse" and m["HeadroomRegimesPcaAttnknnAtKAccVerdict"] == "better"
    assert m["HeadroomRegimesAttnknnWins"] == "0" and m["HeadroomRegimesPcaAttnknnTunedK"] == "64"
    frame = views.verdict_frame(record)
    tuned, at_k = "PCA of pixels: attention head, tuned (k 64, for NLL k 1,024)", "PCA of pixels: attention head, k = 16 (unadj.)"
    assert list(frame.index[:2]) == [tuned, at_k]
    assert frame.loc[tuned, "verdict"] == "worse" and frame.loc[at_k, "verdict"] == "better"
    assert "PCA of pixels: attention head, tuned" in views.verdict_frame(record, latex=True).index  # LaTeX: its k in the caption
    assert "vote settings tuned" in views.findings(record) and "at k = 16, as trained" in views.findings(record)
    note = views.regime_tables._multiplicity_note({**record["results"], "multiplicity": {"family_sizes": {"accuracy": 4}},
                                     "confirmatory": []})
    assert "at the $k$ it was trained at it is a diagnostic" in note


def _clusters(n: int, seed: int, nuisance: float) -> tuple[np.ndarray, np.ndarray]:
    """Two informative dimensions carry the class; ``nuisance`` scales six noise dimensions."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, n)
    centres = np.array([[1, 0], [0, 1], [-1, 0], [0, -1]], dtype=np.float64)
    x = np.hstack([centres[y] + 0.3 * rng.standard_normal((n, 2)), nuisance * rng.standard_normal((n, 6))])
    return x.astype(np.float32), y.astype(np.int64)


def test_the_gate_cross_fits_every_method_on_validation_halves():
    from attnknn_lib.experiments.common import gate

    a, b = gate.halves(101, 3)
    assert len(a) + len(b) == 101 and not set(a) & set(b)
    mx, my = _clusters(600, 0, 0.1)
    vx, vy = _clusters(200, 1, 0.1)
    out = gate.gate(mx, my, vx, vy, 4, seed=0, k=8, k_search=32, loo_k=8)
    assert set(out["val_accuracy"]) == {"reference", "geometry", "learner"}
    assert out["val_accuracy"]["reference"] > 0.9  # clean clusters: the rule alone gets them right
    assert out["largest"] == max(out["room"].values())


def test_a_learned_metric_that_drops_the_nuisance_shows_room_in_the_gate():
    from attnknn_lib.experiments.common import gate

    mx, my = _clusters(1500, 0, 2.0)
    vx, vy = _clusters(400, 1, 2.0)
    out = gate.gate(mx, my, vx, vy, 4, seed=0, k=8, k_search=64, loo_k=8, metrics={"nca": lambda x: x[:, :2]})
    assert out["room"]["nca"] > 0.1  # re-retrieval in the informative dimensions beats the rule by far


def test_verdict_table_adds_the_learned_metric_the_probe_the_control_and_each_head_against_nca():
    def diff(v):
        return {"value": v, "low": v - 0.01, "high": v + 0.01, "verdict": "better" if v > 0.01 else "worse",
                "n_seeds": 5, "margin": 0.0025}

    endpoints = {"reference": ("accuracy", "nll", "brier"), "reference_nll": ("nll", "brier"),
                 "nca": ("accuracy", "nll", "brier"), "nca_nll": ("nll", "brier")}
    heads = ("attnknn", "readout")
    d = {m: {r: {e: diff(0.02 if r.startswith("ref") else -0.05) for e in es} for r, es in endpoints.items()
             if r.startswith("ref") or m in heads}
         for m in (*heads, "learner", "nca", "nca_nll", "linear_probe", "query_only")}
    means = {m: {"accuracy": a, "nll": 0.5, "brier": 0.3, "ece": 0.02}
             for m, a in (("reference", 0.8), ("geometry", 0.79), ("learner", 0.8), ("nca", 0.85),
                          ("linear_probe", 0.7), ("query_only", 0.75))}
    cand = {"label": "PCA of pixels", "room": {"largest": 0.02}, "gate": {"largest": 0.02}, "has_room": True, "chosen_head": "readout",
            "per_seed": {"0": {"embedding": {"num_classes": 10, "n_memory": 100, "dims": 64}}},
            "summary": {"means": means, "diff": d, "effective_k": {"attnknn": 6.0, "readout": 15.0},
                        "moved": {"attnknn": True, "readout": False}, "reference_k": [8, 12],
                        "headroom": {"at_k": {"recall": 0.98, "fixable": 0.1}}}}
    record = {"experiment": "headroom_regimes", "dataset": "fashion_mnist",
              "config": {"pca_dims": 64, "label_share": 0.01, "source_classes": 5}, "results": {
        "k": 16, "seeds": [0, 1], "heads": {"attnknn": "Attn-KNN", "readout": "TabR-style readout"},
        "moved_threshold": 14.4, "room_margin": 0.01, "test_rows": 2000, "selected": ["pixels_pca"],
        "candidates": {"pixels_pca": cand}}}
    table = views.verdict_frame(record)
    assert list(table.index) == ["PCA of pixels: attention head", "PCA of pixels: readout head*", "PCA of pixels: boosted-trees learner", "PCA of pixels: NCA",
                                 "PCA of pixels: linear probe", "PCA of pixels: query-only control", "PCA of pixels: attention head vs NCA", "PCA of pixels: readout head* vs NCA"]
    assert table.loc["PCA of pixels: attention head vs NCA", "verdict"] == "worse" and table.loc["PCA of pixels: NCA", "verdict"] == "better"
    assert views.headroom_frame(record).loc["PCA of pixels", "NCA"] == "85.00"
    m = views.regime_macros(record)
    assert m["HeadroomRegimesPcaAttnknnVsNcaAccVerdict"] == "worse" and m["HeadroomRegimesPcaNcaAcc"] == "85.00"
    assert m["HeadroomRegimesPcaChosenVsNcaAccDiff"] == "-5.00" and m["HeadroomRegimesFewNcaAcc"] == "--"
    assert "the attention head against NCA -5.00 pp" in views.findings(record)
    # the counts the abstract reads, every one under the one family: NCA wins, the head loses to NCA
    assert m["HeadroomRegimesNcaWinsWords"] == "all one" and m["HeadroomRegimesAttnknnBeatsNcaWords"] == "none of the one"
    assert m["HeadroomRegimesAttnknnWorseThanNcaWords"] == "all one"
    assert m["HeadroomRegimesAttnknnWins"] == "1" and m["HeadroomRegimesHeadsBelowNca"] == "1"
    assert "AttnknnWinsUnadjusted" not in " ".join(m)  # no unadjusted count beside the adjusted ones
    assert "beats it on 1 and the attention head beats NCA on 0" in views.findings(record)
    assert views.one_family(views.one_family(record)) == views.one_family(record)  # idempotent


def test_the_gates_nca_learns_on_the_memory_alone_and_finds_the_room():
    from attnknn_lib.experiments.common import gate

    mx, my = _clusters(1500, 0, 2.0)
    vx, vy = _clusters(400, 1, 2.0)
    nca = gate.nca_map(mx, my, 4, seed=0, k=8, lrs=(0.03,), epochs=15, patience=3, batch_size=256, candidates=512)
    out = gate.gate(mx, my, vx, vy, 4, seed=0, k=8, k_search=64, loo_k=8, metrics={"nca": nca})
    assert out["room"]["nca"] > 0.05 and out["largest"] == out["room"]["nca"]


def test_holm_adjusts_each_endpoint_over_every_head_candidate_and_comparison():
    from attnknn_lib.evaluation.verdicts import seed_level

    cfg = EXPERIMENT.Config(heads="attnknn,readout")

    def res(shift):
        return seed_level([shift + 0.001 * i for i in range(5)], 0.0, "accuracy", margin=0.0025)

    def cand(shift):
        diff = {h: {"reference": {"accuracy": res(shift)}, "nca": {"accuracy": res(shift)}}
                for h in (*cfg.heads, "attnknn_tuned")}
        return {"summary": {"diff": diff}}
    # a borderline win on one of eight tests: better alone, not once the family is counted
    cands = {"a": cand(0.0), "b": cand(0.0)}
    lone = seed_level([0.004, 0.006, 0.009, 0.011, 0.0], 0.0, "accuracy", margin=0.0025)
    cands["a"]["summary"]["diff"]["attnknn_tuned"]["reference"]["accuracy"] = lone
    cands["a"]["summary"]["diff"]["attnknn"]["reference"]["accuracy"] = dict(lone)
    assert lone["verdict"] == "better"
    assert hr.family_heads(cfg, "accuracy") == ("attnknn_tuned", "readout")
    assert hr.family_heads(cfg, "nll") == ("attnknn_tuned_nll", "readout")
    sizes = hr.holm_correct(cfg, cands)
    adjusted = cands["a"]["summary"]["diff"]["attnknn_tuned"]["reference"]["accuracy"]
    assert sizes["accuracy"] == 8 and sizes["nll"] == 0
    assert adjusted["verdict_unadjusted"] == "better" and adjusted["verdict"] == "inconclusive"
    # Attn-KNN at its trained k is a diagnostic: outside the family, its verdict as measured
    assert cands["a"]["summary"]["diff"]["attnknn"]["reference"]["accuracy"]["verdict"] == "better"


def test_the_multiplicity_note_escapes_labels_names_who_passed_and_calls_every_verdict_exploratory():
    res = {"multiplicity": {"family_sizes": {"accuracy": 12, "nll": 12}}, "confirmatory": ["few_labels"],
           "candidates": {"few_labels": {"label": "CNN on 1 % of labels", "summary": {"diff": {}}},
                          "pixels_pca": {"label": "PCA", "summary": {"diff": {}}}}}
    note = views.regime_tables._multiplicity_note(res)
    assert "CNN on 1 \\% of labels passed the gate; every verdict is exploratory" in note and "(12 comparisons for accuracy" in note
    assert "every candidate passed the gate; every verdict is exploratory" in views.regime_tables._multiplicity_note(
        {**res, "confirmatory": ["few_labels", "pixels_pca"]})
    assert "no candidate passed the gate; every verdict is exploratory" in views.regime_tables._multiplicity_note(
        {**res, "confirmatory": []})
    assert "confirmatory" not in note
    assert "one family that holds every learner's comparison with the tuned vote" in note


def test_the_figure_plots_effective_k_for_the_voting_heads_only():
    record = _view_record()  # heads: Attn-KNN (a vote) and the TabR-style readout (not a vote)
    fig = views.figure(record)
    right = fig.axes[1]
    assert [line.get_label() for line in right.lines if not line.get_label().startswith("_")] == ["attention head"]
    left = {h.get_label() for h in fig.axes[0].containers}
    assert "readout head" in left  # its accuracy still shows on the left, under the paper's name


def test_the_readme_bullet_counts_candidates_with_room_and_wins_and_defines_room():
    import json
    from pathlib import Path

    from attnknn_lib.experiments.headroom_regimes.views import answer_lines
    from attnknn_lib.experiments.headroom_regimes.views.regime_family import _candidates, _wins

    record = json.loads((Path(__file__).resolve().parents[1] / "results" / "headroom_regimes_fashion_mnist.json").read_text())
    lines = answer_lines([record])
    bullet, terms = lines[0], lines[lines.index("**Terms.**") + 1:]
    cands = _candidates(record)
    assert f"{sum(c['has_room'] for _, c in cands)} of {len(cands)} show room" in bullet
    assert f"beats the tuned vote on {len(_wins(record, 'attnknn'))}" in bullet and len(bullet) <= 300
    assert any(t.startswith("- *Room*") for t in terms)
    assert answer_lines([]) == []


def test_the_views_adjust_every_learner_of_the_committed_record_in_one_family():
    """On the committed record: 10 comparisons per candidate (each counted head with the tuned vote and with
    NCA, the boosted trees, NCA, the probe and the control with the tuned vote) in one family per endpoint;
    the intervals stay as measured, a verdict may only lose a win to the adjustment."""
    import json

    record = json.loads((Path(__file__).parents[1] / "results" / "headroom_regimes_fashion_mnist.json").read_text())
    adjusted = views.one_family(record)
    n = len(record["results"]["candidates"])
    assert adjusted["results"]["multiplicity"]["family_sizes"] == {"accuracy": 10 * n, "nll": 10 * n, "brier": 10 * n}
    for key, cand in adjusted["results"]["candidates"].items():
        for name in ("nca", "linear_probe", "query_only", "learner"):
            d = cand["summary"]["diff"][name]["reference"]["accuracy"]
            before = record["results"]["candidates"][key]["summary"]["diff"][name]["reference"]["accuracy"]
            assert (d["low"], d["high"], d["family_size"]) == (before["low"], before["high"], 10 * n)
            assert d["verdict"] == d["verdict_unadjusted"] or d["verdict"] == "inconclusive"


def test_a_record_under_the_one_budget_puts_the_nonlinear_metric_and_the_heads_at_k_w_in_the_one_family():
    """The committed record with the one budget's learners added (copies of NCA's entries): each enters the
    family against the tuned vote, each head at k_w also against NCA, and the verdict table shows them."""
    import copy
    import json
    from pathlib import Path

    from attnknn_lib.experiments.headroom_regimes import views

    record = json.loads((Path(__file__).resolve().parents[1] / "results" / "headroom_regimes_fashion_mnist.json").read_text())
    before = views.one_family(record)["results"]["multiplicity"]["family_sizes"]["accuracy"]
    for c in record["results"]["candidates"].values():
        diff = c["summary"]["diff"]
        for m in ("mlp_metric", "attnknn_wide_tuned", "attnknn_label_wide", "attnknn_self_wide"):
            for name in (m, f"{m}_nll"):  # the vote-settings learners also tuned for NLL
                diff[name] = {r: copy.deepcopy(diff["nca"]["reference"]) for r in ("reference", "nca")}
                diff[name].update({r: copy.deepcopy(diff["nca_nll"]["reference_nll"]) for r in ("reference_nll", "nca_nll")})
            c["summary"]["effective_k"].setdefault(m, 16.0)
        for m in ("attnknn_tuned", "attnknn_wide_tuned"):  # the attention head against the nonlinear metric too
            diff[m]["mlp_metric"] = copy.deepcopy(diff["nca"]["reference"])
            diff[f"{m}_nll"]["mlp_metric_nll"] = copy.deepcopy(diff["nca_nll"]["reference_nll"])
        for i, p in enumerate(c["per_seed"].values()):
            p["methods"]["attnknn_wide"] = {"info": {"k_trained": 32 * (1 + i % 3)}}
    read = views.one_family(record)
    n = len(record["results"]["candidates"])
    assert read["results"]["multiplicity"]["family_sizes"]["accuracy"] == before + n * (1 + 3 * 2 + 2)
    m = views.regime_macros(record)
    assert m["HeadroomRegimesWideK"] == "32\u201396" and m["HeadroomRegimesMlpMetricWinsWords"] == m["HeadroomRegimesNcaWinsWords"]
    bullet = views.findings(record).splitlines()[-1]
    assert bullet.startswith("- The nonlinear metric and the heads at k_w") and len(bullet.split()) <= 70
    assert any(i.endswith("vs nonlinear metric") for i in views.verdict_frame(record).index)
    assert "HeadroomRegimesAttnknnWideBeatsMlpMetricWords" in m and "HeadroomRegimesMlpMetricWins" not in views.regime_macros(
        json.loads((Path(__file__).resolve().parents[1] / "results" / "headroom_regimes_fashion_mnist.json").read_text()))
    table = views.verdict_frame(record)
    assert any(i.endswith(": nonlinear metric") for i in table.index)
    assert any("at k_w" in i and i.endswith("vs NCA") for i in table.index)
    latex = views.verdict_frame(record, latex=True).index  # rows are not escaped: k_w in math mode
    assert any("at $k_w$" in i for i in latex) and not any("k_w" in i.replace("$k_w$", "") for i in latex)


def test_a_holm_adjusted_verdict_stands_beside_the_adjusted_p_values_it_was_read_from():
    """In the notebook's table each adjusted verdict shows its Holm p-values (difference, equivalence): an
    interval that excludes zero under "inconclusive" is explained by them; the LaTeX table has no room."""
    import json
    from pathlib import Path

    from attnknn_lib.experiments.common.fixed_embedding_views import HOLM_P
    from attnknn_lib.experiments.headroom_regimes import views

    record = json.loads((Path(__file__).resolve().parents[1] / "results" / "headroom_regimes_fashion_mnist.json").read_text())
    table = views.verdict_frame(record)
    for label, row in table.iterrows():
        if row[HOLM_P].startswith("--"):
            assert "unadj." in label or "$^\\dagger$" in label
            continue
        p_diff, p_equiv = map(float, row[HOLM_P].split(", "))
        assert (row["verdict"] in ("better", "worse")) == (p_diff <= 0.05 and p_equiv > 0.025), label
    assert HOLM_P not in views.verdict_frame(record, latex=True).columns


def test_the_weaker_embeddings_and_the_positive_control_share_one_budget():
    """The paper describes one budget for both (the positive control's numbers): their defaults must agree."""
    from attnknn_lib.experiments.positive_control import EXPERIMENT as PC

    budget = ("train_queries", "head_epochs", "head_patience", "head_lrs", "nca_lrs", "nca_patience", "nca_epochs",
              "nonlinear_metric", "mlp_hidden", "probe_as_heads", "wide_heads", "wide_k_min", "wide_k_max")
    ours, theirs = EXPERIMENT.Config(), PC.Config()
    assert {k: getattr(ours, k) for k in budget} == {k: getattr(theirs, k) for k in budget}

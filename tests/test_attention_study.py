"""The attention study's building blocks: headroom of a reweighting, flip detection, the variant
heads, the gallery's query rules, and the findings helpers every notebook's last cell uses."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from experiment_api import api

from attnknn_lib.experiments.attention_study.measure import gallery_queries
from attnknn_lib.knn.headroom import (
    captured,
    consistency_weights,
    flip_detection,
    headroom,
    label_recall,
    loo_agreement,
    rank_weights,
    vote_gap,
)
from attnknn_lib.models.neighbour_heads import (
    AdaptiveK,
    LabelAwareAttention,
    NeighbourBatch,
    NeighbourReadout,
    QueryOnly,
)
from attnknn_lib.report.findings import difference_text, seed_difference, seeds_text

LABELS = np.array([[0, 0, 1, 1, 1],   # true 0: present, loses 2-3
                   [2, 2, 2, 2, 2],   # true 2: all agree, right
                   [1, 1, 1, 1, 1],   # true 0: all agree, wrong (absent)
                   [0, 1, 0, 1, 2]])  # true 1: tied 2-2, neutral tie -> nearest (0): wrong
TARGET = np.array([0, 2, 0, 1])


def test_headroom_counts_recall_agreement_and_the_fixable_share_by_vote_gap():
    assert label_recall(LABELS, TARGET, 5).tolist() == [True, True, False, True]
    assert label_recall(LABELS, TARGET, 1).tolist() == [True, True, False, False]
    assert vote_gap(LABELS, TARGET, 3, 5).tolist() == [1, 0, 5, 0]
    h = headroom(LABELS, TARGET, 3, 5)
    assert h["recall"] == 0.75 and h["uniform_accuracy"] == 0.25
    assert h["all_agree_right"] == 0.25 and h["all_agree_wrong"] == 0.25
    assert h["fixable"] == 0.5 and h["fixable_within"]["1"] == 0.5  # one lost by a vote, one by a tie
    assert captured(0.5, 0.25, 0.75) == pytest.approx(0.5) and captured(0.3, 0.3, 0.3) is None


def test_rank_and_consistency_weights_are_convex_and_fall_back_to_uniform():
    w = rank_weights((2, 4), 1.0)
    assert np.allclose(w.sum(1), 1) and (np.diff(w[0]) < 0).all()
    c = consistency_weights(np.array([[1.0, 0.2, 0.9], [0.1, 0.1, 0.1]]), 0.5)
    assert np.allclose(c, [[0.5, 0, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    assert loo_agreement(np.array([[1, 1, 0], [2, 0, 0]]), np.array([1, 0])).tolist() == pytest.approx([2 / 3, 2 / 3])


def test_flip_detection_is_blind_for_uniform_and_perfect_when_flipped_weigh_less():
    flipped = np.array([[True, False, False], [False, True, False]])
    blind = flip_detection(np.full((2, 3), 1 / 3), flipped)
    assert blind["ratio"] == pytest.approx(1.0) and blind["auroc"] == pytest.approx(0.5)
    sharp = flip_detection(np.where(flipped, 0.1, 0.45), flipped)
    assert sharp["ratio"] < 1 and sharp["auroc"] == pytest.approx(1.0)
    assert flip_detection(np.ones((1, 2)), np.zeros((1, 2), bool)) == {"ratio": None, "auroc": None}


def _hood(b=3, k=4, d=8, c=3) -> NeighbourBatch:
    g = torch.Generator().manual_seed(0)
    return NeighbourBatch(torch.randn(b, d, generator=g), torch.randn(b, k, d, generator=g),
                         torch.rand(b, k, generator=g), torch.randint(0, c, (b, k), generator=g),
                         torch.rand(b, k, generator=g))


@pytest.mark.parametrize("head", [LabelAwareAttention(3, 8), NeighbourReadout(3, 8), QueryOnly(3, 8), AdaptiveK(3, 4)],
                         ids=["label_aware", "readout", "query_only", "adaptive_k"])
def test_variant_heads_return_probabilities_and_convex_weights_with_a_gradient(head):
    p, w = head(_hood())
    assert p.shape == (3, 3) and w.shape == (3, 4)
    assert torch.allclose(p.sum(1), torch.ones(3), atol=1e-5) and (w >= 0).all()
    assert torch.allclose(w.sum(1), torch.ones(3), atol=1e-5)
    torch.log(p.clamp_min(1e-9))[:, 0].sum().backward()
    assert any(q.grad is not None and q.grad.abs().sum() > 0 for q in head.parameters())


def test_gallery_queries_take_the_first_query_that_fits_each_rule():
    labels = np.array([[1, 1, 1, 1], [0, 0, 1, 2], [2, 2, 0, 0], [1, 1, 1, 0]])
    target = np.array([1, 0, 1, 1])
    flipped = np.zeros_like(labels, dtype=bool)
    q = gallery_queries(labels, target, flipped, 3, noisy=False)
    assert q == {"correct": 1, "wrong": 2, "near tie": 1}  # row 0 is correct but unanimous
    flipped[3, :3] = True
    assert gallery_queries(labels, target, flipped, 3, noisy=True) == {"flipped neighbours": 3}


def test_findings_state_a_seed_level_difference_with_its_interval_and_verdict():
    d = seed_difference([0.901, 0.905, 0.899], [0.900, 0.904, 0.900], "accuracy")
    assert d["n_seeds"] == 3 and d["value"] == pytest.approx(1 / 3 * 0.001)
    text = difference_text(d, "accuracy")
    assert text.startswith("+0.03 pp [") and text.endswith(f"**{d['verdict']}**")
    one = seed_difference([0.9], [0.8], "accuracy")
    assert difference_text(one, "accuracy") == "+10.00 pp, **inconclusive**"  # one seed: no interval


def test_the_parameters_table_shows_the_profile_and_only_changed_knobs():
    noise = api("noise")
    from attnknn_lib.experiments.common.views import parameters_frame, parameters_markdown

    default = parameters_frame(noise.Config())
    assert list(default.index) == ["profile", "(the others)"] and "at their defaults" in default.iloc[1, 0]
    changed = parameters_frame(noise.Config(lr=0.01, seeds="0,1"))
    assert changed.loc["lr", "value"] == "0.01" and changed.loc["seeds", "value"] == "0, 1"
    assert parameters_markdown(noise.Config()).startswith("| parameter | value | meaning |")


def _committed(name: str) -> dict:
    import json
    from pathlib import Path

    return json.loads((Path(__file__).resolve().parents[1] / "results" / f"{name}.json").read_text())


def test_the_committed_findings_bullets_read_every_bullet_against_the_strongest_rule_and_the_end_to_end_control():
    attention_study = api("attention_study")

    record = _committed("attention_study_fashion_mnist")
    lines = attention_study.finding_bullets([record])
    bullets = [b for b in lines[:lines.index("**Terms.**")] if b]
    glossary = [g for g in lines[lines.index("**Terms.**") + 1:] if g]
    assert len(bullets) <= 7 and len(glossary) == len(attention_study.GLOSSARY)
    text = "\n".join(lines)
    assert attention_study.plain_answer(record) in text
    v = record["results"]["summary"]["settings"]["clean"]["attnknn"]["verdicts_reference"]["accuracy"]
    from attnknn_lib.report.macros import signed  # a value that rounds to zero keeps its sign with more decimals

    assert f"clean memory {signed(100 * v['value'], 2)} pp" in text and f"**{v['verdict']}**" in text
    assert "second dataset, descriptive only" in text and "On Digits" in text  # a second dataset with zero-width differences counts in no verdict
    e2e = record["results"]["summary"]["end_to_end"]
    assert f"{e2e['models']['no_bonus']['effective_k']['mean']:.2f} of 16" in text
    assert attention_study.end_to_end_reading(e2e, 16) in text
    # the long-tailed memory has its own seeds, among the study's, and its bullet says how many
    lt = record["results"]["summary"]["settings"]["long_tail/0.01"]
    assert lt["seeds"] == record["config"]["long_tail_seeds"] and set(lt["seeds"]) <= set(record["results"]["seeds"])
    assert f"retrained on it, {seeds_text(len(lt['seeds']))})" in text

def test_the_end_to_end_reading_follows_the_effective_k():
    from attnknn_lib.experiments.attention_study.views import end_to_end_reading

    def e2e(no_bonus: float, prototype: float) -> dict:
        return {"models": {"no_bonus": {"effective_k": {"mean": no_bonus}},
                           "prototype": {"effective_k": {"mean": prototype}}}}

    assert "the bonus does not hold them" in end_to_end_reading(e2e(15.99, 15.99), 16)
    for pair in ((15.99, 15.99), (9.0, 15.99), (15.99, 9.0), (9.0, 10.0)):  # one clause: it follows a colon
        assert ":" not in end_to_end_reading(e2e(*pair), 16), pair
    assert "does hold them" in end_to_end_reading(e2e(9.0, 15.99), 16)
    assert "with and without" in end_to_end_reading(e2e(9.0, 10.0), 16)


def _verdict(value: float, verdict: str) -> dict:
    return {"value": value, "low": value - 0.002, "high": value + 0.002, "verdict": verdict}


def test_the_findings_bullets_lead_with_attnknn_itself_then_the_chosen_head_then_a_glossary():
    from attnknn_lib.experiments.attention_study.views import GLOSSARY, finding_bullets

    three = {m: _verdict(v, w) for m, v, w in (("accuracy", -0.001, "equivalent"), ("ece", 0.0004, "inconclusive"),
                                                 ("nll", 0.002, "equivalent"))}
    kv = {"chosen": "label_aware", "methods": {"label_aware": {"verdicts_reference": three}},
          "learnable": {"verdicts": {"accuracy": _verdict(0.004, "better")}}}
    settings = {"clean": {"seeds": [0, 1, 2], "attnknn": {"verdicts_reference": three}, "variants": {"16": kv}},
                "symmetric/0.3": {"seeds": [0, 1, 2], "variants": {"16": kv}},
                "asymmetric/0.4": {"seeds": [0, 1, 2], "variants": {"16": kv}},
                "long_tail/0.01": {"seeds": [0, 1], "variants": {"16": kv}}}
    e2e = {"seeds": [0, 1], "models": {"no_bonus": {"effective_k": {"mean": 15.99}},
                                       "prototype": {"effective_k": {"mean": 15.98}}}}
    record = {"dataset": "fashion_mnist", "config": {"k": 16, "margin_accuracy": 0.0025, "margin_ece": 0.002,
                                                     "margin_nll": 0.01, "variants": ["label_aware", "query_only"],
                                                     "long_tail_max_train": 10000, "long_tail_epochs": 2},
              "results": {"summary": {"settings": settings, "end_to_end": e2e}}}
    lines = finding_bullets([record])
    bullets = lines[:lines.index("**Terms.**")]
    bullets = [b for b in bullets if b]
    glossary = [g for g in lines[lines.index("**Terms.**") + 1:] if g]
    assert len(bullets) <= 7 and len(glossary) == len(GLOSSARY)
    assert bullets[0].startswith("- **The answer.** Attn-KNN as trained is equivalent to the tuned vote")
    assert "does not beat it in any of 3 settings" in bullets[0]  # the long tail is not counted
    for b in bullets[1:4]:
        assert "tuned vote" in b and "**" in b
    assert bullets[1].startswith("- **Attn-KNN**") and "-0.10 pp [-0.30, +0.10], **equivalent**" in bullets[1]
    # the chosen head: the clean memory with its learnable headroom, then the noisy memories, in one line
    assert bullets[2].startswith("- **The chosen head**") and "symmetric 30 %" in bullets[2] \
        and "asymmetric 40 %" in bullets[2]
    assert "learnable room +0.40 pp [+0.20, +0.60], **better**" in bullets[2]
    assert "not counted in the answer" in bullets[3]


def test_the_second_dataset_reads_main_splits_and_states_split_level_verdicts():
    from attnknn_lib.evaluation.verdicts import split_level
    from attnknn_lib.experiments.attention_study import measure
    from attnknn_lib.experiments.attention_study.config import Config
    from attnknn_lib.experiments.main.config import Config as MainConfig
    from attnknn_lib.experiments.main.measure import runs as main_runs

    cfg = Config(second_splits=3)
    second = measure.second_runs(cfg, "digits")
    assert [r.data.split_seed for r in second] == [0, 1, 2] and [r.seed for r in second] == [0, 1, 2]
    assert {r.id for r in second} <= {r.id for r in main_runs(MainConfig())}  # main's models: trained once
    assert {r.id for r in second} <= {r.id for r in measure.runs(cfg)}
    v = split_level([0.01, -0.02, 0.0], 360, 1100, "accuracy", margin=0.0025)
    room = split_level([0.03, 0.02, 0.04], 360, 1100, "accuracy", margin=0.0025)
    summary = {"clean": {"reference_k": [64, 128, 64], "recall": 0.99, "learners": ["gbm"] * 3,
                         "mean": {m: {"accuracy": 0.97, "ece": 0.02, "nll": 0.1}
                                  for m in (*measure.SECOND_METHODS, *measure.LEARNERS)},
                         **{f"{m}_vs_reference": {"accuracy": v, "ece": v, "nll": v} for m in measure.SECOND_DIFFS}}}
    summary["clean"]["learnable_vs_reference"]["accuracy"] = room
    record = {"config": {"k": 16}, "results": {"second": {"digits": {"title": "Digits", "splits": 3,
                                                                     "summary": summary}}, "summary": {"settings": {}}}}
    views = api("attention_study")
    frame = views.second_frame(record)
    assert list(frame.index) == ["Digits, clean memory"] and frame.iloc[0]["ref. k"] == "64\u2013128"
    assert frame.iloc[0]["learnable (pp)"].startswith("+3.00 [")
    assert views.second_line(record).startswith("on Digits, Attn-KNN and the tuned vote give the same accuracy in "
                                                "1 of 3 hold-out splits on the clean memory; mean differences clean "
                                                "memory -0.33 pp")
    assert views.second_line({"config": {"k": 16}, "results": {}}) is None
    assert views.second_learnable(record).startswith("on Digits clean memory +3.00 pp [")
    learnable = views.learnable_frame(record)  # the second dataset's learnable headroom, split-level
    assert list(learnable.index) == ["Digits, clean memory, k = 16"]
    assert learnable.iloc[0]["learnable room (pp)"].startswith("+3.00 [")
    assert learnable.iloc[0]["attention head capt. (%)"] == ("--" if room["verdict"] != "better" else "-11")


def _fake_fit(score):
    """A stand-in for a head's training whose best selection accuracy is ``score(lr)``."""
    from attnknn_lib.training.loops import TrainResult

    def fit(cfg, name, train, val, mem, num_classes, k, seed, lr=None, epochs=None, patience=None):
        return TrainResult(None, [{"epoch": 1, "val_accuracy": score(lr), "val_nll": 1.0}], 1, 0.0)
    return fit


def test_the_learner_search_extends_its_learning_rates_past_an_end_where_the_best_sits(monkeypatch):
    from attnknn_lib.experiments.attention_study import measure
    from attnknn_lib.experiments.attention_study.config import Config

    cfg = Config()
    monkeypatch.setattr(measure.variants, "_fit", _fake_fit(lambda lr: lr))  # the larger the better: an open upper end
    _, info = measure._fit_searched(cfg, "label_aware_heldout", None, None, None, 3, 4, 0)
    top = max(cfg.head_lrs) * measure.LR_STEP ** measure.LR_EXTENSIONS
    assert info["lr"] == pytest.approx(top) and len(info["lrs"]) == len(cfg.head_lrs) + measure.LR_EXTENSIONS
    assert info["edge"] and info["configs"] == len(info["lrs"])
    inner = _fake_fit(lambda lr: -abs(lr - 0.01))  # an inner optimum: no extension
    monkeypatch.setattr(measure.variants, "_fit", inner)
    _, info = measure._fit_searched(cfg, "label_aware_heldout", None, None, None, 3, 4, 0)
    assert info["lr"] == 0.01 and info["lrs"] == sorted(cfg.head_lrs) and not info["edge"]
    # every variant searches so, not only the learner of the learnable room (the one budget)
    _, info = measure._fit_searched(cfg, "blind_bonus", None, None, None, 3, 4, 0)
    assert info["lr"] == 0.01 and info["configs"] == len(cfg.head_lrs)
    # a run stopped by its patience on the last epoch allowed reached a plateau; one still improving did not
    assert measure.reached_plateau(64, 56, 8) and not measure.reached_plateau(64, 60, 8)


def test_a_part_name_parses_into_one_value_and_spells_the_same_name():
    """The workflow stores each part under its name: :class:`Part` reads and spells them in one place."""
    from attnknn_lib.base.errors import ConfigError
    from attnknn_lib.experiments.attention_study.config import Config
    from attnknn_lib.experiments.attention_study.measure import Part, parts

    assert all(Part.parse(n).name == n for n in parts(Config()))
    assert Part.parse("seed3c") == Part("seed", 3, 2) and Part("seed", 12).name == "seed12"
    assert Part.parse("e2e1") == Part("e2e", 1) and Part.parse("second_digits") == Part("second", dataset="digits")
    for bad in ("seed", "collapse0b", "seeds0", "tail0", "seed1a"):
        with pytest.raises(ConfigError):
            Part.parse(bad)

def test_a_head_stops_at_a_plateau_and_keeps_its_best_epoch():
    from attnknn_lib.knn.neighbourhood import Neighbourhood
    from attnknn_lib.training.head_fitting import train_head

    rng = np.random.default_rng(0)
    n, k, m, d, c = 40, 4, 30, 8, 3

    def hoods():
        return Neighbourhood(query=rng.normal(size=(n, d)).astype(np.float32), rows=rng.integers(0, m, (n, k)),
                             sq_dist=rng.random((n, k)).astype(np.float32), labels=rng.integers(0, c, (n, k)),
                             loo=rng.random((n, k)).astype(np.float32), target=rng.integers(0, c, n))
    memory = torch.randn(m, d)
    frozen = train_head(LabelAwareAttention(c, d), hoods(), hoods(), memory, c, epochs=50, lr=0.0, patience=2)
    assert frozen.best_epoch == 1 and len(frozen.history) == 3  # nothing moves: stops 2 epochs after the best
    assert len(train_head(LabelAwareAttention(c, d), hoods(), hoods(), memory, c, epochs=5, lr=0.0).history) == 5


def test_the_study_and_main_give_attnknn_against_the_strongest_rule_one_interval():
    """The study recomputes main's comparison (Attn-KNN minus the strongest rule on the same probabilities):
    its pooled seed-level interval must be main's, not a second one (issue 28)."""
    from attnknn_lib.experiments.attention_study import measure as study
    from attnknn_lib.experiments.attention_study.config import Config as StudyConfig
    from attnknn_lib.experiments.main import measure as main
    from attnknn_lib.experiments.main.config import COMPARISONS
    from attnknn_lib.experiments.main.config import Config as MainConfig

    rng = np.random.default_rng(3)
    labels = rng.integers(0, 4, 300)
    names = {n for pair in COMPARISONS.values() for n in pair}
    probs = {str(s): {n: (rng.dirichlet(np.ones(4), 300), rng.dirichlet(np.ones(4), 300)) for n in names}
             for s in range(3)}
    a, b = COMPARISONS["attnknn_vs_reference"]
    mine = study.seed_verdicts(StudyConfig(), [
        {split: study._paired(StudyConfig(), probs[s][a][i], probs[s][b][i], labels, int(s), n_boot=study.HEADLINE_BOOT)
         for i, split in enumerate(("raw", "calibrated"))} for s in probs])
    theirs = main._paired(MainConfig(), probs, {s: labels for s in probs})["attnknn_vs_reference"]["seed_level"]
    for metric, split in study.COMPARED:
        if metric not in theirs[split]:
            continue  # the study also judges Brier, which main does not report
        for key in ("value", "low", "high", "test_se"):
            assert mine[metric][key] == pytest.approx(theirs[split][metric][key], rel=1e-9, abs=1e-12)
    assert study.drop_pairs({"x": [{"raw": {study.PAIR: 1, "accuracy": 2}}]}) == {"x": [{"raw": {"accuracy": 2}}]}


def test_the_trees_learner_reads_as_many_neighbours_as_the_reference_chose(monkeypatch):
    """The learnable headroom has no cap the reference does not share: where the reference chose a
    k beyond the memory's stored neighbourhoods, the boosted trees read that many, searched anew,
    with this memory's (possibly noisy) labels and agreements."""
    from attnknn_lib.experiments.attention_study import measure
    from attnknn_lib.experiments.attention_study.config import Config
    from attnknn_lib.experiments.common import shared as core
    from attnknn_lib.experiments.common.shared import Frozen
    from attnknn_lib.knn.bank import MemoryBank

    rng = np.random.default_rng(0)
    train, val, test = (rng.normal(size=(n, 4)).astype(np.float32) for n in (200, 40, 30))
    y = rng.integers(0, 3, 200)
    frozen = Frozen(train, val, test, np.arange(200))
    bank = MemoryBank().build(train, y)
    self_nb = bank.search_excluding(train, 17, np.arange(200))
    val_nb, test_nb = bank.search(val, 8), bank.search(test, 8)
    cfg = Config()
    mem = measure.memory_setting(frozen, y, self_nb, val_nb, test_nb, rng.integers(0, 3, 40),
                                 rng.integers(0, 3, 30), np.arange(20), "symmetric/0.4", 3, cfg, 0)
    seen = {}

    def fake_rule(val_hood, val_y, test_hood, prior, num_classes, k, seed):
        seen.update(val=val_hood, test=test_hood, k=k)
        return {"val": np.full((40, 3), 1 / 3), "test": np.full((30, 3), 1 / 3), "folds": [], "configs": 0,
                "features": 1}
    monkeypatch.setattr(measure.learnable_headroom, "learned_rule", fake_rule)
    search = core.searcher(bank, {"val": val, "test": test})
    measure.gbm_learner(mem, 32, 3, 0, search)
    rows, _ = search("val", 32)
    assert seen["k"] == 32 and seen["val"].labels.shape == (40, 32) and seen["test"].labels.shape == (30, 32)
    assert (seen["val"].labels == mem.labels[rows]).all() and (seen["val"].loo == mem.loo[rows]).all()
    assert not (mem.labels == y).all()  # the noisy memory's labels, not the clean ones
    measure.gbm_learner(mem, 8, 3, 0, search)  # within the stored neighbourhoods: no new search
    assert seen["val"].labels is mem.val.labels or (seen["val"].labels == mem.val.labels).all()
    assert sum(measure.fold_queries(40)) + 2 * 4 == 40  # each half of 20 tunes on its fifth


def test_the_collapse_reading_counts_the_changes_apart_from_the_head_they_change():
    from attnknn_lib.experiments.attention_study.measure import AS_TRAINED, COLLAPSE
    from attnknn_lib.experiments.attention_study.views import collapse_reading

    def record(keffs: dict[str, float]) -> dict:
        v = {"value": 0.001, "low": -0.002, "high": 0.004, "verdict": "inconclusive"}
        sweep = {n: {"effective_k": {"mean": keffs.get(n, 15.9)}, "verdicts_reference": {"accuracy": v}}
                 for n in COLLAPSE}
        return {"config": {"k": 16}, "results": {"summary": {"settings": {"clean": {"collapse": {"settings": sweep}}}}}}

    changes = len(COLLAPSE) - 1
    assert AS_TRAINED in COLLAPSE and f"none of the {changes} changed heads" in collapse_reading(record({}))
    said = collapse_reading(record({"all sharp": 12.0, AS_TRAINED: 14.0}))
    assert said.startswith(f"2 of {len(COLLAPSE)} heads (the head as trained and {changes} changes)"), said


def test_the_difference_head_scores_each_neighbour_from_q_minus_n_and_starts_uniform():
    from attnknn_lib.models.neighbour_heads import DifferenceAttention

    head = DifferenceAttention(3, 8)
    nb = _hood()
    p, w = head(nb)
    assert head.scores(nb).shape == (3, 1, 4)
    assert torch.allclose(w, torch.full((3, 4), 0.25))  # zero last layer: the uniform vote
    torch.log(p.clamp_min(1e-9))[:, 0].sum().backward()
    assert head.score[-1].weight.grad.abs().sum() > 0
    shifted = nb._replace(query=nb.query + 1.0, neighbours=nb.neighbours + 1.0)  # reads only q - n_j
    with torch.no_grad():
        head.score[-1].weight.normal_()
        assert torch.allclose(head.scores(nb), head.scores(shifted), atol=1e-5)


def test_the_attention_scores_are_what_its_weights_are_the_softmax_of():
    from attnknn_lib.models import AttentionConfig, MultiHeadNeighbourAttention
    from attnknn_lib.models.neighbour_heads import BlindAttention

    att = MultiHeadNeighbourAttention(AttentionConfig(3, 8, 2))
    nb = _hood()
    with torch.no_grad():
        s = BlindAttention(att).scores(nb)
        w, per_head = att(nb.query, nb.neighbours, nb.sq_dist, nb.labels)
    assert s.shape == (3, 2, 4) and torch.allclose(per_head, s.softmax(-1)) and torch.allclose(w, per_head.mean(1))


def test_the_score_range_is_the_mean_spread_of_scores_within_a_neighbourhood():
    from attnknn_lib.base.errors import ConfigError
    from attnknn_lib.knn.votes import score_range

    s = np.array([[[0.0, 1.0, 3.0], [2.0, 2.0, 2.0]], [[1.0, -1.0, 0.0], [0.5, 0.0, 0.0]]])  # (2 queries, 2 heads, 3)
    assert score_range(s) == pytest.approx((3 + 0 + 2 + 0.5) / 4)
    assert score_range(np.zeros((5, 1, 4))) == 0.0
    with pytest.raises(ConfigError, match="queries, heads, neighbours"):
        score_range(np.zeros((5, 4)))


def test_head_scores_gather_every_query_in_batches():
    from attnknn_lib.knn.neighbourhood import Neighbourhood
    from attnknn_lib.models.neighbour_heads import DifferenceAttention
    from attnknn_lib.training.head_fitting import head_scores

    rng = np.random.default_rng(0)
    memory = torch.randn(20, 8)
    rows = rng.integers(0, 20, (7, 4))
    data = Neighbourhood(rng.integers(0, 3, (7, 4)), rng.random((7, 4)), rows,
                         query=rng.standard_normal((7, 8)).astype(np.float32),
                         target=rng.integers(0, 3, 7), loo=rng.random((7, 4)).astype(np.float32))
    head = DifferenceAttention(3, 8)
    with torch.no_grad():
        head.score[-1].weight.normal_()
    out = head_scores(head, data, memory, batch_size=3)
    assert out.shape == (7, 1, 4) and np.ptp(out) > 0 and head.training  # mode restored


def test_the_study_heads_share_the_positive_controls_one_budget_and_zero_means_every_query():
    """Every variant and the linear probe train as the positive control's heads do (issue: one budget for every
    learner): its learning-rate grid, every memory row, its epoch cap, patience and batch."""
    from attnknn_lib.base.errors import ConfigError
    from attnknn_lib.experiments.attention_study.config import Config
    from attnknn_lib.experiments.attention_study.measure.memory import _train_rows
    from attnknn_lib.experiments.positive_control import EXPERIMENT as PC

    assert (_train_rows(10, 0, seed=3) == np.arange(10)).all()
    part = _train_rows(10, 4, seed=3)
    assert len(part) == 4 and (np.diff(part) > 0).all()
    budget = ("train_queries", "head_epochs", "head_patience", "head_lrs", "head_batch_size", "nca_lrs",
              "nca_patience", "nca_epochs", "probe_as_heads")
    ours, theirs = Config(), PC.Config()
    assert {k: getattr(ours, k) for k in budget} == {k: getattr(theirs, k) for k in budget}
    assert ours.train_queries == 0 and ours.probe_as_heads
    assert ours.end_to_end_seeds == ours.collapse_seeds == len(ours.long_tail_seeds) == 5
    with pytest.raises(ConfigError, match="train_queries"):
        Config(train_queries=-1)
    with pytest.raises(ConfigError, match="head_lrs"):
        Config(head_lrs=(0.01, -1.0))


def test_the_collapse_reading_adds_the_difference_head_and_mains_score_range():
    from attnknn_lib.experiments.attention_study.measure import COLLAPSE, DIFFERENCE, MAIN_ATTNKNN
    from attnknn_lib.experiments.attention_study.views import collapse_frame, collapse_reading

    v = {"value": -0.01, "low": -0.02, "high": -0.005, "verdict": "worse"}
    row = {"what": "x", "effective_k": {"mean": 15.9}, "accuracy": {"mean": 0.9}, "verdicts_reference": {"accuracy": v},
           "score_range": {"mean": 0.05}, "temperature": {"mean": 0.44}}
    sweep = {**{n: row for n in COLLAPSE}, DIFFERENCE: {**row, "effective_k": {"mean": 9.5}, "temperature": {"mean": None}},
             MAIN_ATTNKNN: row}
    record = {"config": {"k": 16}, "results": {"summary": {"settings": {"clean": {"collapse": {"settings": sweep}}}}}}
    said = collapse_reading(record)
    assert f"none of the {len(COLLAPSE) - 1} changed heads" in said  # the rows beside the sweep are no changes
    assert "difference between query and neighbour" in said and "9.50" in said and "span 0.050" in said
    assert "with its per-head temperatures (mean 0.440) applied" in said and "at most 1.05 times" in said
    frame = collapse_frame(record)
    assert frame.loc[DIFFERENCE, "τ"] == "--" and frame.loc[MAIN_ATTNKNN, "score range"] == "0.050"


def test_the_learned_metric_table_reads_the_record_and_escapes_its_row_labels():
    from attnknn_lib.experiments.attention_study.views.learned import learned_frame

    def v(x):
        return {"value": x, "low": x - 0.01, "high": x + 0.01, "verdict": "better" if x > 0.01 else "inconclusive"}

    lm = {"nca": {"accuracy": {"mean": 0.9}, "verdicts_reference": {"accuracy": v(0.02)}},
          "linear_probe": {"accuracy": {"mean": 0.8}, "verdicts_reference": {"accuracy": v(-0.05)}},
          "nca_nll": {"verdicts_reference_nll": {"nll": v(-0.02), "brier": v(0.0)}},
          "attnknn_tuned_vs_nca": {"accuracy": v(-0.03), "nll": v(0.05), "brier": v(0.01)}}
    record = {"results": {"summary": {"settings": {"asymmetric/0.4": {"learned_metric": lm}, "clean": {}}}}}
    frame = learned_frame(record, latex=True)
    assert len(frame) == 4 and all("\\%" in i for i in frame.index)
    plain = learned_frame(record)
    assert plain.iloc[0, 0] == "90.00" and plain.iloc[0, 1].endswith("better")
    assert plain.iloc[3, 1].startswith("-3.00")


def test_the_learnable_tables_capture_note_goes_with_its_columns():
    import pandas as pd

    from attnknn_lib.experiments.attention_study.views.outputs import capture_note

    empty = pd.DataFrame({"headroom (pp)": ["+0.10"], "attention head": ["--"], "chosen": [""]})
    assert capture_note(empty) == ""  # both share columns are dropped from the table: no note on them
    shown = empty.assign(chosen=["40"])
    assert capture_note(shown).startswith(" Captured (\\%): the share of that room")


def _short_record(new: bool) -> dict:
    """A study record with four memory settings; ``new``: with the knob-tuned Attn-KNN and the learned metrics."""
    def v(word: str) -> dict:
        return _verdict(0.001, word)

    settings = {}
    for st, own, tuned in (("clean", "equivalent", "equivalent"), ("symmetric/0.3", "worse", "equivalent"),
                           ("asymmetric/0.4", "worse", "better"), ("long_tail/0.01", "inconclusive", "equivalent")):
        attn = {"verdicts_reference": {"accuracy": v(own)}, "verdicts_reference_nll": {"nll": v("worse")}}
        s = {"seeds": [0, 1, 2], "attnknn": attn,
             "variants": {"16": {"chosen": "label_aware",
                                 "methods": {"label_aware": {"verdicts_reference": {"accuracy": v("inconclusive")}}}}}}
        if new:
            attn["tuned"] = {"verdicts_reference": {"accuracy": v(tuned)}, "verdicts_reference_nll": {"nll": v("better")}}
            s["learned_metric"] = {"nca": {"verdicts_reference": {"accuracy": v("better")}},
                                   "linear_probe": {"verdicts_reference": {"accuracy": v("worse")}},
                                   "attnknn_tuned_vs_nca": {"accuracy": v("worse")}}
        settings[st] = s
    e2e = {"seeds": [0, 1], "models": {"no_bonus": {"effective_k": {"mean": 15.99}}}}
    return {"dataset": "fashion_mnist",
            "config": {"k": 16, "margin_accuracy": 0.0025, "margin_nll": 0.01, "variants": ["label_aware", "readout"],
                       "long_tail_max_train": 0, "long_tail_epochs": 0},
            "results": {"summary": {"settings": settings, "end_to_end": e2e}}}


def test_the_readme_answer_counts_the_knob_tuned_attnknn_and_the_learned_metrics_when_the_record_has_them():
    from attnknn_lib.experiments.attention_study.views import answer_lines

    lines = answer_lines([_short_record(new=True)])
    bullets = [b for b in lines[:lines.index("**Terms.**")] if b]
    assert len(bullets) == 3 and all(len(b) <= 300 for b in bullets)
    assert "with its vote settings tuned" in bullets[0] and "1 better, 3 equivalent" in bullets[0]
    assert "4 better in calibrated NLL" in bullets[0]
    assert "4 inconclusive against the tuned vote" in bullets[1] and "almost equally" in bullets[1]
    assert "NCA is 4 better" in bullets[2] and "linear probe 4 worse" in bullets[2] and "against NCA: 4 worse" in bullets[2]
    assert any(t.startswith("- *NCA*") for t in lines[lines.index("**Terms.**"):])


def test_the_readme_answer_falls_back_to_attnknn_at_its_trained_k_for_an_older_record():
    from attnknn_lib.experiments.attention_study.views import answer_lines

    lines = answer_lines([_short_record(new=False)])
    bullets = [b for b in lines[:lines.index("**Terms.**")] if b]
    assert len(bullets) == 2  # no learned-metric bullet
    assert "at its trained k = 16" in bullets[0] and "2 worse, 1 equivalent, 1 inconclusive" in bullets[0]
    assert "4 worse in calibrated NLL" in bullets[0] and "(clean, label noise, long tail; 4 settings)" in bullets[0]
    assert not any("*NCA*" in t for t in lines)
    assert answer_lines([]) == []


def test_a_stacked_cell_puts_value_and_letter_on_the_rows_line_over_the_interval_and_dashes_a_missing_one():
    from attnknn_lib.experiments.attention_study.views.cells import stacked_cell

    v = {"value": 0.0007, "low": -0.0011, "high": 0.0024, "verdict": "equivalent"}
    cell = stacked_cell(v)  # top-aligned: the value beside the row's label, the interval below
    assert cell == "\\begin{tabular}[t]{@{}r@{}}+0.07 E\\\\{\\scriptsize[-0.11, +0.24]}\\end{tabular}"
    assert stacked_cell({**v, "low": None, "high": None}) == "+0.07 E" and stacked_cell(None) == "--"


def _tiny_memory(m: int = 48, d: int = 8, k: int = 4, classes: int = 3, seed: int = 0):
    """A frozen memory of ``m`` rows in ``d`` dimensions (labels by the first coordinate) with its
    training, validation and test neighbourhoods at ``k``: enough for a head to train a few epochs."""
    import torch

    from attnknn_lib.experiments.attention_study.measure.memory import Memory
    from attnknn_lib.knn.neighbourhood import Neighbourhood

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(m + 24, d)).astype(np.float32)
    y = np.digitize(x[:, 0], [-0.4, 0.4]).astype(np.int64) % classes
    mem_x, mem_y = x[:m], y[:m]

    def hood(q: np.ndarray, target: np.ndarray, own: bool) -> Neighbourhood:
        d2 = ((q[:, None, :] - mem_x[None]) ** 2).sum(-1)
        if own:
            np.fill_diagonal(d2, np.inf)  # a training query never retrieves itself
        rows = np.argsort(d2, 1)[:, :k]
        return Neighbourhood(labels=mem_y[rows], sq_dist=np.take_along_axis(d2, rows, 1).astype(np.float32),
                             rows=rows, loo=np.ones(rows.shape, np.float32), query=q, target=target)

    return Memory(torch.from_numpy(mem_x), mem_y, np.zeros(m, bool), np.ones(m), hood(mem_x, mem_y, True),
                  hood(x[m:m + 12], y[m:m + 12], False), hood(x[m + 12:], y[m + 12:], False))


def test_a_variant_and_the_linear_probe_train_over_the_learning_rate_grid_on_every_memory_row():
    """The one budget as run: a variant and the probe each train at every rate of the grid on the memory's
    training queries, report the rate chosen on validation, and give probabilities for every row."""
    from attnknn_lib.experiments.attention_study.config import Config
    from attnknn_lib.experiments.attention_study.measure.metric_learners import probe_as_variants
    from attnknn_lib.experiments.attention_study.measure.variants import train_variant

    cfg = Config(embed_dim=8, num_heads=2, k=4, head_epochs=2, head_patience=1, head_batch_size=16,
                 head_lrs=(0.01, 0.03), headroom_ks=(4,), variant_ks=(4,))
    mem = _tiny_memory()
    out = train_variant(cfg, "blind_none", mem, 4, 3, seed=0)
    (search,) = out["search"]
    assert set(search["lrs"]) >= {0.01, 0.03} and search["lr"] in search["lrs"] and search["configs"] >= 2
    assert out["val"].shape == (12, 3) and out["test"].shape == (12, 3)
    assert np.allclose(out["test"].sum(1), 1.0)
    held = train_variant(cfg, "label_aware_heldout", mem, 4, 3, seed=0)
    assert len(held["search"]) == 2  # each cross-fitted half searches its rate
    probe = probe_as_variants(cfg, mem, 3, seed=0)
    assert probe.val.shape == (12, 3) and probe.info["lr"] in probe.info["lrs"]
    again = probe_as_variants(cfg, mem, 3, seed=0)
    assert np.array_equal(probe.test, again.test)  # seeded: one seed gives one probe

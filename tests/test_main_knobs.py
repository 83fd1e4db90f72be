"""main and the attention study with the rule's knobs: each seed's choices, gaps and edges as the
record keeps them, the calibration endpoint's rows in main's tables, and the study's summary of
Attn-KNN with its knobs tuned."""

from __future__ import annotations

import numpy as np
import pytest

from attnknn_lib.evaluation.tuned_attention import HeadScores, tuned_attentions
from attnknn_lib.experiments.main.config import COMPARISONS
from attnknn_lib.experiments.main.measure.knob_search import KNOB_METHODS, knobs_entry, label_knob_methods
from attnknn_lib.experiments.main.views.knob_tables import knob_findings, knob_macros, knobs_frame


def _scored(k: int, val: float, test: float, edges=(), **extra) -> dict:
    info = {"choice": {"k": k}, "label": f"rule, k={k}", "configs": 10, "edges": list(edges), "k_searched": 512, **extra}
    return {"info": info, "val": {"accuracy": val}, "test_raw": {"accuracy": {"value": test}}, "label": "x"}


def _level(value: float, verdict: str) -> dict:
    return {"value": value, "low": value - 0.01, "high": value + 0.01, "verdict": verdict, "margin": 0.005}


def _record() -> dict:
    per_seed = {}
    for s in ("0", "1"):
        scored = {"reference": _scored(384, 0.80, 0.78, ("k",)), "reference_nll": _scored(4096, 0.79, 0.78, ("k",),
                                                                                         tuned_on="nll"),
                  "attnknn_tuned": _scored(16 if s == "0" else 96, 0.79, 0.77), "attnknn_tuned_nll": _scored(96, .7, .7)}
        per_seed[s] = {"knobs": knobs_entry(scored, 16)}
    paired = {name: {"a": a, "b": b, "seed_level": {split: {m: _level(0.02, "worse") for m in
                                                          ("accuracy", "ece", "nll", "brier")}
                                                  for split in ("raw", "calibrated")}}
              for name, (a, b) in COMPARISONS.items()}
    return {"results": {"per_seed": per_seed, "paired": paired, "seeds": [0, 1]}}


def test_each_seed_records_its_choice_the_validation_test_gap_and_where_k_differs_from_training():
    knobs = _record()["results"]["per_seed"]
    ref = knobs["0"]["knobs"]["reference"]
    assert ref["val_test_gap"] == pytest.approx(0.02) and ref["edges"] == ["k"] and "k_trained" not in ref
    assert knobs["0"]["knobs"]["reference_nll"]["tuned_on"] == "nll"
    assert knobs["0"]["knobs"]["attnknn_tuned"]["k_differs"] is False
    assert knobs["1"]["knobs"]["attnknn_tuned"]["k_differs"] is True
    assert set(knobs["0"]["knobs"]) == set(KNOB_METHODS)
    scored = {m: {"label": m} for m in KNOB_METHODS}
    label_knob_methods(scored)
    assert scored["attnknn_tuned"]["label"].startswith("Attn-KNN, knobs tuned")


def test_the_knobs_table_macros_and_findings_name_every_edge_and_the_trained_k():
    record = _record()
    frame = knobs_frame(record)
    assert len(frame) == 8 and "(trained at k=16)" in frame.loc["seed 1: Attn-KNN, tuned", "choice"]
    assert frame.loc["seed 0: tuned vote", "open edges"] == "k"
    macros = knob_macros(("main", "x"), record["results"])
    assert macros["MainXAttnknnTunedKDiffersCount"] == "1" and macros["MainXReferenceEdges"] == "k"
    assert macros["MainXDiffCalRefBrierCalVerdict"] == "worse than" and "MainXDiffCalRefAcc" not in macros
    assert macros["MainXDiffTunedAcc"] == "+2.00"
    text = "\n".join(knob_findings(record["results"]))
    assert "open edge: k" in text and "Brier after calibration" in text and "+2.00" in text


def test_tuned_attentions_picks_the_selection_that_calibrates_better_on_validation():
    rng = np.random.default_rng(0)
    n, k, c = 200, 64, 3
    target = rng.integers(0, c, n)
    labels = np.where(rng.random((n, k)) < 0.5, rng.integers(0, c, (n, k)), target[:, None])
    full = HeadScores(rng.normal(size=(n, 2, k)), labels, rng.random((n, k)))

    def scorer(split: str, kk: int) -> HeadScores:
        return HeadScores(full.log_weights[:, :, :kk], full.labels[:, :kk], full.loo[:, :kk])

    acc, cal = tuned_attentions(scorer, target, np.full(c, 1 / c), c, 16, k)
    cands = cal.info["candidates"]
    assert cal.info["tuned_on"] == min(cands, key=lambda s: cands[s]["val_nll_calibrated"])
    assert acc.info["choice"]["k"] <= acc.info["k_searched"] <= k and acc.test.shape == (n, c)


def test_the_study_summarises_attnknn_with_its_knobs_over_seeds_with_both_references():
    from attnknn_lib.experiments.attention_study.config import Config
    from attnknn_lib.experiments.attention_study.measure import _paired
    from attnknn_lib.experiments.attention_study.measure.summary import summarise_tuned

    cfg = Config()
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 200)
    ts = []
    for s, k in enumerate((16, 384)):
        a, b = rng.dirichlet(np.ones(3), 200), rng.dirichlet(np.ones(3), 200)
        metric = {m: {"value": 0.5} for m in ("accuracy", "ece", "nll", "brier")}
        ts.append({"label": f"attention, k={k}", "k": k, "k_trained": 16, "k_differs": k != 16, "edges": ["k"] * s,
                   "test_raw": metric, "test_calibrated": metric, "calibration": {"label": "c"},
                   "diff_reference": {split: _paired(cfg, a, b, y, s, 50) for split in ("raw", "calibrated")},
                   "diff_reference_nll": {"calibrated": _paired(cfg, a, b, y, s, 50)}})
    out = summarise_tuned(cfg, ts)
    assert out["k"] == [16, 384] and out["k_differs"] == 1 and out["edges"] == ["k"]
    assert set(out["verdicts_reference"]) == {"accuracy", "ece", "nll", "brier"}
    assert set(out["verdicts_reference_nll"]) == {"nll", "brier"}
    assert out["verdicts_reference_nll"]["nll"]["value"] == pytest.approx(out["verdicts_reference"]["nll"]["value"])


def _main_record(ds: str, comparisons: dict[str, tuple[str, str, str]]) -> dict:
    """A main record whose ``paired`` holds each comparison's seed-level verdict (split, metric, word)."""
    paired = {c: {"seed_level": {split: {metric: {"value": 0.0, "verdict": word}}}}
              for c, (split, metric, word) in comparisons.items()}
    return {"dataset": ds, "config": {"k": 16}, "results": {"paired": paired}}


def test_mains_answer_bullet_gives_the_primary_datasets_difference_in_points_and_falls_back_to_the_trained_k():
    """The answer is about the primary dataset, in points with its verdict; the tabular sets are
    descriptive (no verdict is counted over datasets the paper draws none on)."""
    from attnknn_lib.experiments.main.views.dataset_answer import answer_lines

    new = [_main_record(ds, {"attnknn_tuned_vs_reference": ("raw", "accuracy", acc),
                             "attnknn_tuned_vs_reference_nll": ("calibrated", "nll", "worse"),
                             "attnknn_tuned_vs_nca": ("raw", "accuracy", "equivalent")})
           for ds, acc in (("fashion_mnist", "better"), ("iris", "inconclusive"))]
    for r in new:
        r["config"].update({"primary": "fashion_mnist", "datasets": ["fashion_mnist", "iris"]})
    (line,) = answer_lines(new)
    assert line.startswith("- **Fashion-MNIST**") and "with its vote settings tuned minus the tuned vote: +0.00 points" in line
    assert "(better)" in line and "(worse)" in line and "inconclusive" not in line
    assert "The tabular dataset is descriptive." in line and line.endswith("([table](results/notebooks/01_main.pdf))")
    old = [_main_record("iris", {"attnknn_vs_reference": ("raw", "accuracy", "equivalent")})]
    assert "at its trained k = 16, Attn-KNN differs from the tuned vote by" in answer_lines(old)[0]
    assert answer_lines([]) == [] and answer_lines([_main_record("iris", {})]) == []

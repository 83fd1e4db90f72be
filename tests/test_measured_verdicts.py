"""Verdicts measured, not rendered: noise, long tail and the k-sweep compute every verdict from their
results and their config's margins when they measure (``measure.verdicts``), store it in the record,
and their views only read it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from experiment_api import api

from attnknn_lib.evaluation.verdicts import MARGINS
from attnknn_lib.experiments.framework.reading import parameter_differences
from attnknn_lib.report.macros import VERDICT_PHRASES, macro_name

REPO = Path(__file__).resolve().parents[1]
noise, long_tail, k_sweep = api("noise"), api("long_tail"), api("k_sweep")

BASE = [0.900, 0.910, 0.920, 0.905, 0.915]  # one value per seed
DIFFS = {  # A - B per seed, and the verdict against a 0.25 pp margin
    "better": [0.010, 0.011, 0.009, 0.010, 0.012],
    "worse": [-0.010, -0.011, -0.009, -0.010, -0.012],
    "equivalent": [0.0001, -0.0001, 0.0002, 0.0, -0.0002],
    "inconclusive": [0.020, -0.030, 0.010, -0.015, 0.025],
}


def _entry(values: list[float], ece: list[float]) -> dict:
    return {"test_raw": {"accuracy": {"values": values}}, "test_calibrated": {"ece": {"values": ece}}}


def _robustness_results(word: str, methods: tuple[str, ...]) -> dict:
    """A results dict of a noise or long-tail record, one setting and one condition: ``attnknn`` (and
    ``attnknn_balanced``) differ from every other method by ``DIFFS[word]``."""
    ece = [0.02, 0.021, 0.019, 0.02, 0.022]
    summary = {m: _entry(BASE, ece) for m in methods}
    for m in ("attnknn", "attnknn_balanced"):
        if m in summary:
            summary[m] = _entry([b + d for b, d in zip(BASE, DIFFS[word])], [e - 0.001 for e in ece])
    return {"settings": {"bank": {"curves": {"c": {"summary": summary}}}}}


def _k_sweep_results(word: str) -> dict:
    """A results dict of a k-sweep record: k = 1 (every rule the same) and k = 5, where Attn-KNN minus
    the best baseline (distance) is ``DIFFS[word]`` in accuracy."""
    def scored(acc: float, nll: float) -> dict:
        return {"test_raw": {"accuracy": {"value": acc}},
                "test_calibrated": {"nll": {"value": nll}, "ece": {"value": 0.02}}}

    per_seed = {}
    for s, (b, d) in enumerate(zip(BASE, DIFFS[word])):
        per_seed[str(s)] = {"by_k": {
            "1": {"best_baseline": "distance", "methods": {"distance": scored(b, 0.3), "attnknn": scored(b, 0.3)}},
            "5": {"best_baseline": "distance", "methods": {"distance": scored(b, 0.3), "attnknn": scored(b + d, 0.28)}}}}
    se = {"accuracy": {"se": 0.0}, "nll": {"se": 0.001}, "ece": {"se": 0.001}}
    return {"k_values": [1, 5], "seeds": list(range(5)), "per_seed": per_seed,
            "paired": {k: {"attnknn": {"raw": se, "calibrated": se}} for k in ("1", "5")}}


@pytest.mark.parametrize("word", sorted(DIFFS))
def test_noise_verdicts_come_from_the_results_and_the_configs_margin(word):
    v = noise.verdicts(_robustness_results(word, ("attnknn", "reference", "best_baseline")), noise.Config())
    cell = v["settings"]["bank"]["c"]
    assert cell["reference"] == "reference"
    for comparison, against in (("attnknn_vs_reference", "reference"), ("attnknn_vs_best_baseline", "best_baseline")):
        assert cell[comparison]["b"] == against
        assert cell[comparison]["accuracy"]["verdict"] == word
        assert cell[comparison]["accuracy"]["margin"] == MARGINS["accuracy"]
        assert "verdict" not in cell[comparison]["ece"]  # ECE is described only
    # a record from before the tuned vote: its claims read against the best kNN vote
    old = noise.verdicts(_robustness_results(word, ("attnknn", "best_baseline")), noise.Config())["settings"]["bank"]["c"]
    assert old["reference"] == "best_baseline" and old["attnknn_vs_reference"]["b"] == "best_baseline"


@pytest.mark.parametrize("word", sorted(DIFFS))
def test_long_tail_verdicts_come_from_the_results_and_the_configs_margin(word):
    methods = ("attnknn", "attnknn_balanced", "reference", "best_baseline", "best_baseline_balanced")
    cell = long_tail.verdicts(_robustness_results(word, methods), long_tail.Config())["settings"]["bank"]["c"]
    assert {k for k in cell if k != "reference"} == {"attnknn_vs_reference", "attnknn_balanced_vs_reference",
                                                      "attnknn_vs_best_baseline",
                                                      "attnknn_balanced_vs_best_baseline_balanced"}
    assert {c["accuracy"]["verdict"] for k, c in cell.items() if k != "reference"} == {word}


@pytest.mark.parametrize("word", sorted(DIFFS))
def test_k_sweep_verdicts_come_from_the_results_and_the_configs_margin(word):
    v = k_sweep.verdicts(_k_sweep_results(word), k_sweep.Config())
    acc = v["differences"]["attnknn"]["raw"]["accuracy"]
    assert acc["1"]["verdict"] == "identical" and acc["5"]["verdict"] == word
    assert v["counted"]["attnknn"]["accuracy"] == [word]  # k = 1 never counts
    assert v["counted"]["attnknn"]["nll"] == ["better"]  # 0.02 lower NLL on every seed
    assert v["differences"]["attnknn_retrained"]["raw"]["accuracy"] == {}  # not in this record
    assert v["counted"]["attnknn_retrained"]["accuracy"] == []
    adv = v["seed_advantage"]["attnknn"]
    assert adv["accuracy"]["k"] == adv["largest_accuracy_difference"]["k"] == adv["nll_calibrated"]["k"] == 5
    assert set(v["seed_advantage"]) == {"attnknn"}


def test_the_margins_are_the_configs():
    """A wider margin in the config makes the same 1 pp difference equivalent, in every experiment."""
    wide = 0.05
    cell = noise.verdicts(_robustness_results("better", ("attnknn", "reference", "best_baseline")),
                          noise.Config(margin_accuracy=wide))["settings"]["bank"]["c"]
    assert cell["attnknn_vs_reference"]["accuracy"]["verdict"] == "equivalent"
    assert cell["attnknn_vs_reference"]["accuracy"]["margin"] == wide
    cell = long_tail.verdicts(_robustness_results("better", ("attnknn", "reference", "best_baseline")),
                              long_tail.Config(margin_accuracy=wide))["settings"]["bank"]["c"]
    assert cell["attnknn_vs_reference"]["accuracy"]["verdict"] == "equivalent"
    v = k_sweep.verdicts(_k_sweep_results("better"), k_sweep.Config(margin_accuracy=wide, margin_nll=0.05))
    assert v["counted"]["attnknn"] == {"accuracy": ["equivalent"], "nll": ["equivalent"]}
    for cfg in (noise.Config(), long_tail.Config(), k_sweep.Config()):  # today's library margins, exactly
        assert cfg.margin("accuracy") == MARGINS["accuracy"] and cfg.margin("ece") is None
    assert k_sweep.Config().margin("nll") == MARGINS["nll"]


def _committed(name: str) -> dict:
    path = REPO / "results" / f"{name}_fashion_mnist.json"
    if not path.exists():
        pytest.skip(f"no committed {path.name}")
    return json.loads(path.read_text())


@pytest.mark.parametrize("name", ["noise", "long_tail", "k_sweep"])
def test_with_verdicts_adds_them_and_the_margin_knobs_at_their_defaults(name):
    exp = api(name)
    record = _committed(name)
    before = copy.deepcopy(record)
    out = exp.with_verdicts(record)
    assert record == before  # the record itself is left as it was
    assert out["results"]["verdicts"] == exp.verdicts(record["results"], exp.Config(**out["config"]))
    assert out["config"] == exp.Config(**out["config"]).to_dict()  # what a run would write, in field order
    assert {k: v for k, v in out["config"].items() if k.startswith("margin_")} == \
        {k: v for k, v in exp.Config().to_dict().items() if k.startswith("margin_")}
    assert parameter_differences(out["config"], exp.Config()) == parameter_differences(record["config"], exp.Config())
    assert {k: v for k, v in out.items() if k not in ("config", "results")} == \
        {k: v for k, v in record.items() if k not in ("config", "results")}


def test_the_noise_views_read_the_stored_verdicts():
    record = noise.with_verdicts(_committed("noise"))
    ds, setting = record["dataset"], "bank"
    key = max((k for k in record["results"]["settings"][setting]["curves"] if k.startswith("symmetric/")),
              key=lambda k: float(k.split("/")[1]))
    stored = record["results"]["verdicts"]["settings"][setting][key]["attnknn_vs_reference"]["accuracy"]
    word = next(w for w in ("better", "worse") if w != stored["verdict"])
    stored.update(value=0.5, verdict=word)  # not what the results give: the views must show it anyway
    macros = noise.noise_macros(record)
    assert macros[macro_name("noise", ds, setting, "symmetric", "Max Diff", "Acc")] == "+50.00"
    assert macros[macro_name("noise", ds, setting, "symmetric", "Max Diff", "Acc", "Verdict")] == VERDICT_PHRASES[word]
    assert "+50.00 pp [" in noise.findings(record) and f"**{word}**" in noise.findings(record)


def test_the_long_tail_views_read_the_stored_verdicts():
    record = long_tail.with_verdicts(_committed("long_tail"))
    ds, setting = record["dataset"], "trained"
    smallest = min(record["results"]["settings"][setting]["curves"], key=float)
    stored = record["results"]["verdicts"]["settings"][setting][smallest]["attnknn_balanced_vs_reference"]["accuracy"]
    word = next(w for w in ("better", "worse") if w != stored["verdict"])
    stored.update(value=-0.5, verdict=word)
    macros = long_tail.long_tail_macros(record)
    assert macros[macro_name("long tail", ds, setting, "Min Diff", "Balanced", "Acc")] == "-50.00"
    assert macros[macro_name("long tail", ds, setting, "Min Diff", "Balanced", "Acc Verdict")] == VERDICT_PHRASES[word]


def test_the_k_sweep_views_read_the_stored_verdicts():
    record = k_sweep.with_verdicts(_committed("k_sweep"))
    ds, v = record["dataset"], record["results"]["verdicts"]
    v["counted"]["attnknn"]["accuracy"] = ["better"] * 7  # not what the results give
    v["seed_advantage"]["attnknn"]["accuracy"].update(k=3, value=0.5)
    v["differences"]["attnknn"]["raw"]["accuracy"]["5"].update(value=0.5, low=0.4, high=0.6)
    macros = k_sweep.k_sweep_macros(record)
    assert macros[macro_name("k sweep", ds, "attnknn", "better", "Count")] == "7"
    assert macros[macro_name("k sweep", ds, "attnknn", "K Count")] == "7"
    assert macros[macro_name("k sweep", ds, "attnknn", "BestGain", "K")] == "3"
    assert macros[macro_name("k sweep", ds, "attnknn", "BestGain", "Acc")] == "+50.00"
    assert "7 better over 7 k" in k_sweep.readme_lines([record])[0]
    assert k_sweep.table_frame(record).loc["5", "$\\Delta$ Attn-KNN"].startswith("+50.00")

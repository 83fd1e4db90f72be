"""The paper's numbers: the study's LaTeX macros (StudyFashionMnist...), read from its record."""

from __future__ import annotations

import numpy as np

from attnknn_lib.evaluation.verdicts import VERDICTS
from attnknn_lib.experiments.attention_study.config import ARTIFACTS, NAME, NOTEBOOK
from attnknn_lib.experiments.attention_study.measure import AS_TRAINED, DIFFERENCE, MAIN_ATTNKNN
from attnknn_lib.experiments.attention_study.views.cells import bracket
from attnknn_lib.experiments.attention_study.views.frames import gradient_shares
from attnknn_lib.experiments.attention_study.views.labels import below_budget, variant_label
from attnknn_lib.experiments.attention_study.views.sentences import (
    budgets,
    collapse_reading,
    end_to_end_reading,
    plain_answer,
)
from attnknn_lib.report.findings import seeds_text
from attnknn_lib.report.macros import VERDICT_PHRASES, macro_name, pct, record_macros, signed
from attnknn_lib.report.tables import DIFF_FORMAT


def study_macros(record: dict) -> dict[str, str]:
    """Headroom at k (clean and each noise setting), the ceilings, the chosen variant per setting
    with its difference and verdict, verdict counts, and the diagnostics (StudyFashionMnist...)."""
    ds, res = record["dataset"], record["results"]
    k = str(record["config"]["k"])
    out: dict[str, str] = {}
    out[macro_name(NAME, ds, "Trees Read")] = (  # what the boosted-trees learner read
        "as many neighbours as the tuned vote chose (so its wide votes are no handicap to them)")
    # the paper's sentence on the long-tailed models' budget, as the record's config has it
    out[macro_name(NAME, ds, "Long Tail Budget")] = (
        "The long-tailed models train on a subset for fewer epochs than main's: they are reported, not counted."
        if below_budget(record["config"]) else
        "The long-tailed models train at main's budget and count in the answer.")
    one_budget = bool(record["config"].get("head_lrs"))  # every variant searched its rate, as NCA does
    fits = [m for s in res["summary"]["settings"].values() for kv in (s.get("variants") or {}).values()
            for name, m in kv["methods"].items() if "fits" in m and (one_budget or "search" not in m)]
    if fits:  # the variants' training: at most head_epochs, stopped at a plateau
        out[macro_name(NAME, ds, "Head Epochs")] = str(record["config"]["head_epochs"])
        out[macro_name(NAME, ds, "Head Patience")] = str(record["config"]["head_patience"])
        n = record["config"]["train_queries"]
        out[macro_name(NAME, ds, "Head Queries")] = ("every memory query" if n == 0 else
                                                     f"a seeded subset of {n} memory queries")
        out[macro_name(NAME, ds, "Head Fits")] = str(sum(m["fits"] for m in fits))
        out[macro_name(NAME, ds, "Head No Plateau")] = str(sum(m["no_plateau"] for m in fits))
    for setting, s in res["summary"]["settings"].items():
        tag = setting.replace("/0.", " ").replace("/", " ")
        if setting.startswith("long_tail/"):  # one long-tailed memory: its macros do not name the ratio
            tag = "long tail"
            out[macro_name(NAME, ds, tag, "Ratio")] = setting.partition("/")[2]
            out[macro_name(NAME, ds, tag, "Seeds")] = str(len(s["seeds"]))
        h = s["headroom"].get(k)
        if h:
            for key, name in (("recall", "Recall"), ("uniform_accuracy", "Uniform"), ("fixable", "Fixable"),
                              ("all_agree_right", "AgreeRight"), ("all_agree_wrong", "AgreeWrong")):
                out[macro_name(NAME, ds, tag, name)] = pct(h[key])
            out[macro_name(NAME, ds, tag, "Within One")] = pct(h["fixable_within"]["1"])
        for fam, c in s["ceilings"].items():
            out[macro_name(NAME, ds, tag, fam, "Ceiling")] = pct(c["test_accuracy"]["mean"])
        out[macro_name(NAME, ds, tag, "Reference Acc")] = pct(s["reference"]["accuracy"]["mean"])
        out[macro_name(NAME, ds, tag, "Reference Choice")] = "; ".join(dict.fromkeys(s["reference"]["choices"]))
        # main's Attn-KNN against the tuned vote on its own embedding
        for metric in ("accuracy", "ece", "nll"):
            scale, dec, _ = DIFF_FORMAT[metric]
            v = s["attnknn"]["verdicts_reference"][metric]
            out[macro_name(NAME, ds, tag, "Attnknn Ref", metric)] = signed(scale * v["value"], dec)
            out[macro_name(NAME, ds, tag, "Attnknn Ref", metric, "Interval")] = bracket(v, scale, dec)
            if "verdict" in v:  # ECE is described only
                out[macro_name(NAME, ds, tag, "Attnknn Ref", metric, "Verdict")] = VERDICT_PHRASES[v["verdict"]]
        tuned = s["attnknn"].get("tuned")
        if tuned:  # main's Attn-KNN with the tuned vote's knobs chosen on validation
            out[macro_name(NAME, ds, tag, "Attnknn Tuned Ks")] = ", ".join(map(str, tuned["k"]))
            out[macro_name(NAME, ds, tag, "Attnknn Tuned Acc")] = pct(tuned["accuracy"]["mean"])
            for ref, metrics in (("verdicts_reference", ("accuracy", "nll", "brier")),
                                 ("verdicts_reference_nll", ("nll", "brier"))):
                for metric in metrics if ref in tuned else ():
                    scale, dec, _ = DIFF_FORMAT[metric]
                    v = tuned[ref][metric]
                    name = ("Attnknn Tuned Ref" if ref == "verdicts_reference" else "Attnknn Tuned Ref Nll") + f" {metric}"
                    out[macro_name(NAME, ds, tag, name)] = signed(scale * v["value"], dec)
                    out[macro_name(NAME, ds, tag, name, "Interval")] = bracket(v, scale, dec)
                    out[macro_name(NAME, ds, tag, name, "Verdict")] = VERDICT_PHRASES[v["verdict"]]
        f = s["reference"]["filter"]
        out[macro_name(NAME, ds, tag, "Filter Acc")] = pct(f["accuracy"]["mean"])
        out[macro_name(NAME, ds, tag, "Filter Ref Acc")] = signed(100 * f["verdict_reference"]["value"], 2)
        out[macro_name(NAME, ds, tag, "Filter Ref Verdict")] = VERDICT_PHRASES[f["verdict_reference"]["verdict"]]
        flipped = [d["settings"][setting]["flipped_share"] for d in res["per_seed"].values() if setting in d["settings"]]
        out[macro_name(NAME, ds, tag, "Flipped Percent")] = f"{100 * np.mean(flipped):.0f}"
        for kk, kv in (s.get("variants") or {}).items():
            chosen = kv["chosen"]
            if chosen is None:
                continue
            v = kv["methods"][chosen]["verdicts"]
            out[macro_name(NAME, ds, tag, f"k{kk}", "Chosen")] = variant_label(chosen)
            out[macro_name(NAME, ds, tag, f"k{kk}", "Chosen Acc")] = signed(100 * v["accuracy"]["value"], 2)
            out[macro_name(NAME, ds, tag, f"k{kk}", "Chosen Verdict")] = VERDICT_PHRASES[v["accuracy"]["verdict"]]
            out[macro_name(NAME, ds, tag, f"k{kk}", "Chosen Test Acc")] = pct(kv["methods"][chosen]["accuracy"]["mean"])
            out[macro_name(NAME, ds, tag, f"k{kk}", "Chosen Effective K")] = f"{kv['methods'][chosen]['effective_k']['mean']:.1f}"
            for name in ("blind_bonus", "label_aware", "readout", "query_only"):  # the prototype design, label-aware, control
                if name in kv["methods"]:
                    out[macro_name(NAME, ds, tag, f"k{kk}", name, "Verdict")] = VERDICT_PHRASES[
                        kv["methods"][name]["verdicts"]["accuracy"]["verdict"]]
                    out[macro_name(NAME, ds, tag, f"k{kk}", name, "Acc")] = signed(
                        100 * kv["methods"][name]["verdicts"]["accuracy"]["value"], 2)
            room = kv["learnable"]["verdicts"]["accuracy"]
            out[macro_name(NAME, ds, tag, f"k{kk}", "Learnable")] = signed(100 * room["value"], 2)
            out[macro_name(NAME, ds, tag, f"k{kk}", "Learnable Interval")] = bracket(room, 100, 2)
            out[macro_name(NAME, ds, tag, f"k{kk}", "Learnable Verdict")] = VERDICT_PHRASES[room["verdict"]]
            for what, n in (budgets(s, kv) or {}).items():
                out[macro_name(NAME, ds, tag, f"k{kk}", "Budget", what)] = str(n)
            out[macro_name(NAME, ds, tag, f"k{kk}", "Trees Acc")] = pct(kv["learner"]["accuracy"]["mean"])
            fixed = (kv["methods"].get("adaptive_k") or {}).get("fixed_k")
            if fixed:
                out[macro_name(NAME, ds, tag, f"k{kk}", "Adaptive Fixed K")] = "/".join(map(str, sorted(set(fixed["k"]))))
                out[macro_name(NAME, ds, tag, f"k{kk}", "Adaptive Vs Fixed Acc")] = signed(
                    100 * fixed["verdicts"]["accuracy"]["value"], 2)
                out[macro_name(NAME, ds, tag, f"k{kk}", "Adaptive Vs Fixed Verdict")] = VERDICT_PHRASES[
                    fixed["verdicts"]["accuracy"]["verdict"]]
            words = [m["verdicts"]["accuracy"]["verdict"] for n, m in kv["methods"].items() if n != "baseline"]
            for word in VERDICTS:
                out[macro_name(NAME, ds, tag, f"k{kk}", word)] = str(words.count(word))
            vr = kv["methods"][chosen]["verdicts_reference"]
            out[macro_name(NAME, ds, tag, f"k{kk}", "Chosen Ref Acc")] = signed(100 * vr["accuracy"]["value"], 2)
            out[macro_name(NAME, ds, tag, f"k{kk}", "Chosen Ref Verdict")] = VERDICT_PHRASES[vr["accuracy"]["verdict"]]
            words = [m["verdicts_reference"]["accuracy"]["verdict"] for n, m in kv["methods"].items()
                     if n != "baseline"]
            for word in VERDICTS:
                out[macro_name(NAME, ds, tag, f"k{kk}", "Ref", word)] = str(words.count(word))
            n = words.count("better")  # the count as the paper's sentence reads it
            out[macro_name(NAME, ds, tag, f"k{kk}", "Ref Better Phrase")] = (
                f"none of the {len(words)} heads beats it" if not n else
                f"{n} of the {len(words)} heads beat{'s' if n == 1 else ''} it")
    shares = gradient_shares(record)
    for split, value in shares.items():
        out[macro_name(NAME, ds, "Gradient Share", split)] = f"{100 * value:.1f}"
    per = [d["diagnostics"]["per_epoch"] for d in res["per_seed"].values()]
    last = [p["diag_gradient_share"][-1] for p in per if p["diag_gradient_share"][-1] is not None]
    if last:
        out[macro_name(NAME, ds, "Gradient Share Train Last")] = f"{100 * np.mean(last):.1f}"
    ratio = [p["diag_entropy_grad_ratio"][-1] for p in per if p["diag_entropy_grad_ratio"][-1] is not None]
    if ratio:
        out[macro_name(NAME, ds, "Entropy Grad Ratio")] = f"{np.mean(ratio):.2f}"
        weight = record["config"]["entropy_weight"]  # after its weight in the loss: what the optimiser sees
        out[macro_name(NAME, ds, "Entropy Grad Ratio Weighted")] = f"{weight * np.mean(ratio):.4f}"
    out[macro_name(NAME, ds, "Seeds")] = str(len(res["seeds"]))
    out[macro_name(NAME, ds, "Reference K")] = str(record["config"]["reference_k"])
    answer = plain_answer(record)
    if answer:
        out[macro_name(NAME, ds, "Plain Answer")] = answer
    e2e = res["summary"].get("end_to_end")
    if e2e:
        out[macro_name(NAME, ds, "End To End Seeds")] = str(len(e2e["seeds"]))
        for name, m in e2e["models"].items():
            tag = "No Bonus" if name == "no_bonus" else "Prototype"
            out[macro_name(NAME, ds, "End To End", tag, "Acc")] = pct(m["accuracy"]["mean"])
            out[macro_name(NAME, ds, "End To End", tag, "Effective K")] = f"{m['effective_k']['mean']:.2f}"
            out[macro_name(NAME, ds, "End To End", tag, "Temperature")] = f"{np.mean(m['temperatures_last']):.3f}"
            out[macro_name(NAME, ds, "End To End", tag, "Diff Acc")] = signed(100 * m["verdicts"]["accuracy"]["value"], 2)
            out[macro_name(NAME, ds, "End To End", tag, "Verdict")] = VERDICT_PHRASES[m["verdicts"]["accuracy"]["verdict"]]
        out[macro_name(NAME, ds, "End To End Reading")] = end_to_end_reading(e2e, int(k))
        d = e2e["no_bonus_minus_prototype"]["verdicts"]
        out[macro_name(NAME, ds, "End To End Bonus Diff Acc")] = signed(100 * d["accuracy"]["value"], 2)
        out[macro_name(NAME, ds, "End To End Bonus Diff Verdict")] = VERDICT_PHRASES[d["accuracy"]["verdict"]]
    for name, e in (res.get("second") or {}).items():
        for setting, s in e["summary"].items():
            tag = ("Second", name, setting.replace("/0.", " ").replace("/", " "))
            v = s["attnknn_vs_reference"]["accuracy"]
            out[macro_name(NAME, ds, *tag, "Ref Acc")] = signed(100 * v["value"], 2)
            out[macro_name(NAME, ds, *tag, "Ref Acc Low")] = signed(100 * v["low"], 2)
            out[macro_name(NAME, ds, *tag, "Ref Acc High")] = signed(100 * v["high"], 2)
            out[macro_name(NAME, ds, *tag, "Ref Acc Verdict Word")] = v["verdict"]
            room = s["learnable_vs_reference"]["accuracy"]
            out[macro_name(NAME, ds, *tag, "Learnable")] = signed(100 * room["value"], 2)
            out[macro_name(NAME, ds, *tag, "Learnable Interval")] = bracket(room, 100, 2)
            out[macro_name(NAME, ds, *tag, "Learnable Verdict Word")] = room["verdict"]
        out[macro_name(NAME, ds, "Second", name, "Splits")] = str(e["splits"])
        out[macro_name(NAME, ds, "Second", name, "Title")] = e["title"]
    sweep = collapse_reading(record)
    if sweep:
        out[macro_name(NAME, ds, "Collapse Reading")] = sweep.replace("**", "")  # the verdict's bold is markdown
        out[macro_name(NAME, ds, "Collapse Seeds")] = seeds_text(len(res["summary"]["settings"]["clean"]["collapse"]["seeds"]))
        rows = res["summary"]["settings"]["clean"]["collapse"]["settings"]
        for name, tag in ((MAIN_ATTNKNN, "Main"), (AS_TRAINED, "As Trained"), (DIFFERENCE, "Difference")):
            e = rows.get(name)
            if not e:
                continue
            out[macro_name(NAME, ds, "Mechanism", tag, "Score Range")] = f"{e['score_range']['mean']:.3f}"
            out[macro_name(NAME, ds, "Mechanism", tag, "Effective K")] = f"{e['effective_k']['mean']:.2f}"
            if e["temperature"]["mean"] is not None:
                out[macro_name(NAME, ds, "Mechanism", tag, "Temperature")] = f"{e['temperature']['mean']:.3f}"
            v = e["verdicts_reference"]["accuracy"]
            out[macro_name(NAME, ds, "Mechanism", tag, "Ref Acc")] = signed(100 * v["value"], 2)
            out[macro_name(NAME, ds, "Mechanism", tag, "Ref Acc Interval")] = bracket(v, 100, 2)
            out[macro_name(NAME, ds, "Mechanism", tag, "Ref Acc Verdict Word")] = v["verdict"]
    return out


def macros(records: list[dict]) -> dict[str, str]:
    return record_macros(records, study_macros, NOTEBOOK, ARTIFACTS.record_file)

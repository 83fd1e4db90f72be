"""The record's summary: means over seeds and seed-level verdicts per setting, k and variant.

Also the learnable headroom's (:func:`summarise_learnable`) and the end-to-end control's
(:func:`summarise_end_to_end`)."""

from __future__ import annotations

import numpy as np

from attnknn_lib.evaluation.verdicts import seed_level
from attnknn_lib.experiments.attention_study.config import Config
from attnknn_lib.experiments.attention_study.measure.controls import END_TO_END
from attnknn_lib.experiments.attention_study.measure.pairing import COMPARED, PROPER, pooled_test_se, seed_verdicts
from attnknn_lib.experiments.attention_study.measure.variants import collapse_what, reached_plateau


def _mean_sd(values: list[float | None]) -> dict:
    v = np.array([x for x in values if x is not None], dtype=np.float64)
    if not v.size:
        return {"mean": None, "std": None, "values": []}
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else None, "values": v.tolist()}


def summarise(cfg: Config, per_seed: dict) -> dict:
    """Means over seeds of the headroom and ceilings; per setting, k and variant: accuracy, the
    seed-level differences to the tuned baseline with verdicts, effective k, captured headroom,
    flip detection; the variant chosen on validation."""
    all_seeds = list(per_seed)
    names = list(dict.fromkeys(st for s in all_seeds for st in per_seed[s]["settings"]))
    out: dict = {"settings": {}}
    for setting in names:
        seeds = [s for s in all_seeds if setting in per_seed[s]["settings"]]  # the long-tailed memory: fewer
        entry = per_seed[seeds[0]]["settings"][setting]
        s_out = {"seeds": [int(s) for s in seeds], "headroom": {}, "ceilings": {}}
        for k in entry["headroom"]:
            rows = [per_seed[s]["settings"][setting]["headroom"][k] for s in seeds]
            s_out["headroom"][k] = {key: _mean_sd([r[key] for r in rows])["mean"] for key in rows[0]
                                    if key not in ("k", "fixable_within")}
            s_out["headroom"][k]["fixable_within"] = {m: float(np.mean([r["fixable_within"][m] for r in rows]))
                                                      for m in rows[0]["fixable_within"]}
        for fam in entry["ceilings"]:
            rows = [per_seed[s]["settings"][setting]["ceilings"][fam] for s in seeds]
            s_out["ceilings"][fam] = {"test_accuracy": _mean_sd([r["test_accuracy"] for r in rows]),
                                      "choices": [f"{r['rule']} {r['param'] if r['param'] is not None else ''} k={r['k']}"
                                                  .replace("  ", " ") for r in rows]}
        if "reference" in entry:
            refs = [per_seed[s]["settings"][setting]["reference"] for s in seeds]
            if "reference_nll" in refs[0]:
                rn = [r["reference_nll"] for r in refs]
                s_out["reference_nll"] = {"nll_calibrated": _mean_sd([r["test_calibrated"]["nll"]["value"] for r in rn]),
                                          "brier_calibrated": _mean_sd([r["test_calibrated"]["brier"]["value"] for r in rn]),
                                          "choices": [r["label"] for r in rn], "tuned_on": [r["tuned_on"] for r in rn],
                                          "edges": sorted({e for r in rn for e in r["edges"]}),
                                          "k_searched": [r.get("k_searched") for r in rn],
                                          # seeds whose doubling of k stopped on NLL_GAIN_TOL, not at an end
                                          "stopped_by_gain": sum(r.get("k_gain") is not None for r in rn)}
            s_out["reference"] = {"accuracy": _mean_sd([r["test_raw"]["accuracy"]["value"] for r in refs]),
                                  "ece_calibrated": _mean_sd([r["test_calibrated"]["ece"]["value"] for r in refs]),
                                  "nll_calibrated": _mean_sd([r["test_calibrated"]["nll"]["value"] for r in refs]),
                                  "brier_calibrated": _mean_sd([r["test_calibrated"]["brier"]["value"] for r in refs]),
                                  "k": [int(r["choice"]["k"]) for r in refs],
                                  "choices": [r["label"] for r in refs], "configs": [r["configs"] for r in refs],
                                  "edges": sorted({e for r in refs for e in r["edges"]}),
                                  "k_searched": [r["k_searched"] for r in refs],
                                  # the tuned vote is strongest on validation: how much of that its test accuracy keeps
                                  "val_test_gap": _mean_sd([r["val_accuracy"] - r["test_raw"]["accuracy"]["value"]
                                                            for r in refs])}
            if "attnknn" in entry:
                ms = [per_seed[s]["settings"][setting]["attnknn"] for s in seeds]
                s_out["attnknn"] = {"accuracy": _mean_sd([m["test_raw"]["accuracy"]["value"] for m in ms]),
                                    "ece_calibrated": _mean_sd([m["test_calibrated"]["ece"]["value"] for m in ms]),
                                    "effective_k": _mean_sd([m["effective_k"] for m in ms]),
                                    "verdicts_reference": seed_verdicts(cfg, [m["diff_reference"] for m in ms])}
                if "diff_reference_nll" in ms[0]:
                    s_out["attnknn"]["verdicts_reference_nll"] = seed_verdicts(
                        cfg, [m["diff_reference_nll"] for m in ms], PROPER)
                if "tuned" in ms[0]:
                    s_out["attnknn"]["tuned"] = summarise_tuned(cfg, [m["tuned"] for m in ms])
            if all("learned_metric" in per_seed[s]["settings"][setting] for s in seeds):
                s_out["learned_metric"] = summarise_learned(
                    cfg, [per_seed[s]["settings"][setting]["learned_metric"] for s in seeds])
            with_sweep = [s for s in seeds if "collapse" in per_seed[s]["settings"][setting]]
            if with_sweep:
                sweeps = [per_seed[s]["settings"][setting]["collapse"] for s in with_sweep]
                s_out["collapse"] = {"seeds": [int(s) for s in with_sweep], "settings": {
                    name: {"what": collapse_what(name),
                           "effective_k": _mean_sd([w[name]["effective_k"] for w in sweeps]),
                           # the score range beside the temperature (records from before it: None)
                           "score_range": _mean_sd([w[name].get("score_range") for w in sweeps]),
                           "temperature": _mean_sd([float(np.mean(w[name]["temperatures"]))
                                                    if w[name].get("temperatures") else None for w in sweeps]),
                           "accuracy": _mean_sd([w[name]["accuracy"] for w in sweeps]),
                           "verdicts_reference": seed_verdicts(cfg, [w[name]["diff_reference"] for w in sweeps])}
                    for name in sweeps[0]}}
            if "filter" in refs[0]:
                fs = [r["filter"] for r in refs]
                s_out["reference"]["filter"] = {
                    "accuracy": _mean_sd([f["test_accuracy"] for f in fs]), "choices": [f["label"] for f in fs],
                    "edges": sorted({e for f in fs for e in f["edges"]}),
                    "verdict_reference": seed_level([f["diff_reference"]["accuracy"]["value"] for f in fs],
                                                    pooled_test_se([f["diff_reference"] for f in fs])["accuracy"],
                                                    "accuracy", margin=cfg.margin_accuracy)}
        if "variants" in entry:
            s_out["variants"] = {}
            for k in entry["variants"]:
                k_out = {"methods": {}}
                runs_k = [per_seed[s]["settings"][setting]["variants"][k] for s in seeds]
                k_out["uniform_accuracy"] = _mean_sd([r["uniform_accuracy"] for r in runs_k])["mean"]
                k_out["recall"] = _mean_sd([r["recall"] for r in runs_k])["mean"]
                k_out["baseline_rules"] = [r["baseline_rule"] for r in runs_k]
                for name in runs_k[0]["methods"]:
                    ms = [r["methods"][name] for r in runs_k]
                    m_out = {"val_accuracy": _mean_sd([m["val_accuracy"] for m in ms]),
                             "accuracy": _mean_sd([m["test_raw"]["accuracy"]["value"] for m in ms]),
                             "ece_calibrated": _mean_sd([m["test_calibrated"]["ece"]["value"] for m in ms]),
                             "nll_calibrated": _mean_sd([m["test_calibrated"]["nll"]["value"] for m in ms])}
                    if "diff_reference" in ms[0]:
                        m_out["verdicts_reference"] = seed_verdicts(cfg, [m["diff_reference"] for m in ms])
                    if "diff_reference_nll" in ms[0]:
                        m_out["verdicts_reference_nll"] = seed_verdicts(cfg, [m["diff_reference_nll"] for m in ms],
                                                                        PROPER)
                    if name != "baseline":
                        m_out["effective_k"] = _mean_sd([m["effective_k"] for m in ms])
                        m_out["captured"] = _mean_sd([m["captured"] for m in ms])
                        m_out["best_epochs"] = [e for m in ms for e in m["best_epoch"]]
                        m_out["epochs"] = cfg.head_epochs
                        m_out["no_plateau"] = sum(not reached_plateau(len(h), b, cfg.head_patience)
                                                  for m in ms for h, b in zip(m["history"], m["best_epoch"]))
                        m_out["fits"] = sum(len(m["history"]) for m in ms)
                        if "search" in ms[0]:
                            m_out["search"] = search_summary([f for m in ms for f in m["search"]])
                        if "flips" in ms[0]:
                            m_out["flip_ratio"] = _mean_sd([m["flips"]["ratio"] for m in ms])
                            m_out["flip_auroc"] = _mean_sd([m["flips"]["auroc"] for m in ms])
                        m_out["verdicts"] = seed_verdicts(cfg, [m["diff"] for m in ms])
                        if "fixed_k" in ms[0]:
                            fk = [m["fixed_k"] for m in ms]
                            m_out["fixed_k"] = {"k": [f["k"] for f in fk],
                                                "accuracy": _mean_sd([f["accuracy"] for f in fk]),
                                                "verdicts": seed_verdicts(cfg, [f["diff"] for f in fk])}
                    k_out["methods"][name] = m_out
                variants = [n for n in k_out["methods"] if n != "baseline"]
                if "learner" in runs_k[0]:
                    k_out.update(summarise_learnable(cfg, runs_k, k_out["methods"]))
                k_out["chosen"] = max(variants, key=lambda n: k_out["methods"][n]["val_accuracy"]["mean"]) \
                    if variants else None
                s_out["variants"][k] = k_out
        out["settings"][setting] = s_out
    e2e = {s: per_seed[s]["end_to_end"] for s in all_seeds if "end_to_end" in per_seed[s]}
    if e2e:
        out["end_to_end"] = summarise_end_to_end(cfg, e2e)
    return out


def summarise_tuned(cfg: Config, ts: list[dict]) -> dict:
    """Main's Attn-KNN with the tuned vote's knobs over seeds: accuracy, calibrated NLL and Brier, each seed's
    choice and k, how many seeds chose a k other than the trained one, the open edges, and the
    seed-level verdicts against the tuned vote and (calibration endpoint) the NLL-tuned vote."""
    out = {"accuracy": _mean_sd([t["test_raw"]["accuracy"]["value"] for t in ts]),
           "ece_calibrated": _mean_sd([t["test_calibrated"]["ece"]["value"] for t in ts]),
           "nll_calibrated": _mean_sd([t["test_calibrated"]["nll"]["value"] for t in ts]),
           "brier_calibrated": _mean_sd([t["test_calibrated"]["brier"]["value"] for t in ts]),
           "k": [t["k"] for t in ts], "k_trained": ts[0]["k_trained"], "choices": [t["label"] for t in ts],
           "k_differs": sum(t["k_differs"] for t in ts), "edges": sorted({e for t in ts for e in t["edges"]}),
           "calibration_choices": [t["calibration"]["label"] for t in ts],
           "verdicts_reference": seed_verdicts(cfg, [t["diff_reference"] for t in ts])}
    if "diff_reference_nll" in ts[0]:
        out["verdicts_reference_nll"] = seed_verdicts(cfg, [t["diff_reference_nll"] for t in ts], PROPER)
    return out


def summarise_learnable(cfg: Config, runs_k: list[dict], methods: dict) -> dict:
    """Over seeds at one k: the boosted-trees learner against the tuned vote, the learnable headroom
    (best learner minus the tuned vote, seed-level), and per variant the share of it captured:
    mean(variant - reference) / mean(best learner - reference), None when the headroom does not
    establish a gain (seed-level verdict not "better": no room a learner could show)."""
    ls = [r["learner"] for r in runs_k]
    room = seed_verdicts(cfg, [r["learnable"]["diff_reference"] for r in runs_k])
    out = {"learner": {"accuracy": _mean_sd([x["test_raw"]["accuracy"]["value"] for x in ls]),
                       "val_accuracy": _mean_sd([x["val_accuracy"] for x in ls]),
                       "configs": [x["configs"] for x in ls],
                       "rounds": [f["rounds"] for x in ls for f in x["folds"]],
                       "edges": sum(f["edge"] for x in ls for f in x["folds"]),
                       "verdicts_reference": seed_verdicts(cfg, [x["diff_reference"] for x in ls]),
                       "k": [x["k"] for x in ls], "fold_queries": ls[0]["fold_queries"]},
           "learnable": {"learners": [r["learnable"]["learner"] for r in runs_k], "verdicts": room}}
    head = room["accuracy"]["value"]
    for name, m in methods.items():
        if name != "baseline" and "verdicts_reference" in m and name != "query_only":
            m["captured_learnable"] = (m["verdicts_reference"]["accuracy"]["value"] / head
                                       if room["accuracy"]["verdict"] == "better" else None)
    return out


def search_summary(folds: list[dict]) -> dict:
    """A searched learner's budget over its fits (one per seed and fold): configurations scored,
    chosen learning rates, and how many fits chose a rate at an end of the grid or stopped short
    of a plateau."""
    return {"configs": [f["configs"] for f in folds], "lrs": [f["lr"] for f in folds],
            "edges": sum(f["edge"] for f in folds), "no_plateau": sum(not f["plateau"] for f in folds),
            "fits": len(folds)}


def summarise_end_to_end(cfg: Config, per_seed: dict) -> dict:
    """Over the seeds with an end-to-end control: each model's test accuracy, calibrated ECE and
    NLL, effective k, selected epochs, last temperatures and head entropy per epoch, its verdicts
    against its own tuned kNN rule; the no-bonus model minus the prototype, with verdicts."""
    out: dict = {"seeds": [int(s) for s in per_seed], "models": {}}
    for name in END_TO_END:
        es = [e[name] for e in per_seed.values()]
        out["models"][name] = {
            "accuracy": _mean_sd([e["test_raw"]["accuracy"]["value"] for e in es]),
            "ece_calibrated": _mean_sd([e["test_calibrated"]["ece"]["value"] for e in es]),
            "nll_calibrated": _mean_sd([e["test_calibrated"]["nll"]["value"] for e in es]),
            "baseline_accuracy": _mean_sd([e["baseline_accuracy"] for e in es]),
            "baseline_rules": [e["baseline_rule"] for e in es],
            "effective_k": _mean_sd([e["effective_k"] for e in es]),
            "best_epochs": [e["best_epoch"] for e in es], "epochs": es[0]["epochs"],
            "temperatures_last": np.mean([e["temperatures"][-1] for e in es], 0).tolist(),
            "head_entropy": [float(np.mean([e["head_entropy"][i] for e in es])) if es[0]["head_entropy"][i] is not None
                             else None for i in range(len(es[0]["head_entropy"]))],
            "verdicts": seed_verdicts(cfg, [e["diff"] for e in es])}
    out["no_bonus_minus_prototype"] = {
        "accuracy": _mean_sd([e["no_bonus_minus_prototype"]["raw"]["accuracy"]["value"] for e in per_seed.values()]),
        "verdicts": seed_verdicts(cfg, [e["no_bonus_minus_prototype"] for e in per_seed.values()])}
    return out


def summarise_learned(cfg: Config, entries: list[dict]) -> dict:
    """One setting's learned metrics over seeds: per method the mean accuracy and calibrated NLL and
    Brier, NCA's training (epochs, plateaus) and the seed-level verdicts against the references; and
    main's Attn-KNN with the tuned vote's knobs against NCA."""

    out: dict = {}
    for name in ("nca", "linear_probe", "nca_nll"):
        es = [e[name] for e in entries]
        out[name] = {"accuracy": _mean_sd([e["test_raw"]["accuracy"]["value"] for e in es]),
                     "nll_calibrated": _mean_sd([e["test_calibrated"]["nll"]["value"] for e in es]),
                     "brier_calibrated": _mean_sd([e["test_calibrated"]["brier"]["value"] for e in es]),
                     "choices": [e.get("label") for e in es]}
        if "nca" in es[0]:
            out[name]["nca"] = {"best_epochs": [e["nca"]["best_epoch"] for e in es],
                                "plateaus": sum(e["nca"]["plateau"] for e in es), "lrs": [e["nca"]["lr"] for e in es]}
        if "diff_reference" in es[0]:
            out[name]["verdicts_reference"] = seed_verdicts(cfg, [e["diff_reference"] for e in es])
        if "diff_reference_nll" in es[0]:
            out[name]["verdicts_reference_nll"] = seed_verdicts(cfg, [e["diff_reference_nll"] for e in es],
                                                               PROPER)
    if all("attnknn_tuned_vs_nca" in e for e in entries):
        out["attnknn_tuned_vs_nca"] = seed_verdicts(cfg, [e["attnknn_tuned_vs_nca"] for e in entries],
                                                    tuple(c for c in COMPARED if c[0] != "ece"))
    return out

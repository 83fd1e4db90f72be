"""Attention-study views: tables, figures, macros, README lines and the notebook's findings, from a record."""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnknn_lib.base.paths import Paths
from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.evaluation.metrics import N_BINS
from attnknn_lib.evaluation.verdicts import VERDICTS
from attnknn_lib.experiments.attention_study.config import ARTIFACTS, NAME, NOTEBOOK, VARIANTS
from attnknn_lib.experiments.attention_study.measure import (
    AS_TRAINED,
    END_TO_END,
    gallery_key,
    gallery_path,
)
from attnknn_lib.experiments.fixed_embedding import HeadKnobs as FixedEmbeddingConfig
from attnknn_lib.experiments.fixed_embedding import k_range
from attnknn_lib.experiments.shared import output_context
from attnknn_lib.report import figures
from attnknn_lib.report.figures import plt
from attnknn_lib.report.findings import markdown_lists, seeds_text
from attnknn_lib.report.macros import VERDICT_PHRASES, macro_name, pct, record_macros, signed
from attnknn_lib.report.readme import per_dataset
from attnknn_lib.report.tables import DIFF_FORMAT, booktabs, num, sd_text

VERDICT_MARK = {"better": "B", "worse": "W", "equivalent": "E", "inconclusive": "?"}
SHORT = {"baseline": "tuned kNN", "blind_bonus": "blind, +H bonus", "blind_none": "blind, no H term",
         "blind_penalty": "blind, H penalty", "blind_heldout": "blind, held-out", "label_aware": "label-aware",
         "label_aware_heldout": "label-aware, held-out",
         "readout": "readout", "query_only": "query only", "adaptive_k": "k-mixture"}  # the LaTeX table's row names
SETTING_TITLES = {"clean": "clean memory"}


def setting_title(setting: str) -> str:
    """'asymmetric/0.4' -> 'asymmetric 40 %'."""
    if setting in SETTING_TITLES:
        return SETTING_TITLES[setting]
    kind, _, rate = setting.partition("/")
    if kind == "long_tail":  # a memory of its own model, retrained on a long-tailed subset
        return f"long tail {float(rate):g} (retrained)"
    return f"{kind} {100 * float(rate):g} %"


def is_noise(setting: str) -> bool:
    """A memory with flipped labels (not the clean or the long-tailed one)."""
    return setting.split("/")[0] in ("symmetric", "asymmetric")


def short_setting(setting: str) -> str:
    """'asymmetric/0.4' -> 'asym. 40 %' (table rows)."""
    return setting_title(setting).replace("clean memory", "clean").replace("asymmetric", "asym.").replace(
        "symmetric", "sym.").replace(" (retrained)", "")


def variant_label(name: str) -> str:
    return "tuned kNN (baseline)" if name == "baseline" else VARIANTS[name][0]


def _seeds(res: dict) -> str:
    n = len(res["seeds"])
    return f"{n} seed{'s' if n != 1 else ''}"


# ----------------------------------------------------------------------------- frames

def headroom_frame(record: dict, latex: bool = False, ks: tuple[int, ...] | None = None) -> pd.DataFrame:
    """Per setting and k (``ks``, every k measured if None): recall@k, uniform vote, all-agree shares,
    fixable share and its part within 1 / 2 / 4 votes (test, % of queries, mean over seeds)."""
    pc = "" if latex else " (%)"
    le = "$\\le$" if latex else "within "
    rows = {}
    for setting, s in record["results"]["summary"]["settings"].items():
        for k, h in s["headroom"].items():
            if ks is not None and int(k) not in ks:
                continue
            rows[f"{short_setting(setting) if latex else setting_title(setting)}, k = {k}"] = {
                f"recall@k{pc}": pct(h["recall"]), f"uniform{pc}": pct(h["uniform_accuracy"]),
                f"agree, right{pc}": pct(h["all_agree_right"]), f"agree, wrong{pc}": pct(h["all_agree_wrong"]),
                f"fixable{pc}": pct(h["fixable"]),
                **{f"{le}{m} vote{'s' if m != '1' else ''}{pc}": pct(v) for m, v in h["fixable_within"].items()}}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "memory, k"
    return df


def ceilings_frame(record: dict) -> pd.DataFrame:
    """Per setting: the two ceilings tuned on validation (test accuracy, the rule each seed chose)."""
    rows = {}
    for setting, s in record["results"]["summary"]["settings"].items():
        for fam, c in s["ceilings"].items():
            acc = c["test_accuracy"]
            rows[(setting_title(setting), fam.replace("_", "-"))] = {
                "test accuracy (%)": f"{100 * acc['mean']:.2f} ± {sd_text(acc['std'], 100, 2)}",
                "chosen on validation (per seed)": "; ".join(c["choices"])}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index = [f"{a}: {b}" for a, b in df.index]
    df.index.name = "ceiling"
    return df


def reference_frame(record: dict, latex: bool = False) -> pd.DataFrame:
    """Per setting: the strongest non-learned rule (vote rule, temperature, k, consistency filter and
    prior exponent tuned on validation), its test accuracy and calibrated ECE (mean ± s.d. over
    seeds), each seed's choice, the configurations scored and the neighbours searched."""
    pc = "\\%" if latex else "%"
    rows = {}
    for setting, s in record["results"]["summary"]["settings"].items():
        ref = s.get("reference")
        if not ref:
            continue
        acc = ref["accuracy"]
        choices = list(dict.fromkeys(ref["choices"]))  # seeds that chose alike: named once
        rows[short_setting(setting) if latex else setting_title(setting)] = {
            f"acc. ({pc})": f"{100 * acc['mean']:.2f} ± {sd_text(acc['std'], 100, 2)}".replace("±", "$\\pm$" if latex
                                                                                                 else "±"),
            "ECE cal.": f"{ref['ece_calibrated']['mean']:.4f}",
            "chosen on validation (per seed; alike once)": "; ".join(choices),
            "configs": f"{int(np.mean(ref['configs']))}",
            "open edge": ", ".join(ref["edges"]) or "none",
            **({f"label filter ({pc})": _filter_cell(ref["filter"], latex)} if ref.get("filter") else {})}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "memory"
    return df


def _bracket(v: dict, scale: float, dec: int) -> str:
    """'[low, high]' of a seed-level difference, or '(one seed: no interval)' where there is none."""
    if v.get("low") is None or v["low"] != v["low"]:
        return "(one seed: no interval)"
    return f"[{signed(scale * v['low'], dec)}, {signed(scale * v['high'], dec)}]"


def _filter_cell(f: dict, latex: bool) -> str:
    """The label-filtering baseline: its accuracy and its difference to the reference with the verdict."""
    v = f["verdict_reference"]
    mark = VERDICT_MARK[v["verdict"]] if latex else v["verdict"]
    return f"{100 * f['accuracy']['mean']:.2f} ({signed(100 * v['value'], 2)} {mark})"


def learnable_frame(record: dict, latex: bool = False) -> pd.DataFrame:
    """Per setting and k at which variants were trained: recall@k, the reference, the boosted-trees
    learner and the label-aware head trained on held-out queries (test accuracy, mean over seeds), the
    learnable headroom (the learner with the better out-of-fold validation accuracy minus the
    reference, seed-level interval and verdict) and the share of it the prototype's head and the
    variant chosen on validation captured ("--": no headroom established, its verdict not "better"); then
    one row per second dataset and setting (its hold-out splits, split-level; proto.: main's Attn-KNN)."""
    pc = "\\%" if latex else "%"
    rows = {}
    for setting, s in record["results"]["summary"]["settings"].items():
        for kk, kv in (s.get("variants") or {}).items():
            if "learnable" not in kv:
                continue
            room = kv["learnable"]["verdicts"]["accuracy"]
            held = kv["methods"].get("label_aware_heldout")

            def cap(name: str) -> str:
                m = kv["methods"].get(name) or {}
                c = m.get("captured_learnable")
                return "--" if c is None else f"{num(c, 0, 100):.0f}"
            label = f"{short_setting(setting) if latex else setting_title(setting)}, k = {kk}"
            u = "" if latex else f" ({pc})"  # the LaTeX table names its units in the caption, to fit the page
            rows[label] = {
                f"recall@k{u}": pct(s["headroom"][kk]["recall"]) if kk in s["headroom"] else "",
                f"ref.{u}": pct(s["reference"]["accuracy"]["mean"]),
                f"trees{u}": pct(kv["learner"]["accuracy"]["mean"]),
                ("l.-aware" if latex else f"label-aware held-out{u}"): pct(held["accuracy"]["mean"]) if held else "",
                ("headroom (pp)" if latex else "learnable headroom (pp)"): _diff_cell(room, "accuracy", latex),
                ("proto." if latex else f"proto. capt.{u}"): cap("blind_bonus"),
                ("chosen" if latex else f"chosen capt.{u}"): cap(kv["chosen"])}
    k = record["config"]["k"]
    for e in (record["results"].get("second") or {}).values():  # the second dataset: split-level, no variants
        for setting, s in e["summary"].items():
            if "learnable_vs_reference" not in s:
                continue
            room = s["learnable_vs_reference"]["accuracy"]
            a = s["attnknn_vs_reference"]["accuracy"]
            cap = a["value"] / room["value"] if room["verdict"] == "better" else None
            label = f"{e['title']}, {short_setting(setting) if latex else setting_title(setting)}, k = {k}"
            u = "" if latex else f" ({pc})"
            rows[label] = {
                f"recall@k{u}": pct(s["recall"]), f"ref.{u}": pct(s["mean"]["reference"]["accuracy"]),
                f"trees{u}": pct(s["mean"]["gbm"]["accuracy"]),
                ("l.-aware" if latex else f"label-aware held-out{u}"): pct(s["mean"]["label_aware_heldout"]["accuracy"]),
                ("headroom (pp)" if latex else "learnable headroom (pp)"): _diff_cell(room, "accuracy", latex),
                ("proto." if latex else f"proto. capt.{u}"): "--" if cap is None else f"{num(cap, 0, 100):.0f}",
                ("chosen" if latex else f"chosen capt.{u}"): ""}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "memory, k"
    return df


def collapse_frame(record: dict, latex: bool = False) -> pd.DataFrame:
    """The sweep of what could hold the label-blind attention at uniform weights (clean memory, k of
    the experiment, no entropy term): per setting its effective k on test, its accuracy and its
    difference to the reference with the verdict (mean over the sweep's seeds)."""
    sweep = record["results"]["summary"]["settings"].get("clean", {}).get("collapse")
    if not sweep:
        return pd.DataFrame()
    k = record["config"]["k"]
    pc = "\\%" if latex else "%"
    rows = {}
    for name, e in sweep["settings"].items():
        rows[name] = {"what changes": e["what"], f"effective k (of {k})": f"{e['effective_k']['mean']:.2f}",
                      f"acc. ({pc})": pct(e["accuracy"]["mean"]),
                      "vs ref. (pp)": _diff_cell(e["verdicts_reference"]["accuracy"], "accuracy", latex)}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "setting"
    return df


def second_frame(record: dict, latex: bool = False) -> pd.DataFrame:
    """The second study: per dataset and memory setting, the strongest rule's accuracy and its k per
    split, main's Attn-KNN, the uniform vote at k and the learnable headroom (the better learner), each
    minus the strongest rule (split-level; in LaTeX only Attn-KNN's with its interval, to fit the page)."""
    second = record["results"].get("second") or {}
    k = record["config"]["k"]
    pc = "\\%" if latex else "%"
    rows = {}
    for e in second.values():
        for setting, s in e["summary"].items():
            ks = sorted(s["reference_k"])
            rows[f"{e['title']}, {short_setting(setting) if latex else setting_title(setting)}"] = {
                f"ref. ({pc})": pct(s["mean"]["reference"]["accuracy"]),
                "ref. k": f"{ks[0]}" if ks[0] == ks[-1] else f"{ks[0]}-{ks[-1]}",
                f"Attn-KNN ({pc})": pct(s["mean"]["attnknn"]["accuracy"]),
                "Attn-KNN $-$ ref." if latex else "Attn-KNN - ref. (pp)":
                    _diff_cell(s["attnknn_vs_reference"]["accuracy"], "accuracy", latex),
                "$\\Delta$ ECE" if latex else "Δ ECE": _diff_cell(s["attnknn_vs_reference"]["ece"], "ece", latex,
                                                                  interval=False),
                "unif. $-$ ref." if latex else f"uniform k={k} - ref. (pp)":
                    _diff_cell(s["uniform_vs_reference"]["accuracy"], "accuracy", latex, interval=not latex),
                **({("learnable" if latex else "learnable (pp)"): _diff_cell(s["learnable_vs_reference"]["accuracy"], "accuracy", latex,
                                                 interval=not latex)} if "learnable_vs_reference" in s else {})}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "dataset, memory"
    return df


def second_line(record: dict) -> str | None:
    """One descriptive clause per second dataset: in how many hold-out splits main's Attn-KNN and the
    strongest rule differ by exactly 0 in accuracy on the clean memory (a difference with no spread
    says nothing about a method: both are right on the same points), and the mean difference per
    setting; None without a second study. It is counted in no verdict."""
    parts = []
    for e in (record["results"].get("second") or {}).values():
        per = e["summary"].get("clean", {}).get("attnknn_vs_reference", {}).get("accuracy", {}).get("per_seed") or []
        zeros = sum(abs(d) < 1e-12 for d in per)
        cells = [f"{setting_title(st)} {signed(100 * s['attnknn_vs_reference']['accuracy']['value'], 2)} pp"
                 for st, s in e["summary"].items()]
        parts.append(f"on {e['title']}, Attn-KNN and the strongest rule give the same accuracy in {zeros} of "
                     f"{len(per)} hold-out splits on the clean memory; mean differences " + "; ".join(cells))
    return ". ".join(parts) or None


def _reference_ks(s: dict) -> list[int]:
    """The reference's chosen k per seed (from its labels in an older record)."""
    ref = s.get("reference") or {}
    if "k" in ref:
        return ref["k"]
    return [int(part.strip()[2:]) for c in ref.get("choices", []) for part in c.split(",") if part.strip().startswith("k=")]


RETRAINED = "long_tail/"  # settings whose models are retrained: counted only at main's budget


def below_budget(cfg: dict) -> bool:
    """Whether the record's long-tailed models trained below main's budget (a subset of the rows or
    fewer epochs than main's recipe: either knob set)."""
    return bool(cfg.get("long_tail_max_train", 1) or cfg.get("long_tail_epochs", 1))


def counted(setting: str, cfg: dict) -> bool:
    """Whether a setting counts toward the headline: its models trained at main's budget."""
    return not (setting.startswith(RETRAINED) and below_budget(cfg))


def attnknn_line(record: dict) -> str:
    """Attn-KNN itself against the strongest rule in every setting the record measured it in, then
    the reference's k where Attn-KNN loses (the reason a fixed k = 16 loses under noise)."""
    res, k = record["results"], str(record["config"]["k"])
    settings = res["summary"]["settings"]
    cells = []
    for st, s in settings.items():
        if "attnknn" not in s:
            continue
        v = s["attnknn"]["verdicts_reference"]["accuracy"]
        note = "" if counted(st, record["config"]) else " (not counted: models below main's budget)"
        cells.append(f"{setting_title(st)} {_interval(v, 'accuracy')}{note}")
    clean = settings["clean"]
    losses = [st for st, s in settings.items() if "attnknn" in s and
              s["attnknn"]["verdicts_reference"]["accuracy"]["verdict"] == "worse"]
    wide = [st for st in losses if max(_reference_ks(settings[st]) or [0]) > int(k)]
    noisy = [st for st in wide if is_noise(st)]
    why = ""
    if wide:
        ranges = ", ".join(f"{k_range(_reference_ks(settings[st]))} ({setting_title(st)})" for st in wide)
        why = (f" Where it loses, the rule votes over more neighbours than Attn-KNN's fixed {k}: k {ranges}"
               + (f"; a wider vote outweighs flipped labels, and Attn-KNN's weighting of {k}, trained on clean "
                  f"labels, does not." if noisy else "."))
    return (f"- **Attn-KNN** ({REGISTRY[record['dataset']].title}, trained end to end, "
            f"{seeds_text(len(clean['seeds']))}) against the strongest rule that learns nothing on its own embedding, "
            f"accuracy: " + "; ".join(cells) + "." + why)


def proper_line(record: dict) -> str | None:
    """Calibration by proper scores: Attn-KNN's and the chosen head's calibrated NLL against the
    reference tuned on NLL, per setting, with what 5 seeds resolve; None for a record without it."""
    k = str(record["config"]["k"])
    cells = []
    for st, s in record["results"]["summary"]["settings"].items():
        kv = (s.get("variants") or {}).get(k) or {}
        parts = []
        if "verdicts_reference_nll" in (s.get("attnknn") or {}):
            parts.append(f"Attn-KNN {_interval(s['attnknn']['verdicts_reference_nll']['nll'], 'nll')}")
        chosen = kv.get("chosen")
        if chosen and "verdicts_reference_nll" in kv["methods"][chosen]:
            parts.append(f"chosen head {_interval(kv['methods'][chosen]['verdicts_reference_nll']['nll'], 'nll')}")
        if parts:
            cells.append(f"{setting_title(st)}: " + ", ".join(parts))
    if not cells:
        return None
    return ("- **Calibration** (proper scores): calibrated NLL minus that of the reference tuned on NLL: " + "; ".join(cells) + ".")


def budgets(setting: dict, kv: dict) -> dict[str, int] | None:
    """Median tuning budget per seed (configurations scored) of the reference, the boosted trees and the
    searched label-aware attention (learning rate x epochs to a plateau, both folds) at one setting and
    k; None without a searched learner."""
    search = (kv["methods"].get("label_aware_heldout") or {}).get("search")
    if not search or "reference" not in setting or "learner" not in kv:
        return None
    per_seed = len(search["configs"]) // max(1, len(kv["learner"]["configs"]))
    att = [sum(search["configs"][i:i + per_seed]) for i in range(0, len(search["configs"]), per_seed)]
    return {name: round(float(np.median(v))) for name, v in (("reference", setting["reference"]["configs"]),
                                                    ("trees", kv["learner"]["configs"]), ("attention", att))}


def budget_text(setting: dict, kv: dict) -> str:
    """' Tuning budgets per seed: ...' (:func:`budgets`), with the attention's fits whose learning rate
    sits at an end of the grid or that never reached a plateau; '' without a searched learner."""
    b = budgets(setting, kv)
    if b is None:
        return ""
    search = kv["methods"]["label_aware_heldout"]["search"]
    lrs = sorted(set(search["lrs"]))
    return (f" Tuning budgets per seed (configurations scored): reference {b['reference']}, boosted trees "
            f"{b['trees']}, label-aware attention {b['attention']} (learning rate x epochs to a plateau; chosen rates "
            f"{', '.join(f'{x:.2g}' for x in lrs)}; {search['edges']} of {search['fits']} fits at an end of the rate "
            f"grid, {search['no_plateau']} without a plateau).")


def second_learnable(record: dict, settings: tuple[str, ...] | None = ("clean",)) -> str | None:
    """One clause per second dataset: its learnable headroom (split-level) in ``settings`` (None: all);
    None without one."""
    parts = []
    for e in (record["results"].get("second") or {}).values():
        cells = [f"{setting_title(st)} {_interval(s['learnable_vs_reference']['accuracy'], 'accuracy')}"
                 for st, s in e["summary"].items()
                 if "learnable_vs_reference" in s and (settings is None or st in settings)]
        if cells:
            parts.append(f"on {e['title']} " + "; ".join(cells))
    return ", ".join(parts) or None


def collapse_reading(record: dict) -> str | None:
    """One sentence on the sweep: which setting moved the weights furthest from uniform, by how much,
    and whether that helped against the reference; None without a sweep."""
    sweep = record["results"]["summary"]["settings"].get("clean", {}).get("collapse")
    if not sweep:
        return None
    k = int(record["config"]["k"])
    es = sweep["settings"]
    name = min(es, key=lambda n: es[n]["effective_k"]["mean"])
    keff = es[name]["effective_k"]["mean"]
    v = es[name]["verdicts_reference"]["accuracy"]
    moved = [n for n in es if es[n]["effective_k"]["mean"] < UNIFORM_SHARE * k]
    changes = sum(n != AS_TRAINED for n in es)  # one head is the head as trained, which the others change
    if not moved:
        return (f"none of the {changes} changes (learning rate, temperature bounds, initialisation, alone and "
                "together) brings "
                f"the effective k below {UNIFORM_SHARE * k:.1f} of {k} ({100 * UNIFORM_SHARE:g} % of k, the declared "
                f"threshold); the lowest (\"{name}\", {keff:.2f}) scores {_interval(v, 'accuracy')} against the "
                f"strongest rule")
    said = {"better": "sharper weights beat the rule there", "worse": "sharper weights cost accuracy there",
            "equivalent": "sharper weights matched the rule there",
            "inconclusive": "the seeds cannot tell whether sharper weights help"}[v["verdict"]]
    return (f"{len(moved)} of {len(es)} heads (the head as trained and {changes} changes) bring the effective k below {UNIFORM_SHARE * k:.1f} of {k} "
            f"({100 * UNIFORM_SHARE:g} % of k); the sharpest (\"{name}\", {keff:.2f}) scores {_interval(v, 'accuracy')} "
            f"against the strongest rule: {said}")


def _diff_cell(v: dict, metric: str, latex: bool, interval: bool = True) -> str:
    """A difference's cell: value (scale and decimals of :data:`~attnknn_lib.report.tables.DIFF_FORMAT`),
    its interval unless ``interval`` is False or there is none, and its verdict (a mark in LaTeX)."""
    scale, dec, _ = DIFF_FORMAT[metric]
    mark = VERDICT_MARK[v["verdict"]] if latex else v["verdict"]
    text = ""
    if interval and v["low"] is not None and v["low"] == v["low"]:
        text = f"[{signed(scale * v['low'], dec)}, {signed(scale * v['high'], dec)}]"
        text = f"\\,{{\\scriptsize{text}}}" if latex else f" {text}"
    return f"{signed(scale * v['value'], dec)}{text} {mark}"


def variants_frame(record: dict, latex: bool = False) -> pd.DataFrame:
    """Per setting, k and variant: test accuracy (mean ± s.d.), the seed-level differences to the
    tuned kNN rule at the same k (accuracy in points, calibrated ECE and NLL) with verdicts,
    effective k, captured headroom and (under noise) the AUROC of low weight for a flipped neighbour."""
    pc = "\\%" if latex else "%"
    rows = {}
    for setting, s in record["results"]["summary"]["settings"].items():
        for k, kv in (s.get("variants") or {}).items():
            if latex and k != str(record["config"]["k"]) and str(record["config"]["k"]) in s["variants"]:
                continue  # the paper's table: the experiment's k only (the notebook shows every k)
            for name, m in kv["methods"].items():
                acc = m["accuracy"]
                row = {f"acc. ({pc})": f"{100 * acc['mean']:.2f}" if latex else
                       f"{100 * acc['mean']:.2f} ± {sd_text(acc['std'], 100, 2)}"}
                vr = m.get("verdicts_reference")
                if name == "baseline":
                    row.update({"Δ acc. (pp)": "", "Δ ECE cal.": "", "Δ NLL cal.": "", "k_eff": "",
                                f"captured ({pc})": "", "flip AUROC": ""})
                else:
                    v = m["verdicts"]
                    cap = m["captured"]["mean"]
                    auroc = (m.get("flip_auroc") or {}).get("mean")
                    row.update({"Δ acc. (pp)": _diff_cell(v["accuracy"], "accuracy", latex),
                                "Δ ECE cal.": _diff_cell(v["ece"], "ece", latex, interval=not latex),
                                "Δ NLL cal.": _diff_cell(v["nll"], "nll", latex, interval=not latex),
                                "k_eff": f"{m['effective_k']['mean']:.1f}",
                                f"captured ({pc})": "--" if cap is None else f"{num(cap, 0, 100):.0f}",
                                "flip AUROC": "--" if auroc is None else f"{auroc:.2f}"})
                if vr and not latex:  # the paper's reference comparison is the best-variant table's
                    row["Δ acc. vs ref. (pp)"] = _diff_cell(vr["accuracy"], "accuracy", False)
                marker = " *" if name == kv["chosen"] else ""
                where = f"{short_setting(setting)}, k = {k}" if not latex else f"{short_setting(setting)}, {k}"
                rows[f"{where}: {SHORT[name] if latex else variant_label(name)}{marker}"] = row
                if "fixed_k" in m:  # adaptive k against its own reference, the best single k of its ladder
                    f = m["fixed_k"]
                    ks = sorted(set(f["k"]))
                    fixed_name = f"k-mixture − best fixed k ({'/'.join(map(str, ks))})"
                    if latex:
                        fixed_name = f"k-mixture $-$ fixed k ({'/'.join(map(str, ks))})"
                    rows[f"{where}: {fixed_name}"] = {
                        f"acc. ({pc})": f"{100 * f['accuracy']['mean']:.2f}" if latex else
                        f"{100 * f['accuracy']['mean']:.2f} ± {sd_text(f['accuracy']['std'], 100, 2)}",
                        "Δ acc. (pp)": _diff_cell(f["verdicts"]["accuracy"], "accuracy", latex),
                        "Δ ECE cal.": _diff_cell(f["verdicts"]["ece"], "ece", latex, interval=not latex),
                        "Δ NLL cal.": _diff_cell(f["verdicts"]["nll"], "nll", latex, interval=not latex),
                        "k_eff": "", f"captured ({pc})": "", "flip AUROC": ""}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "memory, k: method"
    if latex:  # the paper's table leaves NLL to the notebook: it would not fit the page
        df = df.drop(columns="Δ NLL cal.", errors="ignore")
        df.columns = [c.replace("Δ", "$\\Delta$").replace("k_eff", "$k_{\\mathrm{eff}}$").replace(" cal.", "")
                      .replace("captured", "capt.").replace("flip ", "") for c in df.columns]
    return df.fillna("")


def _one_line(v: dict) -> str:
    """'+0.05 [-0.10, +0.20] E': a difference in pp with its seed-level interval and verdict letter
    (:data:`VERDICT_MARK`), short enough for one line of a notebook table."""
    scale, dec, _ = DIFF_FORMAT["accuracy"]
    text = signed(scale * v["value"], dec)
    if v["low"] is not None and v["low"] == v["low"]:
        text += f" [{signed(scale * v['low'], dec)}, {signed(scale * v['high'], dec)}]"
    return f"{text} {VERDICT_MARK[v['verdict']]}"


def variants_by_setting(record: dict) -> dict[str, pd.DataFrame]:
    """The notebook's variants table, one compact frame per memory setting, a row per row of
    :func:`variants_frame` (k and variant, short names, * the chosen one): test accuracy (mean over
    seeds), the accuracy difference to the tuned kNN rule at k and to the strongest rule that learns
    nothing (pp, seed-level interval, verdict letter), and the effective k. Every cell fits one line
    of the PDF page; the calibration differences and the rest are in the table file and the record."""
    out = {}
    for setting, s in record["results"]["summary"]["settings"].items():
        rows = {}
        for k, kv in (s.get("variants") or {}).items():
            for name, m in kv["methods"].items():
                vr = (m.get("verdicts_reference") or {}).get("accuracy")
                rows[f"k={k}: {SHORT[name]}{' *' if name == kv['chosen'] else ''}"] = {
                    "acc. (%)": f"{100 * m['accuracy']['mean']:.2f}",
                    "vs kNN at k (pp)": "" if name == "baseline" else _one_line(m["verdicts"]["accuracy"]),
                    "vs ref. (pp)": _one_line(vr) if vr else "",
                    "k_eff": "" if name == "baseline" else f"{m['effective_k']['mean']:.1f}"}
                if "fixed_k" in m:  # the k-mixture against the uniform vote at its own best single k
                    f = m["fixed_k"]
                    rows[f"k={k}: k-mixture − fixed k ({'/'.join(map(str, sorted(set(f['k']))))})"] = {
                        "acc. (%)": f"{100 * f['accuracy']['mean']:.2f}",
                        "vs kNN at k (pp)": _one_line(f["verdicts"]["accuracy"]), "vs ref. (pp)": "", "k_eff": ""}
        if rows:
            df = pd.DataFrame.from_dict(rows, orient="index")
            df.index.name = "k: variant"
            out[setting_title(setting)] = df.loc[:, (df != "").any()]
    return out


def best_variant_frame(record: dict, latex: bool = False) -> pd.DataFrame:
    """The study's answer per memory setting at the experiment's k: the tuned kNN rule, the
    prototype's design (label-blind head, entropy bonus), the best variant chosen on validation and
    the query-only control, each with its test accuracy (mean over seeds) and, for the attention
    rows, the seed-level difference to the tuned rule with its verdict (accuracy; calibrated ECE)."""
    k = str(record["config"]["k"])
    pc = "\\%" if latex else "%"
    rows = {}
    for setting, s in record["results"]["summary"]["settings"].items():
        kv = (s.get("variants") or {}).get(k)
        if not kv:
            continue
        picks = [("tuned kNN", "baseline"), ("prototype head", "blind_bonus"),
                 (f"best variant: {SHORT[kv['chosen']] if latex else variant_label(kv['chosen'])}", kv["chosen"]),
                 ("query only (control)", "query_only")]
        for label, name in picks:
            m = kv["methods"].get(name)
            if m is None:
                continue
            row = {f"acc. ({pc})": f"{100 * m['accuracy']['mean']:.2f}",
                   "ECE cal.": f"{m['ece_calibrated']['mean']:.4f}", "Δ acc. (pp)": "", "Δ ECE cal.": "",
                   "Δ acc. vs ref. (pp)": ""}
            if name != "baseline":
                v = m["verdicts"]
                row.update({"Δ acc. (pp)": _diff_cell(v["accuracy"], "accuracy", latex, interval=not latex),
                            "Δ ECE cal.": _diff_cell(v["ece"], "ece", latex, interval=not latex)})
            if m.get("verdicts_reference"):
                row["Δ acc. vs ref. (pp)"] = _diff_cell(m["verdicts_reference"]["accuracy"], "accuracy", latex)
            rows[f"{short_setting(setting)}: {label}"] = row
            ref = s.get("reference")
            if name == "baseline" and ref:  # the strongest rule that learns nothing, right below the tuned rule at k
                rows[f"{short_setting(setting)}: strongest non-learned"] = {
                    f"acc. ({pc})": f"{100 * ref['accuracy']['mean']:.2f}",
                    "ECE cal.": f"{ref['ece_calibrated']['mean']:.4f}", "Δ acc. (pp)": "", "Δ ECE cal.": "",
                    "Δ acc. vs ref. (pp)": ""}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = f"memory (k = {k}): method"
    if not any(df.get("Δ acc. vs ref. (pp)", pd.Series(dtype=str))):
        df = df.drop(columns="Δ acc. vs ref. (pp)", errors="ignore")  # a record from before the reference
    if latex:
        df.columns = [c.replace("Δ", "$\\Delta$").replace(" cal.", "") for c in df.columns]
    return df


def end_to_end_frame(record: dict) -> pd.DataFrame:
    """Attn-KNN trained end to end with and without the entropy bonus (same seeds): test accuracy,
    its own tuned kNN rule's, the seed-level differences to that rule, the effective k of the test
    weights, the last epoch's mean temperature and head entropy, the selected epochs; then the
    no-bonus model minus the prototype. Empty if the record has no end-to-end control."""
    e2e = record["results"]["summary"].get("end_to_end")
    if not e2e:
        return pd.DataFrame()
    rows = {}
    for name, m in e2e["models"].items():
        v = m["verdicts"]
        ent = [h for h in m["head_entropy"] if h is not None]
        rows[END_TO_END[name]] = {
            "acc. (%)": f"{100 * m['accuracy']['mean']:.2f} ± {sd_text(m['accuracy']['std'], 100, 2)}",
            "tuned kNN (%)": f"{100 * m['baseline_accuracy']['mean']:.2f}",
            "Δ acc. (pp)": _diff_cell(v["accuracy"], "accuracy", False),
            "Δ ECE cal.": _diff_cell(v["ece"], "ece", False, interval=False),
            "k_eff": f"{m['effective_k']['mean']:.2f}",
            "temperature": f"{np.mean(m['temperatures_last']):.3f}",
            "head entropy": f"{ent[-1]:.4f}" if ent else "--",
            "selected epochs": ", ".join(map(str, m["best_epochs"])) + f" of {m['epochs']}"}
    d = e2e["no_bonus_minus_prototype"]["verdicts"]
    rows["no bonus − prototype"] = {"Δ acc. (pp)": _diff_cell(d["accuracy"], "accuracy", False),
                                    "Δ ECE cal.": _diff_cell(d["ece"], "ece", False, interval=False)}
    df = pd.DataFrame.from_dict(rows, orient="index").fillna("")
    df.index.name = f"end to end (seeds {', '.join(map(str, e2e['seeds']))})"
    return df


def diagnostics_frame(record: dict) -> pd.DataFrame:
    """Per epoch of main's Attn-KNN training, mean over seeds: the share of training queries whose
    vote carries a gradient, the entropy of the averaged weights and the mean per-head entropy,
    the spread of scores, ||grad H|| / ||grad NLL|| and the mean temperature; validation accuracy."""
    per = [d["diagnostics"]["per_epoch"] for d in record["results"]["per_seed"].values()]

    def mean(key: str, i: int) -> float | None:
        vals = [p[key][i] for p in per if i < len(p[key]) and p[key][i] is not None]
        return float(np.mean(vals)) if vals else None

    rows = {}
    for i in range(max(len(p["val_accuracy"]) for p in per)):
        temps = [np.mean(p["temperatures"][i]) for p in per if i < len(p["temperatures"])]
        cells = {"grad. share (%)": mean("diag_gradient_share", i), "H(mean w)": mean("train_entropy", i),
                 "mean H(head)": mean("diag_head_entropy", i), "score s.d.": mean("diag_score_spread", i),
                 "|dH| / |dNLL|": mean("diag_entropy_grad_ratio", i), "temp.": float(np.mean(temps)),
                 "val. acc. (%)": mean("val_accuracy", i)}
        rows[i + 1] = {c: "--" if v is None else (f"{100 * v:.1f}" if "%" in c else f"{v:.3f}") for c, v in cells.items()}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "epoch"
    return df


def gradient_shares(record: dict) -> dict[str, float]:
    """Share of queries whose vote carries a gradient on the trained embedding, per split (mean over seeds)."""
    per = [d["diagnostics"]["gradient_share"] for d in record["results"]["per_seed"].values()]
    return {s: float(np.mean([p[s] for p in per])) for s in per[0]}


# ----------------------------------------------------------------------------- figures

def headroom_figure(record: dict):
    """Per memory setting: recall@k (the ceiling), the uniform vote and the two tuned ceilings, against k."""
    res = record["results"]
    settings = res["summary"]["settings"]
    fig, axes = plt.subplots(1, len(settings), figsize=(7.4, 2.5), sharey=True, squeeze=False)
    for ax, (setting, s) in zip(axes[0], settings.items()):
        ks = [int(k) for k in s["headroom"]]
        h = list(s["headroom"].values())
        ax.plot(ks, [100 * x["recall"] for x in h], "o-", ms=3, label="recall@k (ceiling)")
        ax.plot(ks, [100 * x["uniform_accuracy"] for x in h], "s-", ms=3, label="uniform vote")
        for fam, style in (("geometry", ":"), ("label_aware", "--")):
            ax.axhline(100 * s["ceilings"][fam]["test_accuracy"]["mean"], ls=style, lw=1, color="grey" if fam ==
                       "geometry" else "black", label=f"best {fam.replace('_', '-')} rule (tuned)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks)
        # every other k named: 10 and 16 sit too close on a log axis to print both
        ax.set_xticklabels([str(k) if i % 2 == 0 or k == ks[-1] else "" for i, k in enumerate(ks)], fontsize=7)
        ax.set_title(setting_title(setting).replace(" (", "\n(") + _panel_seeds(res, s).replace(" (", "\n("),
                     fontsize=8)  # narrow panels: the long tail's name and seeds on lines of their own
        ax.set_xlabel("k", fontsize=8)
    axes[0][0].set_ylabel("test queries (%)", fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.suptitle(f"Headroom of any reweighting of the k neighbours (mean over {_seeds(res)})", fontsize=9)
    fig.tight_layout(rect=(0, 0.1, 1, 0.95))
    return fig


def diagnostics_figure(record: dict):
    """Over main's training epochs (one line per seed): the share of training queries whose vote
    carries a gradient (validation / test shares of the trained embedding as dashed lines), the
    effective k (exp of the entropy) of the averaged and per-head weights on an axis from 0 to k,
    so a drift reads at its true size, and the entropy term's gradient over the NLL's."""
    res = record["results"]
    per = {s: d["diagnostics"] for s, d in res["per_seed"].items()}
    fig, axes = plt.subplots(1, 3, figsize=(7.4, 2.4))
    shares = gradient_shares(record)
    for d in per.values():
        e = d["per_epoch"]
        epochs = range(1, len(e["val_accuracy"]) + 1)
        if all(v is not None for v in e["diag_gradient_share"]):
            axes[0].plot(epochs, [100 * v for v in e["diag_gradient_share"]], color="C0", lw=1, alpha=0.7)
            axes[1].plot(epochs, np.exp(e["diag_head_entropy"]), color="C1", lw=1, alpha=0.7)
            axes[2].plot(epochs, e["diag_entropy_grad_ratio"], color="C2", lw=1, alpha=0.7)
        axes[1].plot(epochs, np.exp(e["train_entropy"]), color="C0", lw=1, alpha=0.7)
    for split, style in (("val", "--"), ("test", ":")):
        axes[0].axhline(100 * shares[split], ls=style, color="black", lw=1, label=f"{split} (trained)")
    axes[0].plot([], [], color="C0", label="training batches")
    axes[0].set_ylabel("queries with a gradient (%)", fontsize=8)
    k = record["config"]["k"]
    axes[1].axhline(k, color="grey", ls=":", lw=1, label=f"k = {k} (uniform)")
    axes[1].plot([], [], color="C0", label="averaged weights")
    axes[1].plot([], [], color="C1", label="per head (mean)")
    axes[1].set_ylim(0, k * 1.15)  # from one neighbour taking all the weight (1) to uniform (k)
    axes[1].set_ylabel("effective k = exp(entropy)", fontsize=8)
    axes[2].set_ylabel("|grad H| / |grad NLL|", fontsize=8)
    axes[2].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("epoch", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.get_major_locator().set_params(integer=True)
    axes[0].legend(fontsize=6.5, frameon=False)
    axes[1].legend(fontsize=6.5, frameon=False, loc="lower right")
    fig.suptitle(f"The prototype attention during main's training ({_seeds(res)}, one line each)", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return fig


def variants_figure(record: dict, margin: float | None = None):
    """At the experiment's k, one panel per memory setting on one shared axis: each variant's accuracy
    difference to the strongest rule that learns nothing (points, seed-level 95 % interval), the
    equivalence margin shaded, the variant chosen on validation in red. A record from before the
    reference falls back to the tuned kNN rule at k (said on the axis)."""
    res = record["results"]
    k = str(record["config"]["k"])
    margin = 100 * (margin if margin is not None else record["config"]["margin_accuracy"])
    panels = [(st, e["variants"][k]) for st, e in res["summary"]["settings"].items() if k in (e.get("variants") or {})]
    if not panels:
        fig, ax = plt.subplots(figsize=(3.5, 1.5))
        ax.text(0.5, 0.5, "no variants were trained", ha="center", va="center")
        ax.axis("off")
        return fig
    against_ref = all(m.get("verdicts_reference") for _, kv in panels for n, m in kv["methods"].items()
                      if n != "baseline")
    key = "verdicts_reference" if against_ref else "verdicts"
    names = [n for n in VARIANTS if any(n in kv["methods"] for _, kv in panels)]
    cols = min(len(panels), 3)
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7.4, rows * (0.22 * len(names) + 0.7) + 0.9), sharex=True,
                             sharey=True, squeeze=False)
    for ax in axes.flat:
        ax.set_visible(False)
    for j, (setting, kv) in enumerate(panels):
        ax = axes.flat[j]
        ax.set_visible(True)
        for i, n in enumerate(names):
            if n not in kv["methods"]:
                continue
            v = kv["methods"][n][key]["accuracy"]
            lo = v["low"] if v["low"] is not None and v["low"] == v["low"] else v["value"]
            hi = v["high"] if v["high"] is not None and v["high"] == v["high"] else v["value"]
            ax.errorbar(100 * v["value"], i, xerr=[[100 * (v["value"] - lo)], [100 * (hi - v["value"])]], fmt="o",
                        ms=3, color="C3" if n == kv["chosen"] else "C0", capsize=2)
        ax.axvspan(-margin, margin, color="grey", alpha=0.25, lw=0)
        ax.axvline(0, color="black", lw=0.8)
        ax.set_title(setting_title(setting) + _panel_seeds(res, res["summary"]["settings"][setting]), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(axis="x", lw=0.3, alpha=0.5)
    axes[0][0].set_yticks(range(len(names)))
    axes[0][0].set_yticklabels([variant_label(n) for n in names], fontsize=7)
    axes[0][0].invert_yaxis()
    rule = "the strongest rule that learns nothing" if against_ref else "the tuned kNN rule at k"
    fig.supxlabel(f"accuracy difference to {rule} (percentage points; one axis for every panel)", fontsize=8)
    fig.suptitle(f"Variants at k = {k} minus {rule}\n({_seeds(res)}, 95 % seed-level intervals; grey: "
                 f"±{margin:g} pp margin; red: chosen on validation)", fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_figheight()))  # about 0.5 inch for the title, any height
    return fig


# ----------------------------------------------------------------------------- outputs

def _panel_seeds(res: dict, s: dict) -> str:
    """' (3 seeds)' for a setting run on fewer seeds than the study (the figure's title gives the rest)."""
    n = len(s.get("seeds") or res["seeds"])
    return f" ({n} seed{'s' if n != 1 else ''})" if n < len(res["seeds"]) else ""


def _fewer_seeds(res: dict) -> str:
    """'; long tail 0.01 (retrained): seeds 0, 1, 2' for settings run on fewer seeds than the study."""
    return "".join(f"; {setting_title(n)}: seeds {', '.join(map(str, s['seeds']))}"
                   for n, s in res["summary"]["settings"].items() if len(s.get("seeds") or res["seeds"]) < len(res["seeds"]))


def trees_read_reference_k(res: dict) -> bool:
    """Whether the record's boosted-trees learner read the reference's chosen k (records before this
    code read only the k neighbours: their text must say so)."""
    return any("k" in kv.get("learner", {}) for s in res["summary"]["settings"].values()
               for kv in s.get("variants", {}).values())


def write_outputs(record: dict, paths: Paths) -> dict:
    res, d, title, src = output_context(record, NOTEBOOK, ARTIFACTS)
    seeds = ", ".join(map(str, res["seeds"])) + _fewer_seeds(res)
    trees_k = ", reading as many neighbours as the reference chose (at least k)" if trees_read_reference_k(res) \
        else ", reading the k neighbours"
    cfg = record["config"]
    out = {"headroom": ARTIFACTS.write_table(paths, "headroom", d, booktabs(
        headroom_frame(record, latex=True),
        f"{title}: how much any reweighting of the k neighbours can gain (\\% of test queries, mean over seeds "
        f"{seeds}; main's Attn-KNN embedding, noise in the memory's labels only; a long-tailed memory uses the "
        f"embedding of its own model, retrained on that subset). Recall@k: the true label is "
        f"among the k; agree: all k neighbours carry one label; fixable: the true label is among the k but the "
        f"uniform vote misses it; $\\le m$ votes: fixable with the true class at most m votes behind. {src}.",
        "tab:study-headroom")),
        "variants": ARTIFACTS.write_table(paths, "variants", d, booktabs(
            variants_frame(record, latex=True),
            f"{title}: attention variants trained on the frozen embedding, against the kNN rule tuned on "
            f"validation at the same k, a secondary reference (Table~\\ref{{tab:study-best}} holds the verdicts "
            f"against the strongest rule; seeds {seeds}); rows: memory, k: variant. Blind: the prototype's label-blind attention with an "
            f"entropy bonus, none, or a penalty, or trained on held-out validation queries; readout: TabR-style, "
            f"query only its control. Accuracy difference with its 95\\% seed-level $t$ interval; verdict "
            f"B / W / E / ? = better / worse / equivalent / inconclusive against margins of "
            f"{100 * cfg['margin_accuracy']:g} pp and {cfg['margin_ece']:g} ECE (NLL: in the notebook). "
            f"Captured: share of the fixable headroom won over the uniform vote. * chosen on validation. "
            f"k-mixture $-$ fixed k: the learned mixture over k against the uniform vote at the one k of its ladder "
            f"chosen on validation (in brackets). {src}.",
            "tab:study-variants", escape_index=True, colsep="2.5pt", size="footnotesize")),
        "best": ARTIFACTS.write_table(paths, "best", d, booktabs(
            best_variant_frame(record, latex=True),
            f"{title}: the best attention found, per memory setting at $k={cfg['k']}$ (seeds {seeds}): the "
            f"prototype's design (label-blind head with the entropy bonus) and the variant chosen on validation "
            f"among all the notebook's variants, against the kNN rule tuned on validation "
            f"at the same k ($\\Delta$ acc., $\\Delta$ ECE) and against the strongest rule that learns nothing "
            f"($\\Delta$ vs ref., with its 95\\% seed-level $t$ interval), "
            f"with the query-only control; noise in the memory's labels only, validation and test labels clean. "
            f"Verdicts B / W / E / ? = better / worse / equivalent / inconclusive; ECE after calibration. {src}.",
            "tab:study-best", escape_index=True, colsep="3pt")),
        "reference": ARTIFACTS.write_table(paths, "reference", d, booktabs(
            reference_frame(record, latex=True),
            f"{title}: the strongest rule that learns nothing, per memory setting (seeds {seeds}): the neighbour "
            f"vote (uniform, distance or cosine weights with their temperature), k, a consistency filter (only "
            f"neighbours whose own nearest rows agree with their label at least this share vote) and a prior "
            f"correction (probabilities divided by the memory's class shares to this power) chosen jointly on "
            f"validation, best accuracy then NLL; each grid is extended where the choice sits on its edge, k by "
            f"searching more neighbours. Configs: configurations scored per seed (the tuning budget). {src}.",
            "tab:study-reference", column_format="lrrp{4.6cm}rlr", escape_index=True, colsep="3pt")),
        "learnable": ARTIFACTS.write_table(paths, "learnable", d, booktabs(
            learnable_frame(record, latex=True),
            f"{title}: learnable headroom, per memory setting and k (seeds {seeds}; test accuracy in \\%, "
            f"recall@k in \\% of test queries, captured shares in \\%). Two learners read the "
            f"neighbours' labels, distances, ranks and their own neighbours' agreement and are trained on clean "
            f"held-out validation labels, cross-fitted in two halves (each fit on one half, tuned on a fifth of it, "
            f"applied to the other): gradient-boosted trees on per-class neighbour features (trees){trees_k}, "
            f"and the label-aware attention at k (l.-aware). Learnable headroom: the one with the better out-of-fold validation accuracy minus the "
            f"strongest rule that learns nothing (ref.), with its 95\\% seed-level $t$ interval and verdict "
            f"B / W / E / ? against a {100 * cfg['margin_accuracy']:g} pp margin. Capt.: the share of that "
            f"headroom the prototype's head (proto.) and the variant chosen on validation (chosen) won over the reference "
            f"(--: no headroom established). Rows of a second dataset: its hold-out splits, split-level intervals, "
            f"proto.: main's Attn-KNN of each split. {src}.",
            "tab:study-learnable", escape_index=True, colsep="3pt")),
        **({"collapse": ARTIFACTS.write_table(paths, "collapse", d, booktabs(
            collapse_frame(record, latex=True),
            f"{title}: what could hold the label-blind attention at uniform weights. The prototype's head, "
            f"without the entropy term, trained at $k={cfg['k']}$ on the frozen clean memory with one knob changed "
            f"at a time (seeds {', '.join(map(str, res['summary']['settings']['clean']['collapse']['seeds']))}): "
            f"effective k on test ($k$ = uniform weights), accuracy, and the difference to the strongest rule "
            f"that learns nothing with its 95\\% seed-level $t$ interval and verdict B / W / E / ?. {src}.",
            "tab:study-collapse", escape_index=True, column_format="lp{5.6cm}rrl", colsep="3pt"))}
           if not collapse_frame(record).empty else {}),
        **({"second": ARTIFACTS.write_table(paths, "second", d, booktabs(
            second_frame(record, latex=True),
            f"The study's core comparison on a second dataset: main's Attn-KNN of each stratified hold-out split "
            f"(its attention at $k={cfg['k']}$ on its own embedding) and the uniform vote at $k$ (unif.), each against the "
            f"strongest rule that learns nothing on the same memory (ref.; its $k$ per split), with noise in the "
            f"memory's labels only (each split draws its own flips); learnable: the learnable headroom (the better of "
            f"the two learners of Table~\\ref{{tab:study-learnable}} minus ref.). Attn-KNN's difference with the 95\\% "
            f"split-level interval (corrected resampled $t$: the splits share their data), every accuracy difference in "
            f"points with its "
            f"verdict B / W / E / ?; the other intervals are in Table~\\ref{{tab:study-learnable}} and the notebook. "
            f"{src}.",
            "tab:study-second", escape_index=True, colsep="3pt", size="footnotesize"))} if res.get("second") else {}),
        "diagnostics": ARTIFACTS.write_table(paths, "diagnostics", d, booktabs(
            diagnostics_frame(record).rename(columns=lambda c: c.replace("%", "\\%")),
            f"{title}: the prototype attention during main's training, per epoch (mean over seeds "
            f"{', '.join(map(str, res['seeds']))}). "
            f"Grad.\\ share: training queries whose vote carries a gradient (the true label among the k and the "
            f"neighbourhood mixed); H: entropies in nats of the head-averaged weights and of each head's; "
            f"|dH| / |dNLL|: the entropy term's gradient over the NLL's on the attention's parameters, before "
            f"its weight; temp.: mean temperature. {src}.", "tab:study-diagnostics"))}
    drawn = [("headroom", headroom_figure(record)), ("diagnostics", diagnostics_figure(record)),
             ("variants", variants_figure(record))]
    if res.get("gallery", {}).get("cases"):
        with np.load(gallery_path(paths, d)) as images:
            drawn.append(("gallery", gallery_figure(record, dict(images))))
    for name, fig in drawn:
        out[name + "_figure"] = ARTIFACTS.save_figure(paths, name + "_figure", d, fig)
    return out


# ----------------------------------------------------------------------------- macros, README, findings

def study_macros(record: dict) -> dict[str, str]:
    """Headroom at k (clean and each noise setting), the ceilings, the chosen variant per setting
    with its difference and verdict, verdict counts, and the diagnostics (StudyFashionMnist...)."""
    ds, res = record["dataset"], record["results"]
    k = str(record["config"]["k"])
    out: dict[str, str] = {}
    # the paper's sentence on the long-tailed models' budget, as the record's config has it
    out[macro_name(NAME, ds, "Trees Read")] = (  # what the boosted-trees learner read, as the record has it
        "as many neighbours as the reference chose (so the reference's wide votes are no handicap to them)"
        if trees_read_reference_k(res) else "the $k$ neighbours")
    out[macro_name(NAME, ds, "Long Tail Budget")] = (
        "The long-tailed models train on a subset for fewer epochs than main's: they are reported, not counted."
        if below_budget(record["config"]) else
        "The long-tailed models train at main's budget and count in the answer.")
    fits = [m for s in res["summary"]["settings"].values() for kv in (s.get("variants") or {}).values()
            for name, m in kv["methods"].items() if "fits" in m and "search" not in m]
    if fits:  # the variants' training: at most head_epochs, stopped at a plateau
        out[macro_name(NAME, ds, "Head Epochs")] = str(record["config"]["head_epochs"])
        out[macro_name(NAME, ds, "Head Patience")] = str(record["config"]["head_patience"])
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
        if s.get("reference"):
            out[macro_name(NAME, ds, tag, "Reference Acc")] = pct(s["reference"]["accuracy"]["mean"])
            out[macro_name(NAME, ds, tag, "Reference Choice")] = "; ".join(dict.fromkeys(s["reference"]["choices"]))
            if s.get("attnknn"):  # main's Attn-KNN against the reference on its own embedding
                for metric in ("accuracy", "ece", "nll"):
                    scale, dec, _ = DIFF_FORMAT[metric]
                    v = s["attnknn"]["verdicts_reference"][metric]
                    out[macro_name(NAME, ds, tag, "Attnknn Ref", metric)] = signed(scale * v["value"], dec)
                    out[macro_name(NAME, ds, tag, "Attnknn Ref", metric, "Interval")] = (
                        _bracket(v, scale, dec))
                    out[macro_name(NAME, ds, tag, "Attnknn Ref", metric, "Verdict")] = VERDICT_PHRASES[v["verdict"]]
            f = s["reference"].get("filter")
            if f:
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
            out[macro_name(NAME, ds, tag, f"k{kk}", "Chosen Ece Verdict")] = VERDICT_PHRASES[v["ece"]["verdict"]]
            out[macro_name(NAME, ds, tag, f"k{kk}", "Chosen Test Acc")] = pct(kv["methods"][chosen]["accuracy"]["mean"])
            out[macro_name(NAME, ds, tag, f"k{kk}", "Chosen Effective K")] = f"{kv['methods'][chosen]['effective_k']['mean']:.1f}"
            for name in ("blind_bonus", "label_aware", "readout", "query_only"):  # the prototype design, label-aware, control
                if name in kv["methods"]:
                    out[macro_name(NAME, ds, tag, f"k{kk}", name, "Verdict")] = VERDICT_PHRASES[
                        kv["methods"][name]["verdicts"]["accuracy"]["verdict"]]
                    out[macro_name(NAME, ds, tag, f"k{kk}", name, "Acc")] = signed(
                        100 * kv["methods"][name]["verdicts"]["accuracy"]["value"], 2)
            if kv.get("learnable"):
                room = kv["learnable"]["verdicts"]["accuracy"]
                out[macro_name(NAME, ds, tag, f"k{kk}", "Learnable")] = signed(100 * room["value"], 2)
                out[macro_name(NAME, ds, tag, f"k{kk}", "Learnable Interval")] = (
                    _bracket(room, 100, 2))
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
            vr = kv["methods"][chosen].get("verdicts_reference")
            if vr:
                out[macro_name(NAME, ds, tag, f"k{kk}", "Chosen Ref Acc")] = signed(100 * vr["accuracy"]["value"], 2)
                out[macro_name(NAME, ds, tag, f"k{kk}", "Chosen Ref Verdict")] = VERDICT_PHRASES[vr["accuracy"]["verdict"]]
                words = [m["verdicts_reference"]["accuracy"]["verdict"] for n, m in kv["methods"].items()
                         if n != "baseline" and m.get("verdicts_reference")]
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
        weight = record["config"].get("entropy_weight")
        if weight is not None:  # after its weight in the loss: what the optimiser sees
            out[macro_name(NAME, ds, "Entropy Grad Ratio Weighted")] = f"{weight * np.mean(ratio):.4f}"
    out[macro_name(NAME, ds, "Seeds")] = str(len(res["seeds"]))
    if "reference_k" in record["config"]:
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
            out[macro_name(NAME, ds, "End To End", tag, "Ece Verdict")] = VERDICT_PHRASES[m["verdicts"]["ece"]["verdict"]]
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
            if "learnable_vs_reference" in s:
                room = s["learnable_vs_reference"]["accuracy"]
                out[macro_name(NAME, ds, *tag, "Learnable")] = signed(100 * room["value"], 2)
                out[macro_name(NAME, ds, *tag, "Learnable Interval")] = _bracket(room, 100, 2)
                out[macro_name(NAME, ds, *tag, "Learnable Verdict Word")] = room["verdict"]
        out[macro_name(NAME, ds, "Second", name, "Splits")] = str(e["splits"])
        out[macro_name(NAME, ds, "Second", name, "Title")] = e["title"]
    sweep = collapse_reading(record)
    if sweep:
        out[macro_name(NAME, ds, "Collapse Reading")] = sweep.replace("**", "")  # the verdict's bold is markdown
        out[macro_name(NAME, ds, "Collapse Seeds")] = seeds_text(len(res["summary"]["settings"]["clean"]["collapse"]["seeds"]))
    return out


GLOSSARY = (
    "- *pp*: percentage points of test accuracy; *[low, high]*: the 95 % interval over seeds (seed-level t "
    "interval, the shared test set's bootstrap error included).",
    "- *Strongest rule that learns nothing* (the reference): a neighbour vote whose weights (uniform, distance or "
    "cosine), k, label filter and class-prior correction are all chosen on validation.",
    "- *Better* / *worse*: the interval excludes zero on the good / bad side; *equivalent*: the whole interval lies "
    "within the margin declared before the run ({margins}); *inconclusive*: none of these.",
    "- *ECE*: expected calibration error over {bins} equal-width confidence bins; *NLL*: negative log-likelihood; "
    "both after temperature scaling fitted on validation.",
    "- *Chosen head*: the attention variant with the best validation accuracy among {n_heads} trained on the frozen "
    "embedding (label-blind or label-aware scores, a readout and its query-only control, a mixture over k).",
    "- *Learnable headroom*: the better of two learners that read {learner_reads} and learn from clean "
    "held-out labels (boosted trees, label-aware attention), minus the reference.",
    "- *Effective k*: exp(H), H the entropy of a query's neighbour weights (mean over test queries); it equals k when "
    "every neighbour weighs the same and 1 when one neighbour takes all the weight.",
    "- *Brier*: mean squared distance between the predicted class probabilities and the one-hot label; with NLL a "
    "proper score, the calibration endpoints; calibration is judged against the same reference search tuned on "
    "validation NLL.",
    "- *Attn-KNN*: the paper's method, a CNN embedding and multi-head attention over the k = {k} nearest memory rows, "
    "trained end to end; *TTA*: test-time augmentation (the mean over flipped and cropped views).",
    "- *Memory*: the labelled training embeddings the neighbours come from; noise flips a share of its labels only.",
)


def _interval(v: dict, metric: str) -> str:
    """'-0.12 pp [-0.30, +0.05], **inconclusive**' (accuracy in pp; ECE and NLL to 4 decimals)."""
    scale, dec, unit = DIFF_FORMAT[metric]
    text = f"{signed(scale * v['value'], dec)}{unit}"
    if _bracket(v, scale, dec):
        text += f" {_bracket(v, scale, dec)}"
    return f"{text}, **{v['verdict']}**"


def _chosen_against_reference(kv: dict | None) -> dict | None:
    if kv and kv.get("chosen"):
        return (kv["methods"][kv["chosen"]].get("verdicts_reference") or {}).get("accuracy")
    return None


def answer_lines(records: list[dict], headroom: bool = True) -> list[str]:
    """The README's answer: a few bullets, Attn-KNN itself first, each a method against the strongest
    rule that learns nothing with its seed-level difference and verdict, then a glossary (generated
    from the study's record; an older record without Attn-KNN's own reference reads as before).
    ``headroom`` off leaves the clean memory's learnable headroom out of the chosen head's line (the
    notebook's findings give it for every setting in a line of its own)."""
    if not records:
        return []
    record = records[0]
    res, cfg = record["results"], record["config"]
    settings = res["summary"]["settings"]
    clean = settings.get("clean") or {}
    if "attnknn" not in clean:
        return _legacy_lines(record)
    k = str(cfg["k"])
    answer = plain_answer(record)
    lines = [f"- **The answer.** {answer}"] if answer else []
    lines.append(attnknn_line(record))
    proper = proper_line(record)
    if proper:
        lines.append(proper)
    kv = (clean.get("variants") or {}).get(k)
    v = _chosen_against_reference(kv)
    if v:  # the clean memory, then the noisy ones, in one line
        room = (f" (learnable headroom {_interval(kv['learnable']['verdicts']['accuracy'], 'accuracy')})"
                if kv.get("learnable") and headroom else "")
        noisy = [f"{setting_title(st)} {_interval(n, 'accuracy')}" for st, s in settings.items()
                 if is_noise(st) and (n := _chosen_against_reference((s.get("variants") or {}).get(k)))]
        lines.append(f"- **The chosen head** (k = {k}; on the clean memory {variant_label(kv['chosen'])}) against the "
                     f"strongest rule: clean memory {_interval(v, 'accuracy')}{room}"
                     + "".join(f"; {c}" for c in noisy) + ".")
    for setting, s in settings.items():
        v = _chosen_against_reference((s.get("variants") or {}).get(k))
        if setting.startswith("long_tail/") and v:
            rows = f"{cfg['long_tail_max_train']:,}" if cfg.get("long_tail_max_train") else "all"
            epochs = cfg.get("long_tail_epochs") or "main's"
            budget = (f"; not counted in the answer: its models train on {rows} images for {epochs} epochs, below "
                      f"main's budget" if below_budget(cfg) else "")
            lines.append(f"- **Long-tailed memory** (imbalance ratio {setting.partition('/')[2]}, model retrained on "
                         f"it, {seeds_text(len(s['seeds']))}), the chosen head against the strongest rule, which may "
                         f"correct for class shares: {_interval(v, 'accuracy')}{budget}.")
    second = second_line(record)
    if second:
        lines.append(f"- **A second dataset, descriptive only** (in no verdict): {second[0].upper()}{second[1:]}.")
    e2e = res["summary"].get("end_to_end")
    if e2e:
        m = e2e["models"]
        lines.append(f"- **Why the weights stay uniform**: trained end to end without the entropy bonus "
                     f"({seeds_text(len(e2e['seeds']))}), effective k {m['no_bonus']['effective_k']['mean']:.2f} of {k} "
                     f"({m['prototype']['effective_k']['mean']:.2f} with it): {end_to_end_reading(e2e, int(k))}.")
    margins = (f"{100 * cfg['margin_accuracy']:g} pp accuracy, {cfg['margin_ece']:g} ECE, {cfg['margin_nll']:g} NLL"
               + (f", {cfg['margin_brier']:g} Brier" if "margin_brier" in cfg else ""))
    heads = len(cfg["variants"])
    reads = ("the neighbours (the trees as many as the reference chose, the attention k)"
             if trees_read_reference_k(res) else "only the k neighbours")
    glossary = [g.format(margins=margins, bins=N_BINS, n_heads=heads, k=k, learner_reads=reads) for g in GLOSSARY]
    return lines + ["", "**Terms.**", ""] + glossary


# effective k at or above this share of k reads as "still uniform" (14.4 of 16): the share the positive
# control and the real regimes declared before their runs, so every experiment reads the same threshold
UNIFORM_SHARE = FixedEmbeddingConfig.__dataclass_fields__["moved_share"].default


def end_to_end_reading(e2e: dict, k: int) -> str:
    """One clause on what the end-to-end control shows, chosen by the numbers: whether the weights
    of the model trained without the bonus stayed at uniform (effective k above ``UNIFORM_SHARE``
    of k), and whether they did with the bonus."""
    keff = {name: m["effective_k"]["mean"] for name, m in e2e["models"].items()}
    flat = {name: v >= UNIFORM_SHARE * k for name, v in keff.items()}
    if flat["no_bonus"] and flat["prototype"]:
        return "the weights stay as near uniform as with it, so the bonus does not hold them there"
    if flat["prototype"]:
        return "without the bonus the weights leave uniform, so the bonus does hold them there"
    if flat["no_bonus"]:
        return "the weights stay near uniform without the bonus but not with it"
    return "the weights leave uniform with and without the bonus"




def plain_answer(record: dict) -> str | None:
    """The study's answer in plain sentences, chosen by the verdicts: first Attn-KNN itself (as trained
    end to end) against the strongest rule that learns nothing in each memory setting the record
    measured it in, then whether the head chosen on validation at the experiment's k beats that rule
    in any setting, and whether attention trained end to end leaves uniform weights. Settings whose
    models train below main's budget (:func:`below_budget`) are left out of the counts. None for a
    record from before the reference."""
    res, k = record["results"], str(record["config"]["k"])
    settings = {st: s for st, s in res["summary"]["settings"].items() if counted(st, record["config"])}
    verdicts = {}
    for setting, s in settings.items():
        kv = (s.get("variants") or {}).get(k)
        if kv and kv.get("chosen") and kv["methods"][kv["chosen"]].get("verdicts_reference"):
            verdicts[setting] = kv["methods"][kv["chosen"]]["verdicts_reference"]["accuracy"]["verdict"]
    if not verdicts:
        return None

    def counts(vs: dict) -> str:
        return ", ".join(f"{n} {w}" for w in VERDICTS if (n := list(vs.values()).count(w)))

    own = {st: s["attnknn"]["verdicts_reference"]["accuracy"]["verdict"] for st, s in settings.items() if "attnknn" in s}
    text = ""
    if len(own) > 1:
        text = (f"Attn-KNN as trained does not beat the strongest rule that learns nothing in any of {len(own)} memory "
                f"settings ({counts(own)})" if "better" not in own.values() else
                f"Attn-KNN as trained beats the strongest rule that learns nothing on "
                f"{' and '.join(setting_title(st) for st, v in own.items() if v == 'better')}")
        text += ". "
    elif own:
        text = f"Attn-KNN as trained is {VERDICT_PHRASES[next(iter(own.values()))]} the strongest rule on the clean memory. "
    wins = [setting_title(st) for st, v in verdicts.items() if v == "better"]
    if wins:
        text += (f"The head chosen on validation beats it on {' and '.join(wins)}"
                 + (f", and not on the other {len(verdicts) - len(wins)} memories" if len(wins) < len(verdicts) else ""))
    elif not own:
        text += (f"No: in none of {len(verdicts)} memory settings does the attention head chosen on validation "
                 f"beat the strongest rule that learns nothing ({counts(verdicts)})")
    else:
        text += (f"The attention head chosen on validation does not beat it in any of {len(verdicts)} settings "
                 f"({counts(verdicts)})")
    e2e = res["summary"].get("end_to_end")
    if e2e:
        keff = e2e["models"]["no_bonus"]["effective_k"]["mean"]
        stays = keff >= UNIFORM_SHARE * int(k)
        text += (f", and attention trained end to end {'stays uniform' if stays else 'leaves uniform weights'} "
                 f"(effective k {keff:.2f} of {k}, without the entropy bonus)")
    return text + "."


def macros(records: list[dict]) -> dict[str, str]:
    return record_macros(records, study_macros, NOTEBOOK, ARTIFACTS.record_file)


def findings(record: dict) -> str:
    """The notebook's answer in at most a page: the README's answer bullets (Attn-KNN itself, the
    chosen head, noise, long tail, Digits, end to end), then one sentence each on the room there was
    (fixable share, learnable headroom), what could hold the weights at uniform, and the gradient
    diagnostics. Every number and verdict word is read from the record; the tables above hold the rest."""
    res = record["results"]
    k = str(record["config"]["k"])
    answer = plain_answer(record)
    lines = answer_lines([record], headroom=False)
    lines = lines[:lines.index("")] if "" in lines else lines  # the README's glossary: the cells above define terms
    if answer:  # the answer leads, in bold (the README's Results block shows that line alone)
        lines = [f"**{answer}**", ""] + [ln for ln in lines if not ln.startswith("- **The answer.**")]
    settings = res["summary"]["settings"]
    fixable = [f"{setting_title(st)} {pct(s['headroom'][k]['fixable'])} %" for st, s in settings.items()
               if s.get("headroom", {}).get(k)]
    if fixable:
        lines.append(f"- **Room to win at k = {k}**: share of test queries a reweighting of the {k} neighbours "
                     f"could fix: " + "; ".join(fixable) + ".")
    rooms = [f"{setting_title(st)} {_interval(kv['learnable']['verdicts']['accuracy'], 'accuracy')}"
             for st, s in settings.items() if (kv := (s.get("variants") or {}).get(k)) and kv.get("learnable")]
    if rooms:
        lines.append(f"- **Learnable headroom at k = {k}** (the best learner on clean held-out labels minus the "
                     f"strongest rule): " + "; ".join(rooms) + ".")
    sweep = collapse_reading(record)
    if sweep:
        lines.append(f"- **What holds the weights at uniform**: {sweep}.")
    shares = gradient_shares(record)
    per = [d["diagnostics"]["per_epoch"] for d in res["per_seed"].values()]
    last = [p["diag_gradient_share"][-1] for p in per if p["diag_gradient_share"][-1] is not None]
    train = f"{100 * np.mean(last):.1f} %" if last else "not recorded"
    lines.append(f"- **Diagnostics**: in main's last training epoch the vote of {train} of training queries carried "
                 f"a gradient; on the trained embedding {100 * shares['test']:.1f} % of test queries do.")
    return markdown_lists(lines)


def readme_lines(records: list[dict]) -> list[str]:
    def bullet(res: dict, title: str) -> str:
        record = next(r for r in records if r["results"] is res)
        return f"{title}:\n" + findings(record)

    return per_dataset(records, bullet)


def _short(name: str) -> str:
    """A class name short enough for a 0.4-inch panel title ("T-shirt/top" -> "T-shirt", "Ankle boot" -> "Boot")."""
    name = name.split("/")[0]
    return name.split()[-1].capitalize() if " " in name else name


GALLERY_SHOWN = {"uniform": ("uniform vote", "0.6"), "blind_bonus": ("prototype attention", "tab:blue")}
BEST_COLOUR = "tab:orange"


def gallery_figure(record: dict, images: dict[str, np.ndarray]):
    """The neighbour gallery: per case (chosen by rule, first seed) the query and its k nearest
    neighbours with their memory labels (red: not the query's class; a cross: flipped by the noise),
    and below them the weight each rule gives each neighbour: the uniform vote, the prototype
    attention and the best variant of that setting."""
    g = record["results"]["gallery"]
    names, k = g["class_names"], g["k"]
    cases = list(g["cases"].values())
    legend: dict[str, str] = {}  # rule -> colour, one legend for every panel
    fig = plt.figure(figsize=(figures.MAX_WIDTH, 1.45 * len(cases) + 0.5), layout="constrained")
    outer = fig.add_gridspec(len(cases), 1)
    for i, case in enumerate(cases):
        grid = outer[i].subgridspec(2, k + 1, height_ratios=(1.0, 0.9), hspace=0.05, wspace=0.05)
        key = gallery_key(case["setting"], case["rule"])
        pics = [images[f"{key}_query"]] + list(images[f"{key}_neighbours"])
        labels = [case["label"]] + case["neighbour_labels"]
        for j, pic in enumerate(pics):
            ax = fig.add_subplot(grid[0, j])
            ax.imshow(np.asarray(pic).squeeze(), cmap="gray_r")
            ax.set_xticks([])
            ax.set_yticks([])
            wrong = j > 0 and labels[j] != case["label"]
            flipped = j > 0 and case["flipped"][j - 1]
            ax.set_title(_short(names[labels[j]]), fontsize=6.5, color="tab:red" if wrong else "black", pad=1.5)
            if flipped:
                ax.text(0.97, 0.97, "×", transform=ax.transAxes, ha="right", va="top", color="tab:red",
                        fontsize=9, fontweight="bold")
            if j == 0:
                for side in ax.spines.values():
                    side.set_linewidth(2)
        ax = fig.add_subplot(grid[1, 1:])
        shown = list(case["weights"])
        width = 0.8 / len(shown)
        said = []
        for m_i, m in enumerate(shown):
            label, colour = GALLERY_SHOWN[m] if m in GALLERY_SHOWN else (f"best: {variant_label(m)}", BEST_COLOUR)
            ax.bar(np.arange(k) + (m_i - (len(shown) - 1) / 2) * width, case["weights"][m], width, color=colour)
            said.append(f"{label} → {names[case['predictions'][m]]}")
            legend[label.split(":")[0]] = colour
        ax.set_xlim(-0.5, k - 0.5)
        ax.set_xticks([])
        ax.set_ylim(0, max(0.2, 1.1 * max(max(w) for w in case["weights"].values())))
        ax.tick_params(labelsize=6.5)
        ax.set_ylabel("weight", fontsize=7)
        # each rule's prediction above its bars' panel, off the bars (the colours: the figure's legend)
        ax.set_title(";   ".join(said), fontsize=6.5, loc="left", pad=2)
        lab = fig.add_subplot(grid[1, 0])
        lab.axis("off")
        lab.text(0.5, 0.5, f"{case['rule']}\n({setting_title(case['setting'])})\ntrue: {names[case['label']]}",
                 ha="center", va="center", fontsize=6.5)
    fig.suptitle(f"{REGISTRY[record['dataset']].title}: a query (framed) and its {k} nearest neighbours, seed {g['seed']}; red label: "
                 "not the query's class, ×: flipped in the memory", fontsize=8)
    fig.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in legend.values()], labels=list(legend),
               loc="outside lower center", ncol=len(legend), fontsize=7, frameon=False, title="weight given by",
               title_fontsize=7)
    return fig


def _verdict_of(kv: dict, name: str) -> str:
    """A variant's accuracy verdict at one (setting, k), or -- where it was not trained."""
    return kv["methods"][name]["verdicts"]["accuracy"]["verdict"] if name in kv["methods"] else "--"


def _against_fixed_k(kv: dict) -> str:
    """'; the learned mixture over k against the uniform vote at its best single k (k = 64): -0.01 pp, inconclusive'
    where adaptive k was trained (empty otherwise): whether its gain needs a per-query k at all."""
    fixed = (kv["methods"].get("adaptive_k") or {}).get("fixed_k")
    if not fixed:
        return ""
    v = fixed["verdicts"]["accuracy"]
    return (f"; the learned mixture over k against the uniform vote at its best single k (k = "
            f"{'/'.join(map(str, sorted(set(fixed['k']))))}, chosen on validation): {signed(100 * v['value'], 2)} pp, "
            f"**{v['verdict']}**")


def _against_reference(s: dict, kv: dict) -> str:
    """'; against the strongest non-learned rule (distance 0.1, k=24, ...): -0.40 pp, **worse**' for
    the chosen variant, where the record has the reference (empty otherwise)."""
    vr = kv["methods"][kv["chosen"]].get("verdicts_reference")
    if not vr or not s.get("reference"):
        return ""
    v = vr["accuracy"]
    return (f"; against the strongest rule that learns nothing ({'; '.join(dict.fromkeys(s['reference']['choices']))}"
            f", {pct(s['reference']['accuracy']['mean'])} %): {signed(100 * v['value'], 2)} pp, **{v['verdict']}**")


def _legacy_lines(record: dict) -> list[str]:
    """The README's lines for a record from before Attn-KNN's own reference (an older committed
    record still reads)."""
    res = record["results"]
    k = str(record["config"]["k"])
    answer = plain_answer(record)
    lines = [f"- **The answer.** {answer}"] if answer else []
    for setting, s in res["summary"]["settings"].items():
        h = s["headroom"].get(k)
        if setting == "clean" and h:
            lines.append(f"- **Headroom on clean data.** The true label is among the {k} neighbours for "
                         f"{pct(h['recall'])} % of test queries and the uniform vote gets {pct(h['uniform_accuracy'])} %, "
                         f"but only {pct(h['fixable_within']['1'])} % of queries are fixable by moving one vote; the "
                         f"best geometry-only rule tuned on validation reaches "
                         f"{pct(s['ceilings']['geometry']['test_accuracy']['mean'])} %"
                         + (f" and the strongest rule that learns nothing (vote rule, k, filter and prior tuned on "
                            f"validation) {pct(s['reference']['accuracy']['mean'])} %" if s.get("reference") else "")
                         + ".")
        kv = (s.get("variants") or {}).get(k)
        noisy = [n for n, e in res["summary"]["settings"].items() if is_noise(n) and (e.get("variants") or {}).get(k)]
        if kv and setting.startswith("long_tail/"):
            m = kv["methods"][kv["chosen"]]
            v = m["verdicts"]["accuracy"]
            n = len(s["seeds"])
            lines.append(f"- **On a long-tailed memory** (Attn-KNN retrained on a subset with imbalance ratio "
                         f"{setting.partition('/')[2]}, {n} seed{'s' if n != 1 else ''}), the variant "
                         f"chosen on validation, {variant_label(kv['chosen'])}, against the tuned kNN vote at k = {k}: "
                         f"{signed(100 * v['value'], 2)} pp, **{v['verdict']}**" + _against_reference(s, kv) +
                         f"; the prototype's label-blind attention: {_verdict_of(kv, 'blind_bonus')}.")
        if noisy and setting == noisy[-1]:  # the strongest noise setting (the notebook shows every one)
            m = kv["methods"][kv["chosen"]]
            v = m["verdicts"]["accuracy"]
            lines.append(f"- **With noisy labels in the memory** ({setting_title(setting)}), the "
                         f"variant chosen on validation, {variant_label(kv['chosen'])}, against the tuned kNN vote "
                         f"at k = {k}: {signed(100 * v['value'], 2)} pp, **{v['verdict']}** (calibrated ECE "
                         f"{m['verdicts']['ece']['verdict']})" + _against_reference(s, kv) + "; the prototype's label-blind attention: "
                         f"{_verdict_of(kv, 'blind_bonus')}; the control that reads the query alone, no "
                         f"neighbours: {_verdict_of(kv, 'query_only')}" + _against_fixed_k(kv) + ".")
    e2e = res["summary"].get("end_to_end")
    if e2e:
        m = e2e["models"]
        lines.append(f"- **Trained end to end without the entropy bonus** ({len(e2e['seeds'])} seeds), the attention's "
                     f"effective k on test is {m['no_bonus']['effective_k']['mean']:.2f} of {k} "
                     f"({m['prototype']['effective_k']['mean']:.2f} with the bonus): "
                     f"{end_to_end_reading(e2e, int(k))}.")
    return lines

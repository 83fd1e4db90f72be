"""The pandas tables notebook 07 shows (and the LaTeX tables' frames), read from the study's record."""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnknn_lib.experiments.attention_study.measure import END_TO_END
from attnknn_lib.experiments.attention_study.views.cells import (
    diff_cell,
    filter_cell,
    one_line,
    stacked_cell,
)
from attnknn_lib.experiments.attention_study.views.labels import SHORT, setting_title, short_setting, variant_label
from attnknn_lib.experiments.common.views import k_range
from attnknn_lib.report.macros import pct
from attnknn_lib.report.tables import num, sd_text


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
    """Per setting: the tuned vote (vote rule, temperature, k, consistency filter and
    prior exponent tuned on validation), its test accuracy and calibrated ECE (mean ± s.d. over
    seeds), each seed's choice, the configurations scored and the neighbours searched."""
    pc = "\\%" if latex else "%"
    rows = {}
    for setting, s in record["results"]["summary"]["settings"].items():
        ref = s["reference"]
        acc = ref["accuracy"]
        choices = list(dict.fromkeys(ref["choices"]))  # seeds that chose alike: named once
        rows[short_setting(setting) if latex else setting_title(setting)] = {
            f"acc. ({pc})": f"{100 * acc['mean']:.2f} ± {sd_text(acc['std'], 100, 2)}".replace("±", "$\\pm$" if latex
                                                                                                 else "±"),
            "ECE cal.": f"{ref['ece_calibrated']['mean']:.4f}",
            "chosen on validation (per seed; alike once)": "; ".join(choices),
            "configs": f"{int(np.mean(ref['configs']))}",
            "open edge": ", ".join(ref["edges"]) or "none",
            f"label filter ({pc})": filter_cell(ref["filter"], latex)}
        row = rows[short_setting(setting) if latex else setting_title(setting)]
        row["val. $-$ test (pp)" if latex else "val. - test (pp)"] = f"{100 * ref['val_test_gap']['mean']:+.2f}"
        if "reference_nll" in s:
            rn = s["reference_nll"]
            row["NLL-tuned: open edge" if latex else "tuned for NLL: choice; open edge"] = (
                "" if latex else "; ".join(dict.fromkeys(rn["choices"])) + "; ") + (", ".join(rn["edges"]) or "none") + (
                f", {rn['stopped_by_gain']} stopped by the NLL tolerance" if "k" in rn["edges"] and rn.get("stopped_by_gain")
                else "") + (
                f" (k searched {k_range([k for k in rn.get('k_searched', []) if k])})"
                if any(rn.get("k_searched", [])) else "")
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "memory"
    return df


def learnable_frame(record: dict, latex: bool = False) -> pd.DataFrame:
    """Per setting and k at which variants were trained: recall@k, the tuned vote, the boosted-trees
    learner and the label-aware head trained on held-out queries (test accuracy, mean over seeds), the
    learnable headroom (the learner with the better out-of-fold validation accuracy minus the
    reference, seed-level interval and verdict) and the share of it the prototype's head and the
    variant chosen on validation captured ("--": no headroom established, its verdict not "better"); then
    one row per second dataset and setting (its hold-out splits, split-level; proto.: main's Attn-KNN)."""
    pc = "\\%" if latex else "%"
    rows = {}
    for setting, s in record["results"]["summary"]["settings"].items():
        for kk, kv in (s.get("variants") or {}).items():
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
                f"tuned vote{u}": pct(s["reference"]["accuracy"]["mean"]),
                f"trees{u}": pct(kv["learner"]["accuracy"]["mean"]),
                ("label-aware" if latex else f"label-aware held-out{u}"): pct(held["accuracy"]["mean"]) if held else "",
                "learnable room (pp)": diff_cell(room, "accuracy", latex),
                ("attention head" if latex else f"attention head capt.{u}"): cap("blind_bonus"),
                ("chosen" if latex else f"chosen capt.{u}"): cap(kv["chosen"])}
    k = record["config"]["k"]
    for e in (record["results"].get("second") or {}).values():  # the second dataset: split-level, no variants
        for setting, s in e["summary"].items():
            room = s["learnable_vs_reference"]["accuracy"]
            a = s["attnknn_vs_reference"]["accuracy"]
            cap = a["value"] / room["value"] if room["verdict"] == "better" else None
            label = f"{e['title']}, {short_setting(setting) if latex else setting_title(setting)}, k = {k}"
            u = "" if latex else f" ({pc})"
            rows[label] = {
                f"recall@k{u}": pct(s["recall"]), f"tuned vote{u}": pct(s["mean"]["reference"]["accuracy"]),
                f"trees{u}": pct(s["mean"]["gbm"]["accuracy"]),
                ("label-aware" if latex else f"label-aware held-out{u}"): pct(s["mean"]["label_aware_heldout"]["accuracy"]),
                "learnable room (pp)": diff_cell(room, "accuracy", latex),
                ("attention head" if latex else f"attention head capt.{u}"): "--" if cap is None else f"{num(cap, 0, 100):.0f}",
                ("chosen" if latex else f"chosen capt.{u}"): ""}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "memory, k"
    return df


def collapse_frame(record: dict, latex: bool = False) -> pd.DataFrame:
    """The sweep of what could hold the label-blind attention at uniform weights (clean memory, k of
    the experiment, no entropy term): per setting its effective k on test, its accuracy and its
    difference to the tuned vote with the verdict (mean over the sweep's seeds); beside them the
    within-neighbourhood score range (max - min of the scores per query) and the mean temperature
    ("--": none, or a record from before they were kept); the difference-based head and main's
    Attn-KNN as its last rows."""
    sweep = record["results"]["summary"]["settings"].get("clean", {}).get("collapse")
    if not sweep:
        return pd.DataFrame()
    k = record["config"]["k"]
    pc = "\\%" if latex else "%"
    rows = {}
    for name, e in sweep["settings"].items():
        spread = {key: (e.get(key) or {}).get("mean") for key in ("score_range", "temperature")}
        rows[name] = {"what changes": e["what"], f"effective k (of {k})": f"{e['effective_k']['mean']:.2f}",
                      "score range": "--" if spread["score_range"] is None else f"{spread['score_range']:.3f}",
                      "$\\tau$" if latex else "τ": "--" if spread["temperature"] is None else f"{spread['temperature']:.3f}",
                      f"acc. ({pc})": pct(e["accuracy"]["mean"]),
                      "vs ref. (pp)": diff_cell(e["verdicts_reference"]["accuracy"], "accuracy", latex)}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "setting"
    return df


def second_frame(record: dict, latex: bool = False) -> pd.DataFrame:
    """The second study: per dataset and memory setting, the tuned vote's accuracy and its k per
    split, main's Attn-KNN, the uniform vote at k and the learnable headroom (the better learner), each
    minus the tuned vote (split-level; in LaTeX only Attn-KNN's with its interval, to fit the page)."""
    second = record["results"].get("second") or {}
    k = record["config"]["k"]
    pc = "\\%" if latex else "%"
    rows = {}
    for e in second.values():
        for setting, s in e["summary"].items():
            ks = sorted(s["reference_k"])
            rows[f"{e['title']}, {short_setting(setting) if latex else setting_title(setting)}"] = {
                f"ref. ({pc})": pct(s["mean"]["reference"]["accuracy"]),
                "ref. k": f"{ks[0]}" if ks[0] == ks[-1] else f"{ks[0]}\u2013{ks[-1]}",
                f"Attn-KNN ({pc})": pct(s["mean"]["attnknn"]["accuracy"]),
                "Attn-KNN $-$ ref." if latex else "Attn-KNN - ref. (pp)":
                    diff_cell(s["attnknn_vs_reference"]["accuracy"], "accuracy", latex),
                "$\\Delta$ ECE" if latex else "Δ ECE": diff_cell(s["attnknn_vs_reference"]["ece"], "ece", latex,
                                                                  interval=False),
                "unif. $-$ ref." if latex else f"uniform k={k} - ref. (pp)":
                    diff_cell(s["uniform_vs_reference"]["accuracy"], "accuracy", latex, interval=not latex),
                ("learnable" if latex else "learnable (pp)"):
                    diff_cell(s["learnable_vs_reference"]["accuracy"], "accuracy", latex, interval=not latex)}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "dataset, memory"
    return df


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
                if name == "baseline":
                    row.update({"Δ acc. (pp)": "", "Δ ECE cal.": "", "Δ NLL cal.": "", "k_eff": "",
                                f"captured ({pc})": "", "flip AUROC": ""})
                else:
                    v = m["verdicts"]
                    cap = m["captured"]["mean"]
                    auroc = (m.get("flip_auroc") or {}).get("mean")
                    row.update({"Δ acc. (pp)": diff_cell(v["accuracy"], "accuracy", latex),
                                "Δ ECE cal.": diff_cell(v["ece"], "ece", latex, interval=not latex),
                                "Δ NLL cal.": diff_cell(v["nll"], "nll", latex, interval=not latex),
                                "k_eff": f"{m['effective_k']['mean']:.1f}",
                                f"captured ({pc})": "--" if cap is None else f"{num(cap, 0, 100):.0f}",
                                "flip AUROC": "--" if auroc is None else f"{auroc:.2f}"})
                if not latex:  # the paper's reference comparison is the best-variant table's
                    row["Δ acc. vs tuned vote (pp)"] = diff_cell(m["verdicts_reference"]["accuracy"], "accuracy", False)
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
                        "Δ acc. (pp)": diff_cell(f["verdicts"]["accuracy"], "accuracy", latex),
                        "Δ ECE cal.": diff_cell(f["verdicts"]["ece"], "ece", latex, interval=not latex),
                        "Δ NLL cal.": diff_cell(f["verdicts"]["nll"], "nll", latex, interval=not latex),
                        "k_eff": "", f"captured ({pc})": "", "flip AUROC": ""}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "memory, k: method"
    if latex:  # the paper's table leaves NLL to the notebook: it would not fit the page
        df = df.drop(columns="Δ NLL cal.", errors="ignore")
        df.columns = [c.replace("Δ", "$\\Delta$").replace("k_eff", "$k_{\\mathrm{eff}}$").replace(" cal.", "")
                      .replace("captured", "capt.").replace("flip ", "") for c in df.columns]
    return df.fillna("")


def variants_by_setting(record: dict) -> dict[str, pd.DataFrame]:
    """The notebook's variants table, one compact frame per memory setting, a row per row of
    :func:`variants_frame` (k and variant, short names, * the chosen one): test accuracy (mean over
    seeds), the accuracy difference to the tuned kNN rule at k and to the tuned vote (pp, seed-level interval, verdict letter), and the effective k. Every cell fits one line
    of the PDF page; the calibration differences and the rest are in the table file and the record."""
    out = {}
    for setting, s in record["results"]["summary"]["settings"].items():
        rows = {}
        for k, kv in (s.get("variants") or {}).items():
            for name, m in kv["methods"].items():
                rows[f"k={k}: {SHORT[name]}{' *' if name == kv['chosen'] else ''}"] = {
                    "acc. (%)": f"{100 * m['accuracy']['mean']:.2f}",
                    "vs kNN at k (pp)": "" if name == "baseline" else one_line(m["verdicts"]["accuracy"]),
                    "vs ref. (pp)": one_line(m["verdicts_reference"]["accuracy"]),
                    "k_eff": "" if name == "baseline" else f"{m['effective_k']['mean']:.1f}"}
                if "fixed_k" in m:  # the k-mixture against the uniform vote at its own best single k
                    f = m["fixed_k"]
                    rows[f"k={k}: k-mixture − fixed k ({'/'.join(map(str, sorted(set(f['k']))))})"] = {
                        "acc. (%)": f"{100 * f['accuracy']['mean']:.2f}",
                        "vs kNN at k (pp)": one_line(f["verdicts"]["accuracy"]), "vs ref. (pp)": "", "k_eff": ""}
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
        picks = [("fixed-k vote", "baseline"), ("attention head", "blind_bonus"),  # the paper's names
                 (f"chosen head: {SHORT[kv['chosen']] if latex else variant_label(kv['chosen'])}", kv["chosen"]),
                 ("query-only control", "query_only")]
        for label, name in picks:
            m = kv["methods"].get(name)
            if m is None:
                continue
            row = {f"acc. ({pc})": f"{100 * m['accuracy']['mean']:.2f}",
                   "ECE cal.": f"{m['ece_calibrated']['mean']:.4f}", "Δ acc. (pp)": "", "Δ ECE cal.": "",
                   "Δ acc. vs tuned vote (pp)": ""}
            if name != "baseline":
                v = m["verdicts"]
                row.update({"Δ acc. (pp)": diff_cell(v["accuracy"], "accuracy", latex, interval=not latex),
                            "Δ ECE cal.": diff_cell(v["ece"], "ece", latex, interval=not latex)})
            row["Δ acc. vs tuned vote (pp)"] = diff_cell(m["verdicts_reference"]["accuracy"], "accuracy", latex)
            rows[f"{short_setting(setting)}: {label}"] = row
            ref = s["reference"]
            if name == "baseline":  # the tuned vote, right below the tuned rule at k
                rows[f"{short_setting(setting)}: tuned vote"] = {
                    f"acc. ({pc})": f"{100 * ref['accuracy']['mean']:.2f}",
                    "ECE cal.": f"{ref['ece_calibrated']['mean']:.4f}", "Δ acc. (pp)": "", "Δ ECE cal.": "",
                    "Δ acc. vs tuned vote (pp)": ""}
        rows.update(main_attention_rows(s, setting, k, latex))
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = f"memory (k = {k}): method"
    if latex:
        df.columns = [c.replace("Δ", "$\\Delta$").replace(" cal.", "") for c in df.columns]
    return df


def main_attention_rows(s: dict, setting: str, k: str, latex: bool) -> dict[str, dict]:
    """Main's Attn-KNN on one memory setting: at the k it was trained at (the diagnostic) and with the
    rule's knobs chosen on validation (k, filter, prior: each seed's k named), each with its test
    accuracy, calibrated ECE and its seed-level difference to the tuned vote."""
    pc = "\\%" if latex else "%"
    a = s.get("attnknn")
    if not a:
        return {}
    picks = [(f"Attn-KNN, k = {k} (diagnostic)", a)]
    if "tuned" in a:
        picks.append((f"Attn-KNN, tuned (k {k_range(a['tuned']['k'])})", a["tuned"]))
    rows = {}
    for label, m in picks:
        ece = (m.get("ece_calibrated") or {}).get("mean")
        rows[f"{short_setting(setting)}: {label}"] = {
            f"acc. ({pc})": f"{100 * m['accuracy']['mean']:.2f}", "ECE cal.": "--" if ece is None else f"{ece:.4f}",
            "Δ acc. (pp)": "", "Δ ECE cal.": "",
            "Δ acc. vs tuned vote (pp)": diff_cell(m["verdicts_reference"]["accuracy"], "accuracy", latex)}
    return rows


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
            "Δ acc. (pp)": diff_cell(v["accuracy"], "accuracy", False),
            "Δ ECE cal.": diff_cell(v["ece"], "ece", False, interval=False),
            "k_eff": f"{m['effective_k']['mean']:.2f}",
            "temperature": f"{np.mean(m['temperatures_last']):.3f}",
            "head entropy": f"{ent[-1]:.4f}" if ent else "--",
            "selected epochs": ", ".join(map(str, m["best_epochs"])) + f" of {m['epochs']}"}
    d = e2e["no_bonus_minus_prototype"]["verdicts"]
    rows["no bonus − prototype"] = {"Δ acc. (pp)": diff_cell(d["accuracy"], "accuracy", False),
                                    "Δ ECE cal.": diff_cell(d["ece"], "ece", False, interval=False)}
    df = pd.DataFrame.from_dict(rows, orient="index").fillna("")
    df.index.name = f"end to end (seeds {', '.join(map(str, e2e['seeds']))})"
    return df


def diagnostics_frame(record: dict) -> pd.DataFrame:
    """Per epoch of main's Attn-KNN training, mean over seeds: the share of training queries whose
    vote carries a gradient, the entropy of the averaged weights and the mean per-head entropy (one
    column ``H`` where the two agree to the digits shown in every epoch), the spread of scores, ||grad H|| / ||grad NLL|| and the mean temperature; validation accuracy."""
    per = [d["diagnostics"]["per_epoch"] for d in record["results"]["per_seed"].values()]

    def mean(key: str, i: int) -> float | None:
        vals = [p[key][i] for p in per if i < len(p[key]) and p[key][i] is not None]
        return float(np.mean(vals)) if vals else None

    rows = {}
    for i in range(max(len(p["val_accuracy"]) for p in per)):
        temps = [np.mean(p["temperatures"][i]) for p in per if i < len(p["temperatures"])]
        cells = {"grad. share (%)": mean("diag_gradient_share", i), "H(mean w)": mean("train_entropy", i),
                 "mean H(head)": mean("diag_head_entropy", i), "s.d. of scores": mean("diag_score_spread", i),
                 "|dH| / |dNLL|": mean("diag_entropy_grad_ratio", i), "temp.": float(np.mean(temps)),
                 "val. acc. (%)": mean("val_accuracy", i)}
        rows[i + 1] = {c: "--" if v is None else (f"{100 * v:.1f}" if "%" in c else f"{v:.3f}") for c, v in cells.items()}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "epoch"
    if df["H(mean w)"].equals(df["mean H(head)"]):  # the heads weigh alike: one column says it
        df = df.drop(columns="mean H(head)").rename(columns={"H(mean w)": "H"})
    return df


def gradient_shares(record: dict) -> dict[str, float]:
    """Share of queries whose vote carries a gradient on the trained embedding, per split (mean over seeds)."""
    per = [d["diagnostics"]["gradient_share"] for d in record["results"]["per_seed"].values()]
    return {s: float(np.mean([p[s] for p in per])) for s in per[0]}


def verdict_matrix_frame(record: dict) -> pd.DataFrame:
    """The paper's table of the study (LaTeX cells): one row per memory setting, the tuned vote's test
    accuracy, then each method's accuracy minus the tuned vote's at the experiment's k (mean over seeds,
    verdict letter, its seed-level interval below): the attention head, the head chosen on validation
    (its name in the column before), the query-only control, and main's Attn-KNN at its trained k and with its vote settings
    tuned. A method a setting lacks is a dash; a column no setting has is left out by the table."""
    k = str(record["config"]["k"])
    rows = {}
    for setting, s in record["results"]["summary"]["settings"].items():
        kv = (s.get("variants") or {}).get(k)
        if not kv:
            continue
        methods = kv["methods"]
        chosen = kv["chosen"]
        a = s.get("attnknn") or {}
        rows[short_setting(setting)] = {
            "tuned vote (\\%)": f"{100 * s['reference']['accuracy']['mean']:.2f}",
            "attention head": stacked_cell((methods.get("blind_bonus") or {}).get("verdicts_reference", {}).get("accuracy")),
            "chosen": SHORT[chosen],  # a column of its own: a third stacked line would misalign the row
            "chosen head": stacked_cell(methods[chosen]["verdicts_reference"]["accuracy"]),
            "query-only": stacked_cell((methods.get("query_only") or {}).get("verdicts_reference", {}).get("accuracy")),
            f"Attn-KNN, $k = {k}$": stacked_cell(a["verdicts_reference"]["accuracy"]) if a else "--",
            "Attn-KNN, tuned": stacked_cell(a["tuned"]["verdicts_reference"]["accuracy"]) if "tuned" in a else "--",
        }
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "memory"
    return df

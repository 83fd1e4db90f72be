"""k_sweep: tables, figures, macros, README lines and findings read off its record."""

from __future__ import annotations

import math

import pandas as pd

from attnknn_lib.base.paths import Paths
from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.evaluation.verdicts import VERDICTS
from attnknn_lib.experiments.common.views import output_context
from attnknn_lib.experiments.k_sweep.config import ARTIFACTS, COMPARED, LABELS, NAME, NOTEBOOK
from attnknn_lib.report import figures
from attnknn_lib.report.figures import save_output_figure
from attnknn_lib.report.findings import across_text, markdown_lists, point_text, seeds_text, verdict_counts
from attnknn_lib.report.macros import macro_name, pct, record_macros, signed
from attnknn_lib.report.readme import per_dataset
from attnknn_lib.report.tables import booktabs, error_bars, fmt, fmt_mean_sd, num


def _series(record: dict, method: str, split: str, metric: str, scale: float = 1.0):
    res = record["results"]
    ks = [k for k in res["k_values"] if method in res["summary"][str(k)]]
    e = [res["summary"][str(k)][method][split][metric] for k in ks]
    return ks, [scale * x["mean"] for x in e], error_bars(e, scale)


def figure(record: dict):
    """Accuracy, macro-F1, NLL and ECE (raw and calibrated) against k, and the paired differences."""

    res = record["results"]
    methods = [m for m in LABELS if m in res["summary"][str(res["k_values"][0])]]
    label = dict(LABELS)
    for m in methods:  # say so when a line averages fewer seeds than the others
        seeds = res["summary"][str(res["k_values"][0])][m]["seeds"]
        if len(seeds) < len(res["seeds"]):
            label[m] = f"{LABELS[m]}, seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)}"
    panels = {}
    for ylabel, split, metric, scale in (("accuracy (%)", "test_raw", "accuracy", 100),
                                         ("macro-F1 (%)", "test_raw", "macro_f1", 100),
                                         ("NLL", "test_raw", "nll", 1), ("NLL (cal.)", "test_calibrated", "nll", 1),
                                         ("ECE", "test_raw", "ece", 1), ("ECE (cal.)", "test_calibrated", "ece", 1)):
        panels[ylabel] = {label[m]: _series(record, m, split, metric, scale) for m in methods}
    for ylabel, split, metric, scale in (("$\\Delta$ acc. vs fixed-k vote (pp)", "raw", "accuracy", 100),
                                         ("$\\Delta$ NLL (cal.) vs fixed-k vote", "calibrated", "nll", 1)):
        panels[ylabel] = {}
        for m in COMPARED:
            ks = [k for k in res["k_values"] if m in res["paired"][str(k)]]
            if ks:
                d = [res["paired"][str(k)][m][split][metric] for k in ks]
                panels[ylabel][label[m]] = (ks, [scale * x["value"] for x in d], None)
    title = REGISTRY[record["dataset"]].title
    seeds = ", ".join(map(str, res["seeds"]))
    vline = (res["k_sqrt"], f"k = round(sqrt(n)) = {res['k_sqrt']}") if res["k_sqrt"] else None
    ticks = [res["k_values"][0]]
    for k in res["k_values"][1:]:  # labels at least ~2.2x apart on the log axis, the largest k always
        if math.log10(k / ticks[-1]) >= 0.35 or k == res["k_values"][-1]:
            ticks.append(k)
    return figures.curve_panels(panels, "k (neighbours, log scale)", ncols=4, logx=True, xticks=ticks,
                              vline=vline, hlines={p: 0.0 for p in panels if p.startswith("$\\Delta$")},
                              title=f"{title}: test metrics against k (mean $\\pm$ s.d. over seeds {seeds})")


def _k_label(k: int, res: dict) -> str:
    tags = [t for t, on in (("$\\sqrt{n}$", k == res["k_sqrt"]), ("training $k$", k == res["training_k"])) if on]
    return f"{k} ({', '.join(tags)})" if tags else str(k)


def table_frame(record: dict, split: str = "test_raw", metric: str = "accuracy") -> pd.DataFrame:
    """Rows: k; columns: each method's mean +- s.d. over seeds, and Attn-KNN minus the best
    baseline (seed-level difference with its 95 % t interval)."""
    res = record["results"]
    pair_split = "raw" if split == "test_raw" else "calibrated"
    short = {"uniform": "Uniform", "distance": "Distance", "cosine": "Cosine", "attnknn": "Attn-KNN",
             "attnknn_retrained": "attention head at $k$"}
    rows = {}
    diffs = seed_verdicts(record, "attnknn", metric, pair_split)  # as measured
    for k in res["k_values"]:
        summ = res["summary"][str(k)]
        row = {short[m]: fmt_mean_sd(summ[m][split][metric], metric) for m in LABELS if m in summ}
        d = diffs.get(str(k))
        if d:
            row["$\\Delta$ Attn-KNN"] = fmt(d, metric, signed=True)
        rows[_k_label(k, res)] = row
    df = pd.DataFrame.from_dict(rows, orient="index").fillna("--")
    df.index.name = "$k$"
    return df


def write_outputs(record: dict, paths: Paths) -> dict:
    res, d, title, src = output_context(record, NOTEBOOK, ARTIFACTS)
    seeds = ", ".join(map(str, res["seeds"]))
    retrained = res["paired"][str(res["k_values"][0])].get("attnknn_retrained", {}).get("n_seeds", 0)
    note = (f"Mean $\\pm$ s.d.\\ over seeds {seeds} of the clean-trained Attn-KNN models; "
            f"Attn-KNN as trained (attention trained at $k = {res['training_k']}$) and with a fresh attention trained "
            f"at each $k$ on the frozen embedding (the attention head at each $k$, {retrained} seed{'s' * (retrained != 1)}); $\\Delta$: Attn-KNN minus "
            f"the best fixed vote at that $k$ (the weighting best on validation), paired on the test points, with its 95\\% seed-level "
            f"$t$ interval.")
    out = {"table": ARTIFACTS.write_table(paths, "table", d, booktabs(
        table_frame(record), f"{title}: test accuracy (\\%) against $k$. {note} {src}.", f"tab:{NAME}",
        escape_index=False))}
    out["calibration"] = ARTIFACTS.write_table(paths, "calibration", d, booktabs(
        table_frame(record, "test_calibrated", "ece"),
        f"{title}: test ECE after the post-hoc calibrator fitted on validation, against $k$. {note} {src}.",
        f"tab:{NAME}-calibration", escape_index=False))
    fig = figure(record)
    out["figure"] = save_output_figure(ARTIFACTS, paths, "figure", d, fig)
    return out


def summary_frame(record: dict) -> pd.DataFrame:
    """Plain numbers, one row per k (integer): each method's mean test accuracy (%), Attn-KNN minus
    the best baseline at that k (mean paired difference over seeds, percentage points), and each method's
    calibrated ECE; the s.d. over seeds and the intervals are in the LaTeX tables and the record."""
    res = record["results"]
    short = {"uniform": "Uniform", "distance": "Distance", "cosine": "Cosine", "attnknn": "Attn-KNN",
             "attnknn_retrained": "attention head at k"}
    rows = {}
    for k in res["k_values"]:
        summ, row = res["summary"][str(k)], {}
        row.update({("accuracy (%)", short[m]): num(summ[m]["test_raw"]["accuracy"]["mean"], 2, 100)
                    for m in short if m in summ})
        row.update({("Δ accuracy vs fixed-k vote (pp)", short[m]): num(d["raw"]["accuracy"]["value"], 2, 100)
                    for m, d in res["paired"][str(k)].items() if m in short})
        row.update({("ECE after calibration", short[m]): num(summ[m]["test_calibrated"]["ece"]["mean"], 4)
                    for m in short if m in summ})
        rows[int(k)] = row
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    df.index.name = "k"
    return df


def k_sweep_macros(record: dict) -> dict[str, str]:
    """k-sweep: the sqrt(n) k, and where each Attn-KNN variant differs most from the best baseline."""
    ds, res = record["dataset"], record["results"]
    out = {macro_name("k sweep", ds, "K sqrt"): str(res["k_sqrt"]),
           macro_name("k sweep", ds, "K values"): ", ".join(map(str, res["k_values"]))}
    for m, adv in res["verdicts"]["seed_advantage"].items():
        for what, tag in (("largest_accuracy_difference", "LargestDiff"), ("accuracy", "BestGain")):
            e = adv[what]
            out[macro_name("k sweep", ds, m, tag, "K")] = str(e["k"])
            for part, word in (("value", ""), ("low", "Low"), ("high", "High")):
                out[macro_name("k sweep", ds, m, tag, "Acc", word)] = signed(None if e[part] is None else 100 * e[part], 2)
    for m in COMPARED:  # seed-level verdicts against the best baseline at each k > 1, counted over the k grid
        words = res["verdicts"]["counted"][m]["accuracy"]
        for word in VERDICTS:
            out[macro_name("k sweep", ds, m, word, "Count")] = str(words.count(word))
        out[macro_name("k sweep", ds, m, "K Count")] = str(len(words))
    for k in res["k_values"]:
        for m, e in res["summary"][str(k)].items():
            out[macro_name("k sweep", ds, "k", str(k), m, "Acc")] = pct(e["test_raw"]["accuracy"]["mean"])
    return out


def macros(records: list[dict]) -> dict[str, str]:
    """Every macro of this experiment, with caption sources and dataset-free aliases."""
    return record_macros(records, k_sweep_macros, NOTEBOOK, ARTIFACTS.record_file)


def readme_lines(records: list[dict]) -> list[str]:
    """One README bullet per dataset: where Attn-KNN and the best baseline differ most."""
    def bullet(res: dict, title: str) -> str:
        words = res["verdicts"]["counted"]["attnknn"]["accuracy"]
        return (f"- k-sweep ({title}, k in {', '.join(map(str, res['k_values']))}): Attn-KNN against the best "
                f"baseline at each k > 1, seed-level verdicts in accuracy: {count_text(words)}.")

    return per_dataset(records, bullet)


def count_text(words: list[str]) -> str:
    """'2 equivalent, 1 worse over 3 k' (k = 1 and identical predictions left out)."""
    return (", ".join(f"{words.count(w)} {w}" for w in VERDICTS if words.count(w)) or "none") + \
        f" over {len(words)} k (k = 1 left out: every rule puts all the weight on the one neighbour)"


def seed_verdicts(record: dict, method: str, metric: str = "accuracy", split: str = "raw") -> dict[str, dict]:
    """Per k: the seed-level verdict of ``method`` minus that seed's best baseline at k (chosen on
    validation), as the measurement stored it
    (:func:`~attnknn_lib.experiments.k_sweep.measure.seed_verdicts`); split ``raw`` keeps accuracy,
    ``calibrated`` NLL and ECE."""
    return record["results"]["verdicts"]["differences"][method][split][metric]


def findings(record: dict) -> str:
    """The notebook's answer: a paragraph counting the seed-level verdicts of Attn-KNN (trained at one k)
    and of the attention retrained at each k against the best tuned kNN vote at the same k, then one
    bullet per method with its difference at each k (value and verdict word; the intervals are in the
    tables above), and whether the retrained attentions reached a plateau."""
    res = record["results"]
    counted = res["verdicts"]["counted"]
    said = [f"{LABELS[m]} {verdict_counts(counted[m]['accuracy']) or 'none'}" for m in COMPARED if seed_verdicts(record, m)]
    lines = [f"Against the best kNN vote at the same k ({seeds_text(len(res['seeds']))}; the attention was trained at "
             f"k = {res['training_k']}), the seed-level verdicts in accuracy over {len(counted['attnknn']['accuracy'])} "
             f"k are: {'; '.join(said)}; in calibrated NLL, Attn-KNN: {count_text(counted['attnknn']['nll'])}.", ""]
    for method in COMPARED:
        v = seed_verdicts(record, method)
        if v:
            lines.append(across_text(f"{LABELS[method]} minus the best kNN vote, accuracy",
                                     [(f"k = {k}:", point_text(d, "accuracy")) for k, d in v.items()]))
    trained = retrained_training(record)
    if trained:
        lines.append(f"- The retrained attention reached a plateau of its validation score in {trained}.")
    return markdown_lists(lines)


def retrained_training(record: dict) -> str | None:
    """'n of m runs (epochs run a-b)': how many retrained attentions (seed x k) stopped at a plateau;
    None for a record without retraining or from before the plateau was recorded."""
    heads = [by_k["retrained_attention"] for s in record["results"]["per_seed"].values()
             for by_k in s["by_k"].values() if by_k.get("retrained_attention")]
    if not heads or "plateau" not in heads[0]:
        return None
    runs = [len(h["history"]) for h in heads]
    return (f"{sum(h['plateau'] for h in heads)} of {len(heads)} runs (seed x k; epochs run "
            f"{min(runs)}\u2013{max(runs)} of at most {record['config']['head_epochs']})")


def advantage_frame(record: dict) -> pd.DataFrame:
    """For each compared method: the k with its largest accuracy gain, its best calibrated NLL and its
    largest accuracy difference over the best baseline (seed-level differences and intervals)."""
    what = {"accuracy": "largest accuracy gain", "nll_calibrated": "best NLL (cal.)",
            "largest_accuracy_difference": "largest accuracy difference"}
    rows = {}
    for m, d in record["results"]["verdicts"]["seed_advantage"].items():
        for key, e in d.items():
            scale, unit = (1, "") if key == "nll_calibrated" else (100, " (pp)")
            dec = 4 if key == "nll_calibrated" else 2
            rows[(LABELS[m], what.get(key, key))] = {
                "k": int(e["k"]), "difference": f"{scale * e['value']:+.{dec}f}{unit}",
                "95 % interval": (f"[{scale * e['low']:+.{dec}f}, {scale * e['high']:+.{dec}f}]"
                                  if e.get("low") is not None and e["low"] == e["low"] else "one seed: none")}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis(["method", "what"])


def tuning_frame(record: dict) -> pd.DataFrame:
    """Per k: the baseline each seed's validation chose and the first seed's tuned temperatures."""
    res = record["results"]
    seeds = list(res["per_seed"])
    first = res["per_seed"][seeds[0]]["by_k"]
    rows = {int(k): {"fixed-k vote's weighting (per seed)": "; ".join(LABELS.get(b, b) for b in (
                         res["per_seed"][s]["by_k"][k]["best_baseline"] for s in seeds)),
                     f"distance tau (seed {seeds[0]})": f"{first[k]['methods']['distance']['info']['param']:g}",
                     f"cosine T (seed {seeds[0]})": f"{first[k]['methods']['cosine']['info']['param']:g}"}
            for k in first}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("k")

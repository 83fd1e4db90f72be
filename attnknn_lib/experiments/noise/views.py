"""noise: tables, figures, macros, README lines and findings read off its record."""

from __future__ import annotations

import pandas as pd

from attnknn_lib.base.paths import Paths
from attnknn_lib.data.label_noise import NOISE_KINDS
from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.experiments.common.views import SETTING_TITLES, k_range, output_context
from attnknn_lib.experiments.noise.config import ARTIFACTS, LABELS, NAME, NOTEBOOK
from attnknn_lib.report import figures
from attnknn_lib.report.figures import save_output_figure
from attnknn_lib.report.findings import (
    across_text,
    difference_text,
    differences_text,
    markdown_lists,
    mean_pct,
    point_text,
    verdict_counts,
)
from attnknn_lib.report.macros import VERDICT_PHRASES, macro_name, pct, record_macros, signed
from attnknn_lib.report.readme import per_dataset
from attnknn_lib.report.tables import booktabs, error_bars, fmt_mean_sd, num


def cell_verdicts(res: dict, setting: str, key: str) -> dict:
    """The verdicts the measurement stored for one (setting, condition) cell
    (:func:`~attnknn_lib.experiments.noise.measure.verdicts`): ``reference``, the method its claims read
    against (the tuned vote; records before it was scored here: the best kNN vote at k, which their text
    then names), and Attn-KNN minus it (``attnknn_vs_reference``) and minus the fixed-k vote
    (``attnknn_vs_best_baseline``), each with its accuracy and calibrated ECE difference."""
    return res["verdicts"]["settings"][setting][key]


def _sentence(comparison: dict) -> str:
    """``accuracy +0.01 pp [...], **equivalent**; ECE after calibration ...`` of a stored comparison."""
    return differences_text(comparison, {"accuracy": "accuracy", "ece": "ECE after calibration"})


def _curve(setting: dict, kind: str, method: str, split: str, metric: str, scale: float):
    """(rates, means, s.d.) of one method along one kind of noise (rate 0 shared by the kinds)."""
    keys = [(r, "none/0" if r == 0 else f"{kind}/{r:g}") for r in setting["rates"]]
    keys = [(r, key) for r, key in keys if key in setting["curves"]]
    e = [setting["curves"][key]["summary"][method][split][metric] for _, key in keys]
    return [100 * r for r, _ in keys], [scale * x["mean"] for x in e], error_bars(e, scale)


def figure(record: dict):
    """Accuracy and calibrated ECE against the noise rate, per setting and kind."""

    res = record["results"]
    methods = tuple(m for m in ("uniform", "best_baseline", "reference", "attnknn", "cnn")
                    if all(m in c["summary"] for s in res["settings"].values() for c in s["curves"].values()))
    panels = {}
    for metric, ylabel, split, scale in (("accuracy", "test accuracy (%)", "test_raw", 100),
                                         ("ece", "test ECE (cal.)", "test_calibrated", 1)):
        for sname, s in res["settings"].items():
            for kind in res["kinds"]:
                title = f"{SETTING_TITLES[sname]}, {kind}"
                panels[(title, ylabel)] = {LABELS[m]: _curve(s, kind, m, split, metric, scale) for m in methods}
    return figures.curve_panels(panels, "noise rate (%)", ncols=len(panels) // 2,
                              title=f"{REGISTRY[record['dataset']].title}: label noise (clean test labels; mean "
                                    f"$\\pm$ s.d. over seeds)")


def noise_label(kind: str, rate: str | float) -> str:
    """``clean``, ``sym. 10%`` or ``asym. 40%`` (plain text: booktabs escapes the percent sign), the
    attention study's abbreviations."""
    return "clean" if kind == "none" else f"{ {'symmetric': 'sym', 'asymmetric': 'asym'}.get(kind, kind)}. {100 * float(rate):.0f}%"


def table_frame(record: dict) -> pd.DataFrame:
    """Rows: setting, kind, rate; columns: accuracy (mean +- s.d.) of each method."""
    res = record["results"]
    short = {"uniform": "Uniform", "distance": "Distance", "cosine": "Cosine", "best_baseline": "fixed-k vote",
             "reference": "tuned vote", "attnknn": "Attn-KNN", "cnn": "CNN"}
    rows = {}
    for sname, s in res["settings"].items():
        for key, cell in s["curves"].items():
            kind, rate = key.split("/")
            if sname == "trained" and kind == "none":
                continue  # retrained on clean labels are the clean-trained models: the memory-only row has them
            label = f"{SETTING_TITLES[sname]}, {noise_label(kind, rate)}"
            # noise in the memory alone leaves the CNN as it was: its accuracy is the clean row's
            rows[label] = {short[m]: fmt_mean_sd(cell["summary"][m]["test_raw"]["accuracy"], "accuracy", 1)
                           if m != "cnn" or sname == "trained" or kind == "none" else "--"
                           for m in short if m in cell["summary"]}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "Setting, noise"
    return df


def weights_frame(record: dict) -> pd.DataFrame:
    """Rows: setting, kind, rate > 0; columns: flipped/clean weight ratio per rule, share of flipped neighbours."""
    res = record["results"]
    rows = {}
    for sname, s in res["settings"].items():
        for key, cell in s["curves"].items():
            kind, rate = key.split("/")
            if kind == "none":
                continue
            label = f"{SETTING_TITLES[sname]}, {noise_label(kind, rate)}"
            row = {LABELS[m]: f"{cell['weight_ratio'][m]['mean']:.3f}" for m in ("attnknn", "distance", "cosine")}
            row["Attn-KNN $k_{\\mathrm{eff}}$"] = f"{cell['effective_neighbours']['attnknn']:.2f}"
            row["flipped neighbours"] = f"{100 * cell['flipped_share_of_neighbours']:.1f}\\%"
            rows[label] = row
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "Setting, noise"
    return df


def write_outputs(record: dict, paths: Paths) -> dict:
    res, d, title, src = output_context(record, NOTEBOOK, ARTIFACTS)
    bank, trained = res["settings"]["bank"], res["settings"].get("trained")
    how = (f"memory only: noise only in the memory (and validation) labels of the clean-trained Attn-KNN models, seeds "
           f"{', '.join(map(str, bank['seeds']))}")
    if trained:
        how += (f"; retrained: Attn-KNN and CNN trained on the noisy labels ({trained['n_train_before_change'] or 'all'} training "
                f"rows, {trained['epochs']} epochs, seeds {', '.join(map(str, trained['seeds']))}; retrained on clean "
                f"labels they are the clean-trained models of the first row)")
    how += "; --: the CNN reads no memory, so noise in the memory alone leaves it at the clean row's accuracy"
    out = {"table": ARTIFACTS.write_table(paths, "table", d, booktabs(
        table_frame(record),
        f"{title}: test accuracy (\\%, clean test labels; mean $\\pm$ s.d.\\ over seeds) under label noise. {how}. "
        f"Symmetric (sym.) flips go to any other class, asymmetric (asym.) ones from $c$ to $c+1$; validation labels "
        f"are noisy too, and every setting is chosen on them. Uniform, distance and cosine votes and the fixed-$k$ vote "
        f"(the best of them on validation) use $k = {res['k']}$; the tuned vote (weighting, temperature, $k$, label "
        f"filter and prior correction tuned on the noisy validation labels) is the reference of every verdict. {src}.", f"tab:{NAME}"))}
    out["weights"] = ARTIFACTS.write_table(paths, "weights", d, booktabs(
        weights_frame(record),
        f"{title}: mean weight a rule gives a test query's neighbour whose label was flipped, divided by the mean "
        f"weight of a clean neighbour ($k = {res['k']}$; uniform voting: 1; below 1: flipped neighbours are "
        f"down-weighted), Attn-KNN's effective number of neighbours $\\exp(H(w))$ (uniform: $k$), and the share of flipped neighbours. {src}.", f"tab:{NAME}-weights"))
    out["figure"] = save_output_figure(ARTIFACTS, paths, "figure", d, figure(record))
    return out


def summary_frame(record: dict) -> pd.DataFrame:
    """Plain numbers, one row per setting and noise: mean test accuracy (%) and calibrated ECE of the
    best kNN rule, Attn-KNN and the CNN (the weight ratios, defined only under noise, are in
    ``weights_frame``)."""
    rows = {}
    for sname, s in record["results"]["settings"].items():
        for key, cell in s["curves"].items():
            kind, rate = key.split("/")
            summ = {m: cell["summary"][m] for m in ("reference", "best_baseline", "attnknn", "cnn")
                    if m in cell["summary"]}
            row = {("accuracy (%)", LABELS[m]): num(e["test_raw"]["accuracy"]["mean"], 2, 100) for m, e in summ.items()}
            row.update({("ECE after calibration", LABELS[m]): num(e["test_calibrated"]["ece"]["mean"], 4)
                        for m, e in summ.items()})
            rows[(SETTING_TITLES[sname], noise_label(kind, rate))] = row
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    df.index.names = ["setting", "noise"]
    return df


def noise_macros(record: dict) -> dict[str, str]:
    """Label noise: accuracy and calibrated ECE of every method, and the flipped / clean weight
    ratios, per setting, kind and rate (rate in percent: NoiseFashionMnistTrainedSymmetricThreeZero...)."""
    ds, res = record["dataset"], record["results"]
    out = {}
    for sname, s in res["settings"].items():
        for key, cell in s["curves"].items():
            kind, rate = key.split("/")
            prefix = ("noise", ds, sname, kind, str(round(100 * float(rate))))
            for m, e in cell["summary"].items():
                out[macro_name(*prefix, m, "Acc")] = pct(e["test_raw"]["accuracy"]["mean"])
                out[macro_name(*prefix, m, "EceCal")] = f"{e['test_calibrated']['ece']['mean']:.4f}"
            if kind != "none":
                for m, r in cell["weight_ratio"].items():
                    out[macro_name(*prefix, m, "WeightRatio")] = f"{r['mean']:.3f}"
                out[macro_name(*prefix, "attnknn", "EffectiveK")] = f"{cell['effective_neighbours']['attnknn']:.1f}"
        for kind in {key.split("/")[0] for key in s["curves"]} - {"none"}:  # the grid's highest rate, any grid
            rate = max(float(key.split("/")[1]) for key in s["curves"] if key.startswith(kind + "/"))
            exact = macro_name("noise", ds, sname, kind, str(round(100 * rate)))
            for k, v in list(out.items()):
                if k.startswith(exact):
                    out[macro_name("noise", ds, sname, kind, "Max") + k[len(exact):]] = v
            out[macro_name("noise", ds, sname, kind, "Max Rate")] = f"{100 * rate:g}"
            key = next(key for key in s["curves"] if key.startswith(kind + "/") and float(key.split("/")[1]) == rate)
            cell, verdicts = s["curves"][key], cell_verdicts(res, sname, key)
            for metric, tag, dec, scale in (("accuracy", "Acc", 2, 100), ("ece", "EceCal", 4, 1)):
                for against, name in (("attnknn_vs_reference", ()), ("attnknn_vs_best_baseline", ("Fixed K",))):
                    d = verdicts[against][metric]  # seed-level, as measured
                    out[macro_name("noise", ds, sname, kind, "Max Diff", *name, tag)] = signed(scale * d["value"], dec)
                    if "verdict" in d:  # ECE is described only
                        out[macro_name("noise", ds, sname, kind, "Max Diff", *name, tag, "Verdict")] = \
                            VERDICT_PHRASES[d["verdict"]]
            out[macro_name("noise", ds, sname, kind, "Max Reference K")] = ", ".join(
                map(str, cell.get("reference_k") or ["--"]))
        out[macro_name("noise", ds, sname, "Seeds")] = ", ".join(map(str, s["seeds"]))
    if res.get("calibration"):  # the clean validation slice the calibrators are fitted on
        out[macro_name("noise", ds, "Calibration Share")] = f"{100 * res['calibration']['share']:g}"
    trained = res["settings"].get("trained")
    if trained:
        out[macro_name("noise", ds, "trained", "NTrain")] = str(trained["n_train_before_change"] or "all")
        out[macro_name("noise", ds, "trained", "Epochs")] = str(trained["epochs"])
    return out


def _closest(keys, target: float) -> str:
    return min(keys, key=lambda k: abs(float(k.split("/")[-1]) - target))


def macros(records: list[dict]) -> dict[str, str]:
    """Every macro of this experiment, with caption sources and dataset-free aliases."""
    return record_macros(records, noise_macros, NOTEBOOK, ARTIFACTS.record_file)


def readme_lines(records: list[dict]) -> list[str]:
    """One README bullet per dataset: accuracy near 30 % symmetric noise and the flipped / clean weight ratio."""
    def bullet(res: dict, title: str) -> str:
        s = res["settings"].get("trained") or res["settings"]["bank"]
        key = _closest([k for k in s["curves"] if k.startswith("symmetric/")] or list(s["curves"]), 0.3)
        cell = s["curves"][key]
        ref = cell_verdicts(res, "trained" if s is res["settings"].get("trained") else "bank", key)["reference"]
        acc = {m: 100 * cell["summary"][m]["test_raw"]["accuracy"]["mean"] for m in (ref, "attnknn", "cnn")}
        return (f"- label noise ({title}, {key.replace('/', ' ')}, models "
                f"{'retrained on the noisy labels' if s is res['settings'].get('trained') else 'unchanged'}): "
                f"test accuracy {'tuned vote' if ref == 'reference' else 'best kNN'} {acc[ref]:.2f} %, "
                f"Attn-KNN {acc['attnknn']:.2f} %, "
                f"CNN {acc['cnn']:.2f} %; weight of a flipped neighbour / a clean one: Attn-KNN "
                f"{cell['weight_ratio']['attnknn']['mean']:.3f}, distance "
                f"{cell['weight_ratio']['distance']['mean']:.3f}.")

    return per_dataset(records, bullet)


def _top_cells(record: dict) -> list[tuple[str, str, str, dict]]:
    """(setting, kind, key, cell) at the highest rate of each kind of noise, in the record's order."""
    out = []
    for sname, s in record["results"]["settings"].items():
        for kind in [k for k in NOISE_KINDS if any(key.startswith(k + "/") for key in s["curves"])]:
            key = max((key for key in s["curves"] if key.startswith(kind + "/")), key=lambda x: float(x.split("/")[1]))
            out.append((sname, kind, key, s["curves"][key]))
    return out


def _cell_title(sname: str, kind: str, key: str) -> str:
    return f"{SETTING_TITLES[sname]}, {kind} {100 * float(key.split('/')[1]):g} %"


def findings(record: dict) -> str:
    """The notebook's answer: a paragraph counting Attn-KNN's verdicts against the method its claims
    read against (the tuned vote) at the highest rate of each kind of noise, then one bullet per
    cell with that difference (its interval: the one number the answer rests on) and the accuracies,
    then one bullet each across the cells: against the fixed-k vote, the tuned vote's k, the weight of
    a flipped neighbour. Every number and verdict word is read from the record."""
    res = record["results"]
    cells = _top_cells(record)
    if not cells:
        return "No results yet."
    stored = {(sname, key): cell_verdicts(res, sname, key) for sname, _, key, _ in cells}
    tuned = all(v["reference"] == "reference" for v in stored.values())
    name, comparison = ("the tuned vote", "attnknn_vs_reference") if tuned else \
        ("the best kNN vote (this record has no tuned vote)", "attnknn_vs_best_baseline")
    diffs = {(sname, key): stored[(sname, key)][comparison]["accuracy"] for sname, _, key, _ in cells}
    worst = min(diffs, key=lambda c: diffs[c]["value"])
    worst_title = next(_cell_title(sname, kind, key) for sname, kind, key, _ in cells if (sname, key) == worst)
    seeds = sorted({len(s["seeds"]) for s in res["settings"].values()})
    lines = [f"At the highest rate of each kind of noise, Attn-KNN (k = {res['k']}) minus {name} in accuracy is "
             f"{verdict_counts([d['verdict'] for d in diffs.values()])} over {len(cells)} cells "
             f"({', '.join(SETTING_TITLES[s] for s in res['settings'])}; "
             f"{'/'.join(map(str, seeds))} seeds); the largest difference is {point_text(diffs[worst], 'accuracy')} "
             f"({worst_title}).", ""]
    for sname, kind, key, cell in cells:
        acc = {m: mean_pct(cell["summary"][m]["test_raw"]["accuracy"])
               for m in ("reference", "best_baseline", "attnknn", "cnn") if m in cell["summary"]}
        ref = acc.get("reference") if tuned else acc["best_baseline"]
        lines.append(f"- {_cell_title(sname, kind, key)}: Attn-KNN minus {name.split(' (')[0]} "
                     f"{difference_text(diffs[(sname, key)], 'accuracy')} (Attn-KNN {acc['attnknn']}, "
                     f"{name.split(' (')[0]} {ref}, the CNN {acc['cnn']}).")
    if tuned:
        lines.append(across_text(f"Attn-KNN minus the vote with k = {res['k']} (secondary)", [
            (f"{_cell_title(sname, kind, key)}:", point_text(stored[(sname, key)]["attnknn_vs_best_baseline"]["accuracy"],
                                                            "accuracy")) for sname, kind, key, _ in cells]))
        lines.append(across_text("The tuned vote's k over seeds", [
            (f"{_cell_title(sname, kind, key)}:", k_range(cell["reference_k"])) for sname, kind, key, cell in cells]))
    lines.append(across_text("A flipped neighbour's weight over a clean one's in Attn-KNN (1 = no down-weighting)", [
        (f"{_cell_title(sname, kind, key)}:", f"{cell['weight_ratio']['attnknn']['mean']:.3f}")
        for sname, kind, key, cell in cells]))
    lines.append("")
    lines.append("Differences are means over seeds; their intervals are t intervals over the seeds' paired "
                 "differences (the tables above give every one); ECE is described, without a verdict.")
    cal = res.get("calibration")
    if cal:  # records from before it fitted every calibrator on noisy validation labels
        lines.append(f"Calibrators: fitted on the {cal['fitted_on']}, {100 * cal['share']:g} % of them.")
    return markdown_lists(lines)

"""long_tail: tables, figures, macros, README lines and findings read off its record."""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnknn_lib.base.paths import Paths
from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.experiments.common.views import SETTING_TITLES, output_context
from attnknn_lib.experiments.long_tail.config import ARTIFACTS, BETAS, NAME, NOTEBOOK, REMEDIED
from attnknn_lib.experiments.long_tail.config import LABELS as MEASURED_LABELS
from attnknn_lib.report import figures
from attnknn_lib.report.figures import save_output_figure
from attnknn_lib.report.findings import differences_text, markdown_lists, method_names, seeds_text
from attnknn_lib.report.macros import VERDICT_PHRASES, macro_name, pct, record_macros, signed
from attnknn_lib.report.readme import per_dataset
from attnknn_lib.report.tables import booktabs, fmt_mean_sd, num

FIGURE_METHODS = ("uniform", "best_baseline", "attnknn", "cnn", "best_baseline_balanced", "attnknn_balanced")

LABELS = method_names(MEASURED_LABELS)  # the paper's names of the votes


def cell_verdicts(res: dict, setting: str, key: str) -> dict:
    """The verdicts the measurement stored for one (setting, ratio) cell
    (:func:`~attnknn_lib.experiments.long_tail.measure.verdicts`): ``reference``, the method its claims
    read against (the tuned vote; records before it was scored here: the best kNN vote at k), and the
    comparisons ``attnknn_vs_reference``, ``attnknn_balanced_vs_reference``, ``attnknn_vs_best_baseline``
    and ``attnknn_balanced_vs_best_baseline_balanced``, each with its accuracy and calibrated ECE difference."""
    return res["verdicts"]["settings"][setting][key]


def _sentence(comparison: dict) -> str:
    """``accuracy +0.01 pp [...], **equivalent**; ECE after calibration ...`` of a stored comparison."""
    return differences_text(comparison, {"accuracy": "accuracy", "ece": "ECE after calibration"})


def figure(record: dict):
    """Per-class test accuracy against the class's size in the memory, per setting and imbalanced ratio:
    one marker per size rank and method (the r-th largest class, mean over the panel's seeds), no
    lines between classes; the class at each rank is named (per seed where the draw differs)."""

    import textwrap

    plt = figures.plt
    res = record["results"]
    cells = [(sname, s, key, cell) for sname, s in res["settings"].items() for key, cell in s["curves"].items()
             if float(key) != 1]
    ncols = min(2, len(cells))
    nrows = -(-len(cells) // ncols)
    fig = plt.figure(figsize=(4.9, 1.95 * nrows + 1.8), layout="constrained")
    panels, foot = fig.subfigures(2, 1, height_ratios=[1.95 * nrows + 0.6, 1.2])
    axes = panels.subplots(nrows, ncols, squeeze=False, sharey=True)
    orders: dict[str, list[int]] = {}
    for ax, (sname, _s, key, cell) in zip(axes.flat, cells):
        sizes = np.asarray(cell["size_ranked_sizes"], dtype=float)
        names = res.get("class_names") or [str(c) for c in range(len(sizes))]  # older records: indices
        for i, m in enumerate(FIGURE_METHODS):
            dodge = 1.045 ** (i - (len(FIGURE_METHODS) - 1) / 2)  # side by side on the log axis
            ax.plot(sizes * dodge, 100 * np.asarray(cell["size_ranked_accuracy"][m]), ls="none", ms=3.5,
                    color=f"C{i}", marker="osD^v<"[i], label=LABELS[m])
        seeds = list(cell["class_order"])
        per_seed = {tuple(o) for o in cell["class_order"].values()}
        if len(per_seed) == 1:  # one class per rank: name it at its size
            order = next(iter(per_seed))
            for x, c in zip(sizes, order):
                ax.text(x, 1.0, names[c], transform=ax.get_xaxis_transform(), rotation=90, fontsize=7,
                        ha="center", va="bottom")
        else:
            orders.update({seed: o for seed, o in cell["class_order"].items()})
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(figures.matplotlib.ticker.NullFormatter())  # no crowded 2x10^2 labels
        ax.set_title(f"{SETTING_TITLES[sname]}, ratio {key} (mean of {len(seeds)} seed{'s' if len(seeds) != 1 else ''})",
                     fontsize=8, pad=54 if len(per_seed) == 1 else 4)
        ax.set_xlabel("class size in the memory (log)")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("class accuracy (%)")
    for ax in list(axes.flat)[len(cells):]:
        ax.axis("off")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    foot.legend(handles, labels, loc="upper center", ncol=3, frameon=False, fontsize=7)
    note = "; ".join(f"seed {seed}: " + ", ".join(names[c] for c in o) for seed, o in orders.items())
    if note:
        foot.text(0.5, 0.02, textwrap.fill("Classes from the largest to the smallest (drawn per seed), " + note, 100),
                  fontsize=7, ha="center", va="bottom")
    panels.suptitle(f"{REGISTRY[record['dataset']].title}: accuracy of each class on a long-tailed memory\n"
                 f"(markers: the r-th largest class, per method; seeds as in each panel's title)", fontsize=9)
    return fig


def table_frame(record: dict) -> pd.DataFrame:
    """Rows: setting, ratio, method; columns: accuracy, macro-F1, calibrated ECE (mean +- s.d.), frequent / rare classes' accuracy."""
    res = record["results"]
    rows = {}
    for sname, s in res["settings"].items():
        for key, cell in s["curves"].items():
            for m, e in cell["summary"].items():
                if m in ("distance", "cosine") or (float(key) == 1 and m in REMEDIED):
                    continue
                if float(key) == 1 and sname == "trained":
                    continue  # retrained on the balanced set are the clean-trained models: the memory-only rows
                if m.startswith("cnn") and sname == "bank" and float(key) != 1:
                    continue  # the memory alone does not change the CNN: its rows are the balanced ones
                rows[f"{SETTING_TITLES[sname]}, {key}: {LABELS[m]}"] = {
                    "Acc. (\\%)": fmt_mean_sd(e["test_raw"]["accuracy"], "accuracy", 1),
                    "Macro-F1 (\\%)": fmt_mean_sd(e["test_raw"]["macro_f1"], "macro_f1", 1),
                    "ECE (cal.)": fmt_mean_sd(e["test_calibrated"]["ece"], "ece", 3),
                    "Frequent (\\%)": f"{100 * cell['group_accuracy'][m]['head']:.1f}",
                    "Rare (\\%)": f"{100 * cell['group_accuracy'][m]['tail']:.1f}"}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "Setting, ratio: method"
    return df


def write_outputs(record: dict, paths: Paths) -> dict:
    res, d, title, src = output_context(record, NOTEBOOK, ARTIFACTS)
    bank, trained = res["settings"]["bank"], res["settings"].get("trained")
    how = f"memory only: the clean-trained Attn-KNN models (seeds {', '.join(map(str, bank['seeds']))}), memory = the imbalanced subset"
    if trained:
        how += (f"; retrained: Attn-KNN and CNN trained on the imbalanced subset of "
                f"{trained['n_train_before_change'] or 'all'} training rows ({trained['epochs']} epochs, seeds "
                f"{', '.join(map(str, trained['seeds']))}); at ratio 1 they are the clean-trained models of the first "
                f"rows. The CNN reads no memory: its memory-only rows are those at ratio 1")
    out = {"table": ARTIFACTS.write_table(paths, "table", d, booktabs(
        table_frame(record),
        f"{title} with a long-tailed training set (class sizes falling exponentially with rank; ratio = smallest / largest class; balanced "
        f"validation and test). {how}. Frequent / rare: mean accuracy over the third of the classes largest / smallest in "
        f"the memory. Prior correction: each class's vote divided by its memory share to the power $\\beta$, chosen on "
        f"validation from {{{', '.join(f'{b:g}' for b in BETAS)}}} (for the CNN the same correction of its "
        f"softmax). {LABELS['reference']}: weighting, temperature, $k$, label "
        f"filter and prior correction (its exponent 0 to 2 or beyond) tuned on validation, the reference of every verdict. "
        f"Mean $\\pm$ s.d.\\ over seeds (the class order drawn per seed). {src}.", f"tab:{NAME}"))}
    fig = figure(record)
    out["figure"] = save_output_figure(ARTIFACTS, paths, "figure", d, fig)
    return out


def summary_frame(record: dict) -> pd.DataFrame:
    """Plain numbers per setting, ratio and method (best kNN rule, Attn-KNN, CNN): mean test, head
    and tail accuracy (%) and calibrated ECE as they are, then accuracy and tail accuracy with the
    prior correction and its beta per seed (uniform, distance and cosine votes are in the record)."""
    rows = {}
    for sname, s in record["results"]["settings"].items():
        for key, cell in s["curves"].items():
            for m, fixed in (("reference", None), ("best_baseline", "best_baseline_balanced"),
                             ("attnknn", "attnknn_balanced"), ("cnn", "cnn_balanced")):
                if m not in cell["summary"]:  # a record from before the tuned vote was scored here
                    continue
                e, g = cell["summary"][m], cell["group_accuracy"]
                row = {("as is", "accuracy (%)"): num(e["test_raw"]["accuracy"]["mean"], 2, 100),
                       ("as is", "head (%)"): num(g[m]["head"], 2, 100),
                       ("as is", "tail (%)"): num(g[m]["tail"], 2, 100),
                       ("as is", "ECE (cal.)"): num(e["test_calibrated"]["ece"]["mean"], 4)}
                if fixed in cell["summary"]:
                    row.update({("prior correction", "accuracy (%)"):
                                num(cell["summary"][fixed]["test_raw"]["accuracy"]["mean"], 2, 100),
                                ("prior correction", "tail (%)"): num(g[fixed]["tail"], 2, 100),
                                ("prior correction", "β per seed"): ", ".join(f"{b:g}" for b in cell["beta"][fixed])})
                elif m == "reference":  # its prior exponent is one of its tuned knobs: the as-is numbers include it
                    row.update({("prior correction", "accuracy (%)"): row[("as is", "accuracy (%)")],
                                ("prior correction", "tail (%)"): row[("as is", "tail (%)")],
                                ("prior correction", "β per seed"): "in the tuned vote"})
                rows[(SETTING_TITLES[sname], key, LABELS[m])] = row
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    df.index.names = ["setting", "ratio", "method"]
    return df


def long_tail_macros(record: dict) -> dict[str, str]:
    """Long tail: accuracy, head and tail accuracy of every method per setting and ratio
    (ratio spelled with its digits: LongTailFashionMnistTrainedZeroZeroOne...)."""
    ds, res = record["dataset"], record["results"]
    out = {}
    for sname, s in res["settings"].items():
        for key, cell in s["curves"].items():
            prefix = ("long tail", ds, sname, key.replace(".", ""))
            for m, e in cell["summary"].items():
                out[macro_name(*prefix, m, "Acc")] = pct(e["test_raw"]["accuracy"]["mean"])
                out[macro_name(*prefix, m, "HeadAcc")] = pct(cell["group_accuracy"][m]["head"])
                out[macro_name(*prefix, m, "TailAcc")] = pct(cell["group_accuracy"][m]["tail"])
        out[macro_name("long tail", ds, sname, "N Seeds")] = str(len(s["seeds"]))
        if sname == "trained":  # the retrained models' budget, disclosed where their numbers appear
            out[macro_name("long tail", ds, sname, "NTrain")] = str(s.get("n_train_before_change") or "all")
            out[macro_name("long tail", ds, sname, "Epochs")] = str(s.get("epochs"))
        smallest = min(s["curves"], key=float)  # the grid's strongest imbalance, any grid
        exact = macro_name("long tail", ds, sname, smallest.replace(".", ""))
        for k, v in list(out.items()):
            if k.startswith(exact):
                out[macro_name("long tail", ds, sname, "Min") + k[len(exact):]] = v
        out[macro_name("long tail", ds, "Min Ratio")] = smallest
        verdicts = cell_verdicts(res, sname, smallest)
        for comparison, tag in (("attnknn_vs_reference", ""), ("attnknn_balanced_vs_reference", "Balanced"),
                                ("attnknn_vs_best_baseline", "Fixed K"),
                                ("attnknn_balanced_vs_best_baseline_balanced", "Fixed K Balanced")):
            d = verdicts[comparison]["accuracy"]  # seed-level verdict, as measured
            out[macro_name("long tail", ds, sname, "Min Diff", tag, "Acc")] = signed(100 * d["value"], 2)
            out[macro_name("long tail", ds, sname, "Min Diff", tag, "Acc Verdict")] = VERDICT_PHRASES[d["verdict"]]
    return out


def macros(records: list[dict]) -> dict[str, str]:
    """Every macro of this experiment, with caption sources and dataset-free aliases."""
    return record_macros(records, long_tail_macros, NOTEBOOK, ARTIFACTS.record_file)


def readme_lines(records: list[dict]) -> list[str]:
    """One README bullet per dataset: tail-class accuracy at the strongest imbalance, with and without the prior correction."""
    def bullet(res: dict, title: str) -> str:
        s = res["settings"].get("trained") or res["settings"]["bank"]
        key = min(s["curves"], key=float)
        g = s["curves"][key]["group_accuracy"]
        return (f"- long tail ({title}, ratio {key}, models "
                f"{'retrained on the subset' if s is res['settings'].get('trained') else 'unchanged'}): "
                + (f"tail-class accuracy tuned vote {100 * g['reference']['tail']:.1f} %, " if "reference" in g
                   else "tail-class accuracy ")
                + f"best kNN vote {100 * g['best_baseline']['tail']:.1f} %, with the prior "
                f"correction {100 * g['best_baseline_balanced']['tail']:.1f} %; Attn-KNN "
                f"{100 * g['attnknn']['tail']:.1f} % / {100 * g['attnknn_balanced']['tail']:.1f} %.")

    return per_dataset(records, bullet)


def findings(record: dict) -> str:
    """The notebook's answer: per setting, at the strongest imbalance, Attn-KNN against the best tuned
    kNN vote with and without the prior correction (seed-level verdicts), and the tail classes' accuracy."""
    lines = []
    for sname, s in record["results"]["settings"].items():
        key = min(s["curves"], key=float)
        g, verdicts = s["curves"][key]["group_accuracy"], cell_verdicts(record["results"], sname, key)
        lines.append(f"**{SETTING_TITLES[sname]}** ({s['description']}; {seeds_text(len(s['seeds']))}), ratio {key}:")
        if verdicts["reference"] == "reference":
            lines += [f"- Attn-KNN minus the tuned vote: {_sentence(verdicts['attnknn_vs_reference'])}.",
                      f"- Attn-KNN with the prior correction minus the tuned vote: "
                      f"{_sentence(verdicts['attnknn_balanced_vs_reference'])}."]
        else:
            lines.append("- This record has no tuned vote (it predates it); the verdicts below read against the "
                         "vote with k.")
        ref_tail = f"tuned vote {100 * g['reference']['tail']:.1f} %, " if "reference" in g else ""
        lines += [f"- Secondary, against the vote with k = {record['results']['k']}: Attn-KNN minus the best kNN vote "
                  f"{_sentence(verdicts['attnknn_vs_best_baseline'])}; with the prior correction on both "
                  f"{_sentence(verdicts['attnknn_balanced_vs_best_baseline_balanced'])}.",
                  f"- Tail-class accuracy (mean over seeds): {ref_tail}"
                  f"best kNN vote {100 * g['best_baseline']['tail']:.1f} %, "
                  f"corrected {100 * g['best_baseline_balanced']['tail']:.1f} %; Attn-KNN "
                  f"{100 * g['attnknn']['tail']:.1f} %, corrected {100 * g['attnknn_balanced']['tail']:.1f} %; CNN "
                  f"{100 * g['cnn']['tail']:.1f} %, corrected {100 * g['cnn_balanced']['tail']:.1f} %.", ""]
    lines.append("Intervals: t over the seeds' paired differences (no test-point bootstrap in this record); "
                 "margins as declared in `attnknn_lib.evaluation.verdicts.MARGINS`.")
    return markdown_lists(lines)


def tuning_frame(record: dict) -> pd.DataFrame:
    """Per setting and ratio: the prior-correction exponent beta validation chose per seed, the
    training class sizes by rank (largest first; mean over seeds) and each seed's tail classes."""
    rows = {}
    for s, v in record["results"]["settings"].items():
        names = record["results"].get("class_names")
        for ratio, cell in v["curves"].items():
            row = {f"beta, {LABELS[m]}": ", ".join(f"{b:g}" for b in betas) for m, betas in cell["beta"].items()}
            row["class sizes, largest first"] = ", ".join(f"{x:.0f}" for x in cell["size_ranked_sizes"])
            balanced = len(set(cell["size_ranked_sizes"])) == 1  # no tail to name
            row["tail classes per seed"] = "--" if balanced else "; ".join(
                ", ".join(names[c] if names else str(c) for c in groups["tail"])
                for groups in cell.get("groups_by_seed", {}).values()) or "--"  # older records: not kept
            rows[(SETTING_TITLES[s], ratio)] = row
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis(["setting", "ratio"])

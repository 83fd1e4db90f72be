"""What the two fixed-embedding experiments' views draw alike: a verdict row, the learned metric's macros and sentence.

The positive control (one unit per nuisance scale) and the real regimes (one per candidate
embedding) measure the same comparison (:mod:`~attnknn_lib.experiments.common.fixed_embedding`),
so a unit of either is one dict with its ``summary`` (differences, means, effective k) and
``per_seed``. What differs, each experiment's views keep: how its units are named and ordered,
its headroom table's columns, its rows after the heads, its own macros.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping

import pandas as pd

from attnknn_lib.experiments.common.views import (
    DETECTABLE_ENDPOINTS,
    TUNED_ATTNKNN,
    TUNED_LABEL,
    all_tuned,
    counted_diff,
    detectable_tabular,
    row_method,
)
from attnknn_lib.report.figures import plt, save_output_figure
from attnknn_lib.report.findings import HEAD_NAMES, METHOD_NAMES, difference_text, vote_heads
from attnknn_lib.report.macros import macro_name, signed
from attnknn_lib.report.tables import interval_text

VS = {"rule": ("reference", "reference_nll"), "NCA": ("nca", "nca_nll"),
      "nonlinear metric": ("mlp_metric", "mlp_metric_nll")}
"""What a verdict row is against: (the accuracy reference, the NLL and Brier reference)."""
OPTIONAL_LEARNERS = {
    "attnknn_wide_tuned": "attention head at k_w, tuned", "attnknn_label_wide": HEAD_NAMES["attnknn_label_wide"],
    "attnknn_self_wide": HEAD_NAMES["attnknn_self_wide"], "mlp_metric": "nonlinear metric"}
"""The learners on a frozen embedding that a record holds when its config opted in (wide_heads, nonlinear_metric)."""


def has_one_budget(unit: Mapping) -> bool:
    """Whether a unit (a scale, a candidate) holds every learner the one budget adds (:data:`OPTIONAL_LEARNERS`):
    the views then show them, and the words and macros about them."""
    return set(OPTIONAL_LEARNERS) <= unit["summary"]["diff"].keys()

LEARNED_MACROS = ("Nca Acc", "Nca Acc Diff", "Nca Acc Verdict", "Attnknn Vs Nca Acc Diff", "Attnknn Vs Nca Acc Low",
                  "Attnknn Vs Nca Acc High", "Attnknn Vs Nca Acc Verdict", "Probe Acc", "Query Only Acc")
"""The learned metric's macros of one unit that both experiments write (:func:`learned_macros`)."""


def pp(x: float) -> str:
    """A share as percent with two decimals (0.8123 -> '81.23')."""
    return f"{100 * x:.2f}"


def difference(unit: Mapping, name: str, ref: str, metric: str) -> dict:
    """The seed-level difference of ``name`` minus ``ref`` on ``metric`` in one unit, as measured
    (the attention head as trained; :func:`~attnknn_lib.experiments.common.views.counted_diff`
    gives the one the verdicts count)."""
    return unit["summary"]["diff"][name][ref][metric]


def tuned_everywhere(units: Iterable[tuple[str, Mapping]]) -> bool:
    """Whether every unit holds the attention head with tuned vote settings (then the views count it)."""
    return all_tuned(u["summary"]["diff"] for _, u in units)


def wins(units: Iterable[tuple[str, Mapping]], name: str, against: str = "reference") -> list[str]:
    """The labels of the units on which ``name``'s counted verdict is 'better' in accuracy."""
    return [label for label, u in units if counted_diff(u, name, against, "accuracy")["verdict"] == "better"]


def optional_learners(unit: Mapping) -> dict[str, str]:
    """The :data:`OPTIONAL_LEARNERS` a unit holds, method -> the paper's name."""
    return {m: name for m, name in OPTIONAL_LEARNERS.items() if m in unit["summary"]["diff"]}


def first_better(units: list[tuple[str, Mapping]], name: str, against: str = "reference",
                 counted: bool = True, latex: bool = False) -> str:
    """Where ``name`` starts to be 'better' than ``against`` in accuracy over ``units`` (label, unit),
    smallest scale first, in words for a sentence: 'from $s = X$ on' (better there and at every larger
    scale), 'first at $s = X$, though not at every larger scale', 'only at the largest scale, $s = X$', or
    'at no scale'. ``counted``: the counted verdict (the attention head with tuned vote settings where
    measured), else the method as named; ``latex``: s = X in math mode."""
    read = counted_diff if counted else difference
    better = [read(u, name, against, "accuracy")["verdict"] == "better" for _, u in units]
    if True not in better:
        return "at no scale"
    first = better.index(True)
    at = f"$s = {units[first][0]}$" if latex else f"s = {units[first][0]}"
    if first == len(units) - 1:
        return f"only at the largest scale, {at}"
    return f"from {at} on" if all(better[first:]) else f"first at {at}, though not at every larger scale"


def and_list(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'; 'none' for no item."""
    return " and ".join([", ".join(items[:-1]), items[-1]] if len(items) > 1 else items) or "none"


def grid_macros(prefix: tuple[str, ...], units: list[tuple[str, Mapping]], added_later: tuple[str, ...]) -> dict[str, str]:
    """The grid of a record's units (labels, smallest first) for a set in the paper (``Scales``), and its
    history: the labels of the first run (``First Scales``), those ``added_later`` after its results
    (``Added Scales``) and those of them it keeps (``Added Kept``)."""
    labels = [label for label, _ in units]
    return {macro_name(*prefix, "Scales"): ", ".join(labels),
            macro_name(*prefix, "First Scales"): ", ".join(x for x in labels if x not in added_later),
            macro_name(*prefix, "Added Scales"): and_list(list(added_later)),
            macro_name(*prefix, "Added Kept"): and_list([x for x in added_later if x in labels])}


HOLM_P = "Holm p (diff., equiv.)"
"""The column of a verdict row's Holm-adjusted p-values in accuracy (difference, equivalence), where adjusted:
"better"/"worse" needs the first <= 0.05, "equivalent" the second <= 0.025 (the interval beside them is unadjusted)."""


def verdict_row(unit: Mapping, name: str, against: str) -> dict[str, str]:
    """One row of a verdict table: ``name`` against the tuned vote (``against`` 'rule') or NCA
    ('NCA'), accuracy against the accuracy reference, NLL and Brier (after calibration) against
    the NLL one, each as difference [95 % interval] and verdict; and its effective k (a vote head's
    only, else '--')."""
    s = unit["summary"]
    ref_acc, ref_nll = VS[against]
    acc = difference(unit, name, ref_acc, "accuracy")
    nll = difference(unit, row_method(name, "nll"), ref_nll, "nll")
    brier = difference(unit, row_method(name, "brier"), ref_nll, "brier")
    row = {"accuracy (pp)": f"{signed(100 * acc['value'], 2)} {interval_text(acc['low'], acc['high'], 2, 100, acc.get('margin'))}",
           "verdict": acc["verdict"]}
    if "p_difference_holm" in acc:  # the adjusted verdict is read from these, not from the unadjusted interval
        row[HOLM_P] = f"{acc['p_difference_holm']:.3f}, {acc['p_equivalence_holm']:.3f}"
    return {**row,
            "NLL": f"{signed(nll['value'], 3)} {interval_text(nll['low'], nll['high'], 3, margin=nll.get('margin'))}",
            "NLL verdict": nll["verdict"], "Brier verdict": brier["verdict"],
            "eff. k": f"{s['effective_k'][name]:.1f}" if name in vote_heads(s["effective_k"]) else "--"}


VERDICT_COLUMNS = "lr>{\\raggedright\\arraybackslash}p{1.5cm}r>{\\raggedright\\arraybackslash}p{1.5cm}r"
"""The LaTeX verdict table's columns (label, accuracy, verdict, NLL, verdict, effective k): a verdict of the
declared families ("worse, within the margin") wraps in its column rather than widening the table."""


def verdict_table(rows: dict[str, dict], index_name: str, latex: bool = False) -> pd.DataFrame:
    """The verdict table of :func:`verdict_row` rows (LaTeX: the interval named in the headers)."""
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = index_name
    if HOLM_P in df:
        df[HOLM_P] = df[HOLM_P].fillna("-- (unadj.)")  # a row outside the family
    if latex:  # the page holds no more columns: the adjusted p-values and the Brier verdicts are in the notebook
        df = df.drop(columns=[HOLM_P, "Brier verdict"], errors="ignore")
        df.index = pd.Index([i.replace("k_w", "$k_w$") for i in df.index], name=index_name)  # rows unescaped
        df = df.rename(columns={"accuracy (pp)": "accuracy (pp) [95\\,\\% CI]", "NLL": "NLL [95\\,\\% CI]"})
    return df


def latex_headroom_columns(df: pd.DataFrame) -> pd.DataFrame:
    """A headroom table's headers for LaTeX ('recall@16' -> 'recall at 16', '<=' -> '$\\le$', 'k_w' -> '$k_w$')."""
    df.columns = [c.replace("@", " at ").replace("<=", "$\\le$").replace("k_w", "$k_w$") for c in df.columns]
    return df


def learned_macros(pre: tuple, tag: str, unit: Mapping) -> dict[str, str]:
    """The :data:`LEARNED_MACROS` of one unit under ``tag``: NCA's, the linear probe's and the
    query-only control's accuracy, NCA against the tuned vote and the counted attention head against NCA."""
    means = unit["summary"]["means"]
    nca = difference(unit, "nca", "reference", "accuracy")
    out = {macro_name(*pre, tag, "Nca Acc"): pp(means["nca"]["accuracy"]),
           macro_name(*pre, tag, "Probe Acc"): pp(means["linear_probe"]["accuracy"]),
           macro_name(*pre, tag, "Query Only Acc"): pp(means["query_only"]["accuracy"]),
           macro_name(*pre, tag, "Nca Acc Diff"): signed(100 * nca["value"], 2),
           macro_name(*pre, tag, "Nca Acc Verdict"): nca["verdict"]}
    att = counted_diff(unit, "attnknn", "nca", "accuracy")
    for part, v in (("Diff", signed(100 * att["value"], 2)), ("Low", signed(100 * att["low"], 2)),
                    ("High", signed(100 * att["high"], 2)), ("Verdict", att["verdict"])):
        out[macro_name(*pre, tag, "Attnknn Vs Nca Acc", part)] = v
    return out


def nca_sentence(unit: Mapping, tuned_words: str = "") -> str:
    """' NCA (...) <difference> against the tuned vote; the attention head<tuned_words> against NCA
    <difference>', without the closing stop (an experiment may add a clause)."""
    return (f" NCA (a learned linear metric, the tuned vote searched again in its space) "
            f"{difference_text(difference(unit, 'nca', 'reference', 'accuracy'), 'accuracy')} against the tuned vote; "
            f"the attention head{tuned_words} against NCA "
            f"{difference_text(counted_diff(unit, 'attnknn', 'nca', 'accuracy'), 'accuracy')}")


def verdict_entries(units: Iterable[Mapping], rows: Iterable[tuple[str, str]]) -> dict[str, list[dict]]:
    """Per endpoint, the seed-level results of the verdict rows ``rows`` ((method, 'rule' or 'NCA'), as
    :func:`verdict_row` reads them) in every unit that has them: accuracy against the accuracy
    reference, NLL and Brier against the NLL one (the blocks of the table of detectable differences)."""
    rows = list(rows)
    out: dict[str, list[dict]] = {"accuracy": [], "nll": [], "brier": []}
    for unit in units:
        diff = unit["summary"]["diff"]
        for name, against in rows:
            for metric in out:
                method, ref = row_method(name, metric), VS[against][metric != "accuracy"]
                if metric in diff.get(method, {}).get(ref, {}):
                    out[metric].append(diff[method][ref][metric])
    return out


FOREST_LEARNERS = ("learner", "nca", "linear_probe", "query_only")
"""The forest plot's rows after the heads: the learners that are no head (the query-only control is a head
that reads no neighbour)."""


def forest_learners(heads: Iterable[str], tuned: bool) -> dict[str, str]:
    """The forest plot's rows, method -> the paper's name (:data:`~attnknn_lib.report.findings.HEAD_NAMES`,
    :data:`~attnknn_lib.report.findings.METHOD_NAMES`): each head (the attention head with its vote
    settings tuned, where every unit holds it: the one whose verdict counts), then :data:`FOREST_LEARNERS`."""
    out = {(TUNED_ATTNKNN["accuracy"] if h == "attnknn" and tuned else h):
           (TUNED_LABEL if h == "attnknn" and tuned else HEAD_NAMES.get(h, h)) for h in heads}
    names = {"learner": "boosted-trees learner", **METHOD_NAMES, **HEAD_NAMES}
    # lower case as the heads' rows are ("linear probe"), an acronym kept ("NCA")
    return {**out, **{m: names[m] if names[m][:2].isupper() else names[m][0].lower() + names[m][1:]
                      for m in FOREST_LEARNERS}}


FOREST_COLUMNS = 3  # panels per row: the figure prints at the text width with its fonts near the body's
FOREST_LINEAR = 10.0  # points: beyond it the forest plot's axes turn logarithmic outside -/+ 1 point


def forest_figure(units: list[tuple[str, Mapping]], learners: Mapping[str, str], title: str):
    """One panel per unit (a nuisance scale or a candidate embedding, :data:`FOREST_COLUMNS` to a row
    of panels), one row per learner: its test
    accuracy minus the tuned vote's in points, the mean over seeds with its seed-level 95 % interval as
    the record stores it (unadjusted), a vertical line at 0 and dotted lines at -/+ the declared margin.
    A learner a unit lacks leaves its row empty there. Where some difference exceeds :data:`FOREST_LINEAR`
    points, every axis is linear within -/+ 1 point and logarithmic beyond (so the margins stay visible)."""
    n, ncols = len(learners), min(len(units), FOREST_COLUMNS)
    nrows = -(-len(units) // ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(1.6 + 1.75 * ncols, 0.7 + (0.4 + 0.24 * n) * nrows), sharey=True,
                             layout="constrained", squeeze=False)
    axes = [list(grid.flat)[:len(units)]]
    for ax in list(grid.flat)[len(units):]:
        ax.set_visible(False)
    reach = max((abs(100 * unit["summary"]["diff"][name]["reference"]["accuracy"][end])
                 for _, unit in units for name in learners
                 if "accuracy" in unit["summary"]["diff"].get(name, {}).get("reference", {}) for end in ("low", "high")),
                default=0.0)
    wide = reach > FOREST_LINEAR
    colors = {"better": "tab:green", "worse": "tab:red", "equivalent": "tab:blue",
              "better, within the margin": "yellowgreen", "worse, within the margin": "lightcoral"}
    shown = set()
    for u, (ax, (label, unit)) in enumerate(zip(axes[0], units)):
        diff, margins = unit["summary"]["diff"], set()
        for i, name in enumerate(learners):
            if "accuracy" not in diff.get(name, {}).get("reference", {}):
                continue
            d = diff[name]["reference"]["accuracy"]
            margins.add(d["margin"])
            shown.add(d["verdict"])
            ax.errorbar([100 * d["value"]], [i], xerr=[[100 * (d["value"] - d["low"])], [100 * (d["high"] - d["value"])]],
                        fmt="o", ms=3.5, lw=1.2, capsize=2, color=colors.get(d["verdict"], "0.35"))
        ax.axvline(0, color="black", lw=0.8)
        for margin in margins:
            for x in (-100 * margin, 100 * margin):
                ax.axvline(x, color="grey", lw=0.8, ls=":")
        ax.set_title(textwrap.fill(label, 18))
        if wide:
            ax.set_xscale("symlog", linthresh=1.0)
            ax.set_xticks([x for x in (-50, -5, 0, 5, 50)], [f"{x:g}" for x in (-50, -5, 0, 5, 50)])
            ax.minorticks_off()
            ax.set_xlim(-1.5 * reach, 1.5 * reach)
        if u + ncols >= len(units):  # the lowest panel of its column
            ax.set_xlabel("pp vs tuned vote")
        ax.grid(axis="x", alpha=0.3)
    grid[0][0].set_yticks(range(n), [v.replace("k_w", "$k_w$") for v in learners.values()])  # the paper's symbol
    grid[0][0].set_ylim(n - 0.5, -0.5)
    handles = [plt.Line2D([], [], color=c, marker="o", ls="", label=w) for w, c in
               (*colors.items(), ("inconclusive", "0.35")) if w in shown or "within" not in w]  # within: if drawn
    fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 6), frameon=False)
    fig.suptitle(title)
    return fig


def forest_and_detectable(artifacts, paths, dataset: str, source: str, what: str, units: list[tuple[str, Mapping]], heads,
                          tuned: bool, rows=None, family: str = "every row of its verdict table, every unit", sizes: Mapping[str, int] | None = None) -> dict:
    """The two outputs the fixed-embedding experiments write alike: the forest plot of ``units`` ((panel
    title, unit) pairs; :func:`forest_figure` with :func:`forest_learners` of ``heads``) and the block of
    the table of detectable differences for one family named ``what: family``, its comparisons each
    unit's verdict rows ``rows(unit)`` ((..., method, 'rule' or 'NCA'); :func:`verdict_entries`), or,
    given ``sizes`` (the family's m per endpoint), every result the measurement adjusted in its Holm family."""
    seeds = len(units[0][1]["per_seed"])
    learners = forest_learners(heads, tuned) | optional_learners(units[0][1])
    fig = forest_figure(units, learners, f"{what}: test accuracy minus the tuned vote's ({seeds} seeds)")
    if sizes is None:
        per_unit = [verdict_entries([u], [(name, against) for *_, name, against in rows(u)]) for _, u in units]
        entries = {m: [e for d in per_unit for e in d[m]] for m in DETECTABLE_ENDPOINTS}
    else:
        entries = {m: [e for _, u in units for refs in u["summary"]["diff"].values() for ref in refs.values()
                       for metric, e in ref.items() if metric == m and "family_size" in e] for m in sizes}
    label = f"{what}: {family}"
    return {"forest": save_output_figure(artifacts, paths, "forest", dataset, fig),
            "detectable": artifacts.write_table(paths, "detectable", dataset, detectable_tabular(
                source, {label: entries}, None if sizes is None else {label: sizes}))}

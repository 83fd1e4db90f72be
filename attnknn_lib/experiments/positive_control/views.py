"""Positive-control views: tables, the figure, macros, README lines and findings read off its record
(no measuring)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnknn_lib.base.paths import Paths
from attnknn_lib.experiments.common.fixed_embedding import k_range
from attnknn_lib.experiments.common.fixed_embedding_views import (
    LEARNED_MACROS,
    difference,
    first_better,
    forest_and_detectable,
    grid_macros,
    latex_headroom_columns,
    learned_macros,
    optional_learners,
    pp,
    tuned_everywhere,
    verdict_row,
    verdict_table,
    wins,
)
from attnknn_lib.experiments.common.learned_metric import LABELS
from attnknn_lib.experiments.common.views import (
    AT_K_LABEL,
    TUNED_ATTNKNN,
    TUNED_CAPTION,
    TUNED_LABEL,
    all_tuned,
    answer_findings,
    answer_then_lines,
    counted_diff,
    counted_method,
    head_labels,
    tuned_k,
    tuned_k_note,
)
from attnknn_lib.experiments.positive_control.config import ARTIFACTS, DATASET, NAME, NOTEBOOK
from attnknn_lib.report.figures import plt, save_output_figure
from attnknn_lib.report.findings import (
    HEAD_NAMES,
    NOT_MEASURED,
    across_text,
    head_names,
    point_text,
    share_text,
    table_link,
    vote_heads,
)
from attnknn_lib.report.macros import (
    VERDICT_PHRASES,
    count_phrase,
    macro_name,
    record_macros,
    signed,
    source_note,
)
from attnknn_lib.report.tables import booktabs

CEILINGS = {  # method -> label, for the headroom table and the figure
    "reference": "tuned vote",
    "geometry": "geometry-only, k <= 16",
    "oracle_inside_k": "oracle weights on the k retrieved",
    "oracle_reference_k": "oracle weights at the tuned vote's k",
    "oracle_retrieval": "oracle retrieval",
    "learner": "boosted-trees learner (learnable room)",
}
LEARNED_COLUMNS = {  # the learned metrics and the control, beside the ceilings
    "nca": "NCA: re-retrieval in a learned linear map",
    "linear_probe": LABELS["linear_probe"],
    "query_only": HEAD_NAMES["query_only"],
}
COMPARED = {"learner": "boosted trees", "nca": LABELS["nca"], "linear_probe": LABELS["linear_probe"],
            "query_only": HEAD_NAMES["query_only"]}  # the verdict table's rows after the heads


def _levels(record: dict) -> list[tuple[str, dict]]:
    return sorted(record["results"]["levels"].items(), key=lambda kv: kv[1]["nuisance_scale"])


def _tuned(record: dict) -> bool:
    """Whether every scale holds the attention head with tuned vote settings (then the views count it)."""
    return tuned_everywhere(_levels(record))


def headroom_frame(record: dict, latex: bool = False) -> pd.DataFrame:
    """Per nuisance scale (means over seeds): the headroom at k before any head is trained, the
    tuned vote (its k per seed) and every ceiling, test accuracy in %."""
    k = record["results"]["k"]
    rows = {}
    for key, lv in _levels(record):
        s = lv["summary"]
        hr, means = s["headroom"], s["means"]
        row = {f"recall@{k}": pp(hr["at_k"]["recall"]), f"uniform@{k}": pp(hr["at_k"]["uniform_accuracy"]),
               f"fixable@{k}": pp(hr["at_k"]["fixable"]),
               "tuned vote's k": k_range(s["reference_k"])}
        row.update({CEILINGS[m]: pp(means[m]["accuracy"]) for m in CEILINGS})
        row.update({label: pp(means[m]["accuracy"]) for m, label in LEARNED_COLUMNS.items()})
        rows[key] = row
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "nuisance scale"
    return latex_headroom_columns(df) if latex else df


def _compared(record: dict, lv: dict, with_k: bool = True) -> list[tuple[str, str, str]]:
    """(row label, method, against) of one level: each head, the learner, the learned metrics and
    the control against the tuned vote; then each head against NCA."""
    heads = head_labels(head_names(record["results"]["heads"]), record["results"]["k"], _tuned(record),
                        lv["per_seed"] if with_k else None)
    if not with_k and TUNED_ATTNKNN["accuracy"] in heads:  # LaTeX: short names, the k in the caption
        heads.update({TUNED_ATTNKNN["accuracy"]: "attention, tuned", "attnknn": f"attention, k = {record['results']['k']}"})
    diff, attention = lv["summary"]["diff"], {**heads, **optional_learners(lv)}
    out = [(label, name, "rule") for name, label in {**heads, **COMPARED, **optional_learners(lv)}.items() if name in diff]
    metrics = ("NCA", "nonlinear metric") if "mlp_metric" in diff else ("NCA",)  # each attention method against each
    return out + [(f"{label} vs {m}", name, m) for m in metrics for name, label in attention.items() if name != "mlp_metric"]


def verdict_frame(record: dict, latex: bool = False) -> pd.DataFrame:
    """One row per (scale, method, what it is against): each head, the boosted-trees learner, NCA,
    the linear probe and the query-only control against the tuned vote, then each head against NCA:
    accuracy against the accuracy-tuned one, NLL and Brier (after calibration) against the NLL-tuned
    one, each as difference [95 % interval] and verdict; and the head's effective k (exp of the
    weights' entropy, mean over test queries and seeds)."""
    rows = {f"s = {key}, {label}": verdict_row(lv, name, against) for key, lv in _levels(record)
            for label, name, against in _compared(record, lv, with_k=not latex)}  # LaTeX: the k in the caption
    return verdict_table(rows, "scale, method", latex)


SHARED = {TUNED_ATTNKNN["accuracy"]: TUNED_LABEL, **{h: h for h in ("attnknn", "label_aware", "readout")}, "learner": "boosted trees", "nca": "NCA",
          "linear_probe": "linear probe", "query_only": "query-only", "oracle_inside_k": "oracle weights in k",
          "oracle_reference_k": "oracle weights at tuned vote's k"}  # the shares table's rows (heads: their labels)


def _share(x: float | None) -> str:
    return "--" if x is None else f"{100 * x:.0f}"


def _min_room(record: dict) -> float:
    """The smallest room a share is taken of (the accuracy margin, as the record stored it)."""
    return _levels(record)[0][1]["summary"]["shares"]["retrieval"]["min_room"]


def shares_frame(record: dict) -> pd.DataFrame:
    """Per method and nuisance scale, the share of the room it captures (%): its accuracy gain over
    the tuned vote divided by the oracle retrieval's gain, then by the oracle weights' inside k (the
    ratio of the mean gain to the mean room over seeds; '--' where there is no room)."""
    heads = head_names(record["results"]["heads"])
    if _tuned(record):
        heads["attnknn"] = AT_K_LABEL.format(k=record["results"]["k"])
    rows: dict = {}
    for key, lv in _levels(record):
        sh = lv["summary"]["shares"]
        for name, label in SHARED.items():
            if name in sh["retrieval"]["methods"]:
                r, i = (sh[o]["methods"][name]["of_means"] for o in ("retrieval", "inside_k"))
                rows.setdefault(heads.get(name, label), {})[f"s = {key}"] = f"{_share(r)} / {_share(i)}"
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "method (% of oracle retrieval / of oracle weights in k)"
    return df


def diagnostic_frame(record: dict) -> pd.DataFrame:
    """Why the label-aware head fails, per scale (means over seeds): its test accuracy as trained and
    when its distance feature is the informative-block distance of the same neighbours, the oracle
    weights on the same neighbours and the uniform vote; the rank correlation of its weights with the
    informative distance (as trained, with informative distances) and of the retrieved with the
    informative distance."""
    rows = {}
    for key, lv in _levels(record):
        d = lv["summary"].get("label_aware_diagnostic")
        if d is None:
            continue
        rows[key] = {"uniform vote": pp(d["uniform_accuracy"]), "label-aware": pp(d["as_retrieved"]["accuracy"]),
                     "label-aware, informative distances": pp(d["informative"]["accuracy"]),
                     "oracle weights in k": pp(lv["summary"]["means"]["oracle_inside_k"]["accuracy"]),
                     "rho(weights, informative)": f"{d['as_retrieved']['weights_vs_informative']:.2f}",
                     "rho(weights, informative), informative distances": (
                         f"{d['informative']['weights_vs_informative']:.2f}"),
                     "rho(retrieved, informative)": f"{d['retrieved_vs_informative']:.2f}"}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "nuisance scale"
    return df


def resolution_frame(record: dict) -> pd.DataFrame:
    """The smallest difference each endpoint resolves (the interval's half-width) at 3 and 5 seeds,
    from the counted attention head's measured seed s.d. at each scale, beside the declared margin."""
    rows = {}
    for key, lv in _levels(record):
        for metric, ref in (("accuracy", "reference"), ("nll", "reference_nll"), ("brier", "reference_nll")):
            d = counted_diff(lv, "attnknn", ref, metric)
            scale = 100 if metric == "accuracy" else 1
            res = d.get("resolvable", {})
            rows[(key, metric)] = {"margin": f"{scale * d['margin']:.4g}",
                                   **{f"resolvable at {n} seeds": (f"{scale * res[n]:.4g}" if n in res else "--")
                                      for n in ("3", "5")},
                                   "resolved at 5": "yes" if res.get("5", np.inf) < d["margin"] else "no"}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.names = ["scale", "endpoint"]
    return df


def figure(record: dict):
    """Left: each head (the attention head also with tuned vote settings), the boosted-trees learner
    and NCA minus the tuned vote, in accuracy points (mean over seeds, seed-level 95 % interval), on
    one axis (the oracles' room, far larger, is in the headroom table). Right: the effective k of the
    heads that vote (not the readout), with the k they read and the threshold declared for 'moved
    from uniform'."""
    res = record["results"]
    lv = _levels(record)
    x = np.array([v["nuisance_scale"] for _, v in lv])
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.6), layout="constrained")
    heads = head_labels(head_names(res["heads"]), res["k"], _tuned(record))
    shown = {**heads, "learner": "boosted-trees learner (learnable room)", "nca": LABELS["nca"]}
    for i, (name, label) in enumerate(shown.items()):
        d = [difference(v, name, "reference", "accuracy") for _, v in lv]
        mean = np.array([100 * e["value"] for e in d])
        err = np.array([[100 * (e["value"] - e["low"]) for e in d], [100 * (e["high"] - e["value"]) for e in d]])
        color = {"learner": "tab:brown", "nca": "black"}.get(name, f"C{i}")
        axes[0].errorbar(x + 0.02 * (i - len(shown) / 2), mean, yerr=err, color=color, marker="o", ms=3.5, lw=1.2,
                         capsize=2, label=label, ls="--" if name in ("learner", "nca") else "-")
        if name in vote_heads(res["heads"]):  # a readout is not a vote: its weights' effective k is not its k
            axes[1].plot(x, [v["summary"]["effective_k"][name] for _, v in lv], color=color, marker="o", ms=3.5,
                         lw=1.3, label=label)
    axes[0].axhline(0, color="black", lw=0.8)
    axes[1].axhline(res["k"], color="black", lw=0.8, ls="--", label=f"k = {res['k']} (uniform weights)")
    axes[1].axhline(res["moved_threshold"], color="grey", lw=0.8, ls=":",
                    label=f"{res['moved_threshold']:g}: below it, moved from uniform")
    axes[1].set_ylim(0, res["k"] + 1)
    axes[0].set_ylabel("accuracy minus the tuned vote's (pp)")
    axes[1].set_ylabel(f"effective k = exp(H), of k = {res['k']}")
    for ax in axes:
        ax.set_xlabel("nuisance scale s")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7.5, loc="upper left")
    axes[1].legend(fontsize=7.5, loc="lower left")
    n = len(res["seeds"])
    fig.suptitle(f"Positive control: accuracy over the tuned vote and effective k of the weights, by nuisance scale "
                 f"({n} seeds)", fontsize=9)
    return fig


def write_outputs(record: dict, paths: Paths) -> dict:
    src = source_note(NOTEBOOK, ARTIFACTS.record_file(DATASET))
    res = record["results"]
    n, k = len(res["seeds"]), res["k"]
    out = {"headroom": ARTIFACTS.write_table(paths, "headroom", DATASET, booktabs(
        headroom_frame(record, latex=True).T,
        f"Positive control: room to win against the nuisance scale (test accuracy in \\%, mean over {n} seeds). "
        f"Recall, uniform vote and fixable share at Attn-KNN's $k = {k}$; the tuned vote "
        f"(its $k$ per seed); the geometry-only vote (the best uniform, distance or cosine vote over at most {k} neighbours, no filter or prior correction); the {k} retrieved neighbours "
        f"reweighted by their distance in the informative dimensions (which the generator knows), the same at the "
        f"tuned vote's $k$, and the vote over the nearest rows in the informative dimensions alone; the boosted-trees "
        f"learner on neighbour features; NCA (the tuned vote's search run again on the neighbours of a linear map learned with "
        f"the NCA loss), the linear probe and the query-only control, which reads no neighbour. {src}.",
        f"tab:{NAME}_headroom", escape_index=False, size="footnotesize")),
        "verdicts": ARTIFACTS.write_table(paths, "verdicts", DATASET, booktabs(
            verdict_frame(record, latex=True),
            f"Positive control: each head, the boosted-trees learner, NCA, the linear probe and the query-only control "
            f"minus the tuned vote, then each head minus NCA (rows 'vs NCA'), seed-level 95\\,\\% intervals over "
            f"{n} seeds (each seed its own data and test set). Accuracy against the tuned vote (or NCA); NLL and "
            f"Brier, after calibration on validation, against the NLL-tuned vote (or NCA tuned for NLL). "
            f"{TUNED_CAPTION + tuned_k_note(_levels(record), 's = ') if _tuned(record) else ''}Effective $k$: exp of the entropy of the weights as trained "
            f"(--: not a vote, or the attention head with tuned vote settings, whose weights are those of its row at "
            f"$k = {k}$). {src}.", f"tab:{NAME}_verdicts", escape_index=False, size="scriptsize", stretch=0.9,
            colsep="3pt")),
        "figure": save_output_figure(ARTIFACTS, paths, "figure", DATASET, figure(record))}
    out["shares"] = ARTIFACTS.write_table(paths, "shares", DATASET, booktabs(
        shares_frame(record),
        f"Positive control: the share of the retrieval room each method captures (\\%), its test-accuracy gain over the "
        f"tuned vote divided by the gain of the oracle retrieval (the uniform vote over the {k} nearest rows "
        f"in the informative dimensions), then by that of the oracle weights on the {k} retrieved neighbours: the "
        f"ratio of the mean gain to the mean room over {n} seeds; -- where the oracle's room over the tuned vote is below the accuracy margin "
        f"({100 * _min_room(record):g}\\,pp). "
        f"NCA is the tuned vote's search run again on the neighbours of a linear map learned with the NCA loss. {src}.",
        f"tab:{NAME}_shares", escape_index=True, size="footnotesize", colsep="3pt"))
    out["diagnostic"] = ARTIFACTS.write_table(paths, "diagnostic", DATASET, booktabs(
        diagnostic_frame(record).T,
        f"Positive control: why the label-aware head fails (means over {n} seeds). It reads each neighbour's "
        f"distance, rank, label share and label agreement but no coordinate, so it can reweight only by the "
        f"distance the retrieval measured. Test accuracy (\\%) of the uniform vote over the {k} retrieved, of the "
        f"head as trained, of the same head trained with the informative-dimension distance of the same neighbours "
        f"in place of the retrieved one, and of the oracle weights on them; Spearman correlation (mean over test "
        f"queries) of the head's weights with minus the informative distance, and of the retrieved with the "
        f"informative distance. {src}.", f"tab:{NAME}_diagnostic", escape_index=True, size="footnotesize"))
    return out | forest_and_detectable(ARTIFACTS, paths, DATASET, src, "Positive control", [(f"s = {s}", lv) for s, lv in
                                       _levels(record)], res["heads"], _tuned(record), lambda lv: _compared(record, lv, False))


RANKS = ("Max", "Second", "Third", "Min")  # the scales the paper names: largest, next two, smallest


def _level_macros(pre: tuple, tag: str, lv: dict | None) -> dict[str, str]:
    """One level's macros under its rank ``tag``; '--' for each when the profile has no such level."""
    if lv is None:
        names = ("Scale", "Room", "Attnknn Acc Diff", "Attnknn Acc Low", "Attnknn Acc High", "Attnknn Acc Verdict",
                 "Attnknn Acc Phrase", "Learner Acc Diff", "Learner Acc Low", "Learner Acc High", "Learner Acc Verdict", "Attnknn Nll Diff",
                 "Attnknn Nll Low", "Attnknn Nll High", "Attnknn Nll Verdict", "Attnknn Eff K", "Reference Acc",
                 "Attnknn Acc", "Oracle Inside Acc", "Fixable", "Attnknn At K Acc Diff", "Attnknn At K Acc Verdict",
                 "Attnknn Tuned K", "Attnknn Tuned At Cap Words")
        return {macro_name(*pre, tag, n): "--" for n in names}
    s = lv["summary"]
    out = {macro_name(*pre, tag, "Scale"): f"{lv['nuisance_scale']:g}"}
    for name, head in (("attnknn", "Attnknn"), ("learner", "Learner")):
        acc = counted_diff(lv, name, "reference", "accuracy")
        out[macro_name(*pre, tag, head, "Acc Diff")] = signed(100 * acc["value"], 2)
        out[macro_name(*pre, tag, head, "Acc Low")] = signed(100 * acc["low"], 2)
        out[macro_name(*pre, tag, head, "Acc High")] = signed(100 * acc["high"], 2)
        out[macro_name(*pre, tag, head, "Acc Verdict")] = acc["verdict"]
    # "better than the tuned vote", for a sentence whose verdict comes before what was compared
    out[macro_name(*pre, tag, "Attnknn Acc Phrase")] = VERDICT_PHRASES[out[macro_name(*pre, tag, "Attnknn Acc Verdict")]]
    nll = counted_diff(lv, "attnknn", "reference_nll", "nll")
    at_k = difference(lv, "attnknn", "reference", "accuracy")  # the head as trained: a diagnostic where tuned exists
    out[macro_name(*pre, tag, "Attnknn At K Acc Diff")] = signed(100 * at_k["value"], 2)
    out[macro_name(*pre, tag, "Attnknn At K Acc Verdict")] = at_k["verdict"]
    out[macro_name(*pre, tag, "Attnknn Tuned K")] = tuned_k(lv["per_seed"]) if all_tuned([s["diff"]]) else "--"
    # the seeds whose tuned k is the most neighbours the search may read (an open edge: more might gain more)
    out[macro_name(*pre, tag, "Attnknn Tuned At Cap Words")] = count_phrase(
        sum("k" in p["methods"][TUNED_ATTNKNN["accuracy"]]["info"]["edges"] for p in lv["per_seed"].values()),
        len(lv["per_seed"])) if all_tuned([s["diff"]]) else "--"
    out[macro_name(*pre, tag, "Room")] = signed(
        100 * (s["means"]["oracle_inside_k"]["accuracy"] - s["means"]["reference"]["accuracy"]), 2)
    out[macro_name(*pre, tag, "Attnknn Nll Diff")] = signed(nll["value"], 3)
    out[macro_name(*pre, tag, "Attnknn Nll Low")] = signed(nll["low"], 3)
    out[macro_name(*pre, tag, "Attnknn Nll High")] = signed(nll["high"], 3)
    out[macro_name(*pre, tag, "Attnknn Nll Verdict")] = nll["verdict"]
    out[macro_name(*pre, tag, "Attnknn Eff K")] = f"{s['effective_k']['attnknn']:.1f}"
    out[macro_name(*pre, tag, "Reference Acc")] = pp(s["means"]["reference"]["accuracy"])
    out[macro_name(*pre, tag, "Attnknn Acc")] = pp(s["means"][counted_method(s["diff"], "attnknn", "accuracy")]["accuracy"])
    out[macro_name(*pre, tag, "Oracle Inside Acc")] = pp(s["means"]["oracle_inside_k"]["accuracy"])
    out[macro_name(*pre, tag, "Fixable")] = pp(s["headroom"]["at_k"]["fixable"])
    return out


LEVEL_LEARNED_MACROS = (*LEARNED_MACROS, "Attnknn Vs Nca Nll Diff", "Attnknn Vs Nca Nll Verdict",
                        "Attnknn Share Retrieval", "Attnknn Share Inside", "Nca Share Retrieval", "Nca Share Inside",
                        "Oracle Retrieval Acc", "Label Aware Acc", "Label Aware Informative Acc", "Label Aware Rho",
                        "Label Aware Informative Rho", "Retrieved Rho")


def _learned_macros(pre: tuple, tag: str, lv: dict | None) -> dict[str, str]:
    """One level's numbers of the learned metric, the shares of the room and the label-aware
    diagnostic under its rank ``tag``; '--' for each where the profile has no such level, and for the
    diagnostic where the record lacks it."""
    if lv is None:
        return {macro_name(*pre, tag, n): "--" for n in LEVEL_LEARNED_MACROS}
    s = lv["summary"]
    out = learned_macros(pre, tag, lv)
    out[macro_name(*pre, tag, "Oracle Retrieval Acc")] = pp(s["means"]["oracle_retrieval"]["accuracy"])
    nll = counted_diff(lv, "attnknn", "nca_nll", "nll")
    out[macro_name(*pre, tag, "Attnknn Vs Nca Nll Diff")] = signed(nll["value"], 3)
    out[macro_name(*pre, tag, "Attnknn Vs Nca Nll Verdict")] = nll["verdict"]
    for name, head in ((counted_method(s["diff"], "attnknn", "accuracy"), "Attnknn"), ("nca", "Nca")):
        for oracle, word in (("retrieval", "Retrieval"), ("inside_k", "Inside")):
            out[macro_name(*pre, tag, head, "Share", word)] = _share(s["shares"][oracle]["methods"][name]["of_means"])
    d = s.get("label_aware_diagnostic")
    for key, value in (("Label Aware Acc", d and pp(d["as_retrieved"]["accuracy"])),
                       ("Label Aware Informative Acc", d and pp(d["informative"]["accuracy"])),
                       ("Label Aware Rho", d and f"{d['as_retrieved']['weights_vs_informative']:.2f}"),
                       ("Label Aware Informative Rho", d and f"{d['informative']['weights_vs_informative']:.2f}"),
                       ("Retrieved Rho", d and f"{d['retrieved_vs_informative']:.2f}")):
        out[macro_name(*pre, tag, key)] = value or "--"
    return out


def pc_macros(record: dict) -> dict[str, str]:
    """The generator's sizes, and per ranked scale (:data:`RANKS`: the largest, the next two, the
    smallest; '--' where a profile has fewer levels) Attn-KNN and the boosted-trees learner against
    the tuned vote, Attn-KNN's NLL against the NLL-tuned vote, its effective k and the room."""
    res = record["results"]
    pre = (NAME,)
    out = {macro_name(*pre, "Seeds"): str(len(res["seeds"])), macro_name(*pre, "K"): str(res["k"]),
           macro_name(*pre, "Moved Threshold"): f"{res['moved_threshold']:.1f}",
           macro_name(*pre, "Levels"): str(len(res["levels"]))}
    task = res["task"]
    for key, name in (("num_classes", "Classes"), ("clusters_per_class", "Clusters"),
                      ("informative_dims", "Informative Dims"), ("nuisance_dims", "Nuisance Dims")):
        out[macro_name(*pre, name)] = str(task[key])
    out[macro_name(*pre, "Dims")] = str(task["informative_dims"] + task["nuisance_dims"])
    levels = [lv for _, lv in _levels(record)]  # smallest scale first
    ranked = {"Max": levels[-1], "Second": levels[-2] if len(levels) > 2 else None,
              "Third": levels[-3] if len(levels) > 3 else None, "Min": levels[0]}
    for tag in RANKS:
        out.update(_level_macros(pre, tag, ranked[tag]))
        out.update(_learned_macros(pre, tag, ranked[tag]))
    # where each learner starts to be better than the tuned vote (and the attention head than NCA), in words
    out.update(grid_macros(pre, _levels(record), ADDED_LATER))
    for key, name, against, counted in (f for f in FIRST_BETTER if f[1] in levels[0]["summary"]["diff"]):
        out[macro_name(*pre, key, "First Better")] = first_better(_levels(record), name, against, counted, latex=True)
    return out


FIRST_BETTER = (("Attnknn", "attnknn", "reference", True), ("Attnknn At K", "attnknn", "reference", False),
                ("Nca", "nca", "reference", False), ("Attnknn Than Nca", "attnknn", "nca", True),
                ("Readout", "readout", "reference", False), ("Query Only", "query_only", "reference", False))
ADDED_LATER = ("1.1", "1.25", "1.4")  # scales added after the first run's results (b2a6fb1); 1.1, 1.4 cut (b970947)


def macros(records: list[dict]) -> dict[str, str]:
    return record_macros(records, pc_macros, NOTEBOOK, ARTIFACTS.record_file, aliases=False)


def _mean(lv: dict, method: str) -> float:
    return lv["summary"]["means"][method]["accuracy"]


def finding_lines(record: dict) -> list[str]:
    """The findings' bullets, one point each across the nuisance scales: the room (oracle inside k
    minus the tuned vote), the counted attention head against the tuned vote (accuracy) and the
    NLL-tuned vote (calibrated NLL), the head as trained at k (a diagnostic), NCA against the tuned
    vote and the head against NCA, the shares of the oracle retrieval's gain, the effective k, the
    learnable-headroom learner and the label-aware diagnostic. Values and verdict words; the intervals
    are in the notebook's tables."""
    res = record["results"]
    k, levels, tuned = res["k"], _levels(record), _tuned(record)
    who = "The attention head with its vote settings tuned" if tuned else "The attention head"

    def row(what: str, text) -> str:
        return across_text(what, [(f"s = {key}:", text(lv)) for key, lv in levels])

    def shares(lv: dict) -> str:
        s = lv["summary"]
        sh = s["shares"]["retrieval"]["methods"]
        head, nca = sh[counted_method(s["diff"], "attnknn", "accuracy")]["of_means"], sh["nca"]["of_means"]
        return NOT_MEASURED if head is None and nca is None else f"{share_text(head)} / {share_text(nca)}"

    lines = [
        row(f"Room inside the {k} neighbours (oracle weights minus the tuned vote)",
            lambda lv: f"{signed(100 * (_mean(lv, 'oracle_inside_k') - _mean(lv, 'reference')), 2)} pp"),
        row(f"{who} minus the tuned vote in accuracy",
            lambda lv: point_text(counted_diff(lv, "attnknn", "reference", "accuracy"), "accuracy"))]
    if tuned:
        lines.append(row(f"The attention head at k = {k}, as trained (a diagnostic), minus the tuned vote",
                         lambda lv: point_text(difference(lv, "attnknn", "reference", "accuracy"), "accuracy")))
    lines += [
        row(f"{who} minus the NLL-tuned vote in calibrated NLL",
            lambda lv: point_text(counted_diff(lv, "attnknn", "reference_nll", "nll"), "nll")),
        row("NCA (a linear metric learned with the same vote) minus the tuned vote",
            lambda lv: point_text(difference(lv, "nca", "reference", "accuracy"), "accuracy")),
        row(f"{who} minus NCA", lambda lv: point_text(counted_diff(lv, "attnknn", "nca", "accuracy"), "accuracy")),
        row("Share of the oracle retrieval's gain captured (attention head / NCA; not measured without a gain)", shares),
        row(f"As trained, the attention head's effective k (of {k})",
            lambda lv: f"{lv['summary']['effective_k']['attnknn']:.1f}"),
        row("Boosted trees on neighbour features minus the tuned vote",
            lambda lv: point_text(difference(lv, "learner", "reference", "accuracy"), "accuracy"))]
    diag = [(key, lv["summary"]["label_aware_diagnostic"]) for key, lv in levels
            if lv["summary"].get("label_aware_diagnostic")]
    if diag:
        key, d = diag[-1]  # the largest scale that has it (every scale: the diagnostic table)
        lines.append(f"- At s = {key}, the label-aware head gets {pp(d['as_retrieved']['accuracy'])} % (its weights' "
                     f"rank correlation with the informative distance {d['as_retrieved']['weights_vs_informative']:.2f}); "
                     f"given the informative distances of the same neighbours, {pp(d['informative']['accuracy'])} % "
                     f"({d['informative']['weights_vs_informative']:.2f}).")
    return lines


def _summary(record: dict) -> str:
    res, lv = record["results"], _levels(record)
    who = "The attention head, its vote settings tuned as the tuned vote's are," if _tuned(record) else \
        "The attention head"
    head = f"{who} is better than the tuned vote {first_better(lv, 'attnknn')}" + (
        ", so this implementation can sharpen and win where the room is large" if wins(lv, "attnknn") else
        ": the learner is suspect before any null result elsewhere")
    head += (f"; NCA, a linear metric learned with the same vote, is better than the tuned vote "
             f"{first_better(lv, 'nca', counted=False)}, and the attention head better than NCA "
             f"{first_better(lv, 'attnknn', 'nca')}")
    return (head + f" ({len(res['seeds'])} seeds per scale; the nuisance scale s grows from {lv[0][0]} to "
            f"{lv[-1][0]}).")


def answer_lines(records: list[dict]) -> list[str]:
    """One short bullet of the README's answer: at how many nuisance scales Attn-KNN beats the tuned vote
    (which), its verdict at the smallest scale, NCA against the tuned vote and Attn-KNN against NCA;
    the intervals are in the notebook's tables."""
    out = []
    for record in records:
        lv = _levels(record)
        low = counted_diff(lv[0][1], "attnknn", "reference", "accuracy")["verdict"]
        who = "the attention head, vote settings tuned," if _tuned(record) else "the attention head"
        text = (f"- **A generated task with room to win** (nuisance scale s): {who} is better than the tuned "
                f"vote {first_better(lv, 'attnknn')} ({low} at s = {lv[0][0]}), NCA "
                f"{first_better(lv, 'nca', counted=False)}; the head beats NCA {first_better(lv, 'attnknn', 'nca')}")
        out.append(f"{text}. {table_link(NOTEBOOK)}")
    return out


def readme_lines(records: list[dict]) -> list[str]:
    """The positive control's answer, then one line per scale."""
    return answer_then_lines(records, _summary, finding_lines)


def findings(record: dict) -> str:
    """The notebook's answer (the README's lines of this record)."""
    return answer_findings(record, _summary, finding_lines)

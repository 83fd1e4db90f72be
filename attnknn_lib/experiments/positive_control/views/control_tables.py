"""The positive control's tables and figures: the notebook's frames, the figure, the forest plot and
``write_outputs`` (the LaTeX tables with their captions), read off its record."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd

from attnknn_lib.base.paths import Paths
from attnknn_lib.experiments.common.declared_family import has_declared, holm_declared
from attnknn_lib.experiments.common.fixed_embedding_views import (
    OPTIONAL_LEARNERS,
    VERDICT_COLUMNS,
    VS,
    difference,
    forest_and_detectable,
    has_one_budget,
    latex_headroom_columns,
    optional_learners,
    pp,
    tuned_everywhere,
    verdict_row,
    verdict_table,
)
from attnknn_lib.experiments.common.learned_metric import LABELS
from attnknn_lib.experiments.common.views import (
    AT_K_LABEL,
    TUNED_ATTNKNN,
    TUNED_CAPTION,
    TUNED_LABEL,
    counted_diff,
    head_labels,
    k_range,
    tuned_k_note,
)
from attnknn_lib.experiments.positive_control.config import ARTIFACTS, DATASET, NAME, NOTEBOOK
from attnknn_lib.report.figures import plt, save_output_figure
from attnknn_lib.report.findings import (
    HEAD_NAMES,
    head_names,
    vote_heads,
)
from attnknn_lib.report.macros import (
    source_note,
)
from attnknn_lib.report.tables import booktabs, latex_escape, paged_booktabs

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
    "mlp_metric": "nonlinear metric: re-retrieval in a learned MLP map",  # measured under the one budget only
    "linear_probe": LABELS["linear_probe"],
    "query_only": HEAD_NAMES["query_only"],
}
COMPARED = {"learner": "boosted-trees learner", "nca": LABELS["nca"], "linear_probe": LABELS["linear_probe"],
            "query_only": HEAD_NAMES["query_only"]}  # the verdict table's rows after the heads


def _levels(record: dict) -> list[tuple[str, dict]]:
    return sorted(record["results"]["levels"].items(), key=lambda kv: kv[1]["nuisance_scale"])


def _tuned(record: dict) -> bool:
    """Whether every scale holds the attention head with tuned vote settings (then the views count it)."""
    return tuned_everywhere(_levels(record))


def declared(record: dict) -> dict:
    """The record as its views read it. Measured under the one budget (every scale holds the
    declaration's 15 comparisons per endpoint), its verdicts are Holm-adjusted in one family per endpoint
    over every scale (m = 90 at six; :mod:`~attnknn_lib.experiments.common.declared_family`), in the
    declaration's words, intervals as measured; a record measured before the declaration is read as it
    was declared, each verdict unadjusted. Applying it twice changes nothing."""
    if not all(has_declared(lv["summary"]["diff"]) for _, lv in _levels(record)):
        return record
    out = copy.deepcopy(record)
    sizes = {metric: holm_declared(out["results"]["levels"], metric) for metric in ("accuracy", "nll", "brier")}
    out["results"]["multiplicity"] = {"method": "holm", "words": "confirmatory", "family_sizes": sizes}
    return out


def multiplicity_words(record: dict) -> tuple[str, str]:
    """(short, long) words for how the record's counted verdicts were read: "unadjusted" / "an unadjusted
    single comparison", or Holm-adjusted over the declared family (:func:`declared`; m as counted on
    accuracy, identical results left out, over the scales the record holds: 15 per scale)."""
    sizes = declared(record)["results"].get("multiplicity", {}).get("family_sizes")
    if not sizes:
        return "unadjusted", "an unadjusted single comparison"
    m, scales = sizes["accuracy"], len(_levels(record))
    per = f"{m // scales} per nuisance scale, {scales} scales" if scales and m % scales == 0 else f"{scales} scales"
    return (f"Holm-adjusted over the {m} declared comparisons per endpoint",
            f"Holm-adjusted within one family per endpoint, the family holding that endpoint's {m} declared "
            f"comparisons ({per}; a diagnostic outside it is unadjusted)")


def headroom_frame(record: dict, latex: bool = False) -> pd.DataFrame:
    """Per nuisance scale (means over seeds): the headroom at k before any head is trained, the
    tuned vote (its k per seed), k_w and the effective k of the attention head trained at k_w (as
    trained; uniform weights would give k_w) where the record holds it, and every ceiling, test
    accuracy in %."""
    k = record["results"]["k"]
    rows = {}
    for key, lv in _levels(record):
        s = lv["summary"]
        hr, means = s["headroom"], s["means"]
        row = {f"recall@{k}": pp(hr["at_k"]["recall"]), f"uniform@{k}": pp(hr["at_k"]["uniform_accuracy"]),
               f"fixable@{k}": pp(hr["at_k"]["fixable"]),
               "tuned vote's k": k_range(s["reference_k"])}
        if "attnknn_wide" in s.get("effective_k", {}):  # the attention head trained again at k_w (one budget)
            row["k_w"] = k_range([p["methods"]["attnknn_wide"]["info"]["k_trained"] for p in lv["per_seed"].values()])
            row["effective k at k_w"] = f"{s['effective_k']['attnknn_wide']:.1f}"
        row.update({CEILINGS[m]: pp(means[m]["accuracy"]) for m in CEILINGS})
        row.update({label: pp(means[m]["accuracy"]) for m, label in LEARNED_COLUMNS.items() if m in means})
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
        heads.update({TUNED_ATTNKNN["accuracy"]: "attention head, tuned", "attnknn": f"attention head, k = {record['results']['k']}"})
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
    record = declared(record)
    adjusted = "multiplicity" in record["results"]
    mark = "$^\\dagger$" if latex else " (unadj.)"
    rows = {}
    for key, lv in _levels(record):
        for label, name, against in _compared(record, lv, with_k=not latex):  # LaTeX: the k in the caption
            outside = adjusted and difference(lv, name, VS[against][0], "accuracy").get("family_size") is None
            if latex and outside and (name, against) != ("attnknn", "rule"):
                continue  # the paper's table: the family and the head as trained; every other row in the notebook
            rows[f"s = {key}, {label}{mark if outside else ''}"] = verdict_row(lv, name, against)
    return verdict_table(rows, "scale, method", latex)


SHARED = {TUNED_ATTNKNN["accuracy"]: TUNED_LABEL, **{h: h for h in ("attnknn", "label_aware", "readout")}, "learner": "boosted-trees learner", "nca": "NCA",
          "mlp_metric": "nonlinear metric", "attnknn_wide_tuned": "attention head at k_w, tuned", "linear_probe": "linear probe", "query_only": "query-only", "oracle_inside_k": "oracle weights in k",
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
    """Left: each head (the attention head also with tuned vote settings), the boosted-trees learner,
    NCA, and where measured the nonlinear metric and the attention head at k_w (tuned) minus the tuned vote, in accuracy points (mean over seeds, seed-level 95 % interval), on
    one axis (the oracles' room, far larger, is in the headroom table). Right: the effective k of the
    heads that vote (not the readout), with the k they read and the threshold declared for 'moved
    from uniform'."""
    record = declared(record)
    res = record["results"]
    lv = _levels(record)
    x = np.array([v["nuisance_scale"] for _, v in lv])
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.6), layout="constrained")
    heads = head_labels(head_names(res["heads"]), res["k"], _tuned(record))
    shown = {**heads, "learner": "boosted-trees learner (learnable room)", "nca": LABELS["nca"],
             **{n: OPTIONAL_LEARNERS[n] for n in ("mlp_metric", "attnknn_wide_tuned") if n in lv[0][1]["summary"]["diff"]}}
    for i, (name, label) in enumerate(shown.items()):
        d = [difference(v, name, "reference", "accuracy") for _, v in lv]
        mean = np.array([100 * e["value"] for e in d])
        err = np.array([[100 * (e["value"] - e["low"]) for e in d], [100 * (e["high"] - e["value"]) for e in d]])
        color = {"learner": "tab:brown", "nca": "black", "mlp_metric": "dimgrey",
                 "attnknn_wide_tuned": "tab:purple"}.get(name, f"C{i}")  # apart from the nonlinear metric's grey
        axes[0].errorbar(x + 0.02 * (i - len(shown) / 2), mean, yerr=err, color=color, marker="o", ms=3.5, lw=1.2,
                         capsize=2, label=label.replace("k_w", "$k_w$"), ls="--" if name in ("learner", "nca", "mlp_metric") else "-")
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
    axes[0].legend(fontsize=7, loc="upper left", framealpha=0.95)  # its curves rise at the right, below it
    axes[1].legend(fontsize=8, loc="lower left")
    n = len(res["seeds"])
    fig.suptitle(f"Generated task: accuracy over the tuned vote and effective k of the weights, by nuisance scale "
                 f"({n} seeds)", fontsize=9)
    return fig


def _wide_k_note(record: dict) -> str:
    """The caption's sentence on the k_w each seed trained the heads at k_w at, per scale (under the one budget)."""
    levels = _levels(record)
    if not all(has_one_budget(lv) for _, lv in levels):
        return ""
    return "The $k_w$ of the heads at $k_w$, per seed: " + "; ".join(
        f"s = {key}: {k_range([p['methods']['attnknn_wide']['info']['k_trained'] for p in lv['per_seed'].values()])}"
        for key, lv in levels) + ". "


def _scale_of(row: str) -> tuple[str, str]:
    """A verdict row's scale and the rest ("s = 2, NCA" -> ("s = 2", "NCA")): the table groups by scale."""
    scale, rest = row.split(", ", 1)
    return scale, rest


def write_outputs(record: dict, paths: Paths) -> dict:
    record = declared(record)
    src = source_note(NOTEBOOK, ARTIFACTS.record_file(DATASET))
    res = record["results"]
    n, k = len(res["seeds"]), res["k"]
    outside_note = (" (the row marked $^\\dagger$, the attention head at the $k$ it was trained at, is outside the family "
                    "and unadjusted; the other comparisons outside it are in the notebook)") if "multiplicity" in res else ""
    one_budget = all(has_one_budget(lv) for _, lv in _levels(record))  # its learners, each against both metrics
    metric_words = ((", the nonlinear metric (NCA's map plus an MLP, searched again the same way), the attention head "
                     "and its two variants trained at $k_w$", " and minus the nonlinear metric (rows `vs NCA', `vs "
                     "nonlinear metric')") if one_budget else ("", " (rows `vs NCA')"))
    out = {"headroom": ARTIFACTS.write_table(paths, "headroom", DATASET, booktabs(
        headroom_frame(record, latex=True).T,
        f"Generated task: room to win against the nuisance scale (test accuracy in \\%, mean over {n} seeds). "
        f"Recall, uniform vote and fixable share at the heads' $k = {k}$; the tuned vote "
        f"(its $k$ per seed){'; $k_w$ per seed and the effective $k$ of the attention head trained at $k_w$, as trained (uniform weights would give $k_w$)' if one_budget else ''}; the geometry-only vote (the best uniform, distance or cosine vote over at most {k} neighbours, no filter or prior correction); the {k} retrieved neighbours "
        f"reweighted by their distance in the informative dimensions (which the generator knows), the same at the "
        f"tuned vote's $k$, and the vote over the nearest rows in the informative dimensions alone; the boosted-trees "
        f"learner on neighbour features; NCA (the tuned vote's search run again on the neighbours of a linear map learned with "
        f"the NCA loss){', the nonlinear metric (the same with an MLP map)' if one_budget else ''}, the linear probe and "
        f"the query-only control, which reads no neighbour. {src}.",
        f"tab:{NAME}_headroom", escape_index=False, size="footnotesize")),
        "verdicts": ARTIFACTS.write_table(paths, "verdicts", DATASET, paged_booktabs(
            verdict_frame(record, latex=True),
            f"Generated task: each head, the boosted-trees learner, NCA{metric_words[0]}, the linear probe and the query-only control "
            f"minus the tuned vote, then each head minus NCA{metric_words[1]}, seed-level 95\\,\\% intervals over "
            f"{n} seeds (each seed its own data and test set), verdicts {multiplicity_words(record)[0]}"
            f"{outside_note}. Accuracy against the tuned vote (or NCA); NLL and "
            f"Brier, after calibration on validation, against the NLL-tuned vote (or NCA tuned for NLL); the Brier "
            f"verdicts are in the notebook. "
            f"{TUNED_CAPTION + tuned_k_note(_levels(record), 's = ') if _tuned(record) else ''}{_wide_k_note(record)}"
            f"Effective $k$: exp of the entropy of the weights as trained "
            f"(--: not a vote, or the attention head with tuned vote settings, whose weights are those of its row at "
            f"$k = {k}$). {src}.", f"tab:{NAME}_verdicts", _scale_of, index_name="method", column_format=VERDICT_COLUMNS, escape_index=False, size="scriptsize",
            stretch=0.9, colsep="3pt")),
        "figure": save_output_figure(ARTIFACTS, paths, "figure", DATASET, figure(record))}
    out["shares"] = ARTIFACTS.write_table(paths, "shares", DATASET, booktabs(
        shares_frame(record).rename(index=lambda i: latex_escape(i).replace("k\\_w", "$k_w$")),  # k_w as math
        f"Generated task: the share of the room each method captures (\\%), two numbers per cell: its test-accuracy "
        f"gain over the tuned vote divided by the gain of the oracle retrieval (the uniform vote over the {k} nearest "
        f"rows in the informative dimensions), then divided by that of the oracle weights on the {k} retrieved "
        f"neighbours; each the ratio of the mean gain to the mean room over {n} seeds; -- where the oracle's room over the tuned vote is below the accuracy margin "
        f"({100 * _min_room(record):g}\\,pp). "
        f"NCA is the tuned vote's search run again on the neighbours of a linear map learned with the NCA loss. {src}.",
        f"tab:{NAME}_shares", escape_index=False, size="footnotesize", colsep="3pt"))
    out["diagnostic"] = ARTIFACTS.write_table(paths, "diagnostic", DATASET, booktabs(
        diagnostic_frame(record).T,
        f"Generated task: why the label-aware head fails (means over {n} seeds). It reads each neighbour's "
        f"distance, rank, label share and label agreement but no coordinate, so it can reweight only by the "
        f"distance the retrieval measured. Test accuracy (\\%) of the uniform vote over the {k} retrieved, of the "
        f"head as trained, of the same head trained with the informative-dimension distance of the same neighbours "
        f"in place of the retrieved one, and of the oracle weights on them; Spearman correlation (mean over test "
        f"queries) of the head's weights with minus the informative distance, and of the retrieved with the "
        f"informative distance. {src}.", f"tab:{NAME}_diagnostic", escape_index=True, size="footnotesize"))
    sizes = res.get("multiplicity", {}).get("family_sizes")  # the declared family, where the record is read in it
    return out | forest_and_detectable(
        ARTIFACTS, paths, DATASET, src, "Generated task", [(f"s = {s}", lv) for s, lv in _levels(record)],
        res["heads"], _tuned(record), lambda lv: _compared(record, lv, False),
        **({"family": "the declared comparisons, every scale (Holm)", "sizes": sizes} if sizes else {}))

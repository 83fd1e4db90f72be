"""The paper's numbers: the positive control's LaTeX macros (PositiveControl...), read from its record."""

from __future__ import annotations

from attnknn_lib.experiments.common.fixed_embedding_views import (
    LEARNED_MACROS,
    and_list,
    difference,
    first_better,
    grid_macros,
    has_one_budget,
    learned_macros,
    pp,
)
from attnknn_lib.experiments.common.views import (
    TUNED_ATTNKNN,
    all_tuned,
    counted_diff,
    counted_method,
    k_range,
    tuned_k,
)
from attnknn_lib.experiments.positive_control.config import ARTIFACTS, NAME, NOTEBOOK
from attnknn_lib.experiments.positive_control.views.control_tables import _levels, _share, declared, multiplicity_words
from attnknn_lib.report.macros import (
    VERDICT_PHRASES,
    count_phrase,
    macro_name,
    record_macros,
    signed,
)

RANKS = ("Max", "Second", "Third", "Min")  # the scales the paper names: largest, next two, smallest


def _level_macros(pre: tuple, tag: str, lv: dict | None) -> dict[str, str]:
    """One level's macros under its rank ``tag``; '--' for each when the profile has no such level."""
    if lv is None:
        names = ("Scale", "Room", "Attnknn Acc Diff", "Attnknn Acc Low", "Attnknn Acc High", "Attnknn Acc Verdict",
                 "Attnknn Acc Phrase", "Learner Acc Diff", "Learner Acc Low", "Learner Acc High", "Learner Acc Verdict", "Attnknn Nll Diff",
                 "Attnknn Nll Low", "Attnknn Nll High", "Attnknn Nll Verdict", "Attnknn Eff K", "Reference Acc",
                 "Attnknn Acc", "Oracle Inside Acc", "Fixable", "Attnknn At K Acc Diff", "Attnknn At K Acc Verdict",
                 "Attnknn Tuned K", "Attnknn Tuned At Cap Words")
        return {macro_name(*pre, tag, n): "--" for n in names} | {macro_name(*pre, tag, "Attnknn Tuned At Cap Count"): "0",
                                                                   macro_name(*pre, tag, "Attnknn Moved Count"): "0"}
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
    tuned = all_tuned([s["diff"]])
    at_cap = sum("k" in p["methods"][TUNED_ATTNKNN["accuracy"]]["info"]["edges"] for p in lv["per_seed"].values()) if tuned else 0
    out[macro_name(*pre, tag, "Attnknn Tuned At Cap Words")] = count_phrase(at_cap, len(lv["per_seed"])) if tuned else "--"
    out[macro_name(*pre, tag, "Attnknn Tuned At Cap Count")] = str(at_cap)
    out[macro_name(*pre, tag, "Room")] = signed(
        100 * (s["means"]["oracle_inside_k"]["accuracy"] - s["means"]["reference"]["accuracy"]), 2)
    out[macro_name(*pre, tag, "Attnknn Nll Diff")] = signed(nll["value"], 3)
    out[macro_name(*pre, tag, "Attnknn Nll Low")] = signed(nll["low"], 3)
    out[macro_name(*pre, tag, "Attnknn Nll High")] = signed(nll["high"], 3)
    out[macro_name(*pre, tag, "Attnknn Nll Verdict")] = nll["verdict"]
    out[macro_name(*pre, tag, "Attnknn Eff K")] = f"{s['effective_k']['attnknn']:.1f}"
    # 1 when its mean effective k lies below the declared threshold (moved from uniform), for the paper's \\ifcase
    out[macro_name(*pre, tag, "Attnknn Moved Count")] = str(int(bool(s["moved"]["attnknn"])))
    out[macro_name(*pre, tag, "Reference Acc")] = pp(s["means"]["reference"]["accuracy"])
    out[macro_name(*pre, tag, "Attnknn Acc")] = pp(s["means"][counted_method(s["diff"], "attnknn", "accuracy")]["accuracy"])
    out[macro_name(*pre, tag, "Oracle Inside Acc")] = pp(s["means"]["oracle_inside_k"]["accuracy"])
    out[macro_name(*pre, tag, "Fixable")] = pp(s["headroom"]["at_k"]["fixable"])
    return out


LEVEL_LEARNED_MACROS = (*LEARNED_MACROS, "Attnknn Vs Nca Nll Diff", "Attnknn Vs Nca Nll Verdict",
                        "Attnknn Share Retrieval", "Attnknn Share Inside", "Nca Share Retrieval", "Nca Share Inside",
                        "Attnknn At K Share Retrieval", "Attnknn Wide Share Retrieval",
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
    # the attention head as trained (k = 16) and retrained at k_w, tuned: how much of the room more neighbours buy
    for name, head in (("attnknn", "Attnknn At K"), ("attnknn_wide_tuned", "Attnknn Wide")):
        share = s["shares"]["retrieval"]["methods"].get(name, {}).get("of_means")
        out[macro_name(*pre, tag, head, "Share Retrieval")] = _share(share)
    d = s.get("label_aware_diagnostic")
    for key, value in (("Label Aware Acc", d and pp(d["as_retrieved"]["accuracy"])),
                       ("Label Aware Informative Acc", d and pp(d["informative"]["accuracy"])),
                       ("Label Aware Rho", d and f"{d['as_retrieved']['weights_vs_informative']:.2f}"),
                       ("Label Aware Informative Rho", d and f"{d['informative']['weights_vs_informative']:.2f}"),
                       ("Retrieved Rho", d and f"{d['retrieved_vs_informative']:.2f}")):
        out[macro_name(*pre, tag, key)] = value or "--"
    return out


WIDE = (("Attnknn", "attnknn_wide_tuned"), ("Label", "attnknn_label_wide"), ("Self", "attnknn_self_wide"))
"""The heads trained again at k_w, by macro key: the attention head (read with its vote settings tuned), the
label-conditioned and the neighbour-self-attention variants (each read at the k_w it was trained at)."""


def _one_budget_macros(pre: tuple, record: dict, ranked: dict) -> dict[str, str]:
    """The one budget's settings (the heads' learning-rate grid, epochs and patience, the [min, max] of
    k_w, the nonlinear metric's hidden width) and, at the largest scale and without nuisance, the learners
    it added against the tuned vote and the attention heads against each learned metric, with the k_w the
    seeds trained at. Empty for a record measured before the one budget (no nonlinear metric)."""
    c = record["config"]
    if not all(has_one_budget(lv) for lv in ranked.values() if lv is not None):
        return {}
    out = {macro_name(*pre, "Head Lrs"): and_list([f"{x:g}" for x in c["head_lrs"]]),
           macro_name(*pre, "Head Epochs"): str(c["head_epochs"]), macro_name(*pre, "Head Patience"): str(c["head_patience"]),
           macro_name(*pre, "Wide K Min"): str(c["wide_k_min"]), macro_name(*pre, "Wide K Max"): str(c["wide_k_max"]),
           macro_name(*pre, "Mlp Hidden"): str(c["mlp_hidden"])}
    for tag in ("Max", "Min"):
        lv = ranked[tag]
        s = lv["summary"]
        out[macro_name(*pre, tag, "Mlp Metric Acc")] = pp(s["means"]["mlp_metric"]["accuracy"])
        pairs = [("Mlp Metric", "mlp_metric", "reference"), ("Attnknn Vs Mlp Metric", "attnknn_tuned", "mlp_metric"),
                 ("Attnknn Wide Vs Nca", "attnknn_wide_tuned", "nca"),
                 ("Attnknn Wide Vs Mlp Metric", "attnknn_wide_tuned", "mlp_metric"),
                 *((f"{key} Wide", name, "reference") for key, name in WIDE)]
        for key, name, against in pairs:
            d = difference(lv, name, against, "accuracy")
            out[macro_name(*pre, tag, key, "Acc Diff")] = signed(100 * d["value"], 2)
            out[macro_name(*pre, tag, key, "Acc Verdict")] = d["verdict"]
        ks = [p["methods"]["attnknn_wide"]["info"]["k_trained"] for p in lv["per_seed"].values()]
        out[macro_name(*pre, tag, "Wide K")] = k_range(ks)
        out[macro_name(*pre, tag, "Attnknn Wide Eff K")] = f"{s['effective_k']['attnknn_wide']:.1f}"
    return out


def pc_macros(record: dict) -> dict[str, str]:
    """The generator's sizes, and per ranked scale (:data:`RANKS`: the largest, the next two, the
    smallest; '--' where a profile has fewer levels) Attn-KNN and the boosted-trees learner against
    the tuned vote, Attn-KNN's NLL against the NLL-tuned vote, its effective k and the room."""
    record = declared(record)
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
    # how the verdicts were read: unadjusted, or Holm over the declaration's family (measured under the one budget)
    out[macro_name(*pre, "Multiplicity")], out[macro_name(*pre, "Verdict Rule")] = multiplicity_words(record)
    levels = [lv for _, lv in _levels(record)]  # smallest scale first
    ranked = {"Max": levels[-1], "Second": levels[-2] if len(levels) > 2 else None,
              "Third": levels[-3] if len(levels) > 3 else None, "Min": levels[0]}
    for tag in RANKS:
        out.update(_level_macros(pre, tag, ranked[tag]))
        out.update(_learned_macros(pre, tag, ranked[tag]))
    # where each learner starts to be better than the tuned vote (and the attention head than NCA), in words
    out.update(grid_macros(pre, _levels(record), ADDED_LATER))
    out.update(_one_budget_macros(pre, record, ranked))
    diff = levels[0]["summary"]["diff"]
    for key, name, against, counted in FIRST_BETTER:
        if against not in diff.get(counted_method(diff, name, "accuracy") if counted else name, {}):
            continue  # a learner (or comparison) the record does not hold
        out[macro_name(*pre, key, "First Better")] = first_better(_levels(record), name, against, counted, latex=True)
    return out


FIRST_BETTER = (("Attnknn", "attnknn", "reference", True), ("Attnknn At K", "attnknn", "reference", False),
                ("Nca", "nca", "reference", False), ("Attnknn Than Nca", "attnknn", "nca", True),
                ("Readout", "readout", "reference", False), ("Query Only", "query_only", "reference", False),
                ("Label Aware", "label_aware", "reference", False), ("Linear Probe", "linear_probe", "reference", False),
                # the learners of the one budget (a record measured before it has none of them)
                ("Mlp Metric", "mlp_metric", "reference", False), ("Attnknn Than Mlp Metric", "attnknn", "mlp_metric", True),
                *((f"{key} Wide", name, "reference", False) for key, name in WIDE),
                ("Attnknn Wide Than Nca", "attnknn_wide_tuned", "nca", False),
                ("Attnknn Wide Than Mlp Metric", "attnknn_wide_tuned", "mlp_metric", False))
ADDED_LATER = ("1.1", "1.25", "1.4")  # scales added after the first run's results (b2a6fb1); 1.1, 1.4 cut (b970947)


def macros(records: list[dict]) -> dict[str, str]:
    return record_macros(records, pc_macros, NOTEBOOK, ARTIFACTS.record_file, aliases=False)

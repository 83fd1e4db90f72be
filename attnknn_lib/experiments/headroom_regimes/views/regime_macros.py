"""The paper's numbers: the weaker embeddings' LaTeX macros (HeadroomRegimes...), read from its record."""

from __future__ import annotations

from attnknn_lib.experiments.common.fixed_embedding_views import (
    LEARNED_MACROS,
    difference,
    has_one_budget,
    learned_macros,
    pp,
)
from attnknn_lib.experiments.common.views import (
    all_tuned,
    counted_diff,
    k_range,
    tuned_k,
)
from attnknn_lib.experiments.headroom_regimes.config import ARTIFACTS, NAME, NOTEBOOK
from attnknn_lib.experiments.headroom_regimes.views.regime_family import (
    _any_head_wins,
    _candidates,
    _family,
    _wins,
    one_family,
)
from attnknn_lib.report.findings import (
    head_names,
)
from attnknn_lib.report.macros import count_macros, count_phrase, macro_name, record_macros, signed

TAGS = {"pixels_pca": "Pca", "few_labels": "Few", "other_classes": "Other"}  # macro names of the candidates


def _candidate_macros(pre: tuple, tag: str, cand: dict | None) -> dict[str, str]:
    """One candidate's macros under ``tag``; '--' for each when the profile leaves it out."""
    names = ("Room", "Test Room", "Has Room", "Reference Acc", "Reference K", "Attnknn Acc Diff", "Attnknn Acc Low",
             "Attnknn Acc High", "Attnknn Acc Verdict", "Attnknn Nll Diff", "Attnknn Nll Low", "Attnknn Nll High",
             "Attnknn Nll Verdict", "Attnknn Eff K", "Chosen", "Chosen Acc Diff", "Chosen Acc Verdict",
             "Learner Acc Diff", "Learner Acc Verdict", "Fixable", "Attnknn At K Acc Diff", "Attnknn At K Acc Verdict",
             "Attnknn Tuned K")
    if cand is None:
        return {macro_name(*pre, tag, n): "--" for n in names}
    s = cand["summary"]
    out = {macro_name(*pre, tag, "Room"): signed(100 * cand["gate"]["largest"], 2),
           macro_name(*pre, tag, "Test Room"): signed(100 * cand["room"]["largest"], 2),
           macro_name(*pre, tag, "Has Room"): "yes" if cand["has_room"] else "no",
           macro_name(*pre, tag, "Reference Acc"): pp(s["means"]["reference"]["accuracy"]),
           macro_name(*pre, tag, "Reference K"): k_range(s["reference_k"]),
           macro_name(*pre, tag, "Fixable"): pp(s["headroom"]["at_k"]["fixable"])}
    acc, nll = counted_diff(cand, "attnknn", "reference", "accuracy"), counted_diff(cand, "attnknn", "reference_nll", "nll")
    at_k = difference(cand, "attnknn", "reference", "accuracy")  # the head as trained: a diagnostic where tuned exists
    out[macro_name(*pre, tag, "Attnknn At K Acc Diff")] = signed(100 * at_k["value"], 2)
    out[macro_name(*pre, tag, "Attnknn At K Acc Verdict")] = at_k["verdict"]
    out[macro_name(*pre, tag, "Attnknn Tuned K")] = tuned_k(cand["per_seed"]) if all_tuned([s["diff"]]) else "--"
    for metric, d, dec, scale in (("Acc", acc, 2, 100), ("Nll", nll, 3, 1)):
        out[macro_name(*pre, tag, "Attnknn", metric, "Diff")] = signed(scale * d["value"], dec)
        out[macro_name(*pre, tag, "Attnknn", metric, "Low")] = signed(scale * d["low"], dec)
        out[macro_name(*pre, tag, "Attnknn", metric, "High")] = signed(scale * d["high"], dec)
        out[macro_name(*pre, tag, "Attnknn", metric, "Verdict")] = d["verdict"]
    out[macro_name(*pre, tag, "Attnknn Eff K")] = f"{s['effective_k']['attnknn']:.1f}"
    chosen = cand.get("chosen_head")
    for key, name in (("Chosen", chosen), ("Learner", "learner")):
        d = difference(cand, name, "reference", "accuracy") if name else None
        out[macro_name(*pre, tag, key, "Acc Diff")] = signed(100 * d["value"], 2) if d else "--"
        out[macro_name(*pre, tag, key, "Acc Verdict")] = d["verdict"] if d else "--"
    out[macro_name(*pre, tag, "Chosen")] = _shown_label(chosen)
    return out


def _shown_label(head: str | None) -> str:
    return head_names([head])[head] if head else "--"


CANDIDATE_LEARNED_MACROS = (*LEARNED_MACROS, "Chosen Vs Nca Acc Diff", "Chosen Vs Nca Acc Verdict")


def _learned_macros(pre: tuple, tag: str, cand: dict | None) -> dict[str, str]:
    """One candidate's learned metric: NCA's accuracy and its verdict against the tuned vote, Attn-KNN's
    and the chosen head's against NCA, the probe's and the control's accuracy ('--' for each when the
    profile leaves the candidate out)."""
    if cand is None:
        return {macro_name(*pre, tag, n): "--" for n in CANDIDATE_LEARNED_MACROS}
    out = learned_macros(pre, tag, cand)
    chosen = cand.get("chosen_head")
    d = difference(cand, chosen, "nca", "accuracy") if chosen else None
    out[macro_name(*pre, tag, "Chosen Vs Nca Acc Diff")] = signed(100 * d["value"], 2) if d else "--"
    out[macro_name(*pre, tag, "Chosen Vs Nca Acc Verdict")] = d["verdict"] if d else "--"
    return out


def regime_macros(record: dict) -> dict[str, str]:
    """Counts (seeds, candidates, those with room, Attn-KNN's wins) and per candidate (:data:`TAGS`)
    its room, the tuned vote, Attn-KNN's accuracy and NLL verdicts, its effective k, the chosen head's and
    the learner's accuracy verdicts."""
    record = one_family(record)
    res = record["results"]
    pre = (NAME,)
    cands = res["candidates"]
    out = {macro_name(*pre, "Seeds"): str(len(res["seeds"])), macro_name(*pre, "Candidates"): str(len(cands)),
           macro_name(*pre, "With Room"): str(len(res["selected"])),
           macro_name(*pre, "With Room Words"): count_phrase(len(res["selected"]), len(cands)),
           macro_name(*pre, "Room Margin"): f"{100 * res['room_margin']:g}",
           macro_name(*pre, "Test Rows"): f"{res['test_rows']:,}"}
    cfg = record["config"]  # how the candidates were built, for the text
    out.update({macro_name(*pre, "Pca Dims"): str(cfg["pca_dims"]),
                macro_name(*pre, "Label Share"): f"{100 * cfg['label_share']:g}",
                macro_name(*pre, "Source Classes"): str(cfg["source_classes"]),
                macro_name(*pre, "Moved Threshold"): f"{res['moved_threshold']:.1f}"})
    for name, tag in TAGS.items():
        out.update(_candidate_macros(pre, tag, cands.get(name)))
        out.update(_learned_macros(pre, tag, cands.get(name)))
    # how many candidates each learner wins, in words for the abstract and the conclusion ("all three")
    counts = {"Attnknn Wins": _wins(record, "attnknn"),  # every count under the one family's adjustment
              "Any Head Wins": _any_head_wins(record),
              "Heads Below Nca": [c["label"] for _, c in _candidates(record) if all(  # means, no verdict
                  difference(c, h, "nca", "accuracy")["value"] < 0 for h in _family(record, c))],
              "Nca Wins": _wins(record, "nca"),
              # the control that reads no neighbour: a win there is the embedding's, not the neighbours'
              "Query Only Wins": _wins(record, "query_only"),
              "Attnknn Beats Nca": _wins(record, "attnknn", "nca"),
              "Attnknn Worse Than Nca": [c["label"] for _, c in _candidates(record)
                                         if counted_diff(c, "attnknn", "nca", "accuracy")["verdict"] == "worse"]}
    if all(has_one_budget(c) for _, c in _candidates(record)):  # the learners of the one budget
        counts.update({"Mlp Metric Wins": _wins(record, "mlp_metric"),
                       "Attnknn Wide Wins": _wins(record, "attnknn_wide_tuned"),
                       "Label Wide Wins": _wins(record, "attnknn_label_wide"),
                       "Self Wide Wins": _wins(record, "attnknn_self_wide"),
                       "Attnknn Beats Mlp Metric": _wins(record, "attnknn", "mlp_metric"),
                       "Attnknn Wide Beats Nca": _wins(record, "attnknn_wide_tuned", "nca"),
                       "Attnknn Wide Beats Mlp Metric": _wins(record, "attnknn_wide_tuned", "mlp_metric")})
        out[macro_name(*pre, "Wide K")] = k_range([p["methods"]["attnknn_wide"]["info"]["k_trained"]
                                                   for _, c in _candidates(record) for p in c["per_seed"].values()])
    out.update(count_macros(pre, counts, len(cands)))
    return out


def macros(records: list[dict]) -> dict[str, str]:
    return record_macros(records, regime_macros, NOTEBOOK, ARTIFACTS.record_file, aliases=False)

"""The positive control's words: the notebook's findings, the README's lines and its answer bullet."""

from __future__ import annotations

from attnknn_lib.experiments.common.fixed_embedding_views import (
    difference,
    first_better,
    has_one_budget,
    pp,
    wins,
)
from attnknn_lib.experiments.common.views import (
    answer_findings,
    answer_then_lines,
    counted_diff,
    counted_method,
)
from attnknn_lib.experiments.positive_control.config import NOTEBOOK
from attnknn_lib.experiments.positive_control.views.control_tables import _levels, _tuned, declared
from attnknn_lib.report.findings import (
    NOT_MEASURED,
    across_text,
    point_text,
    share_text,
    table_link,
)
from attnknn_lib.report.macros import (
    signed,
)

ONE_BUDGET_ROWS = (("mlp_metric", "the nonlinear metric (NCA's map plus an MLP)"),
                   ("attnknn_wide_tuned", "the attention head trained at k_w (its vote settings tuned)"),
                   ("attnknn_label_wide", "the head at k_w with the label-conditioned bias"),
                   ("attnknn_self_wide", "the head at k_w with self-attention among the neighbours"))
"""The learners the one budget added, as the findings name them (k_w: the tuned vote's k, clipped)."""


def _one_budget(lv: list) -> bool:
    return all(has_one_budget(u) for _, u in lv)


def _mean(lv: dict, method: str) -> float:
    return lv["summary"]["means"][method]["accuracy"]


def finding_lines(record: dict) -> list[str]:
    """The findings' bullets, one point each across the nuisance scales: the room (oracle inside k
    minus the tuned vote), the counted attention head against the tuned vote (accuracy) and the
    NLL-tuned vote (calibrated NLL), the head as trained at k (a diagnostic), NCA against the tuned
    vote and the head against NCA, the shares of the oracle retrieval's gain, the effective k, the
    learnable-headroom learner and the label-aware diagnostic. Values and verdict words; the intervals
    are in the notebook's tables."""
    record = declared(record)
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
        lines.append(row(f"The attention head at k = {k}, as trained (a diagnostic, unadjusted), minus the tuned vote",
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
        row("The boosted-trees learner (on the neighbours' labels, ranks and distances) minus the tuned vote",
            lambda lv: point_text(difference(lv, "learner", "reference", "accuracy"), "accuracy"))]
    if _one_budget(levels):  # the learners it added, by where each starts to win (their intervals: the tables)
        lines.append("- Where each learner the one budget added is better than the tuned vote: " + "; ".join(
            f"{what}, {first_better(levels, name, counted=False)}" for name, what in ONE_BUDGET_ROWS) + ".")
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
    record = declared(record)
    res, lv = record["results"], _levels(record)
    who = "The attention head, its vote settings tuned as the tuned vote's are," if _tuned(record) else \
        "The attention head"
    head = f"{who} is better than the tuned vote {first_better(lv, 'attnknn')}" + (
        ", so this implementation can sharpen and win where the room is large" if wins(lv, "attnknn") else
        ": the learner is suspect before any null result elsewhere")
    head += (f"; NCA, a linear metric learned with the same vote, is better than the tuned vote "
             f"{first_better(lv, 'nca', counted=False)}, and the attention head better than NCA "
             f"{first_better(lv, 'attnknn', 'nca')}")
    if _one_budget(lv):
        head += (f"; the nonlinear metric is better than the tuned vote {first_better(lv, 'mlp_metric', counted=False)}, "
                 f"and the attention head trained at k_w {first_better(lv, 'attnknn_wide_tuned', counted=False)}")
    return (head + f" ({len(res['seeds'])} seeds per scale; the nuisance scale s grows from {lv[0][0]} to "
            f"{lv[-1][0]}).")


def answer_lines(records: list[dict]) -> list[str]:
    """One short bullet of the README's answer: at how many nuisance scales Attn-KNN beats the tuned vote
    (which), its verdict at the smallest scale, NCA against the tuned vote and Attn-KNN against NCA;
    the intervals are in the notebook's tables."""
    records = [declared(r) for r in records]
    out = []
    for record in records:
        lv = _levels(record)
        low = counted_diff(lv[0][1], "attnknn", "reference", "accuracy")["verdict"]
        who = "the attention head with its vote settings tuned" if _tuned(record) else "the attention head"
        text = (f"- **A generated task with room to win** (nuisance scale s): {who} is better than the tuned "
                f"vote {first_better(lv, 'attnknn')} ({low} at s = {lv[0][0]}), NCA "
                f"{first_better(lv, 'nca', counted=False)}; the head beats NCA {first_better(lv, 'attnknn', 'nca')}")
        out.append(f"{text}. {table_link(NOTEBOOK)}")
    return out


def readme_lines(records: list[dict]) -> list[str]:
    """The positive control's answer, then one line per scale."""
    records = [declared(r) for r in records]
    return answer_then_lines(records, _summary, finding_lines)


def findings(record: dict) -> str:
    """The notebook's answer (the README's lines of this record)."""
    record = declared(record)
    return answer_findings(record, _summary, finding_lines)

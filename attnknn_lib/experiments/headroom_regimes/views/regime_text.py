"""The weaker embeddings' words: the notebook's findings, the README's lines and its answer bullet."""

from __future__ import annotations

from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.experiments.common.fixed_embedding_views import (
    difference,
    has_one_budget,
)
from attnknn_lib.experiments.common.views import (
    answer_findings,
    answer_then_lines,
    counted_diff,
    k_range,
    tuned_k_text,
    with_term,
)
from attnknn_lib.experiments.headroom_regimes.config import NOTEBOOK
from attnknn_lib.experiments.headroom_regimes.views.regime_family import (
    _any_head_wins,
    _candidates,
    _tuned,
    _wins,
    one_family,
)
from attnknn_lib.experiments.headroom_regimes.views.regime_macros import _shown_label
from attnknn_lib.report.findings import (
    across_text,
    point_text,
    table_link,
)
from attnknn_lib.report.macros import signed


def finding_lines(record: dict) -> list[str]:
    """The findings' bullets, one point each across the candidates: the gate's room before training,
    the vote settings chosen, the counted attention head against the tuned vote (accuracy) and the
    NLL-tuned vote (calibrated NLL), the head as trained at k (a diagnostic), its effective k, the
    chosen head; then per candidate NCA against the tuned vote and the attention head against NCA.
    Values and verdict words; the intervals are in the notebook's tables."""
    record = one_family(record)
    res = record["results"]
    k, cands, tuned = res["k"], _candidates(record), _tuned(record)
    who = "The attention head with its vote settings tuned" if tuned else "The attention head"

    def row(what: str, text) -> str:
        return across_text(what, [(f"{c['label']}:", text(c)) for _, c in cands])

    lines = [row(f"The gate's room on validation before any head is trained (declared: {100 * res['room_margin']:g} pp)",
                 lambda c: f"{signed(100 * c['gate']['largest'], 2)} pp"),
             row("Vote settings chosen on validation, over seeds",
                 lambda c: f"tuned vote k {k_range(c['summary']['reference_k'])}"
                 + (f", attention head {tuned_k_text(c['per_seed'])}" if tuned else "")),
             row(f"{who} minus the tuned vote in accuracy (Holm-adjusted)",
                 lambda c: point_text(counted_diff(c, "attnknn", "reference", "accuracy"), "accuracy"))]
    if tuned:
        lines.append(row(f"The attention head at k = {k}, as trained (a diagnostic, unadjusted), minus the tuned vote",
                         lambda c: point_text(difference(c, "attnknn", "reference", "accuracy"), "accuracy")))
    lines += [row(f"{who} minus the NLL-tuned vote in calibrated NLL",
                  lambda c: point_text(counted_diff(c, "attnknn", "reference_nll", "nll"), "nll")),
              row(f"As trained, the attention head's effective k (of {k})",
                  lambda c: f"{c['summary']['effective_k']['attnknn']:.1f}")]
    chosen = [(c["label"], c["chosen_head"], c) for _, c in cands if c.get("chosen_head")]
    if chosen:
        lines.append(across_text("The head chosen on validation minus the tuned vote", [
            (f"{label}: {_shown_label(h)}", point_text(difference(c, h, "reference", "accuracy"), "accuracy"))
            for label, h, c in chosen]))
    for _, c in cands:
        lines.append(f"- **{c['label']}**: NCA (a linear metric learned with the same vote) minus the tuned vote "
                     f"{point_text(difference(c, 'nca', 'reference', 'accuracy'), 'accuracy')}; the attention head "
                     f"against NCA {point_text(counted_diff(c, 'attnknn', 'nca', 'accuracy'), 'accuracy')}.")
    if all(has_one_budget(c) for _, c in cands):  # the learners the one budget added
        n = len(cands)
        lines.append(f"- The nonlinear metric and the heads at k_w (Holm-adjusted; candidates won of {n}): the nonlinear "
                     f"metric beats the tuned vote on {len(_wins(record, 'mlp_metric'))}; the attention head at k_w, "
                     f"tuned, beats it on {len(_wins(record, 'attnknn_wide_tuned'))}, NCA on "
                     f"{len(_wins(record, 'attnknn_wide_tuned', 'nca'))} and the nonlinear metric on "
                     f"{len(_wins(record, 'attnknn_wide_tuned', 'mlp_metric'))}; the label-conditioned attention beats "
                     f"the tuned vote on {len(_wins(record, 'attnknn_label_wide'))}, the self-attention over "
                     f"neighbours on {len(_wins(record, 'attnknn_self_wide'))}.")
    return lines


def _summary(record: dict) -> str:
    """Which candidates had room before training, where the attention head won, and, when a head won where no
    room was measured, that the room measures missed it; then NCA's wins and the attention head's over NCA."""
    record = one_family(record)
    res = record["results"]
    n = len(res["candidates"])
    labels = {c["label"] for _, c in _candidates(record) if c["has_room"]}
    wins = _wins(record, "attnknn")
    any_head = _any_head_wins(record)
    room = (f"{len(labels)} of {n} candidate embeddings of Fashion-MNIST ({', '.join(sorted(labels))}) have room "
            f"of at least {100 * res['room_margin']:g} pp on validation before any head is trained" if labels else
            f"None of {n} candidate embeddings of Fashion-MNIST has room of {100 * res['room_margin']:g} pp on "
            f"validation before any head is trained")
    who = "the attention head with its vote settings tuned" if _tuned(record) else "the attention head"
    won = (f"{who} beats the tuned vote on {len(wins)} ({', '.join(wins)})" if wins else
           f"{who} beats the tuned vote on none")
    missed = [c for c in any_head if c not in labels]
    tail = (f"; some head beats it on {len(any_head)} ({', '.join(any_head)})" if any_head else "")
    tail += (", where the gate found less than the margin" if missed else "")
    tail += (f"; NCA, a linear metric learned with the same vote, beats it on {len(_wins(record, 'nca'))} and the "
             f"attention head beats NCA on {len(_wins(record, 'attnknn', 'nca'))}")
    return f"{room}; {won}{tail} ({len(res['seeds'])} seeds)."


def answer_lines(records: list[dict]) -> list[str]:
    """One short bullet of the README's answer: how many candidate embeddings had room before any
    head was trained, where Attn-KNN, NCA and any head beat the tuned vote; then the
    term it uses. The intervals are in the notebook's tables."""
    out = []
    for record in map(one_family, records):
        cands = _candidates(record)
        wins = _wins(record, "attnknn")
        any_head = _any_head_wins(record)
        text = (f"- **Weaker embeddings of {REGISTRY[record['dataset']].title}** ({', '.join(c['label'] for _, c in cands)}): "
                f"{sum(c['has_room'] for _, c in cands)} of {len(cands)} show room on validation; "
                f"the attention head{', tuned,' if _tuned(record) else ''} "
                f"beats the tuned vote on {len(wins)}" + (f" ({', '.join(wins)})" if wins else "")
                + f", NCA on {len(_wins(record, 'nca'))}")
        out.append(f"{text}, some head on {len(any_head)} (Holm-adjusted). {table_link(NOTEBOOK)}")
    margin = f"{100 * records[0]['results']['room_margin']:g}" if records else ""
    return with_term(out, f"- *Room*: the most a reweighting of the neighbours, or a learner reading them, gains over "
                          f"the tuned vote on validation, before any head is trained; an embedding has room from "
                          f"{margin} point{'' if margin == '1' else 's'} of accuracy.")


def readme_lines(records: list[dict]) -> list[str]:
    """The real regimes' answer, then one line per candidate."""
    return answer_then_lines(records, _summary, finding_lines)


def findings(record: dict) -> str:
    """The notebook's answer (the README's lines of this record)."""
    return answer_findings(record, _summary, finding_lines)

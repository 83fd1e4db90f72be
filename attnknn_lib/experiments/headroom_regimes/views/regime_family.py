"""The weaker embeddings' one multiplicity rule: per endpoint one Holm family of every learner, which every view reads; and the wins it counts."""

from __future__ import annotations

import copy

from attnknn_lib.evaluation.verdicts import holm
from attnknn_lib.experiments.common.fixed_embedding_views import (
    difference,
    optional_learners,
    tuned_everywhere,
    wins,
)
from attnknn_lib.experiments.common.views import (
    counted_method,
    row_method,
)

AFTER_HEADS = ("learner", "nca", "linear_probe", "query_only")  # the verdict table's rows after the heads


def _candidates(record: dict) -> list[tuple[str, dict]]:
    return list(record["results"]["candidates"].items())


def _tuned(record: dict) -> bool:
    """Whether every candidate holds the attention head with tuned vote settings (then the views count it)."""
    return tuned_everywhere(_candidates(record))


def _family(record: dict, cand: dict, metric: str = "accuracy") -> list[str]:
    """The heads whose verdicts on ``metric`` count (and the Holm family holds): the attention head
    with its vote settings tuned where measured, every other head as trained."""
    return [counted_method(cand["summary"]["diff"], h, metric) for h in record["results"]["heads"]]


def one_family(record: dict) -> dict:
    """The record as its views read it, one multiplicity rule for every learner: per endpoint one Holm family
    (:func:`~attnknn_lib.evaluation.verdicts.holm`) of, on every candidate, each learner's comparison with the
    tuned vote (each head as :func:`_family` counts it, then :data:`AFTER_HEADS` and the optional learners of a
    record under the one budget) and each head's with NCA; under the one budget also the attention head's (at k and
    at k_w, its vote settings tuned) with the nonlinear metric, as the positive control's declared family has them.
    Verdicts become the adjusted ones (``verdict_unadjusted`` kept), intervals stay as measured; it replaces
    the record's heads-only family, reading each p-value from its interval, so applying it twice changes nothing."""
    out = copy.deepcopy(record)
    sizes = {}
    for metric in ("accuracy", "nll", "brier"):
        ref, nca = ("reference", "nca") if metric == "accuracy" else ("reference_nll", "nca_nll")
        entries = {}
        for key, cand in _candidates(out):
            diff = cand["summary"]["diff"]
            pairs = [(h, r) for h in _family(out, cand, metric) for r in (ref, nca)]
            pairs += [(row_method(m, metric), ref) for m in AFTER_HEADS]
            # a record under the one budget: the nonlinear metric and the heads at k_w, as every other learner;
            # then the attention head (at k and at k_w, its vote settings tuned) against the nonlinear metric too
            extra = optional_learners(cand)
            pairs += [(row_method(m, metric), r) for m in extra for r in ((ref,) if m == "mlp_metric" else (ref, nca))]
            if "mlp_metric" in extra:
                mlp = row_method("mlp_metric", metric)
                pairs += [(counted_method(diff, "attnknn", metric), mlp), (row_method("attnknn_wide_tuned", metric), mlp)]
            for m, r in pairs:
                d = diff.get(m, {}).get(r, {}).get(metric)
                if d is not None:
                    entries["|".join((key, m, r))] = {**d, "verdict": d.get("verdict_unadjusted", d["verdict"])}
        adjusted = holm(entries, metric)
        for joined, d in adjusted.items():
            key, m, r = joined.split("|")
            out["results"]["candidates"][key]["summary"]["diff"][m][r][metric] = d
        sizes[metric] = next((d["family_size"] for d in adjusted.values()), 0)
    out["results"]["multiplicity"] = {"method": "holm", "family": "every learner", "family_sizes": sizes}
    return out





def _wins(record: dict, name: str, against: str = "reference") -> list[str]:
    """The candidates on which ``name``'s counted verdict is 'better' in accuracy (by their labels)."""
    return wins([(c["label"], c) for _, c in _candidates(record)], name, against)


def _any_head_wins(record: dict) -> list[str]:
    """The candidates on which at least one head of the family (:func:`_family`) beats the tuned vote in accuracy."""
    return [c["label"] for _, c in _candidates(record)
            if any(difference(c, h, "reference", "accuracy")["verdict"] == "better" for h in _family(record, c))]

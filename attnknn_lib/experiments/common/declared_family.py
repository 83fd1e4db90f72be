"""The Holm family that ``docs/confirmatory_declaration.md`` declares for every learner of an endpoint.

One unit (a candidate embedding of the confirmatory experiment, a nuisance scale of the positive
control re-run under the one budget) contributes the same 15 comparisons per endpoint
(:func:`declared_comparisons`); :func:`holm_declared` adjusts them over a set of units at once, in the
declaration's words (:func:`~attnknn_lib.evaluation.verdicts.holm_confirmatory`). The confirmatory
experiment applies it when it writes its record (one family of the candidates that pass the gate, one
of those that fail); the positive control's views apply it to its six scales (m = 90).
"""

from __future__ import annotations

from collections.abc import Mapping

from attnknn_lib.evaluation.verdicts import holm_confirmatory

ATTENTION_AGAINST_METRICS = ("attnknn_tuned", "attnknn_wide_tuned")
"""The two Attn-KNN readings with the tuned vote's settings (trained at k and at k_w), each also
compared with each learned metric."""


def declared_comparisons(metric: str) -> list[tuple[str, str]]:
    """The declared comparisons (method, reference) of ``metric`` on one unit: 11 learners against
    the endpoint's tuned vote, then Attn-KNN with the vote's settings (trained at k, at k_w) against each
    learned metric. Learners with vote settings enter tuned on accuracy, or on NLL for calibration."""
    s = "" if metric == "accuracy" else "_nll"
    learners = (f"nca{s}", f"mlp_metric{s}", "linear_probe", "learner", f"attnknn_tuned{s}", f"attnknn_wide_tuned{s}",
                "attnknn_label_wide", "attnknn_self_wide", "label_aware", "readout", "query_only")
    attention = tuple(f"{a}{s}" for a in ATTENTION_AGAINST_METRICS)
    return ([(m, f"reference{s}") for m in learners]
            + [(a, r) for a in attention for r in (f"nca{s}", f"mlp_metric{s}")])


def has_declared(diff: Mapping[str, Mapping], metric: str = "accuracy") -> bool:
    """Whether one unit's ``summary["diff"]`` holds every declared comparison of ``metric``: a record
    measured under the one budget does; one measured before it lacks the nonlinear metric and the
    heads trained at k_w."""
    return all(metric in diff.get(m, {}).get(r, {}) for m, r in declared_comparisons(metric))


def holm_declared(units: Mapping[str, dict], metric: str) -> int:
    """Holm over every declared comparison of ``metric`` that ``units`` (name -> a unit whose
    ``summary["diff"][method][reference][metric]`` holds a seed-level result) hold, in place: each
    result becomes its adjusted one in the declaration's words, its interval unchanged. Returns the
    family's size m (identical results are no test of it)."""
    tests = {(u, m, r): unit["summary"]["diff"][m][r][metric] for u, unit in units.items()
             for m, r in declared_comparisons(metric) if metric in unit["summary"]["diff"].get(m, {}).get(r, {})}
    adjusted = holm_confirmatory({"|".join(key): d for key, d in tests.items()}, metric) if tests else {}
    for u, m, r in tests:
        units[u]["summary"]["diff"][m][r][metric] = adjusted["|".join((u, m, r))]
    return next((d["family_size"] for d in adjusted.values()), 0)

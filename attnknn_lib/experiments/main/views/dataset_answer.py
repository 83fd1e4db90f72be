"""Main's bullet of the README's answer: on the primary dataset (Fashion-MNIST), by how many points
Attn-KNN with its vote settings tuned differs from the tuned vote, with its verdict, and NCA's lead
where it has one.

Only the primary dataset draws a verdict in the paper; the tabular datasets are descriptive, so the
bullet counts no verdicts over them and says so. The values are means over seeds, read from the
record; their intervals are in notebook 01's tables. A record measured before Attn-KNN got the tuned
vote's settings is read with its comparison at the trained k.
"""

from __future__ import annotations

from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.experiments.main.config import NOTEBOOK
from attnknn_lib.report.findings import seeds_text, table_link


def _seed_level(record: dict, comparison: str, split: str, metric: str) -> dict | None:
    """The record's seed-level difference of ``comparison`` (a key of its ``paired``) on ``metric``
    (``split``: raw or calibrated), or None where it has none."""
    entry = (record["results"].get("paired") or {}).get(comparison)
    return (((entry or {}).get("seed_level") or {}).get(split) or {}).get(metric)


def _points(d: dict, metric: str = "accuracy") -> str:
    """'+0.06 points of accuracy (equivalent)' / '+0.0038 in calibrated NLL (equivalent)'."""
    if metric == "accuracy":
        return f"{100 * d['value']:+.2f} points of accuracy ({d['verdict']})"
    return f"{d['value']:+.4f} in calibrated NLL ({d['verdict']})"


def _others(records: list[dict], primary: dict) -> str:
    """' The 4 tabular datasets are descriptive.' (their kind where they share one), or ''."""
    others = [r for r in records if r is not primary]
    kinds = {REGISTRY[r["dataset"]].kind for r in others}
    kind = f"{kinds.pop()} " if len(kinds) == 1 else "other "
    if not others:
        return ""
    return f" The {kind}dataset is descriptive." if len(others) == 1 else f" The {len(others)} {kind}datasets are descriptive."


def answer_lines(records: list[dict]) -> list[str]:
    """One short bullet on the primary dataset: Attn-KNN with its vote settings tuned minus the tuned
    vote in accuracy (mean over seeds, verdict) and in calibrated NLL against the NLL-tuned vote, NCA's
    lead over the tuned vote where it is better (else its difference), and that the other datasets
    are descriptive; else Attn-KNN at its trained k against the tuned vote."""
    if not records:
        return []
    primary = next((r for r in records if r["config"].get("primary") == r["dataset"]), None)
    if primary is None:
        order = list(records[0]["config"].get("datasets") or [])  # the config's order: the primary dataset first
        primary = min(records, key=lambda r: order.index(r["dataset"]) if r["dataset"] in order else len(order))
    res = primary["results"]
    where = f"**{REGISTRY[primary['dataset']].title}** ({seeds_text(len(res.get('seeds') or []))})"
    rest = _others(records, primary)
    tuned = _seed_level(primary, "attnknn_tuned_vs_reference", "raw", "accuracy")
    if tuned is None:
        own = _seed_level(primary, "attnknn_vs_reference", "raw", "accuracy")
        if own is None:
            return []
        return [f"- {where}: at its trained k = {primary['config'].get('k')}, Attn-KNN differs from the tuned vote by "
                f"{_points(own)}.{rest} {table_link(NOTEBOOK)}"]
    text = f"- {where}: Attn-KNN with its vote settings tuned minus the tuned vote: {_points(tuned)}"
    nll = _seed_level(primary, "attnknn_tuned_vs_reference_nll", "calibrated", "nll")
    if nll is not None:
        text += f", {_points(nll, 'nll')}"
    nca = _seed_level(primary, "nca_vs_reference", "raw", "accuracy")
    if nca is not None:
        lead = nca["verdict"] == "better"
        text += (f"; NCA leads it by {100 * nca['value']:.2f} points ({nca['verdict']})" if lead else
                 f"; NCA has no lead ({100 * nca['value']:+.2f} points, {nca['verdict']})")
    return [f"{text}.{rest} {table_link(NOTEBOOK)}"]

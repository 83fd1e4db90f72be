"""Main's bullet of the README's answer: Attn-KNN against the tuned vote (and NCA) over the datasets.

Verdicts are counted over the datasets' records (seed-level on image data, split-level on tabular
data); the intervals are in notebook 01's tables. A record measured before Attn-KNN got the tuned vote's
knobs is read with its comparison at the trained k.
"""

from __future__ import annotations

from attnknn_lib.experiments.main.config import NOTEBOOK
from attnknn_lib.report.findings import table_link, verdict_counts


def _verdicts(records: list[dict], comparison: str, split: str, metric: str) -> list[str]:
    """Each record's seed-level verdict of ``comparison`` (a key of its ``paired``) on ``metric``
    (``split``: raw or calibrated); records without the comparison are left out."""
    out = []
    for r in records:
        entry = (r["results"].get("paired") or {}).get(comparison)
        verdict = (((entry or {}).get("seed_level") or {}).get(split) or {}).get(metric, {}).get("verdict")
        if verdict:
            out.append(verdict)
    return out


def answer_lines(records: list[dict]) -> list[str]:
    """One short bullet: over main's datasets, Attn-KNN with its vote settings tuned against the tuned
    vote in accuracy and in calibrated NLL (against the NLL-tuned vote) and against NCA, where the
    records have those comparisons; else Attn-KNN at its trained k against the tuned vote."""
    if not records:
        return []
    order = list(records[0]["config"].get("datasets") or [])  # the config's order: the primary dataset first
    records = sorted(records, key=lambda r: order.index(r["dataset"]) if r["dataset"] in order else len(order))
    where = f"**{len(records)} datasets**"  # which ones: the table it links (the bullet stays under 300 characters)
    tuned = _verdicts(records, "attnknn_tuned_vs_reference", "raw", "accuracy")
    if not tuned:
        own = _verdicts(records, "attnknn_vs_reference", "raw", "accuracy")
        if not own:
            return []
        k = records[0]["config"].get("k")
        return [f"- {where}: at its trained k = {k}, Attn-KNN is {verdict_counts(own)} against the tuned vote "
                f"in accuracy. {table_link(NOTEBOOK)}"]
    text = f"- {where}: with its vote settings tuned, Attn-KNN is {verdict_counts(tuned)} against the tuned vote"
    nll = _verdicts(records, "attnknn_tuned_vs_reference_nll", "calibrated", "nll")
    if nll:
        text += f" in accuracy and {verdict_counts(nll)} in calibrated NLL"
    nca = _verdicts(records, "attnknn_tuned_vs_nca", "raw", "accuracy")
    if nca:
        text += f"; against NCA, {verdict_counts(nca)}"
    return [f"{text}. {table_link(NOTEBOOK)}"]

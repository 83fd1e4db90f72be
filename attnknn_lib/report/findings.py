"""Sentences for a notebook's findings cell: differences with their intervals and verdict words.

Every experiment module has ``findings(record) -> str`` (Markdown, a few sentences that answer its
notebook's question); its notebook ends with a cell that displays it. The helpers here turn the
numbers of a record into text, so no experiment formats an interval its own way and no verdict
word is typed by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from attnknn_lib.evaluation.verdicts import VERDICTS
from attnknn_lib.evaluation.verdicts import seed_difference as seed_difference  # moved there; re-exported
from attnknn_lib.report.tables import DIFF_FORMAT, num


def difference_text(d: dict, metric: str) -> str:
    """``+0.01 pp [-0.10, +0.12], equivalent`` from a verdict dict (value, low, high, verdict);
    without an interval (one seed) only the value and the verdict; without a verdict (ECE, which
    is described only) the value and the interval."""
    scale, dec, unit = DIFF_FORMAT[metric]
    text = f"{num(d['value'], dec, scale):+.{dec}f}{unit}"
    low, high = d.get("low"), d.get("high")
    if low is not None and high is not None and np.isfinite(low) and np.isfinite(high):
        text += f" [{num(low, dec, scale):+.{dec}f}, {num(high, dec, scale):+.{dec}f}]"
    return f"{text}, **{d['verdict']}**" if "verdict" in d else text


def point_text(d: dict, metric: str) -> str:
    """``+0.01 pp (**equivalent**)``: a stored difference's value and verdict word, its interval left to
    the notebook's tables (a findings bullet makes one point; the interval is one hop above it)."""
    scale, dec, unit = DIFF_FORMAT[metric]
    text = f"{num(d['value'], dec, scale):+.{dec}f}{unit}"
    return f"{text} (**{d['verdict']}**)" if "verdict" in d else text


NOT_MEASURED = "not measured"  # what a findings sentence says where the record holds no value


def share_text(value: float | None) -> str:
    """``64 %`` from a share in [0, 1] (more where a method overshoots), or 'not measured' where the
    record holds none (a share of no established gain): findings never print a bare dash."""
    return NOT_MEASURED if value is None or value != value else f"{100 * value:.0f} %"


def across_text(what: str, entries: Iterable[tuple[str, str]]) -> str:
    """``- <what>: s = 0 -0.32 pp (**inconclusive**); s = 1 ...``: one findings bullet that makes one point
    across an experiment's settings (``entries``: setting label, its text)."""
    return f"- {what}: " + "; ".join(f"{label} {text}" for label, text in entries) + "."


def differences_text(diffs: Mapping[str, dict], names: Mapping[str, str]) -> str:
    """``accuracy +0.01 pp [...], **equivalent**; ECE after calibration +0.0010 [...]``: each metric of
    ``names`` (metric -> its words) with its stored difference from ``diffs`` (:func:`difference_text`)."""
    return "; ".join(f"{words} {difference_text(diffs[metric], metric)}" for metric, words in names.items())


def mean_pct(entry: dict) -> str:
    """``92.16 %`` from a {mean, ...} entry of a proportion."""
    return f"{100 * entry['mean']:.2f} %"


def verdict_counts(verdicts: list[str]) -> str:
    """'2 equivalent, 3 inconclusive': how many of ``verdicts`` (words read from records) fall on each
    counted verdict, in the order of :data:`~attnknn_lib.evaluation.verdicts.VERDICTS`, then
    'identical' where some are (reported, never counted as evidence); '' for none."""
    words = [*VERDICTS, *sorted({v for v in verdicts if v not in VERDICTS})]
    return ", ".join(f"{n} {w}" for w in words if (n := verdicts.count(w)))


def table_link(notebook: str) -> str:
    """'([table](results/notebooks/<stem>.pdf))': where a README answer bullet's details are."""
    return f"([table](results/notebooks/{Path(notebook).stem}.pdf))"


def seeds_text(n: int, what: str = "seed") -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def markdown_lists(lines: list[str]) -> str:
    """The findings' lines as Markdown in which every list starts after a blank line (pandoc, which
    exports the notebooks to PDF, runs a list into the paragraph above it otherwise)."""
    out: list[str] = []
    for line in lines:
        item = line.lstrip().startswith("- ")
        if item and out and out[-1].strip() and not out[-1].lstrip().startswith("- "):
            out.append("")
        out.append(line)
    return "\n".join(out)


# The paper's one name per model, for the tables, figures and captions the views draw: a record keeps
# the label it was measured with, and a view shows the name the paper defines (Attn-KNN is only the
# end-to-end model; a head trained on a frozen embedding has a name of its own).
HEAD_NAMES = {  # head -> its name in the paper's Protocol section
    "attnknn": "attention head",  # Attn-KNN's attention and loss, retrained on a frozen embedding
    "blind_none": "label-blind, no entropy term",  # the same attention without the entropy bonus
    "label_aware": "label-aware head",
    "readout": "readout head",  # TabR-style: values and an MLP readout
    "query_only": "query-only control",
    "attnknn_wide": "attention head at k_w",  # trained again at the tuned vote's k (clipped to [32, 256])
    "attnknn_label_wide": "label-conditioned attention at k_w",
    "attnknn_self_wide": "self-attention over neighbours at k_w",
}
METHOD_NAMES = {  # method -> its name in the paper's Protocol section, where a record's label says otherwise
    "uniform": "Uniform vote", "distance": "Distance vote", "cosine": "Cosine vote",
    "reference": "Tuned vote", "reference_nll": "NLL-tuned vote", "best_baseline": "Fixed-k vote",
    "best_baseline_balanced": "Fixed-k vote + prior correction", "best_baseline_tta": "Fixed-k vote + TTA",
    "attnknn_tuned": "Attn-KNN, tuned", "attnknn_tuned_nll": "Attn-KNN, tuned for NLL",
    "fixed_vote": "Fixed-vote control", "nca": "NCA", "nca_nll": "NCA, tuned for NLL", "linear_probe": "Linear probe",
    "mlp_metric": "Nonlinear metric", "mlp_metric_nll": "Nonlinear metric, tuned for NLL",
    "attnknn_wide_tuned": "Attn-KNN at k_w, tuned",
    "attnknn_wide_tuned_nll": "Attn-KNN at k_w, tuned for NLL",
}


def method_names(labels: Mapping[str, str]) -> dict[str, str]:
    """Method labels (name -> label) under the paper's names, in their order; a method the paper does
    not rename keeps its label."""
    return {m: METHOD_NAMES.get(m, label) for m, label in labels.items()}


NOT_VOTES = frozenset({"readout", "query_only"})
"""Heads whose prediction is not a weighted vote over the neighbours' labels: their weights' effective k
says nothing about the prediction, so no figure plots one for them."""


def vote_heads(heads: Iterable[str]) -> list[str]:
    """The heads of ``heads`` whose prediction is a vote, p(c|q) = sum_j w_j [y_j = c], in their order."""
    return [h for h in heads if h not in NOT_VOTES]


def head_names(heads: Iterable[str]) -> dict[str, str]:
    """A record's heads (their names, in the record's order) under the paper's names: the labels are
    the views', never the measurement's, so renaming a head re-renders and measures nothing."""
    return {h: HEAD_NAMES.get(h, h) for h in heads}

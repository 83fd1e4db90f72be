"""The paper's one name per model, for the tables, figures and captions the views draw: a record keeps
the label it was measured with, and a view shows the name the paper defines (Attn-KNN is only the
end-to-end model; a head trained on a frozen embedding has a name of its own)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

HEAD_NAMES = {  # head -> its name in the paper's Protocol section
    "attnknn": "attention head",  # Attn-KNN's attention and loss, retrained on a frozen embedding
    "label_aware": "label-aware head",
    "readout": "readout head",  # TabR-style: values and an MLP readout
    "query_only": "query-only control",
}
NOT_VOTES = frozenset({"readout", "query_only"})
"""Heads whose prediction is not a weighted vote over the neighbours' labels: their weights' effective k
says nothing about the prediction, so no figure plots one for them."""


def vote_heads(heads: Iterable[str]) -> list[str]:
    """The heads of ``heads`` whose prediction is a vote, p(c|q) = sum_j w_j [y_j = c], in their order."""
    return [h for h in heads if h not in NOT_VOTES]


def head_names(heads: Mapping[str, str]) -> dict[str, str]:
    """A record's heads (name -> the label it was measured with) under the paper's names, in their
    order; a head the paper does not name keeps its recorded label."""
    return {h: HEAD_NAMES.get(h, label) for h, label in heads.items()}

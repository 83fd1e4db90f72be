"""Names the fixed-embedding and robustness views share: how the robustness experiments (label noise,
long tail) name their settings for a reader (the memory alone changed under the clean-trained models,
or the models retrained on the changed data), and which Attn-KNN a fixed-embedding verdict counts."""

from collections.abc import Mapping

SETTING_TITLES = {"bank": "memory only", "trained": "retrained"}

TUNED_ATTNKNN = {"accuracy": "attnknn_tuned", "nll": "attnknn_tuned_nll", "brier": "attnknn_tuned_nll"}
"""Per endpoint, the attention head with the tuned vote's settings (k, filter, prior) chosen for it."""
TUNED_LABEL = "attention head, vote settings tuned"
AT_K_LABEL = "attention head at k = {k}"  # the head as trained: a diagnostic where the tuned one exists


def counted(diff: Mapping, name: str, metric: str) -> str:
    """The method whose verdict on ``metric`` counts for ``name``: for the attention head
    (``attnknn``), the head with the vote settings tuned for that endpoint where the record has it
    (the head at its trained k is then a diagnostic); any other name as it is."""
    tuned = TUNED_ATTNKNN[metric]
    return tuned if name == "attnknn" and tuned in diff else name


def has_tuned(diff: Mapping) -> bool:
    """Whether a setting's comparisons hold the attention head with tuned vote settings."""
    return TUNED_ATTNKNN["accuracy"] in diff


def row_method(name: str, metric: str) -> str:
    """The method a verdict-table row reads on ``metric``: the row of the attention head with tuned
    vote settings reads the settings tuned for that endpoint; any other row its own method."""
    return TUNED_ATTNKNN[metric] if name == TUNED_ATTNKNN["accuracy"] else name


def tuned_k(per_seed: Mapping) -> str:
    """The k each seed's attention head with tuned vote settings chose (on accuracy): one value, or
    the lowest and highest."""
    ks = [p["methods"][TUNED_ATTNKNN["accuracy"]]["info"]["choice"]["k"] for p in per_seed.values()]
    return f"{min(ks)}" if min(ks) == max(ks) else f"{min(ks)}-{max(ks)}"

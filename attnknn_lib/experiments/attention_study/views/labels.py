"""Names of the study's memory settings, variants and verdicts, and which settings count toward its answer."""

from __future__ import annotations

from attnknn_lib.experiments.attention_study.config import VARIANTS

VERDICT_MARK = {"better": "B", "worse": "W", "equivalent": "E", "inconclusive": "?", "identical": "="}
SHORT = {"baseline": "tuned kNN", "blind_bonus": "blind, +H bonus", "blind_none": "blind, no H term",
         "blind_penalty": "blind, H penalty", "blind_heldout": "blind, held-out", "label_aware": "label-aware",
         "label_aware_heldout": "label-aware, held-out",
         "readout": "readout", "query_only": "query only", "adaptive_k": "k-mixture"}  # the LaTeX table's row names
MEMORY_SETTING_TITLES = {"clean": "clean memory"}


def setting_title(setting: str) -> str:
    """'asymmetric/0.4' -> 'asymmetric 40 %'."""
    if setting in MEMORY_SETTING_TITLES:
        return MEMORY_SETTING_TITLES[setting]
    kind, _, rate = setting.partition("/")
    if kind == "long_tail":  # a memory of its own model, retrained on a long-tailed subset
        return f"long tail {float(rate):g} (retrained)"
    return f"{kind} {100 * float(rate):g} %"


def is_noise(setting: str) -> bool:
    """A memory with flipped labels (not the clean or the long-tailed one)."""
    return setting.split("/")[0] in ("symmetric", "asymmetric")


def short_setting(setting: str) -> str:
    """'asymmetric/0.4' -> 'asym. 40 %' (table rows)."""
    return setting_title(setting).replace("clean memory", "clean").replace("asymmetric", "asym.").replace(
        "symmetric", "sym.").replace(" (retrained)", "")


def variant_label(name: str) -> str:
    return "tuned kNN (baseline)" if name == "baseline" else VARIANTS[name][0]


RETRAINED = "long_tail/"  # settings whose models are retrained: counted only at main's budget


def below_budget(cfg: dict) -> bool:
    """Whether the record's long-tailed models trained below main's budget (a subset of the rows or
    fewer epochs than main's recipe: either knob set)."""
    return bool(cfg["long_tail_max_train"] or cfg["long_tail_epochs"])


def counts_toward_answer(setting: str, cfg: dict) -> bool:
    """Whether a setting counts toward the headline: its models trained at main's budget."""
    return not (setting.startswith(RETRAINED) and below_budget(cfg))

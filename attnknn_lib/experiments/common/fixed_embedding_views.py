"""What the two fixed-embedding experiments' views draw alike: a verdict row, the learned metric's macros and sentence.

The positive control (one unit per nuisance scale) and the real regimes (one per candidate
embedding) measure the same comparison (:mod:`~attnknn_lib.experiments.common.fixed_embedding`),
so a unit of either is one dict with its ``summary`` (differences, means, effective k) and
``per_seed``. What differs, each experiment's views keep: how its units are named and ordered,
its headroom table's columns, its rows after the heads, its own macros.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd

from attnknn_lib.experiments.common.views import all_tuned, counted_diff, row_method
from attnknn_lib.report.findings import difference_text, vote_heads
from attnknn_lib.report.macros import macro_name, signed
from attnknn_lib.report.tables import interval_text

VS = {"rule": ("reference", "reference_nll"), "NCA": ("nca", "nca_nll")}
"""What a verdict row is against: (the accuracy reference, the NLL and Brier reference)."""

LEARNED_MACROS = ("Nca Acc", "Nca Acc Diff", "Nca Acc Verdict", "Attnknn Vs Nca Acc Diff", "Attnknn Vs Nca Acc Low",
                  "Attnknn Vs Nca Acc High", "Attnknn Vs Nca Acc Verdict", "Probe Acc", "Query Only Acc")
"""The learned metric's macros of one unit that both experiments write (:func:`learned_macros`)."""


def pp(x: float) -> str:
    """A share as percent with two decimals (0.8123 -> '81.23')."""
    return f"{100 * x:.2f}"


def difference(unit: Mapping, name: str, ref: str, metric: str) -> dict:
    """The seed-level difference of ``name`` minus ``ref`` on ``metric`` in one unit, as measured
    (the attention head as trained; :func:`~attnknn_lib.experiments.common.views.counted_diff`
    gives the one the verdicts count)."""
    return unit["summary"]["diff"][name][ref][metric]


def tuned_everywhere(units: Iterable[tuple[str, Mapping]]) -> bool:
    """Whether every unit holds the attention head with tuned vote settings (then the views count it)."""
    return all_tuned(u["summary"]["diff"] for _, u in units)


def wins(units: Iterable[tuple[str, Mapping]], name: str, against: str = "reference") -> list[str]:
    """The labels of the units on which ``name``'s counted verdict is 'better' in accuracy."""
    return [label for label, u in units if counted_diff(u, name, against, "accuracy")["verdict"] == "better"]


def verdict_row(unit: Mapping, name: str, against: str) -> dict[str, str]:
    """One row of a verdict table: ``name`` against the tuned vote (``against`` 'rule') or NCA
    ('NCA'), accuracy against the accuracy reference, NLL and Brier (after calibration) against
    the NLL one, each as difference [95 % interval] and verdict; and its effective k (a vote head's
    only, else '--')."""
    s = unit["summary"]
    ref_acc, ref_nll = VS[against]
    acc = difference(unit, name, ref_acc, "accuracy")
    nll = difference(unit, row_method(name, "nll"), ref_nll, "nll")
    brier = difference(unit, row_method(name, "brier"), ref_nll, "brier")
    return {"accuracy (pp)": f"{signed(100 * acc['value'], 2)} {interval_text(acc['low'], acc['high'], 2, 100, acc.get('margin'))}",
            "verdict": acc["verdict"],
            "NLL": f"{signed(nll['value'], 3)} {interval_text(nll['low'], nll['high'], 3, margin=nll.get('margin'))}",
            "NLL verdict": nll["verdict"], "Brier verdict": brier["verdict"],
            "eff. k": f"{s['effective_k'][name]:.1f}" if name in vote_heads(s["effective_k"]) else "--"}


def verdict_table(rows: dict[str, dict], index_name: str, latex: bool = False) -> pd.DataFrame:
    """The verdict table of :func:`verdict_row` rows (LaTeX: the interval named in the headers)."""
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = index_name
    if latex:
        df = df.rename(columns={"accuracy (pp)": "accuracy (pp) [95\\,\\% CI]", "NLL": "NLL [95\\,\\% CI]"})
    return df


def latex_headroom_columns(df: pd.DataFrame) -> pd.DataFrame:
    """A headroom table's headers for LaTeX ('recall@16' -> 'recall at 16', '<=' -> '$\\le$')."""
    df.columns = [c.replace("@", " at ").replace("<=", "$\\le$") for c in df.columns]
    return df


def learned_macros(pre: tuple, tag: str, unit: Mapping) -> dict[str, str]:
    """The :data:`LEARNED_MACROS` of one unit under ``tag``: NCA's, the linear probe's and the
    query-only control's accuracy, NCA against the tuned vote and the counted attention head against NCA."""
    means = unit["summary"]["means"]
    nca = difference(unit, "nca", "reference", "accuracy")
    out = {macro_name(*pre, tag, "Nca Acc"): pp(means["nca"]["accuracy"]),
           macro_name(*pre, tag, "Probe Acc"): pp(means["linear_probe"]["accuracy"]),
           macro_name(*pre, tag, "Query Only Acc"): pp(means["query_only"]["accuracy"]),
           macro_name(*pre, tag, "Nca Acc Diff"): signed(100 * nca["value"], 2),
           macro_name(*pre, tag, "Nca Acc Verdict"): nca["verdict"]}
    att = counted_diff(unit, "attnknn", "nca", "accuracy")
    for part, v in (("Diff", signed(100 * att["value"], 2)), ("Low", signed(100 * att["low"], 2)),
                    ("High", signed(100 * att["high"], 2)), ("Verdict", att["verdict"])):
        out[macro_name(*pre, tag, "Attnknn Vs Nca Acc", part)] = v
    return out


def nca_sentence(unit: Mapping, tuned_words: str = "") -> str:
    """' NCA (...) <difference> against the tuned vote; the attention head<tuned_words> against NCA
    <difference>', without the closing stop (an experiment may add a clause)."""
    return (f" NCA (a learned linear metric, the tuned vote searched again in its space) "
            f"{difference_text(difference(unit, 'nca', 'reference', 'accuracy'), 'accuracy')} against the tuned vote; "
            f"the attention head{tuned_words} against NCA "
            f"{difference_text(counted_diff(unit, 'attnknn', 'nca', 'accuracy'), 'accuracy')}")

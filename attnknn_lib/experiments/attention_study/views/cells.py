"""How one seed-level difference prints: a table cell, an interval, a sentence's clause."""

from __future__ import annotations

from attnknn_lib.experiments.attention_study.views.labels import VERDICT_MARK
from attnknn_lib.report.macros import signed
from attnknn_lib.report.tables import DIFF_FORMAT
from attnknn_lib.report.tables import interval_text as ends_text


def bracket(v: dict, scale: float, dec: int) -> str:
    """'[low, high]' of a seed-level difference, or '(one seed: no interval)' where there is none."""
    if v.get("low") is None or v["low"] != v["low"]:
        return "(one seed: no interval)"
    return ends_text(v["low"], v["high"], dec, scale, v.get("margin"))


def filter_cell(f: dict, latex: bool) -> str:
    """The label-filtering baseline: its accuracy and its difference to the tuned vote with the verdict."""
    v = f["verdict_reference"]
    mark = VERDICT_MARK[v["verdict"]] if latex else v["verdict"]
    return f"{100 * f['accuracy']['mean']:.2f} ({signed(100 * v['value'], 2)} {mark})"


def diff_cell(v: dict, metric: str, latex: bool, interval: bool = True) -> str:
    """A difference's cell: value (scale and decimals of :data:`~attnknn_lib.report.tables.DIFF_FORMAT`),
    its interval unless ``interval`` is False or there is none, and its verdict (a mark in LaTeX;
    none for ECE, which is described only)."""
    scale, dec, _ = DIFF_FORMAT[metric]
    judged = "verdict" in v
    mark = (VERDICT_MARK[v["verdict"]] if latex else v["verdict"]) if judged else ""
    text = ""
    if interval and v["low"] is not None and v["low"] == v["low"]:
        text = f"\\,{{\\scriptsize{bracket(v, scale, dec)}}}" if latex else f" {bracket(v, scale, dec)}"
    return f"{signed(scale * v['value'], dec)}{text} {mark}".rstrip()


LINE_BREAK = "\\\\"  # a line break inside a stacked cell


def stacked_cell(v: dict | None) -> str:
    """A LaTeX accuracy difference on stacked lines: value and verdict letter, its seed-level interval
    below (small); '--' for a missing difference."""
    if v is None:
        return "--"
    scale, dec, _ = DIFF_FORMAT["accuracy"]
    lines = [f"{signed(scale * v['value'], dec)} {VERDICT_MARK[v['verdict']]}"]
    if v["low"] is not None and v["low"] == v["low"]:
        lines.append(f"{{\\scriptsize{bracket(v, scale, dec)}}}")
    # top-aligned: the first line sits on the row's baseline, beside the row's label, the rest below it
    return f"\\begin{{tabular}}[t]{{@{{}}r@{{}}}}{LINE_BREAK.join(lines)}\\end{{tabular}}" if len(lines) > 1 else lines[0]


def one_line(v: dict) -> str:
    """'+0.05 [-0.10, +0.20] E': a difference in pp with its seed-level interval and verdict letter
    (:data:`VERDICT_MARK`), short enough for one line of a notebook table."""
    scale, dec, _ = DIFF_FORMAT["accuracy"]
    text = signed(scale * v["value"], dec)
    if v["low"] is not None and v["low"] == v["low"]:
        text += f" {bracket(v, scale, dec)}"
    return f"{text} {VERDICT_MARK[v['verdict']]}"


def interval_text(v: dict, metric: str) -> str:
    """'-0.12 pp [-0.30, +0.05], **inconclusive**' (accuracy in pp; ECE and NLL to 4 decimals)."""
    scale, dec, unit = DIFF_FORMAT[metric]
    text = f"{signed(scale * v['value'], dec)}{unit}"
    if bracket(v, scale, dec):
        text += f" {bracket(v, scale, dec)}"
    return f"{text}, **{v['verdict']}**" if "verdict" in v else text

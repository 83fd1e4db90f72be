"""LaTeX (booktabs) tables and pandas views built from results dictionaries; no number typed by hand."""

from __future__ import annotations

import re
from collections.abc import Callable

import pandas as pd

# metric -> (column title, scale, decimals)
METRIC_FORMAT = {"accuracy": ("Acc. (\\%)", 100.0, 2), "macro_f1": ("Macro-F1 (\\%)", 100.0, 2),
                 "nll": ("NLL", 1.0, 3), "ece": ("ECE", 1.0, 4), "brier": ("Brier", 1.0, 4)}
# metric -> (scale, decimals, unit) of a *difference* (tables, sentences, macros): a difference of two calibrated
# NLLs is often below 0.0005, so three decimals would print +0.000 [+0.000, +0.000]
DIFF_FORMAT = {"accuracy": (100.0, 2, " pp"), "ece": (1.0, 4, ""), "nll": (1.0, 4, ""), "brier": (1.0, 4, "")}


def fmt(entry: dict, metric: str, ci: bool = True, signed: bool = False) -> str:
    """``value`` or ``value [low, high]`` formatted for LaTeX (``signed``: a leading + or -, a
    difference, with the decimals of :data:`DIFF_FORMAT` where it names the metric)."""
    _, scale, dec = METRIC_FORMAT[metric]
    dec = DIFF_FORMAT[metric][1] if signed and metric in DIFF_FORMAT else dec
    sign = "+" if signed else ""

    def one(x: float) -> str:  # never "-0.000": a value that rounds to zero prints without a minus
        return f"{num(x, dec, scale):{sign}.{dec}f}"

    margin = entry.get("margin")  # a verdict's margin: an end that rounds onto it gets a decimal more

    def end(x: float) -> str:  # an interval's end: a sign, and never a rounded zero that hides one
        return signed_bound(x * scale, dec, None if margin is None else margin * scale) if signed else one(x)

    v = end(entry["value"]) if signed else one(entry["value"])  # a difference keeps its sign, as its ends do
    if ci and entry.get("low") is not None and entry["low"] == entry["low"]:  # none (one seed): no interval
        v += f"\\,{{\\scriptsize[{end(entry['low'])}, {end(entry['high'])}]}}"
    return v


def signed_bound(x: float, decimals: int, margin: float | None = None) -> str:
    """An interval's end with its sign. One that is not zero but rounds to zero at ``decimals`` gets
    up to two more decimals (+0.00004, not +0.0000): whether an interval excludes zero is what a
    reader checks first, and whether it lies inside the ``margin`` (same units) second, so an end
    that rounds onto the margin without being on it gets one more decimal (+0.253, not +0.25)."""
    text = f"{x:+.{decimals}f}"
    for more in (1, 2):
        if x == 0 or float(text) != 0:
            break
        text = f"{x:+.{decimals + more}f}"
    if float(text) == 0:  # still zero two decimals on (float noise): zero at the column's decimals
        return f"{0.0:+.{decimals}f}"
    if margin is not None and abs(float(text)) == round(abs(margin), decimals) and abs(x) != abs(margin):
        return f"{x:+.{decimals + 1}f}"
    return text


NO_SPREAD = "--"  # the spread of a one-seed cell: there is none to show


def num(value: float, decimals: int, scale: float = 1.0) -> float:
    """A frame cell: ``value * scale`` rounded to a column's fixed decimals, without a negative zero."""
    return round(float(value) * scale, decimals) + 0.0


def interval_text(low: float | None, high: float | None, decimals: int, scale: float = 1.0,
                  margin: float | None = None) -> str:
    """``[low, high]`` with signs, or ``--`` where there is no interval (one seed); ``margin``: the
    verdict's, in the same units as ``low`` (see :func:`signed_bound`)."""
    if low is None or high is None or low != low or high != high:
        return NO_SPREAD
    m = None if margin is None else margin * scale
    return f"[{signed_bound(low * scale, decimals, m)}, {signed_bound(high * scale, decimals, m)}]"


def sd_text(sd: float | None, scale: float = 1.0, decimals: int = 2) -> str:
    """A standard deviation over seeds as text; ``--`` where there was one seed (sd None)."""
    return NO_SPREAD if sd is None else f"{sd * scale:.{decimals}f}"


def error_bars(entries: list[dict], scale: float = 1.0) -> list[float]:
    """Half-widths for plotting from {mean, std} entries; 0 (no bar) for a one-seed point."""
    return [0.0 if e["std"] is None else scale * e["std"] for e in entries]


def fmt_mean_sd(entry: dict, metric: str, decimals: int | None = None) -> str:
    """``mean +- sd`` of a {mean, std} entry, formatted for LaTeX (the metric's decimals unless given);
    a one-seed entry shows ``--`` as its spread."""
    _, scale, dec = METRIC_FORMAT[metric]
    dec = dec if decimals is None else decimals
    return f"{entry['mean'] * scale:.{dec}f}\\,{{\\scriptsize$\\pm${sd_text(entry['std'], scale, dec)}}}"


CALIBRATED_ROW = "\\quad after calibration"


def _two_row_frame(methods: dict[str, dict], cell, metrics: tuple[str, ...]) -> pd.DataFrame:
    """Two rows per method, so the table fits the page unscaled: the raw test metrics, then the
    calibrated ones below them (calibration keeps the arg-max, so accuracy and F1 stay blank there).
    Row labels are LaTeX (escaped here)."""
    labels, rows = [], []
    for name, m in methods.items():
        labels += [latex_escape(m.get("label", name)), CALIBRATED_ROW]
        rows.append({METRIC_FORMAT[k][0]: cell(m["test_raw"][k], k) for k in metrics})
        rows.append({METRIC_FORMAT[k][0]: cell(m["test_calibrated"][k], k) if k in ("nll", "ece", "brier") else ""
                     for k in metrics})
    return pd.DataFrame(rows, index=pd.Index(labels, name="Method"))


CALIBRATED_COLUMNS = {"nll": "NLL (cal.)", "ece": "ECE (cal.)", "brier": "Brier (cal.)"}
"""The columns of the proper scores and ECE after calibration in a one-row-per-method table."""


def seed_frame(summary: dict[str, dict]) -> pd.DataFrame:
    """One row per method (its ``label``), mean +- s.d. over seeds of the test metrics: accuracy and
    NLL of the raw probabilities, then NLL, ECE and Brier after calibration (which keeps the
    arg-max, so accuracy does not change). Row labels are LaTeX (escaped here)."""
    rows = {latex_escape(m.get("label", name)): {
        METRIC_FORMAT["accuracy"][0]: fmt_mean_sd(m["test_raw"]["accuracy"], "accuracy"),
        METRIC_FORMAT["nll"][0]: fmt_mean_sd(m["test_raw"]["nll"], "nll"),
        **{col: fmt_mean_sd(m["test_calibrated"][k], k) for k, col in CALIBRATED_COLUMNS.items()}}
        for name, m in summary.items()}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("Method")


def latex_escape(text: str) -> str:
    for a, b in (("\\", "\\textbackslash{}"), ("&", "\\&"), ("%", "\\%"), ("_", "\\_"), ("#", "\\#")):
        text = text.replace(a, b)
    return text


EMPTY_CELLS = frozenset({"", "--", "\u2013", "nan", "None"})
"""Cells that carry no value: a column made only of these says nothing and is left out of a table."""


def column_specs(column_format: str) -> list[str]:
    """A tabular column format split into one spec per column: ``"lp{4cm}rr"`` -> l, p{4cm}, r, r."""
    return re.findall(r"[a-zA-Z](?:\{[^{}]*\})?", column_format)


def _empty(cell) -> bool:
    """A cell with no value: empty, a dash, or dashes joined by slashes (``-- / --``, two values missing)."""
    return all(part.strip() in EMPTY_CELLS for part in str(cell).split("/"))


def drop_empty_columns(df: pd.DataFrame, column_format: str | None = None) -> tuple[pd.DataFrame, str | None]:
    """``df`` without its columns whose every cell is empty or a dash (:data:`EMPTY_CELLS`), and
    ``column_format`` without their specs (the first spec is the row labels'); a format whose specs do
    not match the columns one to one is returned as given."""
    keep = [c for c in df.columns if not all(_empty(v) for v in df[c])]
    if len(keep) == len(df.columns):
        return df, column_format
    if column_format is not None:
        specs = column_specs(column_format)
        if len(specs) == len(df.columns) + 1:
            column_format = specs[0] + "".join(sp for c, sp in zip(df.columns, specs[1:]) if c in keep)
    return df[keep], column_format


def booktabs(df: pd.DataFrame, caption: str, label: str, column_format: str | None = None,
             escape_index: bool = True, colsep: str = "4pt", size: str = "small", stretch: float = 1.0) -> str:
    """A complete ``table`` environment with booktabs rules; cells are inserted as given (LaTeX),
    row labels escaped unless ``escape_index`` is off (labels that already are LaTeX, e.g. $\\sqrt{n}$);
    a column with no value in any row (all empty or dashes) is left out; ``colsep``: the column padding
    (narrower for a wide table, which is never scaled); ``size``: the font size command (footnotesize for a
    long table that must fit one page); ``stretch``: the row height's factor (below 1 for a table of
    many rows that must still fit one page)."""
    return "\n".join(["\\begin{table}[t]", "\\centering", f"\\{size}", f"\\caption{{{caption}}}", f"\\label{{{label}}}",
                      f"\\setlength{{\\tabcolsep}}{{{colsep}}}",
                      *([f"\\renewcommand{{\\arraystretch}}{{{stretch:g}}}"] if stretch != 1.0 else []),
                      tabular(df, column_format, escape_index), "\\end{table}", ""])  # never scaled: it fits the text width


PAGE_ROWS = 72
"""The most rows of one LaTeX table at scriptsize with a caption of a few lines (row stretch 0.9): a page."""


def paged_booktabs(df: pd.DataFrame, caption: str, label: str, split: Callable[[str], tuple[str, str]],
                   max_rows: int = PAGE_ROWS, index_name: str | None = None, **kwargs) -> str:
    """:func:`booktabs` for a table of groups of rows (``split`` of a row label: its group, e.g. a scale or
    a candidate, and the rest), each group under a heading row of its own, so the labels stay short enough
    for the page's width; whole groups per table, at most ``max_rows`` rows each (headings counted) unless
    one group alone is longer, since a float taller than the page runs off it. The first table carries
    ``caption`` and ``label``, each later one says whose continuation it is and which groups it holds;
    ``index_name``: the row labels' header once the groups are headings (default: the frame's)."""
    parts = [split(str(i)) for i in df.index]
    groups = list(dict.fromkeys(g for g, _ in parts))
    sizes = {g: 1 + sum(h == g for h, _ in parts) for g in groups}
    pages: list[list[str]] = [[]]
    for g in groups:
        if pages[-1] and sum(sizes[h] for h in pages[-1]) + sizes[g] > max_rows:
            pages.append([])
        pages[-1].append(g)
    blank = {c: "" for c in df.columns}
    out = []
    for j, page in enumerate(pages):
        labels, rows = [], []  # a list: the same label recurs in every group
        for g in page:
            labels.append(f"\\textit{{{g}}}")
            rows.append(blank)
            for n, (h, rest) in enumerate(parts):
                if h == g:
                    labels.append(rest)
                    rows.append(dict(df.iloc[n]))
        part = pd.DataFrame(rows, columns=list(df.columns), index=pd.Index(labels, name=index_name or df.index.name))
        cap = caption if j == 0 else f"Table~\\ref{{{label}}}, continued: {'; '.join(page)}."
        out.append(booktabs(part, cap, label if j == 0 else f"{label}-{j + 1}", **kwargs))
    return "".join(out)


def tabular(df: pd.DataFrame, column_format: str | None = None, escape_index: bool = True) -> str:
    """The ``tabular`` of :func:`booktabs` alone (no float, caption or label), for a table the paper
    assembles from several files inside its own ``table`` environment."""
    df, column_format = drop_empty_columns(df, column_format)
    cols = column_format or "l" + "r" * len(df.columns)
    esc = latex_escape if escape_index else str
    head = " & ".join([latex_escape(df.index.name or "")] + list(df.columns)) + " \\\\"
    rows = [" & ".join([esc(str(i))] + [str(v) for v in r]) + " \\\\" for i, r in zip(df.index, df.values)]
    return "\n".join([f"\\begin{{tabular}}{{{cols}}}", "\\toprule", head, "\\midrule", *rows, "\\bottomrule",
                      "\\end{tabular}"])


def methods_frame(methods: dict[str, dict], ci: bool = True, latex: bool = True) -> pd.DataFrame:
    """Per method, test metrics with their intervals. LaTeX: accuracy, NLL and ECE, raw then after
    calibration (two rows; the intervals leave room for three columns); plain: every metric, one
    row, accuracy and F1 in %, each metric at its table decimals, calibrated ones as ``<metric> (cal.)``."""
    if latex:
        return _two_row_frame(methods, lambda e, k: fmt(e, k, ci), ("accuracy", "nll", "ece"))
    rows = {}
    for name, m in methods.items():
        raw, cal = m["test_raw"], m["test_calibrated"]
        row = {plain(METRIC_FORMAT[k][0]): round(raw[k]["value"] * METRIC_FORMAT[k][1], METRIC_FORMAT[k][2])
               for k in METRIC_FORMAT}
        row.update({f"{METRIC_FORMAT[k][0]} (cal.)": round(cal[k]["value"], METRIC_FORMAT[k][2]) for k in ("nll", "ece", "brier")})
        rows[m.get("label", name)] = row
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "Method"
    return df



PLAIN = (("k_{\\mathrm{eff}}", "k_eff"), ("$\\pm$", "±"), ("\\,{\\scriptsize", " "), ("\\sqrt{n}", "√n"), ("\\times", "×"), ("\\,\\%", " %"),
         ("\\%", "%"), ("\\,", " "), ("$", ""), ("{", ""), ("}", ""))


def plain(text: str) -> str:
    """A LaTeX table cell as plain text for a notebook: $\\pm$ -> ±, \\sqrt{n} -> √n, \\% -> %."""
    for a, b in PLAIN:
        text = text.replace(a, b)
    return text


def whole_frames() -> None:
    """Show every row, column and whole cell of a DataFrame in this notebook session. pandas cuts a
    frame's display at 60 rows and 50 characters a cell by default, and the PDF export prints that
    cut ("[100 rows x 8 columns]", "co..."); wide frames still wrap into blocks of the display width."""
    pd.set_option("display.max_rows", None)
    pd.set_option("display.max_columns", None)
    pd.set_option("display.max_colwidth", None)


def plain_frame(df: pd.DataFrame) -> pd.DataFrame:
    """The same table with every cell, column and row label as plain text (notebook display)."""
    out = df.map(lambda v: plain(v) if isinstance(v, str) else v)
    out.index = [plain(_label(i)) for i in df.index]
    out.index.name = plain(" / ".join(n for n in df.index.names if n) if df.index.nlevels > 1 else df.index.name or "")
    out.columns = [plain(_label(c)) for c in df.columns]
    return out


def _label(key) -> str:
    """A row or column label as text: the levels of a MultiIndex key joined (empty levels left out),
    never a Python tuple."""
    if isinstance(key, tuple):
        return ", ".join(str(k) for k in key if str(k))
    return str(key)


_MD_ESCAPE = str.maketrans({c: "\\" + c for c in "\\|*_$[]`<>#~^"})


def _keep_together(cell: str) -> str:
    """An interval as one unbreakable unit ('[-0.10, +0.20]' with a no-break space) and its minus
    signs as U+2212, where LaTeX never breaks a line: a wrapped table cell keeps every interval whole."""
    import re

    cell = re.sub(r"(?<![\w.])-(?=[\d.])", "\u2212", cell)
    return re.sub(r"\[([^\]]*)\]", lambda m: "[" + m.group(1).replace(" ", "\u00a0") + "]", cell)


PAGE_CHARS = 110  # characters of table text across a notebook PDF's page (11 pt, 6.5 in)


def markdown_frame(df: pd.DataFrame) -> str:
    """``df`` (its index as the first column) as a Markdown pipe table. The notebook's PDF renders it
    as a LaTeX table as wide as the text whose cells wrap at spaces; a wide DataFrame's text would
    split into column blocks of 80 characters instead. Column widths (the separator's dashes) follow
    each column's longest cell, capped (20 characters for the label column, 40 for the others: a
    difference with its interval and verdict stays on one or two lines), then narrowed, widest
    first, to fit :data:`PAGE_CHARS`, but never below a column's longest unbreakable piece (an
    interval, a word). A table whose unbreakable pieces alone exceed the page is split into tables
    of consecutive columns, each with the row labels (:func:`_column_blocks`), so no column overprints
    its neighbour."""
    frame = plain_frame(df)
    blocks = _column_blocks(frame)
    if len(blocks) > 1:  # too wide for one page-wide table: one table per block, each with the row labels
        return "\n\n".join(_markdown_block(frame.iloc[:, b]) for b in blocks)
    return _markdown_block(frame)


def _pieces(cells: list[str]) -> int:
    """The longest unbreakable piece (an interval, a word) of a column's cells, at least 3."""
    return max(3, max(len(w) for c in cells for w in (_keep_together(c).split(" ") or [""])))


def _column_blocks(frame: pd.DataFrame) -> list[list[int]]:
    """The frame's columns in consecutive blocks whose unbreakable pieces, with the label column,
    fit :data:`PAGE_CHARS` (one block when the whole table fits)."""
    label = _pieces([str(frame.index.name or ""), *map(str, frame.index)]) + 3
    blocks: list[list[int]] = [[]]
    used = label
    for j, c in enumerate(frame.columns):
        need = _pieces([str(c), *("" if v is None or v != v else str(v) for v in frame.iloc[:, j])]) + 3
        if blocks[-1] and used + need > PAGE_CHARS:
            blocks.append([])
            used = label
        blocks[-1].append(j)
        used += need
    return blocks


def _markdown_block(frame: pd.DataFrame) -> str:
    head = [frame.index.name or ""] + [str(c) for c in frame.columns]
    body = [[str(i)] + ["" if v is None or v != v else " ".join(str(v).split("\n")) for v in row]
            for i, row in zip(frame.index, frame.itertuples(index=False))]  # v != v: NaN of any float type
    cells = [[_keep_together(c) for c in row] for row in [head, *body]]
    width, least = [], []
    for j in range(len(head)):
        column = [r[j] for r in cells]
        least.append(max(3, max(len(w) for c in column for w in (c.split(" ") or [""]))))
        width.append(max(least[-1], min(max(map(len, column)), 20 if j == 0 else 40)))
    # LaTeX scales the widths to the text's: above about PAGE_CHARS in all, a column would get less
    # than its longest unbreakable piece and overprint its neighbour, so the widest give way first
    while sum(width) + 3 * len(width) > PAGE_CHARS and any(w > m for w, m in zip(width, least)):
        j = max((j for j in range(len(width)) if width[j] > least[j]), key=lambda j: width[j])
        width[j] -= 1
    line = ["| " + " | ".join(c.translate(_MD_ESCAPE) for c in r) + " |" for r in cells]
    return "\n".join([line[0], "|" + "|".join("-" * (w + 2) for w in width) + "|", *line[1:]])


class Table:
    """A frame for a notebook: HTML in JupyterLab, a Markdown table in the exported PDF (which
    wraps cells instead of splitting the table into column blocks; see :func:`markdown_frame`)."""

    def __init__(self, df: pd.DataFrame):
        self.frame = plain_frame(df)

    def _repr_html_(self) -> str:
        return self.frame.to_html()

    def _repr_markdown_(self) -> str:
        return markdown_frame(self.frame)

    def __repr__(self) -> str:  # the executed notebook's plain-text copy: no memory address, so a redraw keeps it
        return f"Table({self.frame.shape[0]} rows x {self.frame.shape[1]} columns)"


def show(df: pd.DataFrame) -> Table:
    """``df`` as a notebook shows it (:class:`Table`): every cell as plain text, whole."""
    return Table(df)


def written_frame(files: list) -> pd.DataFrame:
    """One row per LaTeX table file a notebook wrote: its name, its ``\\label`` and number of body
    rows, so the executed notebook lists what the paper inputs without printing LaTeX source."""
    import re
    from pathlib import Path

    rows = {}
    for f in map(Path, files):
        text = f.read_text()
        label = re.search(r"\\label\{([^}]*)\}", text)
        body = text.split("\\midrule", 1)[-1].split("\\bottomrule", 1)[0]
        rows[f.name] = {"label": label.group(1) if label else "", "rows": body.count("\\\\")}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "results/tables/"
    return df

"""Tables built for reading: every committed LaTeX table and every frame a notebook displays has no
NaN cell and no integer column written as a float (k = 16.0, epoch 3.0)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from experiment_api import api

ROOT = Path(__file__).resolve().parents[1]
TABLES = sorted((ROOT / "results" / "tables").glob("*.tex"))
NAN = re.compile(r"(?<![A-Za-z\\])nan(?![A-Za-z])", re.IGNORECASE)
FLOAT_INT = re.compile(r"^[+-]?\d[\d,]*\.0$")  # 16.0, 232.0: an integer printed by a float
# headers of integer quantities (k, epochs, seeds, runs, rows): their cells must print as integers
INT_HEADER = re.compile(r"^(\$?k\$?|epochs?|seeds?|runs|rows|n|memory rows|selected epoch)$", re.IGNORECASE)
INT_IN_TEXT = re.compile(r"(?<![\w.])(k|epochs?|seeds?)\s*=\s*\$?\d+\.0\b")  # "k = 16.0" inside a label


def table_cells(tex: str) -> tuple[list[str], list[list[str]]]:
    """Header and body rows of a booktabs table, split into cells."""
    def split(line: str) -> list[str]:
        return [c.strip() for c in line.strip().removesuffix("\\\\").split(" & ")]

    head = tex.split("\\toprule", 1)[1].split("\\midrule", 1)[0]
    body = tex.split("\\midrule", 1)[1].split("\\bottomrule", 1)[0]
    return split(head), [split(line) for line in body.strip().splitlines() if line.strip()]


def table_problems(tex: str) -> list[str]:
    """NaN cells, integer-named columns with non-integer cells, columns whose every cell is N.0."""
    header, rows = table_cells(tex)
    problems = [f"NaN cell {c!r}" for r in rows for c in r if NAN.search(c)]
    problems += [f"float-formatted integer in {c!r}" for r in rows for c in r if INT_IN_TEXT.search(c)]
    for j, name in enumerate(header):
        col = [r[j] for r in rows if j < len(r) and r[j] not in ("", "--")]
        if not col:
            continue
        if INT_HEADER.match(name.strip()) and any(not re.match(r"^\d[\d,]*(\s|$)", c) for c in col):
            problems.append(f"integer column {name!r} has cells {col[:3]}")
        if all(FLOAT_INT.match(c) for c in col):
            problems.append(f"column {name!r} holds integers printed as floats: {col[:3]}")
    return problems


BAD = r"""\begin{table}[t]
\caption{x}
\begin{tabular}{lrr}
\toprule
epoch & acc. (\%) & ratio \\
\midrule
1.0 & 92.1 & nan \\
2.0 & 92.3 & 1.0 \\
\bottomrule
\end{tabular}
\end{table}
"""


def test_table_check_fails_on_a_bad_table():
    problems = table_problems(BAD)
    assert any("NaN" in p for p in problems)
    assert any("integer column 'epoch'" in p for p in problems)
    assert any("printed as floats" in p for p in problems)
    assert table_problems(BAD.replace("1.0 &", "1 &").replace("2.0 &", "2 &").replace("nan", "0.9")) == []
    assert table_problems(BAD.replace("1.0 & 92.1", "clean, k = 16.0 & 92.1").replace("2.0 &", "2 &")
                          .replace("nan", "0.9"))


@pytest.mark.parametrize("path", TABLES, ids=[p.name for p in TABLES])
def test_committed_table_is_readable(path):
    assert table_problems(path.read_text()) == []


def test_tables_are_committed():
    assert len(TABLES) >= 10


# ----------------------------------------------------------------------------- frames

def frame_problems(df: pd.DataFrame) -> list[str]:
    """NaN cells or NaN/"nan" text, float columns (or index levels) whose values are all integers,
    text columns whose every cell reads N.0."""
    problems = []
    if df.isna().to_numpy().any():
        problems.append("NaN cells in columns " + ", ".join(map(str, df.columns[df.isna().any()])))
    levels = [df.index.get_level_values(i) for i in range(df.index.nlevels)]
    cols = [(c, df[c]) for c in df.columns] + [(f"index {lv.name}", pd.Series(lv)) for lv in levels]
    for name, s in cols:
        v = s.dropna()
        if len(v) == 0:
            continue
        if pd.api.types.is_float_dtype(v) and np.all(np.mod(v.to_numpy(), 1) == 0):
            problems.append(f"float column {name} holds integers: {list(v[:3])}")
        text = [x for x in v if isinstance(x, str)]
        if text and any(NAN.search(x) for x in text):
            problems.append(f"'nan' text in {name}")
        if text and len(text) == len(v) and all(FLOAT_INT.match(x) for x in text):
            problems.append(f"text column {name} holds integers printed as floats: {text[:3]}")
    return problems


def test_frame_check_fails_on_a_bad_frame():
    bad = pd.DataFrame({"k": [16.0, 32.0], "acc": [91.2, np.nan], "k_eff": ["16.0", "32.0"]})
    problems = frame_problems(bad)
    assert len(problems) == 3, problems
    assert frame_problems(pd.DataFrame({"k": [16, 32], "acc": [91.2, 91.3]})) == []
    assert frame_problems(pd.DataFrame({"acc": [91.2, 91.3]}, index=pd.Index([1.0, 3.0], name="epoch")))


def _record(name: str) -> dict:
    path = ROOT / "results" / f"{name}.json"
    if not path.exists():
        pytest.skip(f"no committed {path.name}")
    return json.loads(path.read_text())


def _frames():
    """(id, callable) for every frame a notebook displays, built from a committed record."""
    main = api("main")
    from attnknn_lib.report.tables import methods_frame, plain_frame

    def ablation(rec):
        res = rec["results"]
        return methods_frame(res["per_seed"][str(res["seeds"][0])]["ablation"], latex=False)

    out = [(f"main.{f}[{d}]", d, getattr(main, f)) for d in ("fashion_mnist", "iris") for f in
           ("summary_frame", "paired_frame", "tuning_frame", "training_frame") if hasattr(main, f)]
    out.append(("main.ablation", "fashion_mnist", ablation))
    spec = {"k_sweep": ("summary_frame", "advantage_frame", "tuning_frame"),
            "noise": ("summary_frame", "weights_frame"),
            "long_tail": ("summary_frame", "tuning_frame"),
            "efficiency": ("summary_frame", "index_frame", "slopes_frame", "throughput_frame", "cost_frame",
                           "training_frame"),
            "theory": ("table_frame", "summary_frame", "geometry_frame", "fits_frame"),
            "attention_study": ("headroom_frame", "ceilings_frame", "diagnostics_frame", "variants_frame",
                                "best_variant_frame", "end_to_end_frame")}
    for exp, names in spec.items():
        mod = api(exp)
        out += [(f"{exp}.{f}", None, (lambda fn: lambda rec: plain_frame(fn(rec)))(getattr(mod, f)))
                for f in names if hasattr(mod, f)]
    return out


FRAMES = _frames()


@pytest.mark.parametrize("name,dataset,build", FRAMES, ids=[f[0] for f in FRAMES])
def test_notebook_frame_is_readable(name, dataset, build):
    exp = name.split(".")[0]
    rec = _record(f"main_{dataset}" if exp == "main" else f"{exp}_fashion_mnist")
    df = build(rec)
    assert len(df) > 0
    assert frame_problems(df) == [], name


def test_notebook_frames_print_whole_and_differences_of_nll_keep_four_decimals():
    """pandas cuts a frame's text at 60 rows and 50 characters a cell, and the PDF prints the cut
    (issue 28); a calibrated NLL difference below 0.0005 must not print as +0.000."""
    from attnknn_lib.report.tables import fmt, whole_frames

    df = pd.DataFrame({"verdict": ["inconclusive against the strongest rule that learns nothing, " * 2] * 100})
    with pd.option_context("display.max_rows", 60, "display.max_colwidth", 50, "display.max_columns", 20):
        whole_frames()
        text = repr(df)
    assert "rows x" not in text and "..." not in text and text.count("learns nothing") == 200
    assert fmt({"value": 0.0002, "low": -0.0001, "high": 0.0004}, "nll", signed=True).startswith("+0.0002")
    assert fmt({"value": 0.2345}, "nll") == "0.234"  # a value keeps the metric's own decimals


def test_the_study_shows_its_variants_one_readable_frame_per_memory_setting():
    """Notebook 07 prints the variants table per setting: every row of the full table lands in exactly
    one setting's frame, no frame has an empty column, and every frame passes the readability check."""
    study = api("attention_study")
    rec = _record("attention_study_fashion_mnist")
    whole, parts = study.variants_frame(rec), study.variants_by_setting(rec)
    assert len(parts) == len(rec["results"]["summary"]["settings"])
    assert sum(len(p) for p in parts.values()) == len(whole)
    for title, part in parts.items():
        assert (~part.isin(["", "--"])).any().all() and frame_problems(part) == [], title


def test_a_notebook_table_renders_as_markdown_that_keeps_every_interval_on_one_line():
    """The PDF of a notebook turns its tables into LaTeX tables from Markdown: an interval's parts are
    joined by a no-break space and its minus signs are U+2212 (LaTeX breaks a line at neither), so a
    wrapped cell never splits an interval; Markdown's special characters print as themselves."""
    from attnknn_lib.report.tables import markdown_frame, show

    df = pd.DataFrame({"Δ acc. (pp)": ["-0.05 [-0.22, +0.11] equivalent"], "k_eff": ["15.9"]}, index=["a | b *"])
    df.index.name = "k: method"
    text = markdown_frame(df)
    head, rule, row = text.splitlines()
    assert head.startswith("| k: method |") and set(rule) <= {"|", "-"} and rule.count("|") == 4
    assert "\\[\u22120.22,\u00a0+0.11\\]" in row and "\u22120.05" in row  # whole, unbreakable
    assert "a \\| b \\*" in row and "k\\_eff" in head  # escaped: no column split, no emphasis
    assert show(df)._repr_markdown_() == text and "<table" in show(df)._repr_html_()


def test_the_study_findings_fit_a_page_and_its_variants_figure_reads_against_the_strongest_rule():
    study = api("attention_study")
    rec = _record("attention_study_fashion_mnist")
    text = study.findings(rec)
    assert len(text.split()) < 600 and text.count("\n- ") <= 12, len(text.split())  # a page of bullets
    fig = study.variants_figure(rec)
    axes = [a for a in fig.axes if a.get_visible()]
    assert len(axes) == sum(str(rec["config"]["k"]) in (s.get("variants") or {})
                            for s in rec["results"]["summary"]["settings"].values())
    assert len({a.get_xlim() for a in axes}) == 1  # one shared axis
    assert "tuned vote" in fig._suptitle.get_text()


def test_a_notebook_table_names_multiindex_levels_and_splits_when_wider_than_the_page():
    import pandas as pd

    from attnknn_lib.report.tables import PAGE_CHARS, markdown_frame, plain_frame

    cols = pd.MultiIndex.from_tuples([(f"metric {i}, margin 0.25", part) for i in range(4)
                                      for part in ("Δ", "95% interval", "verdict")])
    df = pd.DataFrame([["+0.12", "[-0.10, +0.34]", "inconclusive"] * 4], index=pd.MultiIndex.from_tuples(
        [("Attn-KNN − rule", "raw")], names=["comparison", "probabilities"]), columns=cols)
    plain = plain_frame(df)
    assert "metric 0, margin 0.25, Δ" in plain.columns and "(" not in "".join(plain.columns)
    assert plain.index[0] == "Attn-KNN − rule, raw" and plain.index.name == "comparison / probabilities"
    tables = markdown_frame(df).split("\n\n")
    assert len(tables) > 1 and all(t.startswith("| comparison / probabilities |") for t in tables)
    assert all(len(t.splitlines()[1]) <= PAGE_CHARS + 40 for t in tables)


def test_an_interval_end_never_rounds_to_a_zero_that_hides_its_sign():
    from attnknn_lib.report.tables import fmt, signed_bound

    assert signed_bound(0.00004, 4) == "+0.00004" and signed_bound(-0.00004, 4) == "-0.00004"
    assert signed_bound(0.000004, 4) == "+0.000004" and signed_bound(-0.0000004, 4) == "+0.0000"
    assert signed_bound(1e-17, 4) == "+0.0000"  # float noise: the column's decimals
    assert signed_bound(0.0, 4) == "+0.0000" and signed_bound(-0.0, 2) == "+0.00" and signed_bound(0.0123, 2) == "+0.01"
    assert fmt({"value": 0.0014, "low": 0.00003, "high": 0.0027}, "brier", signed=True) == \
        "+0.0014\\,{\\scriptsize[+0.00003, +0.0027]}"


def test_an_interval_end_that_rounds_onto_the_margin_gets_a_decimal_more():
    from attnknn_lib.report.tables import interval_text, signed_bound

    assert signed_bound(0.2534, 2, margin=0.25) == "+0.253" and signed_bound(-0.2466, 2, margin=0.25) == "-0.247"
    assert signed_bound(0.25, 2, margin=0.25) == "+0.25" and signed_bound(0.2634, 2, margin=0.25) == "+0.26"
    assert interval_text(-0.0023, 0.002534, 2, 100, 0.0025) == "[-0.23, +0.253]"

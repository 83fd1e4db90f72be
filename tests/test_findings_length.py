"""Every notebook's findings, rendered from the committed records, read as a paragraph and short bullets:
no bullet over 70 words (one point each; the intervals are in the tables above it) and no bare "--"
where a value was not measured (the sentence says "not measured")."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest

from attnknn_lib.experiments.framework import catalog

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = catalog.experiments()
MAX_BULLET_WORDS = 70


def committed(name: str) -> list[dict]:
    """The experiment's committed records, with the verdicts its measurement stores now added where a
    record predates them (``measure.with_verdicts``: a pure function of the stored results)."""
    records = [json.loads(f.read_text()) for f in sorted((REPO / "results").glob(f"{name}_*.json"))]
    measure = importlib.import_module(f"attnknn_lib.experiments.{name}.measure")
    if hasattr(measure, "with_verdicts"):
        records = [r if "verdicts" in r["results"] else measure.with_verdicts(r) for r in records]
    return records


def rendered(name: str) -> str:
    """The findings cell of the experiment's notebook: main reads every dataset's record, the others one."""
    views = importlib.import_module(f"attnknn_lib.experiments.{name}.views")
    records = committed(name)
    if not records:
        pytest.skip(f"no committed record of {name}")
    return views.findings(records) if name == "main" else views.findings(records[0])


def bullets(markdown: str) -> list[str]:
    """The Markdown's list items, each with its continuation lines joined."""
    out: list[str] = []
    for line in markdown.splitlines():
        if re.match(r"\s*[-*] ", line):
            out.append(line.strip())
        elif out and line.startswith(" ") and line.strip():
            out[-1] += " " + line.strip()
    return out


def test_bullets_are_found_with_their_continuation_lines():
    text = "Answer.\n\n- one two\n  three\n- four\n\nAfter."
    assert bullets(text) == ["- one two three", "- four"]


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_each_findings_bullet_has_at_most_70_words_and_no_dash_placeholder(name):
    text = rendered(name)
    found = bullets(text)
    long = [(len(b.split()), b[:80]) for b in found if len(b.split()) > MAX_BULLET_WORDS]
    assert not long, f"{name}: bullets over {MAX_BULLET_WORDS} words: {long}"
    assert "--" not in text, f"{name}: a '--' placeholder in its findings (say 'not measured')"


def test_mains_findings_and_answer_give_the_primary_datasets_difference_in_points_and_count_no_tabular_verdicts():
    from attnknn_lib.experiments.main.views.dataset_answer import answer_lines

    records = committed("main")
    primary = next(r for r in records if r["config"].get("primary") == r["dataset"])
    d = primary["results"]["paired"]["attnknn_tuned_vs_reference"]["seed_level"]["raw"]["accuracy"]
    (line,) = answer_lines(records)
    assert f"{100 * d['value']:+.2f} points of accuracy ({d['verdict']})" in line
    assert "descriptive" in line and "datasets**" not in line  # no verdicts counted over every dataset
    assert f"{100 * d['value']:+.2f} pp (**{d['verdict']}**)" in rendered("main").split("\n\n")[0]

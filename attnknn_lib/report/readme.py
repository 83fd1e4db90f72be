"""The README's generated results block: the lines each experiment writes, assembled in sections.

Each experiment module gives ``README_SECTION`` (a heading, or None for lines that lead the block)
and ``readme_lines(records)``; :func:`results_block` groups them under their headings and
:func:`update_readme` writes the block between the README's markers. No experiment is named here.
"""

from __future__ import annotations

from pathlib import Path

from attnknn_lib.base.files import write_text

README_START = "<!-- results:start -->"
README_END = "<!-- results:end -->"
EMPTY = "(no results yet: run ./run_all.sh)"


def results_block(sections: list[tuple[str | None, list[str]]], profile: str) -> str:
    """The block's Markdown: each section's lines in order, those with a heading after a line
    "<heading> (profile `<profile>`):" (sections of one heading are merged, in first-seen order)."""
    grouped: dict[str | None, list[str]] = {}
    for heading, lines in sections:
        if lines:
            grouped.setdefault(heading, []).extend(lines)
    out: list[str] = []
    for heading, lines in grouped.items():
        out += lines if heading is None else ["", f"{heading} (profile `{profile}`):", ""] + lines
    return "\n".join(out) if out else EMPTY


def replace_block(path: str | Path, start: str, end: str, body: str) -> bool:
    """Replace what lies between the ``start`` and ``end`` markers of ``path`` (a generated block of
    the README); False if the file has no such markers."""
    path = Path(path)
    text = path.read_text()
    if start not in text or end not in text:
        return False
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    write_text(path, f"{head}{start}\n{body}\n{end}{tail}")
    return True


def update_readme(readme: str | Path, body: str) -> bool:
    """Replace the block between the results markers of ``readme``; False if it has no markers."""
    return replace_block(readme, README_START, README_END, body)

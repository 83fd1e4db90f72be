"""The README's generated results block: the lines each experiment writes, assembled in sections.

Each experiment's views give a section heading (or None for lines that lead the block) and
``readme_lines(records)``; :func:`results_block` groups them under their headings and
:func:`replace_block` writes a block between the README's markers (:mod:`.compose` assembles them).
No experiment is named here.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

from attnknn_lib.base.files import write_text
from attnknn_lib.data.registry import REGISTRY

README_START = "<!-- results:start -->"
README_END = "<!-- results:end -->"
ANSWER_START = "<!-- answer:start -->"  # the README's first lines: the answer, generated
ANSWER_END = "<!-- answer:end -->"
EMPTY = "(no results yet: run ./run_all.sh)"
EXPERIMENTS_START = "<!-- experiments:start -->"  # the table of experiments, from their declarations
EXPERIMENTS_END = "<!-- experiments:end -->"
LAYOUT_START = "<!-- layout:start -->"
LAYOUT_END = "<!-- layout:end -->"
PACKAGE = Path(__file__).resolve().parents[1]  # attnknn_lib/


def per_dataset(records: list[dict], bullet: Callable[[dict, str], str]) -> list[str]:
    """One README line per record, in dataset order: ``bullet(results, dataset title)``."""
    return [bullet(r["results"], REGISTRY[r["dataset"]].title) for r in sorted(records, key=lambda r: r["dataset"])]


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


def _summary(path: Path) -> str:
    """The first line of a module's docstring (without reST markup)."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    first = " ".join(doc.split("\n\n")[0].split())  # the first paragraph on one line
    first = re.sub(r":(mod|class|func|data|meth):`~?([^`]*)`", lambda m: f"`{m.group(2).split('.')[-1]}`", first)
    return first.split(". ")[0].split(": ``")[0].replace("``", "`").rstrip(".")


def layout_markdown(package: Path = PACKAGE) -> str:
    """The library's folder list for the README, from the docstrings: each layer (highest first,
    as the package declares them) with its summary, then each module with the first line of its
    docstring. The README's layout block is this text (a test compares them)."""
    tree = ast.parse((package / "__init__.py").read_text())
    layers = next(ast.literal_eval(n.value) for n in tree.body
                  if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "LAYERS")
    rows: list[tuple[str, str]] = []
    for layer in layers:
        rows.append((f"  {layer}/", _summary(package / layer / "__init__.py")))
        for path in sorted((package / layer).rglob("*.py")):
            rel = path.relative_to(package / layer)
            if rel.name == "__init__.py" and rel.parent == Path("."):
                continue
            name = f"{rel.parent}/" if rel.name == "__init__.py" else str(rel)
            rows.append((f"    {name}", _summary(path)))
    width = max(len(name) for name, _ in rows) + 2  # every name apart from its description
    lines = ["```", f"{package.name}/  layers, highest first: a module imports only from its own layer and those below"]
    lines += [f"{name:<{width}}{summary}".rstrip() for name, summary in rows]
    return "\n".join(lines + ["```"])


if __name__ == "__main__":  # python -m attnknn_lib.report.readme: rewrite the README's layout block
    readme = PACKAGE.parent / "README.md"
    print("updated" if replace_block(readme, LAYOUT_START, LAYOUT_END, layout_markdown()) else "no layout markers in README.md")

"""The README's generated blocks: results in sections, provenance, and the library's layout (docs/layout.md).

Each experiment's views give a section heading (or None for lines that lead the block) and
``readme_lines(records)``; :func:`results_block` groups them under their headings,
:func:`provenance_paragraph` says where the records were measured, and :func:`replace_block`
writes a block between a file's markers (:mod:`.compose` assembles them). No experiment is named here.
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
PROVENANCE_START = "<!-- provenance:start -->"  # where and at which commits the records were measured
PROVENANCE_END = "<!-- provenance:end -->"
RUN_TIME_START = "<!-- run-time:start -->"  # how long the full run takes, here and with more hardware (the bench)
RUN_TIME_END = "<!-- run-time:end -->"
LAYOUT_START = "<!-- layout:start -->"
LAYOUT_END = "<!-- layout:end -->"
PACKAGE = Path(__file__).resolve().parents[1]  # attnknn_lib/
LAYOUT_FILE = PACKAGE.parent / "docs" / "layout.md"  # the generated layout block lives there, not in the README
ANSWER_BULLETS = 6  # the README's answer: at most this many bullets ...
ANSWER_BULLET_CHARS = 300  # ... of at most this many characters each (the details: the tables they link)


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


def measured_seconds(record: dict) -> float:
    """Wall seconds of a record's measurement: its measure job plus the part jobs it read (0 where
    neither is recorded; model training is not included)."""
    return ((record.get("provenance", {}).get("wall_seconds") or 0.0)
            + (record.get("results", {}).get("timings", {}).get("parts_seconds") or 0.0))


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 7200 else f"{seconds / 60:.0f} min"


def _machine(prov: dict) -> str:
    """'a 2-core AMD EPYC, no GPU' from a record's provenance."""
    m = prov.get("machine") or {}
    cores = f"{prov['cpu_count']}-core " if prov.get("cpu_count") else ""
    gpu = (m.get("cuda") or {}).get("device")
    return f"a {cores}{m.get('cpu_model') or 'CPU of unrecorded model'}, " + (f"GPU {gpu}" if gpu else "no GPU")


def provenance_paragraph(records: list[dict]) -> str:
    """One paragraph from the records' ``provenance``: their profile, the commits they were measured
    at (each with the experiments measured there, marked where the tree had uncommitted changes),
    the machines, and the wall time of their measurement where recorded."""
    if not records:
        return EMPTY
    commits: dict[str, set[str]] = {}
    dirty: set[str] = set()
    for r in records:
        prov = r.get("provenance") or {}
        commit = (prov.get("commit") or "unknown")[:7]
        commits.setdefault(commit, set()).add(r["experiment"])
        if prov.get("dirty"):
            dirty.add(commit)
    at = "; ".join(f"`{c}` for {', '.join(sorted(names))}{' (with uncommitted changes)' if c in dirty else ''}"
                   for c, names in sorted(commits.items(), key=lambda kv: (-len(kv[1]), kv[0])))
    machines = sorted({_machine(r.get("provenance") or {}) for r in records})
    seconds = sum(measured_seconds(r) for r in records)
    text = (f"The committed records come from the `{records[0]['profile']}` profile, measured at "
            f"{'commit' if len(commits) == 1 else 'commits'} {at}; on {' and '.join(machines)}.")
    if seconds:
        text += (f" Their measurement (analyses and their part jobs, model training not included) took "
                 f"{_duration(seconds)} of job time.")
    return text


def run_time_paragraph(bench: dict | None) -> str:
    """How long ``./run_all.sh`` takes, from the bench's reading of the last complete run
    (``results/benchmarks.json``, its ``cpu_run``): wall and job time on this machine's cores, how
    busy they were, and the same jobs scheduled on 8 and 16 cores and with the GPU's training
    (:mod:`attnknn_lib.tooling.schedule`). A sentence saying none is recorded otherwise."""
    run = (bench or {}).get("cpu_run") or {}
    if not run.get("complete") or not run.get("wall_seconds"):
        return ("No complete run has been timed on this machine yet: `./run_all.sh bench` reads the job records of "
                "the last full run and writes its times here.")
    cores = run.get("cores", 1)
    text = (f"The last full run here took {_duration(run['wall_seconds'])} of wall time on {cores} "
            f"core{'s' * (cores > 1)} ({_duration(run['total_seconds'])} of job time, the cores busy "
            f"{100 * run['busy_share']:.0f} % of it).")
    if run.get("at_width"):
        text += " " + width_sentence(run["at_width"])
    return text + " Details: [docs/benchmarks.md](docs/benchmarks.md)."


def width_sentence(at: dict) -> str:
    """What a run's jobs would take on 8 and 16 cores and with the GPU's training, from the bench's
    ``at_width`` (:mod:`attnknn_lib.tooling.schedule`): the README's and docs/benchmarks.md's words."""
    walls = at["wall_seconds"]
    text = (f"Its jobs, scheduled from their records with the longest chain first, would take about "
            f"{_duration(walls['8'])} on 8 cores and {_duration(walls['16'])} on 16 (`--jobs 8`, `--jobs 16`); "
            f"no width ends them sooner than their longest chain, {_duration(at['critical_path_seconds'])}.")
    gpu = at.get("gpu_training")
    if gpu:
        text += (f" With the models trained at the speed measured on one {gpu['device']} and the rest on 16 "
                 f"cores: about {_duration(gpu['wall_seconds']['16'])}.")
    return text


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
    """The library's folder list for docs/layout.md, from the docstrings: each layer (highest first,
    as the package declares them) with its summary, then each module with the first line of its
    docstring. The layout block of docs/layout.md is this text (a test compares them)."""
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


if __name__ == "__main__":  # python -m attnknn_lib.report.readme: rewrite docs/layout.md's layout block
    print("updated" if replace_block(LAYOUT_FILE, LAYOUT_START, LAYOUT_END, layout_markdown())
          else f"no layout markers in {LAYOUT_FILE}")

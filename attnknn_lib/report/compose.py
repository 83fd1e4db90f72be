"""One report from the result records of one profile: the paper's macros and the README's blocks.

The experiments' views (their declarations' ``views``) build the parts; this module assembles
them in the order it is given (the catalog's notebook order), adds the paper-wide config macros
and writes the files. The workflow's report job and the tests call the same two functions:
:func:`compose`, then :func:`write_report`. No experiment is named here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from attnknn_lib.report import macros as macro_file
from attnknn_lib.report import readme


class ExperimentViews(Protocol):  # what compose reads of a declaration (experiments.framework.declaration)
    name: str
    notebook: str
    question: str
    models: str
    awaiting: str  # why its record is not measured yet (empty: the default run measures it)

    @property
    def views(self) -> Views: ...


class Views(Protocol):
    macros: Callable[[list[dict]], dict[str, str]]
    readme_lines: Callable[[list[dict]], list[str]]
    readme_section: str | None
    answer_lines: Callable[[list[dict]], list[str]] | None


@dataclass(frozen=True)
class Report:
    macros: dict[str, str]  # results/macros.tex
    answer: str  # the README's first lines
    results: str  # the README's results block
    experiments: str  # the README's table of experiments
    provenance: str = readme.EMPTY  # the README's paragraph on where the records were measured
    run_time: str = readme.EMPTY  # the README's paragraph on how long the full run takes (the bench)


TERMS = "**Terms.**"  # the line that opens the answer's glossary


def split_terms(lines: list[str]) -> tuple[list[str], list[str]]:
    """An experiment's answer lines split into its bullets and its glossary lines (after :data:`TERMS`),
    so that the answers of several experiments read as one list of bullets and one glossary."""
    if TERMS not in lines:
        return [ln for ln in lines if ln], []
    i = lines.index(TERMS)
    return [ln for ln in lines[:i] if ln], [ln for ln in lines[i + 1:] if ln]


def job_minutes(records: list[dict]) -> str:
    """The wall time of the runs behind an experiment's records (its notebook job's analysis), in
    minutes; '--' without a record."""
    seconds = sum(readme.measured_seconds(r) for r in records)  # parts: computed in jobs of their own
    return f"{seconds / 60:.0f} min" if records else "--"


def _analysis_time(e: ExperimentViews, records: list[dict]) -> str:
    """:func:`job_minutes`, or that a declared experiment awaits its first run."""
    return "not run yet (declared, awaiting its run)" if e.awaiting and not records else job_minutes(records)


def experiments_table(experiments: Iterable[ExperimentViews], records: list[dict] | None = None) -> str:
    """The README's table of experiments, from their declarations, with the time its analysis took
    in the committed run (``records``: the run's records; the training of the models it needs is in
    docs/benchmarks.md)."""
    records = records or []
    lines = ["| notebook | question | models | analysis time here |", "| --- | --- | --- | --- |"]
    lines += [f"| `{Path(e.notebook).stem}` | {e.question} | {e.models} | "
              f"{_analysis_time(e, [r for r in records if r.get('experiment') == e.name])} |" for e in experiments]
    return "\n".join(lines)


def condensed(lines: list[str], notebook: str) -> list[str]:
    """An experiment's README lines as the Results block shows them: its bold summary lines where it
    has any, else its top-level lines (a table, one bullet per finding); nested detail stays in the
    notebook's PDF, which the last line names. The block then stays short enough to read through
    (the full findings: each notebook's PDF and the paper)."""
    lines = "\n".join(lines).splitlines()  # an experiment may return several lines in one string
    bold = [ln for ln in lines if ln.startswith("**")]
    kept = bold or [ln for ln in lines if not ln.startswith(" ")]
    pdf = f"results/notebooks/{Path(notebook).stem}.pdf"
    return [*kept, "", f"Details: [`{pdf}`]({pdf}).", ""]


def compose(records: list[dict], experiments: Iterable[ExperimentViews], bench: dict | None = None) -> Report:
    """The report of ``records`` (all of one profile: see :func:`~attnknn_lib.report.records.read_records`)
    and of the bench's record of the last full run (``results/benchmarks.json``; None: none)."""
    experiments = list(experiments)
    by_name = {e.name: [r for r in records if r.get("experiment") == e.name] for e in experiments}
    macros: dict[str, str] = {}
    if records:  # the recipe every experiment of the run shares, from the first in notebook order
        first = next(by_name[e.name][0] for e in experiments if by_name[e.name])
        macros.update(macro_file.config_macros(first["config"]))
    sections, answer, terms = [], [], []
    for e in experiments:
        recs = by_name[e.name]
        if not recs:
            continue
        macros.update(e.views.macros(recs))
        sections.append((e.views.readme_section, condensed(e.views.readme_lines(recs), e.notebook)))
        if e.views.answer_lines is not None:
            bullets, term_lines = split_terms(e.views.answer_lines(recs))
            answer += bullets
            terms += term_lines
    if terms:  # every experiment's bullets first, then one glossary
        answer += ["", TERMS, ""] + terms
    macros.update(macro_file.verdict_words(macros))
    profile = records[0]["profile"] if records else ""
    return Report(macros, "\n".join(answer) if answer else readme.EMPTY, readme.results_block(sections, profile),
                  experiments_table(experiments, records), readme.provenance_paragraph(records),
                  readme.run_time_paragraph(bench))


def write_report(report: Report, macros_path: str | Path, readme_path: str | Path | None = None,
                 paper_path: str | Path | None = None, strict: bool = True) -> Path:
    """``results/macros.tex`` and, when given a README, its generated blocks (answer, results,
    experiments, provenance, run time; each atomically). Given
    the paper, only the macros it uses are written (:func:`~attnknn_lib.report.macros.used_by`), and,
    ``strict`` (the paper is built), a generated-looking macro it uses that the records do not
    define stops the report."""
    macros = report.macros
    if paper_path is not None:
        macros = macro_file.used_by(macros, Path(paper_path).read_text(), strict)
    path = macro_file.write_macros(macros, macros_path)
    if readme_path is not None:
        readme.replace_block(readme_path, readme.ANSWER_START, readme.ANSWER_END, report.answer)
        readme.replace_block(readme_path, readme.README_START, readme.README_END, report.results)
        readme.replace_block(readme_path, readme.EXPERIMENTS_START, readme.EXPERIMENTS_END, report.experiments)
        readme.replace_block(readme_path, readme.PROVENANCE_START, readme.PROVENANCE_END, report.provenance)
        readme.replace_block(readme_path, readme.RUN_TIME_START, readme.RUN_TIME_END, report.run_time)
    return path

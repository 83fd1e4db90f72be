"""Experiments: one module (or package) per experiment on the shared steps of :mod:`.shared`.

The registry maps a name to its module, which gives ``NAME``, ``NOTEBOOK``, ``Config``, ``runs``
and ``outputs`` (what the workflow plans), ``run`` and ``write_outputs`` (what its notebook calls),
and its record views for the report: ``macros(records)``, ``README_SECTION`` and
``readme_lines(records)`` (and, for the README's first lines, ``answer_lines(records)``). The report over all experiments is assembled here, in registry order,
from those views; :mod:`attnknn_lib.report` stays generic.
"""

from __future__ import annotations

from pathlib import Path

from attnknn_lib.experiments import attention_study, efficiency, k_sweep, long_tail, main, noise, theory
from attnknn_lib.report import macros as macro_file
from attnknn_lib.report import readme
from attnknn_lib.report.records import read_records

REGISTRY = {m.NAME: m for m in (main, k_sweep, noise, long_tail, efficiency, theory, attention_study)}


def _by_experiment(records: list[dict]) -> dict[str, list[dict]]:
    return {name: [r for r in records if r.get("experiment") == name] for name in REGISTRY}


def report_macros(records: list[dict]) -> dict[str, str]:
    """Every macro the paper can use, from the records of one profile."""
    out: dict[str, str] = {}
    for name, recs in _by_experiment(records).items():
        if recs:
            out.update(REGISTRY[name].macros(recs))
    return out


def readme_block(records: list[dict]) -> str:
    """The README's results block, from the records of one profile."""
    sections = [(REGISTRY[name].README_SECTION, REGISTRY[name].readme_lines(recs))
                for name, recs in _by_experiment(records).items() if recs]
    return readme.results_block(sections, records[0]["profile"] if records else "")


def answer_block(records: list[dict]) -> str:
    """The README's first lines (the answer), from the experiments that give ``answer_lines``."""
    lines = [line for name, recs in _by_experiment(records).items() if recs
             for line in getattr(REGISTRY[name], "answer_lines", lambda r: [])(recs)]
    return "\n".join(lines) if lines else readme.EMPTY


def write_macros(files: list[str | Path], path: str | Path) -> Path:
    """``results/macros.tex`` from result files (all of one profile, else one error and no file)."""
    return macro_file.write_macros(report_macros(read_records(files)), path)


def update_readme(readme_path: str | Path, files: list[str | Path]) -> bool:
    """Regenerate the README's results block from result files; False if it has no markers."""
    records = read_records(files)
    readme.replace_block(readme_path, readme.ANSWER_START, readme.ANSWER_END, answer_block(records))
    return readme.update_readme(readme_path, readme_block(records))

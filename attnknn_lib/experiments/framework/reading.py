"""How a notebook gets its record: it reads the committed one, or it recomputes.

Opened in JupyterLab and run top to bottom with its default parameters, an experiment notebook
*reads*: it renders the record, tables and figures committed under ``results/`` and ``figures/``,
trains nothing, measures nothing and writes nothing. Recomputing is one explicit switch:

* the workflow (``./run_all.sh``, ``./run_all.sh render``) runs every notebook through papermill
  with ``$ATTNKNN_OUT_DIR`` set to the job's staging folder, which holds the records its measure job
  wrote: the notebook *renders*, it reads those records and writes the tables and figures drawn
  from them there (it measures nothing);
* ``recompute = True`` in the parameters cell recomputes interactively and writes under
  ``out_dir`` (default ``scratch/``, ignored by git), so the committed outputs are never overwritten
  unless the user points ``out_dir`` at the repository itself. Before it starts, it says what it
  will run and about how long that took last time (the committed record's wall time and, from the
  last bench, the training of its models).

A parameter that changes what is measured, with ``recompute`` left off, stops the notebook with one
line naming the parameters that differ from the committed record's and the two ways to recompute.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.base.files import read_json
from attnknn_lib.base.paths import REPO_ROOT, Paths
from attnknn_lib.experiments.framework.costs import training_text
from attnknn_lib.experiments.framework.declaration import Experiment

OUT_ENV = "ATTNKNN_OUT_DIR"  # set by the workflow's notebook job (its staging folder)
SOURCE_ENV = "ATTNKNN_SOURCE_ROOT"  # ... and the output root its records come from
SCRATCH = "scratch"  # where an interactive recompute writes by default (relative to the repository)


def workflow_job() -> bool:
    """Whether this kernel runs a notebook job of the workflow (papermill with a staging folder)."""
    return bool(os.environ.get(OUT_ENV))


def committed_path(exp: Experiment, dataset: str | None) -> Path:
    return REPO_ROOT / exp.artifacts.record_file(dataset)


def parameter_differences(committed: dict, cfg) -> dict[str, tuple]:
    """{name: (this value, the committed one)} of the parameters whose values differ from a committed
    record's config; a knob the committed run did not have yet counts as the same when it keeps its
    default (the notebook's check, and ``./run_all.sh status``'s)."""
    mine, default = cfg.to_dict(), type(cfg)().to_dict()
    return {k: (mine.get(k), committed.get(k)) for k in sorted(set(mine) | set(committed))
            if mine.get(k) != committed.get(k) and not (k not in committed and mine.get(k) == default.get(k))}


def estimate(exp: Experiment, dataset: str | None = None) -> str:
    """What a recompute of ``exp`` costs: the models it would train first, each costed by its kind
    (:mod:`~attnknn_lib.experiments.framework.costs`), then the analysis, at the committed record's
    wall time."""
    parts = []
    cfg = exp.Config()
    runs = exp.runs(cfg)
    trains = training_text(runs, Paths.at(REPO_ROOT).artifacts / "models") if runs else ""
    if trains:
        parts.append(trains)
    path = committed_path(exp, dataset or exp.artifacts.primary_dataset(cfg))
    if path.exists():
        seconds = read_json(path).get("provenance", {}).get("wall_seconds")
        if seconds:
            parts.append(f"{'then ' if trains else ''}{seconds / 60:.0f} min of analysis at the committed run")
    if not runs:
        parts.append("it trains no model of the workflow")
    return ", ".join(parts) or "no earlier run to estimate from"


@dataclass(frozen=True)
class Session:
    """One notebook's mode: where it reads or writes (``paths``), whether it recomputes, and whether
    it renders (reads the records under ``paths`` and writes what is drawn from them there)."""

    exp: Experiment
    cfg: object
    paths: Paths
    recompute: bool
    render: bool = False

    def committed(self, dataset: str | None = None) -> dict:
        """The committed record of ``dataset`` (the experiment's primary one by default; rendering:
        the record under ``paths``), after checking that it was measured with this notebook's
        parameters."""
        dataset = dataset or self.exp.artifacts.primary_dataset(self.cfg)
        path = self.paths.root / self.exp.artifacts.record_file(dataset) if self.render \
            else committed_path(self.exp, dataset)
        if not path.exists():
            raise ConfigError(f"no record {self.exp.artifacts.record_file(dataset)} under {path.parents[1]}; "
                              f"recompute: set recompute = True in the parameters cell, or run "
                              f"./run_all.sh --only {self.exp.name}")
        record = read_json(path)
        differ = parameter_differences(record.get("config", {}), self.cfg)
        default = type(self.cfg)().to_dict()
        mine = self.cfg.to_dict()
        chosen = {k: v for k, v in differ.items() if mine.get(k) != default.get(k)}  # set in the notebook
        diff = [f"{k}={a!r} (committed {b!r})" for k, (a, b) in chosen.items()]
        if diff:
            raise ConfigError(f"these parameters differ from the committed record's: {'; '.join(diff)}. They change "
                              f"what is measured, so a recompute is needed: set recompute = True (writes under "
                              f"{SCRATCH}/) or run ./run_all.sh --only {self.exp.name} -p key=value")
        if differ:  # only defaults changed since the record: it is still what the repository holds
            old = "; ".join(f"{k}={b!r} (default now {a!r})" for k, (a, b) in differ.items())
            print(f"note: the committed record was measured with {old}; it is shown as committed. "
                  f"./run_all.sh --only {self.exp.name} brings it up to date", file=sys.stderr)
        return record

    def png(self, key: str, dataset: str | None = None) -> str:
        """The PNG of figure ``key`` to show: the one this notebook drew, or, rendering, the one kept
        as it was drawn before (a figure its record cannot draw again; see ``drawn_from``)."""
        path = self.exp.artifacts.path(self.paths, key, dataset)
        source = os.environ.get(SOURCE_ENV)
        if self.render and source and not path.exists():
            path = Path(source) / self.exp.artifacts.relative(key, dataset)
        return str(path)

    def record(self, compute: Callable[[Paths], dict], dataset: str | None = None,
               write: Callable[[dict, Paths], object] | None = None) -> dict:
        """The record of ``dataset``: ``compute(paths)`` (it measures and writes the record under
        ``paths``) when recomputing, else the committed one (:meth:`committed`). When recomputing or
        rendering, ``write(record, paths)`` then draws the tables and figures under ``paths``."""
        if self.recompute:
            record = compute(self.paths)
        else:
            record = self.committed(dataset)
            if not self.render:
                return record
        if write is not None:
            write(record, self.paths)
        return record

    def run(self, write: Callable[[dict, Paths], object]) -> dict:
        """The experiment's record: measured by its ``run`` (recomputing) or read (reading,
        rendering), then drawn by ``write`` (its views' ``write_outputs``) unless only reading."""
        return self.record(lambda paths: self.exp.run(self.cfg, paths), write=write)


def session(exp: Experiment, cfg, out_dir: str | Path, recompute: bool) -> Session:
    """The notebook's mode (see the module docstring); an interactive recompute says first what it
    will run and about how long it takes."""
    if workflow_job():  # the workflow's notebook job renders the records its measure job wrote
        return Session(exp, cfg, Paths.at(out_dir), False, render=True)
    if not recompute:
        return Session(exp, cfg, Paths.at(REPO_ROOT), False)
    out = Path(out_dir)  # relative to notebooks/, where a notebook's kernel starts, wherever this one did
    paths = Paths.at(out if out.is_absolute() else REPO_ROOT / "notebooks" / out)
    print(f"recomputing {exp.name} into {paths.root} ({estimate(exp)})", file=sys.stderr)
    return Session(exp, cfg, paths, True)

"""The plan of a profile: every training run, every notebook with its parameters and outputs.

``workflow/Snakefile`` reads the plan and turns it into rules; no experiment detail lives there."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from attnknn_lib.base.errors import CorruptFileError
from attnknn_lib.base.files import read_json, write_json
from attnknn_lib.base.paths import REPO_ROOT, Paths
from attnknn_lib.base.provenance import (
    PACKAGE_DIR,
    config_fingerprint,
    imported_files,
    measure_code,
    normalised_fingerprint,
)
from attnknn_lib.experiments.framework import catalog, costs
from attnknn_lib.experiments.framework.declaration import Experiment
from attnknn_lib.experiments.framework.parts import part_dir
from attnknn_lib.training.runs import TrainingRun, merge_runs

NOTEBOOK_DIR = REPO_ROOT / "notebooks"


STATE = ".attnknn"  # bookkeeping under the output root: plan, staging folders, job times


TIMES = f"{STATE}/times"


def notebook_cells(exp: Experiment) -> list[str]:
    """The sources of an experiment notebook's cells, narrative included."""
    nb = json.loads((NOTEBOOK_DIR / exp.notebook).read_text())
    return ["".join(c["source"]) for c in nb["cells"]]


def render_files(exp: Experiment) -> list[Path]:
    """The library files that draw an experiment's outputs from its records: what its package (views
    included) and its notebook's code cells import, directly or not."""
    cells = json.loads((NOTEBOOK_DIR / exp.notebook).read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    return imported_files([f"{PACKAGE_DIR.name}.experiments.{exp.name}"], code)


def file_digest(path: Path) -> str:
    """SHA-256 (16 hex) of a file's bytes: the executed notebook names the records it was drawn from
    by their digests (written by the notebook job, compared by ``./run_all.sh status``)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def render_code(exp: Experiment) -> str:
    """The rendering key of an experiment's tables, figures and executed notebook: its
    :func:`render_files` (normalised: a comment or docstring changes nothing) and its notebook's
    cells (narrative included: it is in the executed notebook and its PDF)."""
    return config_fingerprint({"files": normalised_fingerprint(render_files(exp)), "cells": notebook_cells(exp)})


# What one part job may hold, in GB (peak resident, cpu profile): the local run lets part jobs run side
# by side while their sum fits the machine's memory (attnknn_lib.workflow.cli.part_memory_budget_gb).
# Peaks measured in the final run: the study's parts up to 5.0 GB (its seed parts 4.8-5.0, its
# collapse and long-tail parts 1.9-4.6; 14-22.5 GB before the NLL selection's k was capped), main's
# 0.8-1.6 GB, the k-sweep's 2.9 GB, the regimes' 1.6-1.9 GB.
PART_MEMORY_GB = {"attention_study": 8}
OTHER_PART_MEMORY_GB = 4

# Job order (Snakemake priorities: among the jobs ready, the highest first), so that the longest
# chains start first and short jobs fill the cores at the end: a part that waits on models ends the
# longest chains and runs as soon as they are there; models train longest first (by their kind's
# seconds, :mod:`~attnknn_lib.experiments.framework.costs`); parts that need no model are either long
# (the regimes train their own embedders: started beside the models) or short fillers.
PART_PRIORITY_WITH_MODELS = 1_000_000
MODEL_FREE_PART_PRIORITY = {"headroom_regimes": 900}
FILLER_PRIORITY = 0
FEEDS_PARTS_PRIORITY = 100_000  # added to a model's seconds when some part job waits on it


def part_priority(name: str, needs_models: bool) -> int:
    """Snakemake priority of experiment ``name``'s part jobs (see the constants above)."""
    return PART_PRIORITY_WITH_MODELS if needs_models else MODEL_FREE_PART_PRIORITY.get(name, FILLER_PRIORITY)


def run_priority(run: TrainingRun, feeds_parts: bool) -> int:
    """Snakemake priority of a training job: models that part jobs wait on first (they start the
    longest chains, and the experiments that share them finish early), then the longest first by
    their expected seconds."""
    return round(costs.model_seconds(run) or 0) + (FEEDS_PARTS_PRIORITY if feeds_parts else 0)


def make_plan(resolved: dict[str, dict], paths: Paths, pdf: bool, paper: bool, render_only: bool = False,
              current: frozenset[str] | set[str] = frozenset(), drawn: frozenset[str] | set[str] = frozenset()) -> dict:
    """The plan of ``resolved`` ({experiment: params}); writes the run specs under the artifacts
    folder. ``render_only``: the records are inputs (``./run_all.sh render``): no training, part or
    measure job, only what is drawn from the records. ``current``: the experiments whose records
    this checkout would measure the same (``status``: same); their records are inputs too, so a
    model missing from the cache is not trained for them and nothing they show is measured again.
    ``drawn``: those of them whose outputs this checkout would draw the same (``status``: same): no
    job draws them again, whatever Snakemake remembers of the files."""

    plan = {"repo": str(REPO_ROOT), "root": str(paths.root), "artifacts": str(paths.artifacts.resolve()),
            "python": sys.executable, "pdf": pdf, "paper": paper, "render_only": render_only,
            "readme": paths.root == REPO_ROOT, "experiments": {}, "runs": {}, "priorities": {}}
    every_run = []
    feeds_parts: set[str] = set()  # the models some part job waits on
    for name, params in resolved.items():
        exp = catalog.get(name)
        cfg = exp.Config(**params)
        as_input = render_only or name in current  # the records are read, not measured
        runs = [] if as_input else exp.runs(cfg)
        every_run += runs
        if exp.parts and not as_input:
            feeds_parts.update(r.id for r in runs)
        executed = f"results/notebooks/{Path(exp.notebook).stem}.ipynb"
        measured = exp.artifacts.measured(cfg)
        kept: list[str] = []
        if as_input:  # a figure the records cannot draw again (measured before its data was kept
            # beside them) stays as it was drawn, and so does that data's absence
            kept = exp.artifacts.undrawable(cfg, paths.root)
            measured = [m for m in measured if (paths.root / m).exists()]
        plan["experiments"][name] = {"notebook": exp.notebook, "params": params, "outputs": exp.outputs(cfg),
                                     "measured": measured, "kept": kept,
                                     "rendered": [o for o in exp.outputs(cfg)
                                                  if o not in exp.artifacts.measured(cfg) + kept],
                                     "executed": executed, "runs": list(dict.fromkeys(r.id for r in runs)),
                                     "measure": not as_input, "draw": not (as_input and name in drawn),
                                     # what decides the records, and what decides what is drawn from them
                                     "measure_code": measure_code(name), "render_code": render_code(exp),
                                     # timings in the results: the job runs alone, on every core
                                     "timed": bool(exp.timed),
                                     # parts of its measurement the workflow runs as jobs before the notebook
                                     "parts": exp.parts(cfg) if exp.parts and not as_input else [],
                                     # where they are stored, and the code they are computed by (the
                                     # experiment's, without the notebook's cells: editing those reruns
                                     # only the notebook job)
                                     **({"part_dir": part_dir(cfg, name), "part_code": measure_code(name),
                                         "part_memory_gb": PART_MEMORY_GB.get(name, OTHER_PART_MEMORY_GB),
                                         "part_priority": part_priority(name, bool(runs))}
                                        if exp.parts else {})}
    for rid, run in merge_runs(every_run).items():  # one spec per model, whichever experiments need it
        if not render_only:
            write_run_spec(run, paths.artifacts / "runs")
        plan["runs"][rid] = run.label
        plan["priorities"][rid] = run_priority(run, rid in feeds_parts)
    # the report reads every experiment's views: it reruns when any experiment's code changes
    plan["report_code"] = normalised_fingerprint(imported_files(
        [f"{PACKAGE_DIR.name}.experiments.{n}" for n in catalog.names()] + [f"{PACKAGE_DIR.name}.report.compose"]))
    return plan


def write_run_spec(run: TrainingRun, folder: Path) -> Path:
    """``run``'s spec (:meth:`TrainingRun.write_spec`), unless the spec already there is the same
    model that also keeps its epochs' weights (main's replay run, :func:`merge_runs`): that model
    serves this run too. Without this, ``--only`` an experiment that needs the model but not its epochs
    rewrote the spec, and Snakemake retrained the model from the newer file (seen: main's seed-0
    Attn-KNN, 9 min into ``--only attention_study``)."""
    path = Path(folder) / f"{run.id}.json"
    try:
        there = TrainingRun.from_dict(read_json(path)) if path.exists() else None
    except (CorruptFileError, KeyError, TypeError):  # cut short or from other code: written again
        there = None
    if there is not None and there.id == run.id and merge_runs([run, there])[run.id] is there:
        return path
    return run.write_spec(folder)


def write_plan(plan: dict, paths: Paths) -> Path:
    """``<root>/.attnknn/plan.json``, rewritten only when it changes (file times drive the workflow)."""
    path = paths.root / STATE / "plan.json"
    try:
        same = path.exists() and read_json(path) == plan
    except CorruptFileError:  # a plan cut short by a killed run: write it again
        same = False
    if not same:
        write_json(path, plan)
    return path


def result_files(plan: dict) -> list[Path]:
    """The result JSON files of the plan's experiments, then those of the profile's other
    experiments already on disk from an earlier run of the same profile (so ``--only noise`` keeps
    main's macros); files of another profile are never read. The others come in the catalog's
    order, and an experiment's datasets in its config's order, as a plan of every experiment lists
    them: ``--only`` changes no row order of the README's tables."""

    root = Path(plan["root"])
    files = [root / o for e in plan["experiments"].values() for o in e["outputs"]
             if o.startswith("results/") and o.endswith(".json")]
    profiles = {e["params"].get("profile") for e in plan["experiments"].values()}
    others: list[tuple[tuple, Path]] = []
    for f in sorted((root / "results").glob("*.json")):
        if f in files or f.name == "macros.json":
            continue
        try:
            record = read_json(f)
        except CorruptFileError as err:  # not ours to delete; the report goes on without it
            print(f"warning: skipped {err}", file=sys.stderr)
            continue
        except OSError:
            continue
        if isinstance(record, dict) and record.get("experiment") in catalog.names() and \
                record.get("experiment") not in plan["experiments"] and record.get("profile") in profiles:
            datasets = list((record.get("config") or {}).get("datasets") or [])
            rank = datasets.index(record.get("dataset")) if record.get("dataset") in datasets else 0
            others.append(((catalog.names().index(record["experiment"]), rank, f.name), f))
    return files + [f for _, f in sorted(others, key=lambda item: item[0])]

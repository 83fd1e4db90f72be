"""The commands of the workflow's jobs: measure an experiment, render its notebook, export its PDF, build the paper.

:func:`make_plan` turns a resolved profile into the plan ``workflow/Snakefile`` reads: every
training run (its spec file), every experiment notebook with its parameters, declared outputs and
the runs it needs, and the report steps. No experiment detail lives in the Snakefile.

Job commands (``python -m attnknn_lib.workflow.jobs <command> --plan PLAN``):

* ``part NAME --part P``: one part of an experiment's measurement into the shared artifacts folder
  (:mod:`attnknn_lib.experiments.framework.parts`), before its notebook job, beside the other jobs.
* ``measure NAME``: the experiment's measurement (training runs read from the model cache, parts
  from their jobs) into a staging folder; its records are moved into place when all are there.
* ``notebook NAME``: renders: papermill runs the notebook in a staging folder holding a copy of
  its records (progress bars off inside the kernel); it reads them and writes the tables and figures;
  when every declared output is there they are moved into place, so a failed or interrupted job
  leaves the previous outputs untouched. The executed notebook is written without papermill's
  times (:func:`strip_timings`): two renders of the same records are the same bytes.
* ``pdf NOTEBOOK``: nbconvert to PDF next to the executed notebook (atomically).
* ``paper``: latexmk on ``paper/main.tex``.

The report job (the macros and the README's blocks) is :mod:`attnknn_lib.workflow.report_job`: it
needs every experiment's views, which import torch, and this module imports neither, so a notebook,
PDF or paper job starts in about half a second instead of 3.6 s (the smoke workflow runs 19 of them).

And one for developers: ``parameters`` rewrites every committed notebook's parameters cell from
its config class (after a knob is added or changed; a test checks that they agree).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from attnknn_lib.base.errors import AttnKNNError
from attnknn_lib.base.files import read_json, write_text
from attnknn_lib.base.knobs import parameters_cell
from attnknn_lib.base.paths import REPO_ROOT, Paths
from attnknn_lib.base.timing import record_time
from attnknn_lib.experiments.framework import catalog
from attnknn_lib.workflow.plan import NOTEBOOK_DIR, STATE, TIMES, file_digest

# ----------------------------------------------------------------------------- job commands

def write_parameter_cells(repo: Path = REPO_ROOT) -> list[Path]:
    """Regenerate the ``parameters`` cell of every experiment notebook under ``repo/notebooks``."""
    changed = []
    for exp in catalog.experiments().values():
        path = repo / "notebooks" / exp.notebook
        nb = json.loads(path.read_text())
        cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
        source = parameters_cell(exp.Config).splitlines(keepends=True)
        if cell["source"] != source:
            cell["source"] = source
            write_text(path, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
            changed.append(path)
    return changed


def _staging(plan: dict, name: str, job: str) -> Path:
    """An empty staging folder of one job (``<root>/.attnknn/staging/<job>-<name>``)."""
    staging = Path(plan["root"]) / STATE / "staging" / f"{job}-{name}"
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "results" / "notebooks").mkdir(parents=True)
    return staging


def _move_in(staging: Path, root: Path, files: list[str]) -> None:
    """Every file is there (checked before): now move them into place, each rename atomic."""
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / rel, root / rel)
    shutil.rmtree(staging, ignore_errors=True)


def run_measure(plan: dict, name: str) -> None:
    """Measure one experiment into staging (its ``run``: training runs from the model cache, parts
    from their jobs), then move its records into place; tables and figures are the notebook job's."""
    exp = plan["experiments"][name]
    root = Path(plan["root"])
    staging = _staging(plan, name, "measure")
    os.environ.update({"ATTNKNN_ARTIFACTS": plan["artifacts"], "ATTNKNN_PROGRESS": "off"})
    experiment = catalog.get(name)
    experiment.run(experiment.Config(**exp["params"]), Paths(staging))
    check_outputs(staging, exp["measured"], f"measurement of {name}", name)
    _move_in(staging, root, exp["measured"])


def run_notebook(plan: dict, name: str) -> None:
    """Render one experiment: its notebook runs in a staging folder that holds a copy of its records,
    reads them and writes the tables and figures drawn from them there (it measures nothing); when
    every declared output is there they are moved into place, so a failed or interrupted job leaves
    the previous outputs untouched. A figure the records cannot draw again (the plan's ``kept``:
    measured before the data it is drawn from was kept) is left as it was, and the job says so."""
    import papermill as pm

    exp = plan["experiments"][name]
    root = Path(plan["root"])
    staging = _staging(plan, name, "notebook")
    for rel in exp["measured"]:
        shutil.copy2(root / rel, staging / rel)
    for rel in exp["kept"]:
        print(f"[notebook] {name}: {rel} kept as it was drawn (its record was measured before the data it is "
              f"drawn from was kept beside it; the next measurement keeps it)", file=sys.stderr)
    os.environ["ATTNKNN_SOURCE_ROOT"] = str(root)  # where the notebook finds a kept figure to show
    os.environ.update({"ATTNKNN_OUT_DIR": str(staging), "ATTNKNN_ARTIFACTS": plan["artifacts"],
                       "ATTNKNN_PROGRESS": "off"})  # inherited by the kernel
    executed = staging / exp["executed"]
    try:
        pm.execute_notebook(str(NOTEBOOK_DIR / exp["notebook"]), str(executed), parameters=exp["params"],
                            cwd=str(NOTEBOOK_DIR), kernel_name="python3", progress_bar=sys.stderr.isatty())
    except pm.PapermillExecutionError as err:
        raise AttnKNNError(f"notebook {exp['notebook']} failed in cell {err.exec_count}: {err.ename}: "
                           f"{err.evalue.splitlines()[0] if err.evalue else ''} (executed copy: "
                           f"{executed})") from None
    nb = json.loads(executed.read_text())  # papermill records absolute paths of this machine
    nb["metadata"].get("papermill", {}).update({"input_path": f"notebooks/{exp['notebook']}",
                                                "output_path": exp["executed"]})
    for cell in nb["cells"]:  # papermill names its injected cell at random: one name, so a redraw keeps it
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            cell["id"] = "injected-parameters"
    nb["metadata"]["attnknn"] = {"render_code": exp["render_code"],  # what status compares with
                                 "records": {rel: file_digest(staging / rel) for rel in exp["measured"]}}
    executed.write_text(json.dumps(strip_timings(nb), indent=1) + "\n")
    rendered = exp["rendered"] + [exp["executed"]]
    check_outputs(staging, rendered + exp["measured"], f"notebook {exp['notebook']}", name)
    _move_in(staging, root, rendered)


TIMING_FIELDS = ("start_time", "end_time", "duration")  # papermill's, in the notebook's and each cell's metadata


def strip_timings(nb: dict) -> dict:
    """An executed notebook without what only says when it ran: papermill's start and end times and
    durations (the notebook's and each cell's) and each cell's ``execution`` timestamps (the kernel's
    iopub messages), so two renders of the same records are the same bytes. Everything else stays
    (papermill's status and parameters, the ``attnknn`` keys). Changes ``nb`` in place and returns it."""
    for meta in [nb.get("metadata", {})] + [cell.get("metadata", {}) for cell in nb.get("cells", [])]:
        for field in TIMING_FIELDS:
            meta.get("papermill", {}).pop(field, None)
        meta.pop("execution", None)
    return nb


def run_part(plan: dict, name: str, part: str) -> None:
    """One part of an experiment's measurement (:mod:`attnknn_lib.experiments.framework.parts`), stored in the
    shared artifacts folder for the notebook job to read."""
    exp = catalog.get(name)
    if part not in plan["experiments"][name].get("parts", []):
        raise AttnKNNError(f"part={part!r} is not a part of {name}; its parts: "
                           f"{', '.join(plan['experiments'][name].get('parts', [])) or 'none'}")
    cfg = exp.Config(**plan["experiments"][name]["params"])
    os.environ.update({"ATTNKNN_ARTIFACTS": plan["artifacts"], "ATTNKNN_PROGRESS": "off"})
    exp.run_part(cfg, Paths(Path(plan["root"])), part)


def check_outputs(folder: Path, declared: list[str], job: str, experiment: str) -> None:
    """A job's outputs are what its experiment declares: one line naming a declared file it did not
    write, or a file it wrote that is not declared (the job's outputs then stay in staging)."""
    written = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")}
    missing = sorted(set(declared) - written)
    extra = sorted(written - set(declared))
    where = f"(declared in attnknn_lib/experiments/{experiment}/config.py, ARTIFACTS)"
    if missing:
        raise AttnKNNError(f"{job} did not write {', '.join(missing)} {where}")
    if extra:
        raise AttnKNNError(f"{job} wrote {', '.join(extra)}, which it does not declare {where}")


PDF_TEMPLATES = Path(__file__).parent / "pdf_template"  # nbconvert's LaTeX template at 10 pt, narrower margins


def source_date_env(records: list[Path]) -> dict[str, str]:
    """The environment of a PDF build whose dates come from the records it shows: SOURCE_DATE_EPOCH
    is the latest start time among ``records`` (XeTeX then writes it as the creation date and derives
    the file id from it), so a rebuild from the same records gives the same bytes."""
    from datetime import datetime

    starts = []
    for path in records:
        started = (read_json(path).get("provenance") or {}).get("started") if path.exists() else None
        if started:
            starts.append(int(datetime.fromisoformat(started).timestamp()))
    env = dict(os.environ)
    if starts:
        env.update(SOURCE_DATE_EPOCH=str(max(starts)), FORCE_SOURCE_DATE="1")
    return env


def export_pdf(notebook: Path) -> Path:
    """``jupyter nbconvert --to pdf`` into a temporary folder, then renamed next to the notebook;
    dated by the records the executed notebook read (its ``attnknn`` metadata, :func:`source_date_env`)."""
    notebook = Path(notebook)
    read = (json.loads(notebook.read_text()).get("metadata") or {}).get("attnknn") or {}
    root = notebook.resolve().parents[2]  # <root>/results/notebooks/<name>.ipynb
    records = [root / rel for rel in read.get("records", {}) if rel.endswith(".json")]
    with tempfile.TemporaryDirectory(dir=notebook.parent, prefix=".pdf-") as tmp:
        # the PDF shows the run's parameters once, as the setup cell's table (parameters_markdown):
        # neither the defaults cell nor papermill's injected copy of it
        # two XeLaTeX passes, not nbconvert's three: the second completes the PDF's bookmarks, a third
        # changed nothing (same pages, text and bookmarks, measured on 01_main) and cost 1.3 s a notebook
        cmd = [sys.executable, "-m", "nbconvert", "--to", "pdf", "--log-level", "WARN", str(notebook),
               "--PDFExporter.latex_count=2",
               "--output-dir", tmp, f"--TemplateExporter.extra_template_basedirs={PDF_TEMPLATES}",
               "--template", "attnknn", "--TagRemovePreprocessor.enabled=True",
               "--TagRemovePreprocessor.remove_cell_tags=parameters",
               "--TagRemovePreprocessor.remove_cell_tags=injected-parameters"]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=source_date_env(records))
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise AttnKNNError(f"PDF export of {notebook.name} failed: {tail[0]}")
        os.replace(Path(tmp) / notebook.with_suffix(".pdf").name, notebook.with_suffix(".pdf"))
    return notebook.with_suffix(".pdf")


def build_paper(plan: dict) -> Path:
    """Build paper/main.tex with latexmk (XeLaTeX) where the results are (sources copied when --out)."""
    paths = Paths(Path(plan["root"]))
    src = Path(plan["repo"]) / "paper"
    if paths.root != Path(plan["repo"]):
        paths.paper.mkdir(parents=True, exist_ok=True)
        for f in [*src.glob("*.tex"), *src.glob("*.bib")]:
            shutil.copy2(f, paths.paper / f.name)
    proc = subprocess.run(["latexmk", "-xelatex", "-interaction=nonstopmode", "-halt-on-error", "main.tex"],
                          cwd=paths.paper, capture_output=True, text=True,
                          env=source_date_env(sorted(paths.results.glob("*.json"))))
    if proc.returncode != 0:
        log = paths.paper / "main.log"
        err = [ln for ln in log.read_text(errors="replace").splitlines() if ln.startswith("!")] if log.exists() else []
        raise AttnKNNError(f"paper build failed: {(err or ['see ' + str(log)])[0]}")
    return paths.paper / "main.pdf"


def _peak_memory_gb() -> float:
    """The larger of this job's peak resident memory and its largest finished child's (a notebook
    job's kernel), in GB (Linux reports kilobytes, macOS bytes)."""
    import resource

    peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return peak / (2 ** 30 if sys.platform == "darwin" else 2 ** 20)


def run_job(plan: dict | None, command: str, name: str, work: Callable[[], object]) -> int:
    """Run one job's ``work``: an :class:`AttnKNNError` ends it in one line and exit code 1; with a
    plan, its wall time and peak memory are recorded for ./run_all.sh bench and said in one line."""
    t0 = time.perf_counter()
    try:
        work()
    except AttnKNNError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if plan is not None:
        seconds, peak = time.perf_counter() - t0, _peak_memory_gb()
        record_time(Path(plan["root"]) / TIMES, command, name, seconds, peak_memory_gb=round(peak, 2))
        # one line in the workflow's log per job: a job near the machine's memory says so before it is killed
        print(f"[{command}] {name}: {seconds:.0f} s, peak memory {peak:.1f} GB", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m attnknn_lib.workflow.jobs", description="one job of the workflow "
                                 "(the report job: python -m attnknn_lib.workflow.report_job)")
    ap.add_argument("command", choices=("measure", "notebook", "part", "pdf", "paper", "parameters"))
    ap.add_argument("target", nargs="?", help="experiment name (measure, notebook, part) or executed notebook (pdf)")
    ap.add_argument("--part", help="which part of the experiment's measurement (part)")
    ap.add_argument("--plan", required=False, help="plan.json written by ./run_all.sh")
    args = ap.parse_args(argv)
    try:
        plan = read_json(args.plan) if args.plan else None
    except AttnKNNError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if args.command == "parameters":
        for path in write_parameter_cells():
            print(f"rewrote the parameters cell of {path}")
        return 0
    work = {"measure": lambda: run_measure(plan, args.target),
            "notebook": lambda: run_notebook(plan, args.target),
            "part": lambda: run_part(plan, args.target, args.part),
            "pdf": lambda: export_pdf(Path(args.target)),
            "paper": lambda: build_paper(plan)}[args.command]
    name = (args.target if args.command in ("measure", "notebook") else f"{args.target}-{args.part}" if args.command == "part"
            else Path(args.target).stem if args.target else args.command)
    return run_job(plan, args.command, name, work)


if __name__ == "__main__":
    raise SystemExit(main())

"""``./run_all.sh status``: what is up to date, stale or missing, and what a run would cost. It only
reads: no plan, no run spec, no Snakemake state is written.

One summary first: the commit the outputs under the output root come from, per experiment whether
this checkout's code and parameters would produce them unchanged, how many of its models are missing
from the model cache, and the job time a run would take, from the last bench
(``results/benchmarks.json``). Then, with ``-v``, one line per output file with its state and reason
(missing; stale: code, parameters or a model changed since it was written).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from attnknn_lib.base.errors import CorruptFileError
from attnknn_lib.base.files import read_json
from attnknn_lib.base.paths import REPO_ROOT, Paths
from attnknn_lib.base.provenance import PACKAGE_DIR, experiment_code, imported_files
from attnknn_lib.experiments import catalog
from attnknn_lib.experiments.reading import parameter_differences
from attnknn_lib.workflow.plan import NOTEBOOK_DIR

BENCH = "results/benchmarks.json"


def _record(path: Path) -> dict | None:
    try:
        return read_json(path) if path.exists() else None
    except CorruptFileError:
        return None


def _code_files(name: str, notebook: str) -> list[str]:
    """The library files and the notebook behind an experiment's outputs, relative to the repository."""
    import json

    nb = json.loads((NOTEBOOK_DIR / notebook).read_text())
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    files = imported_files([f"{PACKAGE_DIR.name}.experiments.{name}"], cells)
    return [str(p.relative_to(REPO_ROOT)) for p in files] + [f"notebooks/{notebook}"]


def changed_since(commit: str, files: list[str]) -> list[str] | None:
    """The files among ``files`` that differ between ``commit`` and this checkout (None: git cannot say)."""
    out = _git("diff", "--name-only", commit, "--", *files)
    return None if out is None else out.split()


def _git(*args: str) -> str | None:
    try:
        proc = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def code_commit(record_file: Path, record: dict) -> str | None:
    """The commit whose code a record stands for. A record committed in the repository (as it is on
    a fresh clone) stands for the code of the commit that last wrote it: outputs are committed with the
    code that made them, which a record made from uncommitted code cannot name itself. A record
    outside the repository, or changed since, names the commit it was made at, if that was clean.
    None when neither can be told."""
    try:
        rel = record_file.resolve().relative_to(REPO_ROOT.resolve())
    except ValueError:
        rel = None
    if rel is not None and _git("status", "--porcelain", "--", str(rel)) == "":
        last = _git("log", "-1", "--format=%H", "--", str(rel))
        if last:
            return last
    prov = record.get("provenance", {})
    return prov.get("commit") if prov.get("dirty") is False and prov.get("commit") not in (None, "unknown") else None


def _bench() -> dict:
    path = REPO_ROOT / BENCH
    return (_record(path) or {}).get("cpu_run", {}).get("stages", {})


def experiment_state(name: str, params: dict, paths: Paths) -> dict:
    """One experiment's state: its outputs present and missing, the commit of its record, the code
    files and parameters changed since, its models missing from the cache, and the bench's times."""
    exp = catalog.get(name)
    cfg = exp.Config(**params)
    outputs = exp.outputs(cfg) + [f"results/notebooks/{Path(exp.notebook).stem}.ipynb"]
    missing = [o for o in outputs if not (paths.root / o).exists()]
    pairs = [(f, r) for o in outputs if o.endswith(".json") and (r := _record(f := paths.root / o))]
    records = [r for _, r in pairs]
    code: list[str] | None = []
    commit = None
    for f, r in pairs:  # every record of the experiment (one per dataset) must stand for this code
        commit = code_commit(f, r)
        stored = r.get("provenance", {}).get("experiment_code")
        if stored is not None:  # the record names its package's code fingerprint; the notebook and what only
            # the notebook imports (the reading session) by git
            here = [] if stored == experiment_code(name) else [f"attnknn_lib/experiments/{name} and its imports"]
            package = {str(p.relative_to(REPO_ROOT)) for p in imported_files([f"{PACKAGE_DIR.name}.experiments.{name}"])}
            own = [f for f in _code_files(name, exp.notebook) if f not in package]
            notebook = changed_since(commit, own) if commit else []
            found = here + (notebook or [])
        else:
            found = changed_since(commit, _code_files(name, exp.notebook)) if commit else None
        code = None if found is None or code is None else sorted(set(code) | set(found))
    if not pairs:
        code = None
    runs = {r.id: r for r in exp.runs(cfg)}
    no_model = [rid for rid in runs if not (paths.artifacts / "models" / rid / "train.json").exists()]
    stage = _bench().get(f"notebook {name}", {})
    return {"name": name, "outputs": outputs, "missing": missing, "commit": commit, "code_changed": code,
            "parameters_changed": sorted({p for r in records for p in parameter_differences(r.get("config", {}), cfg)}),
            "models": len(runs), "models_missing": no_model, "notebook_seconds": stage.get("seconds"),
            # the part jobs the notebook reads (the bench's record of the last run; a part it lacks counts 0)
            "parts_seconds": sum(v or 0.0 for v in (stage.get("parts") or {}).values()),
            "record_seconds": sum(r.get("provenance", {}).get("wall_seconds") or 0.0 for r in records) or None}


def _minutes(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds / 60:.0f} min"


def _rows(resolved: dict[str, dict], paths: Paths) -> tuple[list[dict], float | None]:
    """Every experiment's state with its verdict (``up_to_date``) and cost (job seconds a run would
    take: its notebook job, its part jobs and the models it still needs, each model counted once), and
    the total."""
    states = [experiment_state(name, params, paths) for name, params in resolved.items()]
    training = _bench().get("training", {})
    per_model = training["seconds"] / training["jobs"] if training.get("jobs") else 0.0
    seen: set[str] = set()
    total: float | None = 0.0  # None: some cost is unknown (no bench entry and no record)
    for s in states:
        s["code"] = "?" if s["code_changed"] is None else ("changed" if s["code_changed"] else "same")
        s["params"] = "changed" if s["parameters_changed"] else "same"
        s["up_to_date"] = not s["missing"] and s["code"] == "same" and s["params"] == "same" and not s["models_missing"]
        new = [m for m in s["models_missing"] if m not in seen]
        seen.update(s["models_missing"])
        notebook = s["notebook_seconds"] or s["record_seconds"]
        s["cost"] = 0.0 if s["up_to_date"] else None if notebook is None else \
            notebook + s["parts_seconds"] + len(new) * per_model
        total = None if total is None or s["cost"] is None else total + s["cost"]
    return states, total


def estimate_line(resolved: dict[str, dict], paths: Paths) -> str:
    """One line for the start of a run: what it will redo and about how long, from the last bench."""
    states, total = _rows(resolved, paths)
    stale = [s["name"] for s in states if not s["up_to_date"]]
    if not stale:
        return "estimate: everything is up to date; this run only checks it"
    return (f"estimate: {', '.join(stale)} to redo, about {_minutes(total)} of job time by the last bench "
            f"(two jobs at once on two cores)")


def summary(resolved: dict[str, dict], paths: Paths, verbose: bool = False) -> str:
    """The status text (see the module docstring)."""
    states, total = _rows(resolved, paths)
    commits = sorted({s["commit"][:7] for s in states if s["commit"]})
    head = _git("rev-parse", "--short", "HEAD") or "unknown"
    lines = [f"Outputs under {paths.root}: their code is that of commit {', '.join(commits) or '(none known)'}; "
             f"this checkout is at {head}.", "",
             f"{'experiment':18s} {'outputs':9s} {'code since':11s} {'parameters':11s} {'models missing':15s} "
             f"estimate (job time)"]
    for s in states:
        outputs = "present" if not s["missing"] else f"{len(s['missing'])} missing"
        lines.append(f"{s['name']:18s} {outputs:9s} {s['code']:11s} {s['params']:11s} "
                     f"{len(s['models_missing']):>3d} of {s['models']:<8d} "
                     f"{'up to date' if s['up_to_date'] else _minutes(s['cost'])}")
    lines.append("")
    stale = [s["name"] for s in states if not s["up_to_date"]]
    if stale:
        lines.append(f"To bring {', '.join(stale)} up to date: ./run_all.sh" +
                     ("" if len(stale) == len(states) else f" --only {','.join(stale)}") +
                     f" (about {_minutes(total)} of job time by the last bench; the workflow runs two jobs at once "
                     f"on two cores).")
    else:
        lines.append("Everything is up to date: ./run_all.sh would only check it.")
    lines.append("'code since': the library files and notebook behind an experiment differ from the commit of its "
                 "record; 'models missing': not in the model cache (artifacts/models), trained by the next run.")
    if verbose:
        lines.append("")
        for s in states:
            reasons = (["code: " + ", ".join(s["code_changed"])] if s["code_changed"] else []) + \
                (["parameters: " + ", ".join(s["parameters_changed"])] if s["parameters_changed"] else [])
            for o in s["outputs"]:
                state = "missing" if o in s["missing"] else "stale" if reasons else "up to date"
                lines.append(f"{state:10s}  {o}" + (f"  ({'; '.join(reasons)})" if state == "stale" else ""))
            for m in s["models_missing"]:
                lines.append(f"{'missing':10s}  artifacts/models/{m}  (model of {s['name']})")
    else:
        lines.append("./run_all.sh status -v lists every output file with its state and reason.")
    return "\n".join(lines)

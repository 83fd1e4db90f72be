"""``./run_all.sh status``: per experiment, whether its records must be measured again (and about
how long that takes) or only its tables, figures and notebook drawn again (seconds). It only reads:
no plan, no run spec, no Snakemake state is written.

Records: *re-measure* when this checkout's measurement key (:func:`~attnknn_lib.base.provenance.measure_code`)
or parameters differ from the ones the record stores. Outputs: *re-render* when the rendering key
(:func:`~attnknn_lib.workflow.plan.render_code`) or a record differs from what the executed notebook
says it was drawn with. With ``-v``, one line per output file with its state and reason.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

from attnknn_lib.base.errors import ConfigError, CorruptFileError
from attnknn_lib.base.files import read_json
from attnknn_lib.base.paths import REPO_ROOT, Paths
from attnknn_lib.base.provenance import measure_code, version_differences
from attnknn_lib.experiments.framework import catalog
from attnknn_lib.experiments.framework.costs import model_seconds
from attnknn_lib.experiments.framework.reading import parameter_differences
from attnknn_lib.workflow.plan import file_digest, render_code
from attnknn_lib.workflow.profiles import parse_overrides

BENCH = "results/benchmarks.json"


@dataclass(frozen=True)
class Invocation:
    """What the user typed that decides what a run does: the experiments selected (``selected``, of
    which ``only`` is what ``--only`` named, empty without it), every ``-p``, the profile and the
    output folder (None: the repository). Every command status or an error suggests is built from it
    by :func:`command`, so following a suggestion runs the same selection with the same parameters
    into the same folder, never the default run of all nine experiments over the committed outputs."""
    selected: tuple[str, ...]
    only: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()
    profile: str = "cpu"
    out: Path | None = None


def command(inv: Invocation, *words: str, only: list[str] | None = None) -> str:
    """The ``./run_all.sh`` command, shell-quoted, that runs ``words`` (a subcommand and its flags) on
    ``only`` (default: the invocation's selection) with the invocation's profile, output folder and
    every ``-p`` that applies to those experiments (one that applies to none would stop the command
    with an error, and changes nothing they do). ``--only`` is left out only where it would name what
    the run selects without it."""
    names = list(inv.selected if only is None else only)
    line = ["./run_all.sh", *words]
    line += ["--profile", inv.profile] if inv.profile != "cpu" else []
    line += ["--out", str(inv.out)] if inv.out is not None else []
    line += [] if not inv.only and names == list(inv.selected) else ["--only", ",".join(names)]
    for item in inv.overrides:
        try:
            parse_overrides([item], names)
        except ConfigError:  # an experiment or parameter none of ``names`` has
            continue
        line += ["-p", item]
    return shlex.join(line)


def _record(path: Path) -> dict | None:
    try:
        return read_json(path) if path.exists() else None
    except CorruptFileError:
        return None


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
    outside the repository, or changed since, names the commit it was made at, if that was clean; so
    does a re-keyed record (:mod:`attnknn_lib.tooling.rekey`), whose last commit only re-keyed it.
    None when neither can be told."""
    prov = record.get("provenance", {})
    clean = prov.get("commit") if prov.get("dirty") is False and prov.get("commit") not in (None, "unknown") else None
    if prov.get("rekeyed") and clean:
        return clean
    try:
        rel = record_file.resolve().relative_to(REPO_ROOT.resolve())
    except ValueError:
        rel = None
    if rel is not None and _git("status", "--porcelain", "--", str(rel)) == "":
        last = _git("log", "-1", "--format=%H", "--", str(rel))
        if last:
            return last
    return clean


def _bench() -> dict:
    path = REPO_ROOT / BENCH
    return (_record(path) or {}).get("cpu_run", {}).get("stages", {})


def measure_state(name: str, pairs: list[tuple[Path, dict]], cfg) -> list[str]:
    """Why an experiment's records would be measured again (empty: they are what this checkout
    measures): a record missing, its measurement key from before keys were stored, or different
    from this checkout's (code), or other parameters."""
    exp = catalog.get(name)
    expected = exp.artifacts.files(cfg, "record")
    if len(pairs) < len(expected):
        return ["record missing"]
    here = measure_code(name)
    reasons = []
    for _, r in pairs:
        stored = r.get("provenance", {}).get("measure_code")
        if stored is None:
            reasons.append("the record stores no measurement key (measured before keys covered only the "
                           "measurement code)")
        elif stored != here:
            reasons.append("measurement code or the pinned computing packages changed since the record")
        if parameter_differences(r.get("config", {}), cfg):
            reasons.append("parameters changed")
    return sorted(set(reasons))


def render_state(exp, rendered: list[str], executed: str, pairs: list[tuple[Path, dict]], paths: Paths) -> list[str]:
    """Why an experiment's tables, figures and executed notebook would be drawn again (empty: they
    are what this checkout draws from these records)."""
    if any(not (paths.root / o).exists() for o in rendered + [executed]):
        return ["an output is missing"]
    try:
        meta = json.loads((paths.root / executed).read_text()).get("metadata", {}).get("attnknn", {})
    except (OSError, ValueError):
        meta = {}
    reasons = []
    if meta.get("render_code") is None:
        reasons.append("drawn before rendering keys were stored")
    elif meta["render_code"] != render_code(exp):
        reasons.append("rendering code or notebook changed")
    drawn = meta.get("records", {})
    if meta and any(drawn.get(str(f.relative_to(paths.root))) != file_digest(f) for f, _ in pairs):
        reasons.append("a record changed since")
    return reasons


def experiment_state(name: str, params: dict, paths: Paths) -> dict:
    """One experiment's state: its outputs missing, the commit of its records, why its records
    would be measured again and why its outputs would be drawn again, its models missing from the
    cache, and the bench's times."""
    exp = catalog.get(name)
    cfg = exp.Config(**params)
    executed = f"results/notebooks/{Path(exp.notebook).stem}.ipynb"
    outputs = exp.outputs(cfg) + [executed]
    records = exp.artifacts.files(cfg, "record")
    missing = [o for o in outputs if not (paths.root / o).exists()]
    pairs = [(f, r) for o in records if (r := _record(f := paths.root / o))]
    commit = code_commit(*pairs[0]) if pairs else None
    measure = measure_state(name, pairs, cfg)
    measured = exp.artifacts.measured(cfg)  # records and the data files measured beside them
    render = render_state(exp, [o for o in exp.outputs(cfg) if o not in measured], executed, pairs, paths)
    runs = {r.id: r for r in exp.runs(cfg)}
    no_model = [rid for rid in runs if not (paths.artifacts / "models" / rid / "train.json").exists()]
    stage = _bench().get(f"notebook {name}", {})
    return {"name": name, "outputs": outputs, "missing": missing, "commit": commit,
            "measure_reasons": measure, "render_reasons": render,
            # the computing packages a record was measured under at other versions than the installed ones:
            # the key covers the pins, so this only warns that this environment would not repeat the bits
            "versions": sorted({d for _, r in pairs for d in version_differences(
                r.get("provenance", {}).get("packages") or {})}),
            "models": len(runs), "models_missing": no_model, "notebook_seconds": stage.get("seconds"),
            # each missing model costed by its own kind (dataset, model, epochs), None where no run says
            "model_seconds": {rid: model_seconds(runs[rid]) for rid in no_model},
            # the part jobs the notebook reads: the bench's record of the last run (a part it lacks counts
            # 0), else what the records say their parts took
            "parts_seconds": sum(v or 0.0 for v in (stage.get("parts") or {}).values()) or sum(
                ((r.get("results") or {}).get("timings") or {}).get("parts_seconds") or 0.0 for _, r in pairs),
            "record_seconds": sum(r.get("provenance", {}).get("wall_seconds") or 0.0 for _, r in pairs) or None}


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
        s["measure"] = "re-measure" if s["measure_reasons"] else "same"
        s["render"] = "re-render" if s["render_reasons"] else "same"  # drawn from these records by this code
        s["up_to_date"] = s["measure"] == "same" and s["render"] == "same"
        new = [m for m in s["models_missing"] if m not in seen] if s["measure"] != "same" else []
        seen.update(new)
        notebook = s["notebook_seconds"] or s["record_seconds"]
        models = sum(per_model if s["model_seconds"].get(m) is None else s["model_seconds"][m] for m in new)
        s["cost"] = 0.0 if s["measure"] == "same" else None if notebook is None else \
            notebook + s["parts_seconds"] + models
        total = None if total is None or s["cost"] is None else total + s["cost"]
    return states, total


def _estimate(s: dict) -> str:
    if s["measure"] != "same":
        return f"re-measure: {_minutes(s['cost'])}"
    return "re-render: seconds" if s["render"] != "same" else "nothing to do"


def estimate_line(resolved: dict[str, dict], paths: Paths) -> str:
    """One line for the start of a run: what it will redo and about how long, from the last bench."""
    states, total = _rows(resolved, paths)
    measure = [s["name"] for s in states if s["measure"] != "same"]
    render = [s["name"] for s in states if s["measure"] == "same" and s["render"] != "same"]
    if not measure and not render:
        return "estimate: everything is up to date; this run only checks it"
    said = [f"{', '.join(measure)} to measure, about {_minutes(total)} of job time by the last bench"] if measure else []
    said += [f"{', '.join(render)} to render (seconds each)"] if render else []
    return "estimate: " + "; ".join(said)


def summary(resolved: dict[str, dict], paths: Paths, verbose: bool = False, inv: Invocation | None = None) -> str:
    """The status text (see the module docstring); its commands are ``inv``'s (default: the profile
    of ``resolved``, no ``-p``, no ``--only``)."""
    inv = inv or Invocation(tuple(resolved), profile=next(iter(resolved.values()), {}).get("profile", "cpu"),
                            out=None if paths.root == REPO_ROOT else paths.root)
    states, total = _rows(resolved, paths)
    commits = sorted({s["commit"][:7] for s in states if s["commit"]})
    head = _git("rev-parse", "--short", "HEAD") or "unknown"
    lines = [f"Records under {paths.root} were measured at commit {', '.join(commits) or '(none known)'}; "
             f"this checkout is at {head}.", "",
             f"{'experiment':18s} {'records':11s} {'outputs':10s} {'models missing':15s} to do"]
    for s in states:
        lines.append(f"{s['name']:18s} {s['measure']:11s} {s['render']:10s} "
                     f"{len(s['models_missing']):>3d} of {s['models']:<8d} {_estimate(s)}")
    lines.append("")
    reasons: dict[str, list[str]] = {}
    for s in states:
        for why in s["measure_reasons"]:
            reasons.setdefault(why, []).append(s["name"])
    for why, names in reasons.items():  # said plainly: why a record would be measured again
        lines.append(f"Records of {', '.join(names)}: {why}.")
    for s in states:
        if s["versions"]:
            lines.append(f"Records of {s['name']} were measured under other package versions than those installed "
                         f"here: {', '.join(s['versions'])}; the pins in pyproject.toml are what they were measured "
                         f"with, and a run here may differ in the last digits.")
    measure = [s["name"] for s in states if s["measure"] != "same"]
    render = [s["name"] for s in states if s["measure"] == "same" and s["render"] != "same"]
    if measure:
        lines.append(f"To measure {', '.join(measure)} again: {command(inv, only=measure)}"
                     f" (about {_minutes(total)} of job time by the last bench, models included).")
    if render:
        lines.append(f"To draw the outputs of {', '.join(render)} again from their records: "
                     f"{command(inv, 'render', only=render)} (minutes, no model).")
    if not measure and not render:
        lines.append(f"Everything is up to date: {command(inv)} would only check it.")
    for exp in catalog.experiments().values():
        if exp.awaiting and exp.name not in resolved:
            lines.append(f"Declared, awaiting its first run (not in the default run): {exp.name}: {exp.awaiting}; "
                         f"to measure it: {command(inv, only=[exp.name])}.")
    lines.append("records: re-measure when this checkout would measure them differently (measurement code or "
                 "parameters; comments, docstrings and views never count); outputs: re-render when this checkout "
                 "would draw the tables, figures or notebook differently from these records (a record measured "
                 "again is drawn again); models missing: not in the model cache (artifacts/models), trained only "
                 "when a record is measured.")
    if verbose:
        lines.append("")
        for s in states:
            for o in s["outputs"]:
                reasons = s["measure_reasons"] if o.endswith(".json") and o.startswith("results/") and \
                    "notebooks/" not in o else s["render_reasons"] or s["measure_reasons"]
                state = "missing" if o in s["missing"] else "stale" if reasons else "up to date"
                lines.append(f"{state:10s}  {o}" + (f"  ({'; '.join(reasons)})" if state == "stale" else ""))
            for m in s["models_missing"]:
                lines.append(f"{'missing':10s}  artifacts/models/{m}  (model of {s['name']})")
    else:
        lines.append(f"Every output file with its state and reason: {command(inv, 'status', '-v')}")
    return "\n".join(_wrapped(line) for line in lines)


WIDTH = 100  # a terminal's columns: status lines are folded to fit


def _wrapped(line: str) -> str:
    """``line`` folded at :data:`WIDTH` columns, continuation lines indented (a long path stays whole)."""
    if len(line) <= WIDTH:
        return line
    return textwrap.fill(line, WIDTH, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)

"""The command line behind ``./run_all.sh``: validate, plan, then run the Snakemake workflow.

    ./run_all.sh [status|render|dag] [--profile cpu] [--only main,...] [--out DIR] [--no-pdf] [--no-paper]
                 [-p key=value ...] [--force] [--jobs N] [--executor NAME] [--workflow-profile DIR] [--list]

Everything the user typed is checked before any work: an unknown profile, experiment or
parameter, a value of the wrong type or out of range, or missing data stops the run with one
line naming the value and what is allowed (exit code 2). Then the library's plan (training runs,
notebooks, reports) is written and Snakemake (``workflow/Snakefile``) runs what is missing or
out of date: one job per training run, one per notebook, one per PDF, the macros and the paper.
``render`` redraws everything from the records alone (tables, figures, executed notebooks and
their PDFs, macros, README blocks, paper): no model, no measurement. ``status`` says per experiment
whether its records must be measured again or only its outputs drawn again; ``dag`` draws the job
graph.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

from attnknn_lib.base.errors import AttnKNNError, ConfigError
from attnknn_lib.base.paths import REPO_ROOT, Paths
from attnknn_lib.base.runtime import device_available
from attnknn_lib.base.timing import total_ram_bytes
from attnknn_lib.experiments.framework import catalog
from attnknn_lib.workflow import kept_parts, overview
from attnknn_lib.workflow.overview import Invocation, command
from attnknn_lib.workflow.plan import make_plan, write_plan
from attnknn_lib.workflow.process_group import run_in_group
from attnknn_lib.workflow.profiles import available_profiles, profile_description, resolve

SNAKEFILE = REPO_ROOT / "workflow" / "Snakefile"
EXECUTORS = ("local", "cluster-generic", "slurm")


def _warn_device(resolved: dict[str, dict], executor: str | None) -> None:
    """One line when the requested device is not on this machine (jobs then fall back to cpu,
    see runtime.pick_device); on a cluster executor the jobs run elsewhere, so say nothing."""
    if executor not in (None, "local"):
        return

    wanted = sorted({p["device"] for p in resolved.values()} - {"auto", "cpu"})
    missing = [d for d in wanted if not device_available(d)]
    if missing:
        print(f"warning: device={missing[0]!r} is not available on this machine; the jobs fall back to cpu (each "
              "says so once). Run on a machine with one, or pass -p device=auto", file=sys.stderr)


def _require_tools(pdf: bool, paper: bool, typed: list[str]) -> None:
    """Stop before any work when the PDF export or the paper is asked for without its tools; the
    way out named is this same command with ``--no-pdf --no-paper``."""
    missing = []
    if pdf:
        missing += [t for t in ("xelatex", "pandoc") if shutil.which(t) is None]
    if paper:
        missing += [t for t in ("latexmk", "xelatex") if shutil.which(t) is None and t not in missing]
    if missing:
        raise ConfigError(f"{', '.join(missing)} not found: needed for the PDF export and the paper "
                          "(Debian: texlive-xetex texlive-fonts-recommended texlive-plain-generic texlive-latex-extra "
                          f"pandoc latexmk; ./run_all.sh installs them as root), or pass --no-pdf --no-paper: "
                          f"{typed_command(typed, '--no-pdf', '--no-paper')}")


def typed_command(typed: list[str], *more: str) -> str:
    """The command the user typed (``typed``: the arguments after ``./run_all.sh``), shell-quoted,
    with ``more`` added where absent: the exact command to run again, not the default run."""
    return shlex.join(["./run_all.sh", *typed, *[m for m in more if m not in typed]])


def invocation(args, resolved: dict[str, dict], paths: Paths) -> Invocation:
    """What of ``args`` a suggested command must keep (see :class:`overview.Invocation`)."""
    only = tuple(s.strip() for s in args.only.split(",") if s.strip())
    return Invocation(tuple(resolved), only, tuple(args.overrides), args.profile,
                      None if paths.root == REPO_ROOT else paths.root)


def train_threads(args) -> int:
    """Threads per job. Here, by default one per job with as many jobs at once as cores: on two
    cores two one-thread training jobs side by side did 1.3x the work of one job on both (measured:
    a SmallCNN step 66 ms on one thread, 43 ms on two). ``--jobs N`` gives each job cores / N."""
    cores = os.cpu_count() or 1
    local = not args.executor or args.executor == "local"
    if local and not args.jobs:
        return 1
    return max(1, cores // max(1, args.jobs or 1))


RESERVED_MEMORY_GB = 4  # left to the training and notebook jobs beside the parts, and the system


def part_memory_budget_gb(plan: dict, total_bytes: int | None = None) -> int:
    """The memory, in GB, that part jobs running side by side may declare together
    (``part_memory_gb`` of each in the plan): the machine's less :data:`RESERVED_MEMORY_GB`, and never
    less than the largest part's, so that every part can run (alone)."""
    if total_bytes is None:
        total_bytes = total_ram_bytes()
    largest = max((e.get("part_memory_gb", 0) for e in plan["experiments"].values()), default=0)
    return max(largest, int(total_bytes / 2 ** 30) - RESERVED_MEMORY_GB)


def snakemake_command(plan_path: Path, root: Path, args, extra: list[str]) -> list[str]:
    """The Snakemake call for the plan: local cores or an executor, profile, rerun rules."""
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(SNAKEFILE), "--directory", str(root),
           "--configfile", str(plan_path), "--rerun-incomplete", "--nolock", "--rerun-triggers", "mtime", "params", "input",
           "--printshellcmds", "--show-failed-logs"]
    cores = os.cpu_count() or 1
    if args.executor and args.executor != "local":
        cmd += ["--executor", args.executor, "--jobs", str(args.jobs or 4)]
    else:
        budget = part_memory_budget_gb(json.loads(Path(plan_path).read_text()))
        cmd += ["--cores", str(cores), "--resources", f"part_memory={budget}"]
    if args.workflow_profile:
        cmd += ["--workflow-profile", str(Path(args.workflow_profile).resolve())]
    if args.force or args.action == "render":  # render: every output is drawn again from the records
        cmd += ["--forceall"]
    return cmd + extra


def _epilog() -> str:
    """Subcommands, experiments and profiles, one line each (from the catalog and configs/)."""
    lines = ["subcommands:",
             "  ./run_all.sh                 set up, then measure what status says is out of date, draw the rest "
             "(notebooks, PDFs, paper)",
             "  ./run_all.sh test [ARGS]     set up, then the test suite (ARGS go to pytest; -m 'not slow': the fast tests)",
             "  ./run_all.sh status [-v]     per experiment: re-measure (with its estimate), re-render (seconds) or "
             "same (reads only)",
             "  ./run_all.sh render          every table, figure, notebook PDF, macro, README block and the paper "
             "from the records (no model, minutes)",
             "  ./run_all.sh lab             JupyterLab: notebooks/ (runnable; they read the committed results) and "
             "results/notebooks/ (executed)",
             "  ./run_all.sh bench           this machine's speed as ratios, and the committed run's stage times",
             "  ./run_all.sh dag             the job graph as figures/workflow_dag.pdf",
             "", "experiments (--only NAME[,NAME]):"]
    for exp in catalog.experiments().values():
        try:  # the notebook's own title, one line
            title = json.loads((REPO_ROOT / "notebooks" / exp.notebook).read_text())["metadata"].get("title", "")
        except (OSError, ValueError, KeyError):
            title = ""
        lines.append(f"  {exp.name:18s} {exp.notebook}: {title}")
    lines += ["", "profiles (--profile NAME):"]
    for name in available_profiles():
        lines.append(f"  {name:18s} {profile_description(name)}")
    return "\n".join(lines)


USAGE = "./run_all.sh [test|lab|bench|run|status|render|dag] [options]"
DESCRIPTION = ("Reproduce the Attn-KNN paper: train and measure what is missing, draw every table and\n"
               "figure, export the notebooks to PDF and build the paper. The first word picks what to do\n"
               "(the subcommands below); the options pick the experiments, profile and output folder.")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="./run_all.sh", description=DESCRIPTION, usage=USAGE,
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_epilog())
    ap.add_argument("action", nargs="?", default="run", choices=("run", "status", "render", "dag", "keep"),
                    help="run (default), status (what must be measured or drawn again; reads only), render (every "
                         "output drawn again from the records, nothing measured), dag (job graph figure), keep (copy "
                         "the stored parts of measurements under way into results/parts, to commit: a fresh clone "
                         "resumes from them); test, "
                         "lab and bench are run by ./run_all.sh itself (see below)")
    ap.add_argument("-v", "--verbose", action="store_true", help="status: every output file with its state and reason")
    ap.add_argument("--profile", default="cpu", help="configs/<name>.yaml (default: cpu)")
    ap.add_argument("--only", default="", help="comma-separated experiments (default: all)")
    ap.add_argument("--out", default=None, help="write everything under this directory instead of the repository")
    ap.add_argument("--no-pdf", action="store_true", help="do not export executed notebooks to PDF")
    ap.add_argument("--no-paper", action="store_true", help="do not build the paper")
    ap.add_argument("-p", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a notebook parameter (experiment.key=value for one experiment)")
    ap.add_argument("--force", action="store_true", help="retrain every model and measure everything again (hours)")
    ap.add_argument("--jobs", type=int, default=0, help="jobs at once (default: one per core here, one thread each; 4 on a cluster executor)")
    ap.add_argument("--executor", default=None, help=f"Snakemake executor: {', '.join(EXECUTORS)} (default: local)")
    ap.add_argument("--workflow-profile", default=None, help="Snakemake profile folder (workflow/profiles/slurm)")
    ap.add_argument("--list", action="store_true", help="print the resolved parameters and stop")
    ap.add_argument("--validate", action="store_true", help="only check the arguments (exit 2 on bad input)")
    return ap


def _validate_options(args) -> None:
    if args.jobs < 0:
        raise ConfigError(f"--jobs {args.jobs} is out of range; allowed: 1 or more")
    if args.executor is not None and args.executor not in EXECUTORS:
        raise ConfigError(f"--executor {args.executor!r} is not allowed; choose one of: {', '.join(EXECUTORS)}")
    if args.workflow_profile and not (Path(args.workflow_profile) / "config.yaml").exists():
        raise ConfigError(f"--workflow-profile {args.workflow_profile!r}: no config.yaml there "
                          f"(e.g. {REPO_ROOT / 'workflow' / 'profiles' / 'slurm'})")


def dag(cmd: list[str], root: Path, typed: list[str]) -> int:
    """The job graph as ``figures/workflow_dag.pdf`` and ``.png`` (Graphviz ``dot``)."""
    if shutil.which("dot") is None:
        print(f"error: Graphviz 'dot' not found; install it (Debian: apt-get install graphviz; "
              f"{typed_command(typed)} installs it when run as root)", file=sys.stderr)
        return 2
    proc = subprocess.run(cmd + ["--dag"], capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "snakemake --dag failed",
              file=sys.stderr)
        return 1
    dot = proc.stdout[proc.stdout.index("digraph"):]
    dot = re.sub(r"(run: )?[a-z_]+-(attnknn|cnn)-s(\d+)-[0-9a-f]{16}", r"\2 seed \3", dot)  # short labels
    out = root / "figures"
    out.mkdir(parents=True, exist_ok=True)
    for ext in ("pdf", "png"):
        subprocess.run(["dot", f"-T{ext}", "-o", str(out / f"workflow_dag.{ext}")], input=dot, text=True, check=True)
    print(f"job graph: {out / 'workflow_dag.pdf'}")
    return 0


def drop_unreadable_models(plan: dict, paths: Paths) -> list[str]:
    """Remove every cached model of the plan whose weights file is not a whole archive (a training
    killed mid-write, a disk that filled up): Snakemake sees a file and would not retrain it, so the
    first job to load it would retrain it in its own process, on that job's threads, and a model
    trained on other threads differs in its last bits. Removed, the training job of the workflow
    retrains it as it trained the rest. Returns one line per model removed."""
    said = []
    for rid in plan["runs"]:
        folder = paths.artifacts / "models" / rid
        weights = folder / "model.pt"
        if not weights.exists():
            continue
        try:
            with zipfile.ZipFile(weights) as archive:  # torch.save writes a zip archive
                whole = archive.testzip() is None
        except (zipfile.BadZipFile, OSError):
            whole = False
        if not whole:
            for f in (weights, folder / "train.json"):
                f.unlink(missing_ok=True)
            said.append(f"cached model {rid} is unreadable (cut short?): it is trained again")
    return said


def check_records(resolved: dict[str, dict], paths: Paths, inv: Invocation | None = None) -> None:
    """Rendering reads the records: one line naming the first one missing under the output root, and
    the command that measures it (``inv``'s profile, parameters and folder)."""
    inv = inv or Invocation(tuple(resolved), out=None if paths.root == REPO_ROOT else paths.root)
    for name, params in resolved.items():
        exp = catalog.get(name)
        for rel in exp.artifacts.files(exp.Config(**params), "record"):
            if not (paths.root / rel).exists():
                raise ConfigError(f"no record {rel} under {paths.root} to render {name} from; measure it first: "
                                  f"{command(inv, only=[name])}")


def main(argv: list[str] | None = None) -> int:
    typed = sys.argv[1:] if argv is None else list(argv)
    args = _parser().parse_args(typed)
    try:
        _validate_options(args)
        only = [s.strip() for s in args.only.split(",") if s.strip()] or None
        resolved = resolve(args.profile, only, args.overrides)
        if args.validate:
            return 0
        if args.action in ("run", "render") and not args.list:
            _require_tools(not args.no_pdf, not args.no_paper, typed)
    except AttnKNNError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    _warn_device(resolved, args.executor)
    if args.list:
        print(yaml.safe_dump(resolved, sort_keys=False))
        return 0

    paths = Paths.at(args.out)
    inv = invocation(args, resolved, paths)
    if args.action == "status":  # reads only: no plan, no run spec, no Snakemake state
        print(overview.summary(resolved, paths, args.verbose, inv))
        return 0
    if args.action == "keep":  # measurements longer than a session: their finished parts, to commit
        if not only:  # every experiment, those awaiting a first run too (their parts are the longest)
            resolved = resolve(args.profile, list(catalog.names()), args.overrides)
        copied = kept_parts.keep(resolved, paths.artifacts)
        print(f"kept {len(copied)} part(s): {', '.join(copied) or 'none new'}")
        print("\n".join(kept_parts.summary(resolved, paths.artifacts)))
        return 0
    render_only = args.action == "render"
    if render_only:
        try:
            check_records(resolved, paths, inv)
        except AttnKNNError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    extra: list[str] = []  # the jobs' order is the plan's priorities (attnknn_lib.workflow.plan.part_priority)
    current: set[str] = set()
    states: dict[str, dict] = {}
    if args.action == "run" and not args.force:
        # what status says, the run does, whatever Snakemake remembers (nothing, on a fresh clone): a record
        # this checkout would measure differently is measured again; one it would measure the same is read,
        # and no model is trained for it; outputs drawn by other code or from other records are drawn again
        states = {n: overview.experiment_state(n, p, paths) for n, p in resolved.items()}
        current = {n for n, st in states.items() if not st["measure_reasons"]}
        rerun = [f"measure_{n}" for n in resolved if n not in current] + [
            f"notebook_{n}" for n in sorted(current) if states[n]["render_reasons"]]
        extra += ["--forcerun", *rerun] if rerun else []
    drawn = {n for n in current if not states[n]["render_reasons"]}
    plan = make_plan(resolved, paths, pdf=not args.no_pdf, paper=not args.no_paper, render_only=render_only,
                     current=current, drawn=drawn)
    plan["train_threads"] = train_threads(args)
    plan_path = write_plan(plan, paths)
    cmd = snakemake_command(plan_path, paths.root, args, extra)
    if args.action == "dag":
        return dag(cmd, paths.root, typed)
    if args.force:
        os.environ["ATTNKNN_RETRAIN"] = "1"  # jobs inherit it: retrain cached models too
    # One run per output folder at a time. The lock is the kernel's (flock), so it dies with the
    # process: a killed run never leaves a stale lock (Snakemake's own lock files would).
    import fcntl

    lock = open(paths.root / ".attnknn" / "run.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print(f"error: another ./run_all.sh is writing to {paths.root}; wait for it to finish", file=sys.stderr)
        return 2
    for line in drop_unreadable_models(plan, paths):
        print(f"[run_all] {line}", file=sys.stderr)
    if not render_only:
        restored = kept_parts.restore(resolved, paths.artifacts)
        if restored:
            print(f"[run_all] {len(restored)} part(s) read from results/parts (kept by ./run_all.sh keep): "
                  f"{', '.join(restored)}", file=sys.stderr)
    if args.only and paths.root == REPO_ROOT and args.action == "run":
        print(f"[run_all] this rewrites the committed outputs of {', '.join(resolved)} in this repository (records, "
              f"tables, figures, notebook PDFs) where they are out of date; to keep them, add --out DIR", file=sys.stderr)
    if not args.force and not render_only:
        try:
            print(f"[run_all] {overview.estimate_line(resolved, paths)}", file=sys.stderr)
        except Exception as err:  # an estimate must never stop a run  # noqa: BLE001
            print(f"[run_all] estimate unavailable ({type(err).__name__}: {err})", file=sys.stderr)
    code = run_in_group(cmd)  # SIGTERM or Ctrl-C ends Snakemake and every job (process_group)
    if code > 128:
        print(f"[run_all] stopped by {_signal_name(code - 128)}: Snakemake and every job have ended. "
              f"{_again(typed, args.force)}", file=sys.stderr)
        return code
    if code != 0:
        print(f"error: the workflow stopped (see the failed job above). {_again(typed, args.force)}", file=sys.stderr)
        return 1
    print(f"all outputs up to date under {paths.root}")
    return 0


def _again(typed: list[str], force: bool) -> str:
    """How to go on after a stopped or failed run: the same command redoes only what is missing; with
    ``--force`` it would redo everything, so both are named."""
    if not force:
        return f"The same command redoes only what is missing: {typed_command(typed)}"
    return (f"The same command starts everything again: {typed_command(typed)}; without --force it redoes only "
            f"what is out of date: {typed_command([t for t in typed if t != '--force'])}")


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # Ctrl-C before Snakemake started: nothing to stop, no traceback
        print("[run_all] stopped by SIGINT before any job started", file=sys.stderr)
        raise SystemExit(128 + signal.SIGINT) from None

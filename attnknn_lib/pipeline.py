"""The pipeline behind ``./run_all.sh``: run the experiment notebooks of a profile with papermill,
export them to PDF, refresh the macros and build the paper.

    python -m attnknn_lib.pipeline [--profile cpu] [--only main,k_sweep] [--out DIR] [--no-pdf]
                                   [--no-paper] [-p key=value ...] [--force] [--list]

Everything the user typed is checked before any work: an unknown profile, experiment or
parameter, a value of the wrong type or out of range, or missing data stops the run with one
line naming the value and what is allowed (exit code 2). A stage whose notebook, library code
and parameters are unchanged since its last successful run is skipped (``--force`` reruns).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import MISSING, dataclass, fields
from pathlib import Path

import yaml

from .errors import AttnKNNError, ConfigError, DataNotFoundError
from .paths import REPO_ROOT, Paths
from .provenance import code_fingerprint

CONFIG_DIR = REPO_ROOT / "configs"
NOTEBOOK_DIR = REPO_ROOT / "notebooks"


@dataclass(frozen=True)
class Experiment:
    name: str
    notebook: str
    config: str  # "module:Class" of the experiment's config dataclass


EXPERIMENTS = {e.name: e for e in [
    Experiment("main", "01_main.ipynb", "attnknn_lib.experiments.main:MainConfig"),
]}
# parameters every notebook has that are not fields of its config
PIPELINE_PARAMETERS = ("out_dir",)


def available_profiles() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))


def load_profile(name: str) -> dict:
    profiles = available_profiles()
    if name not in profiles:
        raise ConfigError(f"profile={name!r} is not allowed; choose one of: {', '.join(profiles)}")
    data = yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text()) or {}
    return data


def _config_class(exp: Experiment):
    import importlib

    module, cls = exp.config.split(":")
    return getattr(importlib.import_module(module), cls)


def parse_overrides(items: list[str], selected: list[str]) -> dict[str, dict]:
    """``key=value`` (every selected experiment that has ``key``) or ``experiment.key=value``;
    values are YAML scalars (5 -> int, 0.1 -> float, true -> bool, a,b -> str)."""
    out: dict[str, dict] = {name: {} for name in selected}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"-p {item!r} is not of the form key=value (or experiment.key=value)")
        key, raw = item.split("=", 1)
        value = yaml.safe_load(raw) if raw != "" else ""
        target, _, param = key.rpartition(".")
        targets = [target] if target else selected
        if target and target not in selected:
            raise ConfigError(f"-p {item!r}: experiment {target!r} is not selected; selected: {', '.join(selected)}")
        hit = False
        for name in targets:
            names = {f.name for f in fields(_config_class(EXPERIMENTS[name]))}
            if param in names:
                out[name][param] = value
                hit = True
        if not hit:
            allowed = sorted({f.name for n in targets for f in fields(_config_class(EXPERIMENTS[n]))})
            raise ConfigError(f"-p {item!r}: unknown parameter {param!r}; allowed: {', '.join(allowed)}")
    return out


def _check_types(cls, params: dict) -> None:
    """Each value has its field's type (an int is accepted for a float)."""
    for f in fields(cls):
        if f.name not in params:
            continue
        default = f.default if f.default is not MISSING else None
        value = params[f.name]
        if default is None or isinstance(default, tuple):  # tuples are given as comma-separated strings
            continue
        kind = type(default)
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        ok |= kind is float and isinstance(value, int) and not isinstance(value, bool)
        if not ok:
            raise ConfigError(f"{f.name}={value!r} has the wrong type; allowed: {kind.__name__} "
                              f"(e.g. {f.name}={default!r})")


def resolve(profile: str, only: list[str] | None, overrides: list[str]) -> dict[str, dict]:
    """The validated notebook parameters of every selected experiment: {experiment: params}."""
    prof = load_profile(profile)
    runnable = [n for n, e in EXPERIMENTS.items() if (NOTEBOOK_DIR / e.notebook).exists()]
    selected = runnable if not only else only
    for name in selected:
        if name not in runnable:
            raise ConfigError(f"experiment {name!r} is not allowed; choose one of: {', '.join(runnable)}")
    extra = parse_overrides(overrides, selected)
    out = {}
    for name in selected:
        exp = EXPERIMENTS[name]
        params = dict((prof.get("experiments") or {}).get(name) or {})
        params.update(extra[name])
        params["profile"] = profile
        cls = _config_class(exp)
        unknown = set(params) - {f.name for f in fields(cls)}
        if unknown:
            raise ConfigError(f"configs/{profile}.yaml: unknown parameter(s) {sorted(unknown)} for {name}")
        _check_types(cls, params)
        cfg = cls(**params)  # raises ConfigError on a bad value
        check_data(cfg)
        out[name] = params
    return out


def check_data(cfg) -> None:
    """Stop before any work when a dataset of ``cfg`` is not on disk (unless downloads are allowed)."""
    from .datasets import REGISTRY, local_sources

    if os.environ.get("ATTNKNN_DOWNLOAD") == "1":
        return
    for name in getattr(cfg, "datasets", ()):
        options = local_sources(name)
        if options and not any(p.exists() for p in options):
            raise DataNotFoundError(f"dataset {name!r}: none of {', '.join(map(str, options))} exists; "
                                    f"{REGISTRY[name].description}. Provide the files (see README, 'Where the data "
                                    "comes from'), or set ATTNKNN_DOWNLOAD=1 to let torchvision/OpenML download")


def stage_key(exp: Experiment, params: dict) -> str:
    h = hashlib.sha256()
    h.update((NOTEBOOK_DIR / exp.notebook).read_bytes())
    h.update(code_fingerprint().encode())
    h.update(json.dumps(params, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def run_notebook(exp: Experiment, params: dict, paths: Paths, force: bool) -> tuple[Path, bool]:
    """Execute one notebook with papermill into results/notebooks/; returns (path, skipped)."""
    import papermill as pm

    paths.notebooks.mkdir(parents=True, exist_ok=True)
    out_nb = paths.notebooks / exp.notebook
    stamp = paths.notebooks / f".{exp.name}.stamp"
    key = stage_key(exp, params)
    if not force and out_nb.exists() and stamp.exists() and stamp.read_text().strip() == key:
        return out_nb, True
    tmp = out_nb.with_name(f".{out_nb.stem}.running.ipynb")
    try:
        pm.execute_notebook(str(NOTEBOOK_DIR / exp.notebook), str(tmp),
                            parameters={**params, "out_dir": str(paths.root)}, cwd=str(NOTEBOOK_DIR),
                            kernel_name="python3", progress_bar=True)
    except pm.PapermillExecutionError as err:
        raise AttnKNNError(f"notebook {exp.notebook} failed in cell {err.exec_count}: {err.ename}: "
                           f"{err.evalue.splitlines()[0] if err.evalue else ''} (executed copy: {tmp})") from None
    os.replace(tmp, out_nb)
    stamp.write_text(key + "\n")
    return out_nb, False


def export_pdf(notebook: Path) -> Path:
    """``jupyter nbconvert --to pdf`` next to the executed notebook."""
    cmd = [sys.executable, "-m", "nbconvert", "--to", "pdf", "--log-level", "WARN", str(notebook),
           "--output-dir", str(notebook.parent)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise AttnKNNError(f"PDF export of {notebook.name} failed: {tail[0]}")
    return notebook.with_suffix(".pdf")


def build_paper(paths: Paths) -> Path:
    """Build paper/main.tex with latexmk (XeLaTeX) where the results are (copied when --out)."""
    src = REPO_ROOT / "paper"
    if paths.root != REPO_ROOT:
        paths.paper.mkdir(parents=True, exist_ok=True)
        for f in src.glob("*.tex"):
            shutil.copy2(f, paths.paper / f.name)
        for f in src.glob("*.bib"):
            shutil.copy2(f, paths.paper / f.name)
    proc = subprocess.run(["latexmk", "-xelatex", "-interaction=nonstopmode", "-halt-on-error", "main.tex"],
                          cwd=paths.paper, capture_output=True, text=True)
    if proc.returncode != 0:
        log = paths.paper / "main.log"
        err = [ln for ln in log.read_text(errors="replace").splitlines() if ln.startswith("!")] if log.exists() else []
        raise AttnKNNError(f"paper build failed: {(err or ['see ' + str(log)])[0]}")
    return paths.paper / "main.pdf"


def _require_tools(pdf: bool, paper: bool) -> None:
    missing = []
    if pdf:
        missing += [t for t in ("xelatex", "pandoc") if shutil.which(t) is None]
    if paper:
        missing += [t for t in ("latexmk", "xelatex") if shutil.which(t) is None and t not in missing]
    if missing:
        raise ConfigError(f"{', '.join(missing)} not found: needed for the PDF export and the paper "
                          "(Debian: texlive-xetex texlive-fonts-recommended texlive-plain-generic texlive-latex-extra "
                          "pandoc latexmk; ./run_all.sh installs them as root), or pass --no-pdf --no-paper")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="./run_all.sh", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="./run_all.sh test [pytest args] runs the test suite instead.")
    ap.add_argument("--profile", default="cpu", help="configs/<name>.yaml (default: cpu)")
    ap.add_argument("--only", default="", help="comma-separated experiments (default: all)")
    ap.add_argument("--out", default=None, help="write everything under this directory instead of the repository")
    ap.add_argument("--no-pdf", action="store_true", help="do not export executed notebooks to PDF")
    ap.add_argument("--no-paper", action="store_true", help="do not build the paper")
    ap.add_argument("-p", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a notebook parameter (experiment.key=value for one experiment)")
    ap.add_argument("--force", action="store_true", help="rerun every stage and retrain cached models")
    ap.add_argument("--list", action="store_true", help="print the resolved parameters and stop")
    ap.add_argument("--validate", action="store_true", help="only check the arguments (exit 2 on bad input)")
    args = ap.parse_args(argv)
    try:
        only = [s.strip() for s in args.only.split(",") if s.strip()] or None
        plan = resolve(args.profile, only, args.overrides)
        if args.validate:
            return 0
        if not args.list:
            _require_tools(not args.no_pdf, not args.no_paper)
    except AttnKNNError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.list:
        print(yaml.safe_dump(plan, sort_keys=False))
        return 0
    paths = Paths.at(args.out)
    if args.force:
        os.environ["ATTNKNN_RETRAIN"] = "1"  # the notebooks' kernels inherit it: retrain cached models too
    from tqdm.auto import tqdm

    from .report import update_readme, write_macros

    start = time.perf_counter()
    try:
        for name, params in tqdm(plan.items(), desc="experiments", unit="notebook"):
            t0 = time.perf_counter()
            nb, skipped = run_notebook(EXPERIMENTS[name], params, paths, args.force)
            if not args.no_pdf and (not skipped or not nb.with_suffix(".pdf").exists()):
                export_pdf(nb)
            tqdm.write(f"[{name}] {'unchanged, skipped' if skipped else 'done'} in {time.perf_counter() - t0:.0f} s "
                       f"-> {nb}")
        write_macros(paths.results)
        if paths.root == REPO_ROOT:
            update_readme(REPO_ROOT / "README.md", paths.results)
        if not args.no_paper:
            pdf = build_paper(paths)
            tqdm.write(f"[paper] {pdf}")
    except AttnKNNError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"all stages finished in {time.perf_counter() - start:.0f} s; outputs under {paths.root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Where a job's time goes: ``python -m attnknn_lib.tooling.profiling NAME``.

For an experiment, runs its measurement (its ``run``, what the notebook job spends its time in)
under cProfile on the models already in the artifacts folder (``$ATTNKNN_ARTIFACTS`` or the
repository's, linked into a scratch folder so that none of the workflow's files is rewritten; it
refuses to start while one of them is missing), with the cpu profile's parameters and any ``-p
KEY=VALUE`` (e.g. ``-p seeds=0`` for one seed). For
``train_attnknn`` / ``train_cnn``, trains main's first-seed model of that kind afresh for
``--epochs`` epochs in a temporary folder. Writes the library functions with the most own time and
the most cumulative time as JSON; ``./run_all.sh bench`` shows the committed ones
(``results/profile_<name>.json``) in docs/benchmarks.md's generated block.

Besides the library's own functions, a profile splits the whole measured time by who spent it
(:func:`time_by_owner`: torch, FAISS, NumPy/SciPy, the library's own lines, the rest). Own times of
distinct functions do not overlap, so the shares add up to the profiled time. cProfile sees calls,
not operators: arithmetic written as ``a * b`` on arrays or tensors counts as the own time of the
library line that writes it, so the library's share is its Python *and* that arithmetic.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import re
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import replace
from functools import cache
from pathlib import Path

from attnknn_lib.base.errors import AttnKNNError, ConfigError, check_choice, check_range
from attnknn_lib.base.files import write_json
from attnknn_lib.base.paths import Paths
from attnknn_lib.base.provenance import PACKAGE_DIR
from attnknn_lib.base.runtime import set_threads
from attnknn_lib.data.spec import prepare
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.experiments.framework import catalog
from attnknn_lib.training.cache import load_or_train, model_dir
from attnknn_lib.workflow.profiles import resolve


@cache
def _library_file(file: str) -> str | None:
    """``attnknn_lib/...`` (POSIX) if ``file`` is one of the library's sources, else None."""
    if file == "~":
        return None
    path = Path(file).resolve()  # PACKAGE_DIR is resolved too: a linked checkout still matches
    return path.relative_to(PACKAGE_DIR.parent).as_posix() if PACKAGE_DIR in path.parents else None


def top_functions(stats: pstats.Stats, n: int) -> dict[str, list[dict]]:
    """The ``n`` library functions with the most own time and with the most cumulative time."""
    rows = []
    for (file, line, fn), (_, calls, own, cum, _) in stats.stats.items():
        rel = _library_file(file)
        if rel is not None:
            rows.append({"function": f"{rel}:{line}({fn})", "calls": calls, "own_seconds": own,
                         "cumulative_seconds": cum})
    return {"by_own_time": sorted(rows, key=lambda r: -r["own_seconds"])[:n],
            "by_cumulative_time": sorted(rows, key=lambda r: -r["cumulative_seconds"])[:n]}


OWNERS = {  # key -> (column of the bench block, what it stands for)
    "torch": ("torch", "time inside torch's calls (network layers, autograd, optimiser steps, top-k)"),
    "faiss": ("FAISS", "time inside FAISS's calls (exact neighbour search)"),
    "numpy": ("NumPy/SciPy", "time inside NumPy's and SciPy's calls (reductions, sorts, bincounts, fits)"),
    "library": ("library lines", "attnknn_lib's own lines, with the array arithmetic they write as operators "
                                 "(a * b, a @ b on arrays and tensors), which cProfile counts there"),
    "other": ("rest", "I/O, compression, the interpreter"),
}


PACKAGES = {"torch": "torch", "torchvision": "torch", "faiss": "faiss", "numpy": "numpy", "scipy": "numpy"}


def owner(file: str, function: str) -> str:
    """Which of :data:`OWNERS` a cProfile entry belongs to: the library by its source file, a
    Python file of an installed package by its top-level package (the folder after
    ``site-packages``), a compiled built-in (file ``~``) by the module its description names."""
    if _library_file(file) is not None:
        return "library"
    if file == "~":  # "<method 'topk' of 'torch._C.TensorBase' objects>", "<built-in method torch.conv2d>"
        m = re.match(r"<method '[^']*' of '([\w.]+)' objects>", function) or re.match(r"<built-in method ([\w.]+)>",
                                                                                     function)
        return PACKAGES.get(m.group(1).split(".")[0], "other") if m else "other"
    parts = Path(file).parts
    for i, part in enumerate(parts[:-1]):
        if part in ("site-packages", "dist-packages"):
            return PACKAGES.get(parts[i + 1], "other")
    return "other"


def time_by_owner(stats: pstats.Stats) -> dict[str, float]:
    """Own seconds per owner (:func:`owner`), every key of :data:`OWNERS` present; they sum to the
    profiled time (cProfile's own times do not overlap)."""
    out = dict.fromkeys(OWNERS, 0.0)
    for (file, _, fn), (_, _, own, _, _) in stats.stats.items():
        out[owner(file, fn)] += own
    return out


TRAINING_JOBS = {"train_attnknn": "attnknn", "train_cnn": "cnn"}
"""Names that profile a training job instead of a notebook: main's first-seed model of that kind on
its primary dataset (the cpu profile's full-size Fashion-MNIST recipe), for ``--epochs`` epochs."""


def _set_environ(values: dict[str, str | None]) -> None:
    """Set each variable to its value, or unset it where the value is None."""
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@contextmanager
def _environ(**values: str | None):
    """Set (a value) or unset (None) environment variables for the block, then restore them."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        _set_environ(values)
        yield
    finally:
        _set_environ(saved)


@contextmanager
def _scratch(tmp: Path):
    """Paths into ``tmp`` whose artifacts folder links the real trained models and embedding cache,
    so a profile reads what the workflow trained and writes its results and arrays into ``tmp``
    (``$ATTNKNN_RETRAIN`` is cleared: nothing is retrained)."""
    real = _artifacts()
    scratch = tmp / "artifacts"
    scratch.mkdir()
    for sub in ("models", "embeddings"):
        if (real / sub).is_dir():
            (scratch / sub).symlink_to(real / sub, target_is_directory=True)
    with _environ(ATTNKNN_ARTIFACTS=str(scratch), ATTNKNN_PROGRESS="off", ATTNKNN_OUT_DIR=None,
                  ATTNKNN_RETRAIN=None):
        yield Paths.at(tmp)


def _artifacts() -> Path:
    """The real artifacts folder (read before ``$ATTNKNN_ARTIFACTS`` points at a scratch folder)."""
    return Paths.at(None).artifacts.resolve()


def _profiled(fn, threads: int) -> tuple[pstats.Stats, float]:
    """cProfile of ``fn()`` on ``threads`` threads (the previous thread count is restored)."""
    before = int(os.environ.get("ATTNKNN_THREADS") or 0) or os.cpu_count() or 1  # what set_threads() gave
    profiler = cProfile.Profile()
    with _environ(ATTNKNN_THREADS=str(threads)):
        set_threads(threads)
        t0 = time.perf_counter()
        profiler.enable()
        try:
            fn()
        finally:
            profiler.disable()
            set_threads(before)
    return pstats.Stats(profiler), time.perf_counter() - t0


def profile_experiment(name: str, overrides: list[str], n: int = 10, threads: int = 0) -> dict:
    """cProfile of experiment ``name``'s measurement on cached models (cpu profile + ``overrides``),
    on ``threads`` threads (0: as its workflow job runs, one thread or every core for a timed one)."""
    params = resolve("cpu", [name], overrides)[name]
    exp = catalog.get(name)
    cfg = exp.Config(**params)
    missing = [r for r in exp.runs(cfg) if not (model_dir(_artifacts(), r) / "train.json").exists()]
    if missing:  # the profile is of the measurement, not of training: refuse before any work
        raise ConfigError(f"{len(missing)} of the models {name} reads are not trained under {_artifacts()}/models "
                          f"(e.g. {missing[0].label}); run ./run_all.sh --only {name} first, or point "
                          "$ATTNKNN_ARTIFACTS at a folder that has them")
    threads = threads or ((os.cpu_count() or 1) if exp.timed else 1)
    with tempfile.TemporaryDirectory(prefix="attnknn-profile-") as tmp, _scratch(Path(tmp)) as paths:
        stats, wall = _profiled(lambda: exp.run(cfg, paths), threads)
    return {"experiment": name, "overrides": overrides, "wall_seconds": wall, "threads": threads,
            "by_owner": time_by_owner(stats), **top_functions(stats, n)}


def profile_training(name: str, epochs: int = 2, n: int = 10, threads: int = 1) -> dict:
    """cProfile of one training job (:data:`TRAINING_JOBS`), trained afresh into a temporary folder
    for ``epochs`` epochs on ``threads`` threads (a workflow training job gets one); the data is
    loaded before the profile starts."""
    check_choice("name", name, tuple(TRAINING_JOBS))
    check_range("epochs", epochs, 1, None)
    main_exp = catalog.get("main")
    cfg = main_exp.Config(**resolve("cpu", ["main"], [])["main"])
    run = core.model_runs(cfg, core.data_spec(cfg, cfg.primary), cfg.seeds[:1], kinds=(TRAINING_JOBS[name],))[0]
    run = replace(run, train={**run.train, "epochs": epochs})
    prepared = prepare(run.data)
    with tempfile.TemporaryDirectory(prefix="attnknn-profile-") as tmp:
        stats, wall = _profiled(lambda: load_or_train(run, tmp, prepared=prepared, force=True, progress=False),
                                threads)
    return {"experiment": name, "overrides": [f"epochs={epochs}"], "wall_seconds": wall, "threads": threads,
            "by_owner": time_by_owner(stats), **top_functions(stats, n)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m attnknn_lib.tooling.profiling", description=__doc__.split("\n\n")[0])
    ap.add_argument("name", help="experiment, or train_attnknn / train_cnn for a training job")
    ap.add_argument("-p", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="threads (default: as the workflow runs the job)")
    ap.add_argument("--epochs", type=int, default=None, help="epochs of a profiled training job (default 2)")
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    try:
        check_choice("name", args.name, (*catalog.names(), *TRAINING_JOBS))
        if args.name in TRAINING_JOBS:
            if args.overrides:
                raise ConfigError(f"-p {args.overrides[0]} is not allowed with {args.name}; a training job takes "
                                  "--epochs and --threads")
            out = profile_training(args.name, 2 if args.epochs is None else args.epochs, args.top, args.threads or 1)
        else:
            if args.epochs is not None:
                raise ConfigError(f"--epochs is not allowed with {args.name}; it sets a training job's epochs "
                                  f"({', '.join(TRAINING_JOBS)})")
            out = profile_experiment(args.name, args.overrides, args.top, args.threads)
    except AttnKNNError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    write_json(Path(args.out), out)
    print(f"[profile] {args.name}: {out['wall_seconds']:.0f} s -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

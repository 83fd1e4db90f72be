"""Where a job's time goes: ``python -m attnknn_lib.workflow.profiling NAME``.

For an experiment, runs its measurement (its ``run``, what the notebook job spends its time in)
under cProfile on the models already in the artifacts folder (``$ATTNKNN_ARTIFACTS`` or the
repository's, linked into a scratch folder so that none of the workflow's files is rewritten),
with the cpu profile's parameters and any ``-p KEY=VALUE`` (e.g. ``-p seeds=0`` for one seed). For
``train_attnknn`` / ``train_cnn``, trains main's first-seed model of that kind afresh for
``--epochs`` epochs in a temporary folder. Writes the library functions with the most own time and
the most cumulative time as JSON; ``./run_all.sh bench`` shows the committed ones
(``results/profile_<name>.json``) in the README's benchmark block.

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
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from attnknn_lib.base.errors import AttnKNNError, check_choice, check_range
from attnknn_lib.base.files import write_json
from attnknn_lib.base.paths import Paths
from attnknn_lib.base.provenance import PACKAGE_DIR
from attnknn_lib.base.runtime import set_threads
from attnknn_lib.data.spec import prepare
from attnknn_lib.experiments import catalog
from attnknn_lib.experiments import shared as core
from attnknn_lib.training.cache import load_or_train
from attnknn_lib.workflow.profiles import resolve


def top_functions(stats: pstats.Stats, n: int) -> dict[str, list[dict]]:
    """The ``n`` library functions with the most own time and with the most cumulative time."""
    rows = []
    for (file, line, fn), (_, calls, own, cum, _) in stats.stats.items():
        path = Path(file)
        if PACKAGE_DIR in path.parents:
            rows.append({"function": f"{path.relative_to(PACKAGE_DIR.parent)}:{line}({fn})", "calls": calls,
                         "own_seconds": own, "cumulative_seconds": cum})
    return {"by_own_time": sorted(rows, key=lambda r: -r["own_seconds"])[:n],
            "by_cumulative_time": sorted(rows, key=lambda r: -r["cumulative_seconds"])[:n]}


OWNERS = {  # key -> (column of the bench block, what it stands for)
    "torch": ("torch", "network passes, autograd, optimiser, the attention's matrix work"),
    "faiss": ("FAISS", "exact neighbour search"),
    "numpy": ("NumPy/SciPy", "votes, metrics, bootstrap, calibration fits"),
    "library": ("library lines", "attnknn_lib's own lines, with the array arithmetic they write as operators "
                                 "(a * b, a @ b on arrays and tensors), which cProfile counts there"),
    "other": ("rest", "I/O, compression, the interpreter"),
}


def owner(file: str, function: str) -> str:
    """Which of :data:`OWNERS` a cProfile entry belongs to: by its source file, or for a
    compiled built-in (file ``~``) by the module named in its description."""
    text = f"{file} {function}".replace("\\", "/")
    if Path(file) != Path("~") and PACKAGE_DIR in Path(file).parents:
        return "library"
    for key, marks in (("faiss", ("faiss",)), ("torch", ("torch",)), ("numpy", ("numpy", "scipy"))):
        if any(m in text for m in marks):
            return key
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


@contextmanager
def _scratch(tmp: Path):
    """Paths into ``tmp`` whose artifacts folder links the real trained models and embedding cache:
    a profile reads what the workflow trained and overwrites none of its files."""
    real = Paths.at(None).artifacts
    scratch = tmp / "artifacts"
    scratch.mkdir()
    for sub in ("models", "embeddings"):
        (real / sub).mkdir(parents=True, exist_ok=True)
        (scratch / sub).symlink_to(real / sub, target_is_directory=True)
    saved = {k: os.environ.get(k) for k in ("ATTNKNN_ARTIFACTS", "ATTNKNN_PROGRESS")}
    os.environ.update(ATTNKNN_ARTIFACTS=str(scratch), ATTNKNN_PROGRESS="off")
    try:
        yield Paths.at(tmp)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _profiled(fn, threads: int) -> tuple[pstats.Stats, float]:
    os.environ["ATTNKNN_THREADS"] = str(threads)
    set_threads(threads)
    profiler = cProfile.Profile()
    t0 = time.perf_counter()
    profiler.enable()
    fn()
    profiler.disable()
    return pstats.Stats(profiler), time.perf_counter() - t0


def profile_experiment(name: str, overrides: list[str], n: int = 10, threads: int = 0) -> dict:
    """cProfile of experiment ``name``'s measurement on cached models (cpu profile + ``overrides``),
    on ``threads`` threads (0: as its workflow job runs, one thread or every core for a timed one)."""
    params = resolve("cpu", [name], overrides)[name]
    exp = catalog.get(name)
    threads = threads or ((os.cpu_count() or 1) if exp.timed else 1)
    with tempfile.TemporaryDirectory(prefix="attnknn-profile-") as tmp, _scratch(Path(tmp)) as paths:
        stats, wall = _profiled(lambda: exp.run(exp.Config(**params), paths), threads)
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
    ap = argparse.ArgumentParser(prog="python -m attnknn_lib.workflow.profiling", description=__doc__.split("\n\n")[0])
    ap.add_argument("name", help="experiment, or train_attnknn / train_cnn for a training job")
    ap.add_argument("-p", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="threads (default: as the workflow runs the job)")
    ap.add_argument("--epochs", type=int, default=2, help="epochs of a profiled training job")
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    try:
        if args.name in TRAINING_JOBS:
            out = profile_training(args.name, args.epochs, args.top, args.threads or 1)
        else:
            out = profile_experiment(args.name, args.overrides, args.top, args.threads)
    except AttnKNNError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    write_json(Path(args.out), out)
    print(f"[profile] {args.name}: {out['wall_seconds']:.0f} s -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

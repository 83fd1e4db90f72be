"""Train one run into the model cache: ``python -m attnknn_lib.training.train_one SPEC.json [--artifacts DIR]``.

``SPEC.json`` is a run spec written by the workflow (``<artifacts>/runs/<run id>.json``). The
model lands in ``<artifacts>/models/<run id>/`` atomically; progress goes to the terminal. Errors
(missing data, a non-finite loss, ...) end in one line and exit code 1, and nothing is cached.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from attnknn_lib.base.errors import AttnKNNError
from attnknn_lib.base.files import read_json
from attnknn_lib.base.runtime import set_threads
from attnknn_lib.base.timing import record_time
from attnknn_lib.training.cache import load_or_train, model_dir
from attnknn_lib.training.runs import TrainingRun


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m attnknn_lib.training.train_one", description=__doc__.split("\n\n")[0])
    ap.add_argument("spec", help="run spec JSON (artifacts/runs/<id>.json)")
    ap.add_argument("--artifacts", default=None, help="artifacts folder (default: the spec's grandparent)")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: every core)")
    ap.add_argument("--force", action="store_true", help="retrain even if the model is cached")
    ap.add_argument("--times", default=None, help="folder for this job's wall-time record (the workflow's)")
    args = ap.parse_args(argv)

    spec = Path(args.spec)
    artifacts = Path(args.artifacts) if args.artifacts else spec.resolve().parent.parent
    try:
        run = TrainingRun.from_dict(read_json(spec))
        if run.id != spec.stem:
            raise AttnKNNError(f"{spec.name}: its content gives run id {run.id}; the training code changed since "
                               "the workflow wrote it, rerun ./run_all.sh")
        for stale in (artifacts / "models").glob(f".{run.id}.*.tmp"):  # left by a killed run of this job
            shutil.rmtree(stale, ignore_errors=True)
        set_threads(args.threads or None)
        t0 = time.perf_counter()
        result, cached = load_or_train(run, artifacts, force=args.force)
    except AttnKNNError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if args.times:

        record_time(Path(args.times), "train", run.id, time.perf_counter() - t0, cached=cached,
                    label=run.label, train_seconds=result.seconds)
    best = result.history[result.best_epoch - 1]
    print(f"[train] {run.label}: {'cached' if cached else f'trained in {time.perf_counter() - t0:.0f} s'}; "
          f"epoch {result.best_epoch} selected (val acc {best['val_accuracy']:.4f}) -> {model_dir(artifacts, run)}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

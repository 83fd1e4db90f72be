"""The training stage of a profile on another device: every run the profile trains, timed.

``python -m attnknn_lib.tooling.training_stage --device cuda --workers 3 --out FILE`` trains every
run of the plan (the ``cpu`` profile by default) with its device set to ``--device`` (amp as the
recipe says: bf16 autocast on a GPU with bf16), in ``--workers`` processes side by side, into a
temporary model cache, and writes per-kind job seconds, the stage's wall time and each run's
selected validation accuracy. This is how the GPU row of docs/benchmarks.md's generated block is
measured (a GPU machine without the workflow tools needs only torch, numpy, scikit-learn and FAISS).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from attnknn_lib.base.errors import AttnKNNError, check_choice, check_range
from attnknn_lib.base.files import write_json
from attnknn_lib.experiments.framework import catalog
from attnknn_lib.training.cache import load_or_train
from attnknn_lib.training.runs import TrainingRun, merge_runs
from attnknn_lib.workflow.profiles import resolve


def plan_runs(profile: str = "cpu") -> list[TrainingRun]:
    """Every training run of ``profile`` once, the longest kinds first (full image runs)."""
    declared = catalog.experiments()
    runs = merge_runs(r for name, params in resolve(profile, None, []).items()
                      for r in declared[name].runs(declared[name].Config(**params)))
    return sorted(runs.values(), key=lambda r: (r.data.max_train != 0 or r.data.name != "fashion_mnist", r.id))


def _worker(args: tuple[list[dict], str, str, int]) -> list[dict]:
    specs, device, artifacts, threads = args
    import torch

    torch.set_num_threads(threads)
    rows = []
    for spec in specs:
        run = TrainingRun.from_dict({**spec, "train": {**spec["train"], "device": device}})
        t0 = time.perf_counter()
        result, _ = load_or_train(run, artifacts, force=True, progress=False)
        rows.append({"label": run.label, "kind": run.kind, "data": run.data.name, "max_train": run.data.max_train,
                     "seconds": time.perf_counter() - t0, "best_epoch": result.best_epoch,
                     "val_accuracy": result.history[result.best_epoch - 1]["val_accuracy"]})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def summarise(rows: list[dict], wall_seconds: float, device: str, workers: int) -> dict:
    """Per (data, kind, full or subset) group: jobs, job seconds and mean validation accuracy."""
    groups: dict[str, dict] = defaultdict(lambda: {"jobs": 0, "seconds": 0.0, "val_accuracy": []})
    for r in rows:
        g = groups[f"{r['data']} {r['kind']}" + (f" ({r['max_train']} rows)" if r["max_train"] else "")]
        g["jobs"] += 1
        g["seconds"] += r["seconds"]
        g["val_accuracy"].append(r["val_accuracy"])
    return {"device": device, "workers": workers, "jobs": len(rows), "job_seconds": sum(r["seconds"] for r in rows),
            "wall_seconds": wall_seconds,
            "groups": {k: {**v, "val_accuracy": sum(v["val_accuracy"]) / len(v["val_accuracy"])}
                       for k, v in sorted(groups.items(), key=lambda kv: -kv[1]["seconds"])}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m attnknn_lib.tooling.training_stage",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--device", default="cuda", help="cuda, cpu or mps")
    ap.add_argument("--workers", type=int, default=3, help="training processes side by side")
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    try:
        check_range("workers", args.workers, 1, None)
        check_choice("device", args.device, ("cuda", "cpu", "mps"))
        runs = plan_runs(args.profile)
    except AttnKNNError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    threads = max(1, (os.cpu_count() or 1) // args.workers)
    parts = [[r.to_dict() for r in runs[i::args.workers]] for i in range(args.workers)]
    with tempfile.TemporaryDirectory(prefix="attnknn-stage-") as tmp:
        t0 = time.perf_counter()
        with mp.get_context("spawn").Pool(args.workers) as pool:
            rows = [row for part in pool.map(_worker, [(p, args.device, tmp, threads) for p in parts]) for row in part]
        wall = time.perf_counter() - t0
    import torch

    name = torch.cuda.get_device_name(0) if args.device == "cuda" and torch.cuda.is_available() else args.device
    write_json(Path(args.out), {"profile": args.profile, **summarise(rows, wall, name, args.workers), "runs": rows})
    print(f"[training stage] {len(rows)} runs on {name}: {wall:.0f} s wall -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

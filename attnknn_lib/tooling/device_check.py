"""Main's Fashion-MNIST comparison on another device, its verdicts beside the committed record's.

``python -m attnknn_lib.tooling.device_check --device cuda --out FILE`` runs main's Fashion-MNIST
parts (each trains its seed's Attn-KNN and CNN on ``--device`` into a fresh model cache, then embeds,
tunes the vote and scores every method) in ``--workers`` processes side by side, assembles
the record as the notebook does, and writes the wall and per-part seconds with every seed-level
verdict beside the committed record's (``results/main_fashion_mnist.json``). The ablation, the
prototype replay and the MixUp control are left out: no verdict of the comparison reads them.

This is how the GPU row of docs/benchmarks.md's generated block checks that a GPU run reaches the
cpu run's verdicts (bf16 on both, other kernels: equal verdicts are expected, equal digits are not).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

from attnknn_lib.base.errors import AttnKNNError, check_choice, check_range
from attnknn_lib.base.files import read_json, write_json
from attnknn_lib.base.paths import REPO_ROOT, Paths
from attnknn_lib.experiments.framework import catalog
from attnknn_lib.experiments.main import measure
from attnknn_lib.workflow.profiles import resolve

DATASET = "fashion_mnist"
LEFT_OUT = {"ablation": False, "replay": False, "mixup_control": 0.0}  # in no verdict of the comparison


def check_config(profile: str, device: str, seeds: str | None = None):
    """Main's config of ``profile`` on Fashion-MNIST alone, on ``device``, without :data:`LEFT_OUT`."""
    params = {**resolve(profile, ["main"], [])["main"], "datasets": DATASET, "primary": DATASET,
              "device": device, **LEFT_OUT}
    if seeds:
        params["seeds"] = seeds
    return catalog.get("main").Config(**params)


def verdicts(record: dict) -> dict[str, dict]:
    """{"<comparison> <raw|calibrated> <metric>": {value, low, high, verdict}} of a main record."""
    return {f"{name} {split} {metric}": {k: v[k] for k in ("value", "low", "high", "verdict")}
            for name, entry in record["results"]["paired"].items()
            for split, by_metric in entry["seed_level"].items() for metric, v in by_metric.items()}


def compare(ours: dict, committed: dict) -> dict:
    """Each verdict of ``ours`` beside ``committed``'s, and how many are equal."""
    rows = {key: {"device": v, "committed": committed.get(key)} for key, v in ours.items()}
    same = sum(r["committed"] is not None and r["device"]["verdict"] == r["committed"]["verdict"] for r in rows.values())
    return {"verdicts": rows, "equal": same, "of": len(rows)}


def _part(args: tuple[dict, str, str, int]) -> tuple[str, float]:
    params, part, root, threads = args
    os.environ["ATTNKNN_THREADS"] = str(threads)
    cfg = catalog.get("main").Config(**params)
    t0 = time.perf_counter()
    measure.run_part(cfg, Paths(Path(root)), part)
    return part, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m attnknn_lib.tooling.device_check",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--device", default="cuda", help="cuda, cpu or mps")
    ap.add_argument("--seeds", default=None, help="comma-separated seeds (default: the profile's)")
    ap.add_argument("--workers", type=int, default=5, help="parts side by side")
    ap.add_argument("--out", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    try:
        check_range("workers", args.workers, 1, None)
        check_choice("device", args.device, ("cuda", "cpu", "mps"))
        cfg = check_config(args.profile, args.device, args.seeds)
    except AttnKNNError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    threads = max(1, (os.cpu_count() or 1) // args.workers)
    with tempfile.TemporaryDirectory(prefix="attnknn-device-") as root:
        t0 = time.perf_counter()
        jobs = [(cfg.to_dict(), p, root, threads) for p in measure.parts(cfg)]
        with mp.get_context("spawn").Pool(args.workers) as pool:
            seconds = dict(pool.imap_unordered(_part, jobs))
        parts_wall = time.perf_counter() - t0
        for part, s in sorted(seconds.items()):
            print(f"[device check] {part}: {s:.0f} s", file=sys.stderr, flush=True)
        measure.run_dataset(cfg, DATASET, Paths(Path(root)))
        record = read_json(Path(root) / "results" / f"main_{DATASET}.json")
        wall = time.perf_counter() - t0
    import torch

    name = torch.cuda.get_device_name(0) if args.device == "cuda" and torch.cuda.is_available() else args.device
    committed = REPO_ROOT / "results" / f"main_{DATASET}.json"
    result = {"device": name, "cpu_count": os.cpu_count(), "workers": args.workers, "profile": args.profile,
              "seeds": list(cfg.seeds), "left_out": LEFT_OUT, "wall_seconds": wall, "parts_wall_seconds": parts_wall,
              "part_seconds": seconds, "torch": torch.__version__,
              **compare(verdicts(record), verdicts(read_json(committed)) if committed.exists() else {}),
              "training": {s: {k: {"best_epoch": t["best_epoch"], "seconds": t["seconds"],
                                   "val_accuracy": t["history"][t["best_epoch"] - 1].get("val_accuracy")}
                               for k, t in e["training"].items()}
                           for s, e in record["results"]["per_seed"].items()}}
    write_json(Path(args.out), result)
    print(f"[device check] main on {DATASET} on {name}: {wall:.0f} s wall; {result['equal']} of {result['of']} "
          f"verdicts equal the committed record's -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

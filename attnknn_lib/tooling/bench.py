"""``./run_all.sh bench``: this machine's speed as ratios, in one run.

* exact batched kNN search (FAISS Flat, k = 10) against this machine's fp32 GEMM, in FLOP/s;
* the attention vote (the trained model's module: projections, per-head softmax, vote) against
  the distance vote, µs per query, batched and one query at a time;
* the library's vectorised vote (:func:`attnknn_lib.knn.votes.vote`) against a naive per-row loop;
* training throughput: one training step of the CNN and of Attn-KNN (batch 256 of 28x28 images,
  forward, backward, AdamW; Attn-KNN also searches a 54k memory and votes) in fp32, and with the
  recipe's levers (the bf16 neighbour scan; bf16 autocast where the CPU has it), the batch augmentation
  and the clean-memory embedding, as images/s and as achieved GFLOP/s (counted by torch's
  FlopCounterMode) over the GEMM rate; and the images/s the last cpu run's training epochs reached;
* the smoke workflow end to end (``./run_all.sh --profile smoke`` into a temporary folder, PDFs
  and paper included) against its 6-minute budget;
* the stage times of the last ``cpu`` run in this folder (each job records its wall time under
  ``.attnknn/times/``; the notebooks fall back to their results' provenance): each notebook job
  against 15 minutes, the training time split into steps, memory refresh and the rest, the wall time
  against the training steps' floor, the cores' busy share and the three largest items left.

Prints a table, writes ``results/benchmarks.json``, the generated block of ``docs/benchmarks.md`` and
the README's run-time paragraph from it. Synthetic unit vectors stand in for the embeddings, so no trained model is needed. The
measurements are in :mod:`.speed` (the micro-benchmarks) and :mod:`.stage_times` (the smoke run and
the cpu run's stage times); :mod:`.bench_block` writes the record as a table and as that block.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

from attnknn_lib.base.errors import AttnKNNError, ConfigError
from attnknn_lib.base.files import read_json, write_json
from attnknn_lib.base.paths import REPO_ROOT
from attnknn_lib.base.provenance import machine, versions
from attnknn_lib.base.runtime import set_threads
from attnknn_lib.report.readme import RUN_TIME_END, RUN_TIME_START, replace_block, run_time_paragraph
from attnknn_lib.tooling.bench_block import markdown, ratios, table
from attnknn_lib.tooling.speed import BenchConfig, search_vs_gemm, training_throughput, votes
from attnknn_lib.tooling.stage_times import cpu_stage_times, run_throughput, smoke_end_to_end


def run(cfg: BenchConfig, root: Path = REPO_ROOT) -> dict:
    threads = set_threads()
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    out = {"config": asdict(cfg), "threads": threads, "started": started, "machine": machine(),
           "packages": versions()}
    print(f"[bench] search vs GEMM ({cfg.queries} queries x {cfg.bank} x {cfg.dim})", file=sys.stderr)
    out["search_vs_gemm"] = search_vs_gemm(cfg)
    print("[bench] attention vote vs distance vote; vectorised vote vs a per-row loop", file=sys.stderr)
    out["votes"] = votes(cfg)
    print("[bench] training throughput (one step of each model, augmentation, bank embedding)", file=sys.stderr)
    out["training"] = training_throughput(cfg, out["search_vs_gemm"]["gemm_gflops"])
    out["training_in_cpu_run"] = run_throughput(root)
    out["cpu_run"] = cpu_stage_times(root)
    gpu = root / "results" / "training_stage_cuda.json"
    if gpu.exists():  # measured on a GPU machine (training_stage); not rerun here
        out["training_stage_cuda"] = {k: v for k, v in read_json(gpu).items() if k != "runs"}
    check = root / "results" / "device_check_cuda.json"
    if check.exists():  # main's comparison measured on a GPU machine (device_check); not rerun here
        out["device_check_cuda"] = read_json(check)
        # the same check on other GPUs (device_check_cuda_<gpu>.json), set beside the first
        out["device_check_cuda_repeats"] = [read_json(f) for f in sorted(check.parent.glob("device_check_cuda_*.json"))]
    out["profiles"] = committed_profiles(root)
    if cfg.smoke:
        print("[bench] the smoke workflow end to end (about 5 minutes)", file=sys.stderr)
        out["smoke"] = smoke_end_to_end()
    return out


def committed_profiles(root: Path = REPO_ROOT) -> dict:
    """The committed notebook profiles (``results/profile_<experiment>.json``, written by
    :mod:`attnknn_lib.tooling.profiling`), by experiment."""
    return {read_json(f)["experiment"]: read_json(f) for f in sorted((root / "results").glob("profile_*.json"))}


HISTORY_RUNS = 10  # earlier bench runs whose ratios are kept for the spread column


def with_history(bench: dict, previous: dict | None) -> dict:
    """``bench`` plus ``history``: the ratios of the earlier bench runs on this machine (from the
    previous ``benchmarks.json``), so docs/benchmarks.md can show how much they vary between runs."""
    history = list((previous or {}).get("history", []))
    if previous:
        history.append({"started": previous["started"], "ratios": ratios(previous)})
    return {**bench, "history": history[-(HISTORY_RUNS - 1):]}


BENCH_START, BENCH_END = "<!-- bench:start -->", "<!-- bench:end -->"
BENCH_DOC = "docs/benchmarks.md"  # the file whose block between the markers is generated (relative to the repository)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="./run_all.sh bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-smoke", action="store_true", help="skip the smoke workflow (about 5 minutes)")
    ap.add_argument("--repeats", type=int, default=BenchConfig.repeats, help="timed repeats per measurement (median)")
    ap.add_argument("--out", default=None, help="write benchmarks.json here instead of results/ (docs/benchmarks.md untouched)")
    args = ap.parse_args(argv)
    try:
        cfg = BenchConfig(repeats=args.repeats, smoke=not args.no_smoke)
        if cfg.smoke and shutil.which("latexmk") is None:
            raise ConfigError("latexmk not found: the smoke workflow builds the paper; install the LaTeX tools "
                              "(docs/workflow.md lists them) or pass --no-smoke")
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        bench = run(cfg)
    except AttnKNNError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(table(bench).to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    path = (Path(args.out) if args.out else REPO_ROOT / "results") / "benchmarks.json"
    previous = read_json(path) if path.exists() else None
    bench = with_history(bench, previous)
    write_json(path, bench)
    if args.out is None:
        replace_block(REPO_ROOT / BENCH_DOC, BENCH_START, BENCH_END, markdown(bench))
        replace_block(REPO_ROOT / "README.md", RUN_TIME_START, RUN_TIME_END, run_time_paragraph(bench))
    print(f"[bench] wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

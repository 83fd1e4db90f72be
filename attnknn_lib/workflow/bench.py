"""``./run_all.sh bench``: this machine's speed as ratios, in one run.

* exact batched kNN search (FAISS Flat, k = 10) against this machine's fp32 GEMM, in FLOP/s;
* the attention vote (the trained model's module: projections, per-head softmax, vote) against
  the distance vote, µs per query, batched and one query at a time;
* the library's vectorised vote (:func:`attnknn_lib.knn.votes.vote`) against a naive per-row loop;
* training throughput: one training step of the CNN and of Attn-KNN (batch 256 of 28x28 images,
  forward, backward, AdamW; Attn-KNN also searches a 54k bank and votes) in fp32, and with the
  recipe's levers (the bf16 neighbour scan; bf16 autocast where the CPU has it), the batch augmentation
  and the clean-bank embedding, as images/s and as achieved GFLOP/s (counted by torch's
  FlopCounterMode) over the GEMM rate; and the images/s the last cpu run's training epochs reached;
* the smoke workflow end to end (``./run_all.sh --profile smoke`` into a temporary folder, PDFs
  and paper included) against its 6-minute budget;
* the stage times of the last ``cpu`` run in this folder (each job records its wall time under
  ``.attnknn/times/``; the notebooks fall back to their results' provenance): each notebook job
  against 15 minutes, the training time split into steps, bank refresh and the rest, the wall time
  against the training steps' floor, the cores' busy share and the three largest items left.

Prints a table, writes ``results/benchmarks.json`` and the README's benchmark block from it.
Synthetic unit vectors stand in for the embeddings, so no trained model is needed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch

from attnknn_lib.base.errors import AttnKNNError, ConfigError, check_range
from attnknn_lib.base.files import read_json, write_json
from attnknn_lib.base.paths import REPO_ROOT, Paths
from attnknn_lib.base.provenance import machine, versions
from attnknn_lib.base.runtime import channels_last, set_threads, to_device
from attnknn_lib.base.timing import median_seconds
from attnknn_lib.data.transforms import BatchAugment
from attnknn_lib.evaluation.inference import embed
from attnknn_lib.experiments import catalog
from attnknn_lib.experiments.efficiency.config import Config as EfficiencyConfig
from attnknn_lib.experiments.efficiency.measure import gemm_yardstick
from attnknn_lib.knn.index_costs import unit_vectors
from attnknn_lib.knn.votes import distance_weights, vote
from attnknn_lib.models import AttentionConfig, MultiHeadNeighborAttention, attend, build_attnknn, build_cnn
from attnknn_lib.models.losses import supervised_contrastive, vote_nll
from attnknn_lib.report.readme import replace_block
from attnknn_lib.training.loops import TrainConfig, cpu_has_bf16, training_neighbors
from attnknn_lib.training.recipe import Recipe
from attnknn_lib.workflow.plan import TIMES
from attnknn_lib.workflow.profiles import resolve
from attnknn_lib.workflow.profiling import OWNERS

SMOKE_BUDGET_S = 6 * 60
NOTEBOOK_BUDGET_S = 15 * 60  # each notebook job (and each part job) of the cpu profile, in job time
REST_BUDGET = 0.05  # training time outside the steps and the bank refresh, as a share of training time


@dataclass(frozen=True)
class BenchConfig:
    bank: int = 54_000  # the cpu profile's Fashion-MNIST memory bank
    dim: int = 128
    queries: int = 2_000
    single_queries: int = 100  # one-at-a-time calls timed per repeat
    k: int = 16
    num_classes: int = 10
    gemm_size: int = 2048
    repeats: int = 5
    smoke: bool = True  # run the smoke workflow (about 5 minutes here)

    def __post_init__(self) -> None:
        for name in ("bank", "dim", "queries", "single_queries", "k", "gemm_size", "repeats"):
            check_range(name, getattr(self, name), 1, None)
        check_range("num_classes", self.num_classes, 2, None)
        check_range("k", self.k, 1, self.bank)


def naive_vote(weights: np.ndarray, labels: np.ndarray, num_classes: int) -> np.ndarray:
    """The vote as a per-row, per-neighbour Python loop: p[i, y_ij] += w_ij (the yardstick)."""
    probs = np.zeros((len(weights), num_classes))
    for i in range(len(weights)):
        for j in range(weights.shape[1]):
            probs[i, labels[i, j]] += weights[i, j]
    return probs


def search_vs_gemm(cfg: BenchConfig) -> dict:
    """Exact batched search (FAISS Flat L2 and IP) in GFLOP/s against a square fp32 GEMM."""

    bank, queries = unit_vectors(cfg.bank, cfg.dim, seed=0), unit_vectors(cfg.queries, cfg.dim, seed=1)
    eff = EfficiencyConfig(gemm_size=cfg.gemm_size, repeats=cfg.repeats, recall_k=10)
    return gemm_yardstick(eff, bank, queries)


def votes(cfg: BenchConfig) -> dict:
    """µs per query: attention vote vs distance vote (batched and single), vectorised vs naive vote."""

    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    b, k, d, c = cfg.queries, cfg.k, cfg.dim, cfg.num_classes
    q = torch.nn.functional.normalize(torch.randn(b, d), dim=1)  # (B, D)
    nb = torch.nn.functional.normalize(q[:, None, :] + 0.3 * torch.randn(b, k, d), dim=2)  # (B, k, D)
    sq = ((nb - q[:, None, :]) ** 2).sum(-1).sort(dim=1).values.numpy()  # (B, k), nearest first
    labels = rng.integers(0, c, size=(b, k))
    y = torch.from_numpy(labels)
    att = MultiHeadNeighborAttention(AttentionConfig(num_classes=c, embed_dim=d)).eval()

    def attention(s: slice) -> np.ndarray:
        with torch.no_grad():
            return attend(att, q[s], nb[s], y[s]).probs.numpy()

    def distance(s: slice) -> np.ndarray:
        return vote(distance_weights(np.sqrt(sq[s]), 0.1), labels[s], c)

    ones = [slice(i, i + 1) for i in range(min(cfg.single_queries, b))]
    us = {}
    for name, fn in (("attention", attention), ("distance", distance)):
        us[f"{name}_batched"] = 1e6 * median_seconds(lambda: fn(slice(None)), cfg.repeats) / b
        us[f"{name}_single"] = 1e6 * median_seconds(lambda: [fn(s) for s in ones], cfg.repeats) / len(ones)
    w = distance_weights(np.sqrt(sq), 0.1)
    us["vote_vectorised"] = 1e6 * median_seconds(lambda: vote(w, labels, c), cfg.repeats) / b
    us["vote_naive_loop"] = 1e6 * median_seconds(lambda: naive_vote(w, labels, c), max(1, cfg.repeats // 2)) / b
    if not np.allclose(vote(w, labels, c), naive_vote(w, labels, c)):
        raise AttnKNNError("the vectorised vote and the per-row loop disagree")  # a benchmark of a wrong result is void
    return {"us_per_query": us, "k": k, "queries": b,
            "attention_over_distance_batched": us["attention_batched"] / us["distance_batched"],
            "attention_over_distance_single": us["attention_single"] / us["distance_single"],
            "naive_over_vectorised": us["vote_naive_loop"] / us["vote_vectorised"]}


def _median_ms(fn, repeats: int) -> float:
    return 1e3 * median_seconds(fn, repeats)


def training_throughput(cfg: BenchConfig, gemm_gflops: float) -> dict:
    """One training step of each model, the augmentation and the clean-bank embedding, on synthetic
    Fashion-MNIST-shaped batches in the training loops' memory format (see the module docstring)."""
    from types import SimpleNamespace

    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    b = 256
    recipe = Recipe()
    x = to_device(torch.randn(b, 1, 28, 28), "cpu")
    y = torch.randint(0, cfg.num_classes, (b,))
    image = SimpleNamespace(kind="image", name="synthetic", input_shape=(1, 28, 28), mean=(0.286,), std=(0.353,))
    augment = BatchAugment(image)
    gen = torch.Generator().manual_seed(0)
    cnn = channels_last(build_cnn("small_cnn", (1, 28, 28), cfg.num_classes, widths=list(recipe.widths())))
    attn = channels_last(build_attnknn("small_cnn", (1, 28, 28), recipe.attention_config(cfg.num_classes),
                                       widths=list(recipe.widths())))
    bank = torch.from_numpy(unit_vectors(cfg.bank, recipe.embed_dim, seed=0))
    bank_labels = torch.randint(0, cfg.num_classes, (cfg.bank,))
    opts = {"cnn": torch.optim.AdamW(cnn.parameters()), "attnknn": torch.optim.AdamW(attn.parameters())}

    bank_bf16 = bank.to(torch.bfloat16)
    own = torch.arange(b)[:, None]

    def cnn_step(amp: bool = False):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            loss = torch.nn.functional.cross_entropy(cnn(x).float(), y)
        opts["cnn"].zero_grad()
        loss.backward()
        opts["cnn"].step()

    def attnknn_step(scan_bf16: bool = False, amp: bool = False):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            q = attn.embedder(x).float()
            rows = training_neighbors(q.detach(), bank, own, recipe.k, bank_bf16 if scan_bf16 else None)
            out = attn.attend(q, bank[rows], bank_labels[rows])
            loss = vote_nll(out.probs, y) + 0.5 * supervised_contrastive(q, y, 0.07)
        opts["attnknn"].zero_grad()
        loss.backward()
        opts["attnknn"].step()

    # fp32 with the exact scan; then the levers the recipe uses: the bf16 scan re-ranked in fp32, and
    # bf16 autocast (amp) where this CPU has native bf16
    native = cpu_has_bf16()
    steps = {"cnn_step": cnn_step, "attnknn_step": attnknn_step,
             "attnknn_step_bf16_scan": lambda: attnknn_step(scan_bf16=True)}
    if native:
        steps |= {"cnn_step_amp": lambda: cnn_step(amp=True),
                  "attnknn_step_amp": lambda: attnknn_step(scan_bf16=True, amp=True)}
    out = {"batch": b, "gemm_gflops": gemm_gflops, "native_bf16": native}
    for name, step in steps.items():
        with FlopCounterMode(display=False) as counter:
            step()
        ms = _median_ms(step, cfg.repeats)
        gflops = counter.get_total_flops() / 1e9 / (ms / 1e3)
        out[name] = {"ms": ms, "images_per_s": b / (ms / 1e3), "gflop_per_step": counter.get_total_flops() / 1e9,
                     "gflops": gflops, "over_gemm": gflops / gemm_gflops}
    ms = _median_ms(lambda: augment(x, gen), cfg.repeats)
    out["augment"] = {"ms": ms, "images_per_s": b / (ms / 1e3)}
    xe = torch.randn(4096, 1, 28, 28)
    for key, size in (("bank_embedding_1024", 1024), ("bank_embedding", TrainConfig.eval_batch_size)):
        ms = _median_ms(lambda size=size: embed(attn.embedder, xe, size), cfg.repeats)
        out[key] = {"batch": size, "ms_per_4096": ms, "images_per_s": 4096 / (ms / 1e3)}
    return out


def run_throughput(root: Path = REPO_ROOT) -> dict | None:
    """Training images/s of the last cpu run's primary-dataset models (epochs' training seconds,
    one thread per job, two jobs side by side), or None without that run's results."""
    path = root / "results" / "main_fashion_mnist.json"
    if not path.exists():
        return None
    record = read_json(path)
    if record.get("profile") != "cpu":
        return None
    n = record["results"]["dataset"]["n_train"]
    out = {}
    for kind in ("attnknn", "cnn"):
        hist = [h for s in record["results"]["per_seed"].values() for h in s["training"][kind]["history"]]
        train = sum(h["train_seconds"] for h in hist)
        total = sum(h["seconds"] for h in hist)
        out[kind] = {"epochs": len(hist), "images_per_s": n * len(hist) / train,
                     "share_outside_steps": 1 - train / total}  # bank rebuild, validation
    return out


def smoke_end_to_end() -> dict:
    """Wall seconds of ``./run_all.sh --profile smoke`` (PDFs and paper) into a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="attnknn-bench-") as tmp:
        t0 = time.perf_counter()
        proc = subprocess.run(["bash", str(REPO_ROOT / "run_all.sh"), "--profile", "smoke", "--out", tmp],
                              cwd=REPO_ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise AttnKNNError(f"the smoke workflow failed ({tail[0]}); run ./run_all.sh --profile smoke to see why")
    return {"seconds": seconds, "budget_seconds": SMOKE_BUDGET_S, "over_budget": seconds / SMOKE_BUDGET_S}


def covered_seconds(spans: list[tuple[float, float]]) -> float:
    """The length of the union of the intervals ``spans`` [(start, end)]: |U_i [s_i, e_i]|, the
    time during which at least one job ran (overlaps counted once, gaps not at all)."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def cpu_stage_times(root: Path = REPO_ROOT) -> dict:
    """Stage times of the last ``cpu`` run under ``root``: the training jobs of the cpu plan, each
    notebook, the PDF exports, the report and the paper (job wall times from ``.attnknn/times``;
    a notebook without one falls back to its results' provenance, a training run to its
    model's recorded training seconds)."""

    times = root / TIMES
    paths = Paths.at(None if root == REPO_ROOT else root)

    spans: list[tuple[float, float]] = []  # (start, end) of every job record read: the run's wall time

    def timed(stage: str, name: str) -> float | None:
        f = times / f"{stage}-{name}.json"
        if not f.exists():
            return None
        rec = read_json(f)
        if rec.get("finished"):
            end = datetime.fromisoformat(rec["finished"]).timestamp()
            spans.append((end - rec["seconds"], end))
        return rec["seconds"]

    resolved = resolve("cpu", None, [])
    declared = catalog.experiments()
    by_exp = {n: {r.id for r in declared[n].runs(declared[n].Config(**p))} for n, p in resolved.items()}
    run_ids = set().union(*by_exp.values())

    def train_seconds(rid: str) -> float | None:
        s = timed("train", rid)
        if s is None:
            meta = paths.artifacts / "models" / rid / "train.json"
            s = read_json(meta)["seconds"] if meta.exists() else None
        return s

    def epoch_seconds(rid: str, key: str) -> float | None:
        """The sum over the run's epochs of ``key``: ``train_seconds`` (the training steps: forward,
        backward and optimiser over the epoch's batches), ``refresh_seconds`` (the clean bank's
        rebuild: the training set embedded in eval mode) or ``seconds`` (the whole epoch, validation
        included), from its model's record; None where an epoch lacks it (a model trained before it
        was recorded)."""
        meta = paths.artifacts / "models" / rid / "train.json"
        hist = read_json(meta).get("history", []) if meta.exists() else []
        values = [h.get(key) for h in hist]
        return sum(values) if values and None not in values else None

    seconds = {rid: train_seconds(rid) for rid in sorted(run_ids)}
    missing = sum(s is None for s in seconds.values())
    train = sum(s for s in seconds.values() if s is not None)
    sums = {}
    for key in ("train_seconds", "refresh_seconds", "seconds"):
        got = [epoch_seconds(rid, key) for rid in sorted(run_ids)]
        sums[key] = sum(got) if got and None not in got else None
    stages = {"training": {"seconds": train if missing < len(run_ids) else None, "jobs": len(run_ids),
                           "missing": missing, "step_seconds": sums["train_seconds"],
                           "refresh_seconds": sums["refresh_seconds"]}}
    t = stages["training"]
    if None not in (t["seconds"], t["step_seconds"], t["refresh_seconds"]) and not missing:
        # the rest: process start-up, loading, per-epoch validation and bookkeeping
        t["rest_seconds"] = t["seconds"] - t["step_seconds"] - t["refresh_seconds"]
        if sums["seconds"] is not None:  # split where it is paid: inside the epochs, or once per job
            t["rest_in_epochs_seconds"] = sums["seconds"] - t["step_seconds"] - t["refresh_seconds"]
            t["rest_outside_epochs_seconds"] = t["seconds"] - sums["seconds"]
    for name in resolved:
        s, source = timed("notebook", name), "job"
        if s is None:  # the notebook's compute: its results' provenance (the last record written is the longest)
            declared_records = declared[name].artifacts.files(declared[name].Config(**resolved[name]), "record")
            records = [read_json(root / f) for f in declared_records if (root / f).exists()]
            walls = [r["provenance"]["wall_seconds"] for r in records
                     if r.get("profile") == "cpu" and r.get("experiment") == name]
            s, source = (max(walls), "provenance") if walls else (None, "none")
        # the training jobs no other experiment uses (e.g. the attention study's end-to-end control)
        own = by_exp[name] - set().union(*(ids for other, ids in by_exp.items() if other != name))
        own_s = [seconds[rid] for rid in own]
        stages[f"notebook {name}"] = {"seconds": s, "source": source, "own_training_jobs": len(own),
                                      "own_training_seconds": sum(x for x in own_s if x is not None)
                                      if all(x is not None for x in own_s) else None}
        exp_parts = declared[name].parts(declared[name].Config(**resolved[name])) if declared[name].parts else []
        if exp_parts:  # the measurement's part jobs, which ran before the notebook job, beside others
            stages[f"notebook {name}"]["parts"] = {p: timed("part", f"{name}-{p}") for p in exp_parts}
    pdfs = [timed("pdf", Path(declared[n].notebook).stem) for n in resolved]
    stages["pdf"] = {"seconds": sum(p for p in pdfs if p is not None) if any(p is not None for p in pdfs) else None,
                     "jobs": len(pdfs),
                     "missing": sum(p is None for p in pdfs)}
    stages["report"] = {"seconds": timed("report", "report")}
    stages["paper"] = {"seconds": timed("paper", "paper")}
    total = sum(v["seconds"] or 0.0 for v in stages.values())  # own training is inside "training"
    total += sum(x or 0.0 for v in stages.values() for x in (v.get("parts") or {}).values())  # part jobs
    complete = missing == 0 and all(v["seconds"] is not None and not v.get("missing") for v in stages.values())
    # jobs run side by side, so the run's wall time is less than the sum of the job times; a run
    # resumed in a later session pauses between sessions, so the wall time counts only the time
    # some job was running (first job's start to last job's end, less the gaps)
    wall = covered_seconds(spans) if spans else None
    cores = os.cpu_count() or 1
    steps = stages["training"]["step_seconds"]
    return {"stages": stages, "total_seconds": total, "wall_seconds": wall, "complete": complete, "cores": cores,
            # the job time over the core time the wall time gave: how busy the cores were
            "busy_share": total / (wall * cores) if wall else None,
            # the training steps spread over every core: no schedule of these jobs ends sooner
            "floor_seconds": steps / cores if steps is not None else None}


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
    :mod:`attnknn_lib.workflow.profiling`), by experiment."""
    return {read_json(f)["experiment"]: read_json(f) for f in sorted((root / "results").glob("profile_*.json"))}


def profile_lines(profiles: dict, n: int = 3, run_stages: dict | None = None) -> list[str]:
    """Where each profiled job's time goes: one row per notebook or training job with its largest
    library building block (the most cumulative time outside ``experiments/``, under 90 % of the
    whole) and its time split by owner (torch, FAISS, NumPy/SciPy, the library's own lines, the
    rest; shares of the profiled time), then its library functions with the most own time."""
    if not profiles:
        return []
    stages = run_stages or {}
    lines = ["", "Where each job's time goes (`python -m attnknn_lib.workflow.profiling NAME`, "
                 "`results/profile_NAME.json`): cProfile of a notebook's measurement on the run's cached models, or of "
                 "a training job trained afresh for a few epochs (`train_*`), on the threads its workflow job gets "
                 "(the run's job time where the profile used the run's parameters). The largest block is the "
                 "library call (outside `experiments/`, under 90 % of the whole) with the most time, callees "
                 "included; each owner's share is its own time over the profiled time:", "",
             "| job | profiled | run's job | largest block | " + " | ".join(c for c, _ in OWNERS.values()) + " |",
             "| --- | ---: | ---: | --- | " + " | ".join("---:" for _ in OWNERS) + " |"]
    notes = []
    for name, p in profiles.items():
        # the run's job only where the profile ran it as the run did (no -p overrides)
        job = None if p["overrides"] else (stages.get(f"notebook {name}") or {}).get("seconds")
        owners = p.get("by_owner") or {}
        total = sum(owners.values())
        cells = [f"{100 * owners.get(k, 0.0) / total:.0f} %" if total else "-" for k in OWNERS]
        block = largest_block(p)
        big = (f"`{_short(block['function'])}` {100 * block['cumulative_seconds'] / p['wall_seconds']:.0f} %"
               if block else "-")
        knobs = f", {', '.join(p['overrides'])}" if p["overrides"] else ""
        lines.append(f"| `{name}` | {p['wall_seconds']:,.0f} s ({p.get('threads', '?')} thr.{knobs}) | "
                     f"{f'{job:,.0f} s' if job else '-'} | {big} | " + " | ".join(cells) + " |")
        notes.append(f"- `{name}`: " + ", ".join(f"`{_short(r['function'])}` {r['own_seconds']:.1f} s"
                                                  for r in p["by_own_time"][:n]))
    lines += ["", "Owners: " + "; ".join(f"{c}: {d}" for c, d in OWNERS.values()) + ". The library functions "
              "with the most own time (their Python and the operator arithmetic in their lines):", "", *notes]
    return lines


def largest_block(profile: dict) -> dict | None:
    """A profile's largest library call: the first by cumulative time outside ``experiments/``
    that is under 90 % of the whole (the entry points above it hold everything)."""
    return next((r for r in profile["by_cumulative_time"] if not r["function"].startswith("attnknn_lib/experiments/")
                 and r["cumulative_seconds"] < 0.9 * profile["wall_seconds"]), None)


def _short(function: str) -> str:
    """``attnknn_lib/knn/votes.py:178(vote)`` -> ``knn/votes.py:178(vote)``."""
    return function.removeprefix("attnknn_lib/")


def table(bench: dict):
    """The benchmark as rows (what, measured, ratio, ratio means) in a pandas DataFrame."""
    import pandas as pd

    g, v = bench["search_vs_gemm"], bench["votes"]
    us = v["us_per_query"]
    rows = [("exact search (Flat L2) vs GEMM", f"{g['flat_search_gflops']:.0f} vs {g['gemm_gflops']:.0f} GFLOP/s",
             g["flat_search_over_gemm"], "share of GEMM speed"),
            ("exact search (Flat IP) vs GEMM", f"{g['flat_ip_search_gflops']:.0f} vs {g['gemm_gflops']:.0f} GFLOP/s",
             g["flat_ip_search_over_gemm"], "share of GEMM speed"),
            ("attention vote vs distance vote, batched", f"{us['attention_batched']:.2f} vs "
             f"{us['distance_batched']:.2f} µs/query", v["attention_over_distance_batched"], "times slower"),
            ("attention vote vs distance vote, one query", f"{us['attention_single']:.0f} vs "
             f"{us['distance_single']:.0f} µs/query", v["attention_over_distance_single"], "times slower"),
            ("vectorised vote vs per-row loop", f"{us['vote_vectorised']:.3f} vs {us['vote_naive_loop']:.2f} µs/query",
             v["naive_over_vectorised"], "times faster")]
    t = bench.get("training")
    if t:
        for key, what in (("cnn_step", "CNN"), ("attnknn_step", "Attn-KNN")):
            e = t[key]
            rows.append((f"{what} training step (batch {t['batch']}, fp32) vs GEMM",
                         f"{e['images_per_s']:,.0f} images/s, {e['gflops']:.0f} GFLOP/s", e["over_gemm"],
                         "share of GEMM speed"))
            for lever, how in (("_bf16_scan", "bf16 neighbour scan"), ("_amp", "bf16 scan and amp" if
                                                                         key == "attnknn_step" else "amp")):
                if key + lever in t:
                    e2 = t[key + lever]
                    rows.append((f"{what} training step, {how}, vs fp32", f"{e2['images_per_s']:,.0f} images/s",
                                 e2["images_per_s"] / e["images_per_s"], "times faster"))
        rows.append(("batch augmentation / bank embedding", f"{t['augment']['images_per_s']:,.0f} / "
                     f"{t['bank_embedding']['images_per_s']:,.0f} images/s", float("nan"), ""))
        if "bank_embedding_1024" in t:  # the refresh's batch against the earlier 1024 (same embeddings, bit for bit)
            b = t["bank_embedding"]
            rows.append((f"bank refresh embedding, batch {b['batch']} vs 1024", f"{b['images_per_s']:,.0f} vs "
                         f"{t['bank_embedding_1024']['images_per_s']:,.0f} images/s",
                         b["images_per_s"] / t["bank_embedding_1024"]["images_per_s"], "times faster"))
    for kind, e in (bench.get("training_in_cpu_run") or {}).items():
        rows.append((f"cpu run: {'Attn-KNN' if kind == 'attnknn' else 'CNN'} training epochs",
                     f"{e['images_per_s']:,.0f} images/s (one thread per job)", e["share_outside_steps"],
                     "share of epoch time outside the steps"))
    if "smoke" in bench:
        s = bench["smoke"]
        rows.append(("smoke workflow end to end (PDFs, paper)", f"{s['seconds']:.0f} s", s["over_budget"],
                     f"share of its {s['budget_seconds'] // 60} min budget"))
    cpu = bench["cpu_run"]
    for name, st in cpu["stages"].items():
        if st["seconds"] is None:
            rows.append((f"cpu run: {name}", "not recorded", float("nan"), ""))
            continue
        extra = f" ({st['jobs']} jobs{', ' + str(st['missing']) + ' not recorded' if st.get('missing') else ''})" \
            if "jobs" in st else ""
        notebook = name.startswith("notebook ")
        rows.append((f"cpu run: {name}", f"{st['seconds']:.0f} s{extra}",
                     st["seconds"] / NOTEBOOK_BUDGET_S if notebook else float("nan"),
                     "share of 15 min" if notebook else ""))
        if st.get("step_seconds") is not None:
            rows.append(("cpu run: training steps alone (forward, backward, optimiser)",
                         f"{st['step_seconds']:.0f} of {st['seconds']:.0f} s", st["step_seconds"] / st["seconds"],
                         "share of training time"))
        if st.get("rest_seconds") is not None:
            for key, what in (("refresh_seconds", "the clean bank's refresh each epoch"),
                              ("rest_seconds", "the rest (start-up, loading, validation, bookkeeping)")):
                rows.append((f"cpu run: training, {what}", f"{st[key]:.0f} of {st['seconds']:.0f} s",
                             st[key] / st["seconds"], "share of training time"))
        part_s = {p: x for p, x in (st.get("parts") or {}).items() if x is not None}
        if part_s:
            longest = max(part_s, key=part_s.get)
            rows.append((f"cpu run: {name}, its {len(part_s)} part jobs",
                         f"{sum(part_s.values()):.0f} s in all, longest {part_s[longest]:.0f} s ({longest})",
                         part_s[longest] / NOTEBOOK_BUDGET_S, "longest part's share of 15 min"))
    rows.append(("cpu run: sum of the job times" + ("" if cpu["complete"] else " (incomplete record)"),
                 f"{cpu['total_seconds'] / 60:.1f} min on {cpu.get('cores', 1)} cores",
                 cpu["busy_share"] if cpu.get("busy_share") is not None else float("nan"),
                 "cores' busy share over the wall time"))
    if cpu.get("wall_seconds") is not None:
        floor = cpu.get("floor_seconds")
        rows.append(("cpu run: wall time while jobs ran (side by side; pauses between sessions left out)", f"{cpu['wall_seconds'] / 60:.1f} min",
                     cpu["wall_seconds"] / floor if floor else float("nan"),
                     "times the training steps' floor" if floor else ""))
    return pd.DataFrame(rows, columns=["measurement", "measured", "ratio", "ratio means"])


def ratios(bench: dict) -> dict[str, float]:
    """The micro-benchmarks' ratios of one bench run (the cpu run's stage times are that run's, not
    the bench's, and are left out)."""
    return {r.measurement: float(r.ratio) for r in table(bench).itertuples(index=False)
            if r.ratio == r.ratio and not r.measurement.startswith(("cpu run", "smoke"))}


HISTORY_RUNS = 10  # earlier bench runs whose ratios are kept for the spread column


def with_history(bench: dict, previous: dict | None) -> dict:
    """``bench`` plus ``history``: the ratios of the earlier bench runs on this machine (from the
    previous ``benchmarks.json``), so the README can show how much they vary between runs."""
    history = list((previous or {}).get("history", []))
    if previous:
        history.append({"started": previous["started"], "ratios": ratios(previous)})
    return {**bench, "history": history[-(HISTORY_RUNS - 1):]}


def largest_items(cpu: dict, profiles: dict | None = None, n: int = 3) -> list[tuple[str, float, str]]:
    """The ``n`` largest items of the cpu run's job time (the training steps, the bank refresh, the
    rest of training, each notebook with its part jobs, the PDF exports), each with what it would
    take to cut it; a notebook's answer names its profile's largest block where one is committed."""
    stages = cpu.get("stages") or {}
    train = stages.get("training") or {}
    items: list[tuple[str, float, str]] = []
    for key, what, cut in (
            ("step_seconds", "training steps", "a GPU (the training stage below) or fewer epochs; on this CPU "
             "they already run in bf16 at the speeds above"),
            ("refresh_seconds", "the clean bank's refresh", "refreshing the bank less often than every epoch, "
             "which changes the method's numbers"),
            ("rest_seconds", "training outside the steps and the refresh", "fewer, longer training processes "
             "(start-up and loading are paid per job)")):
        if train.get(key) is not None:
            items.append((what, train[key], cut))
    for name, st in stages.items():
        if not name.startswith("notebook ") or st.get("seconds") is None:
            continue
        seconds = st["seconds"] + sum(x for x in (st.get("parts") or {}).values() if x is not None)
        p = (profiles or {}).get(name.removeprefix("notebook "))
        block = largest_block(p) if p else None
        cut = (f"a faster `{_short(block['function'])}`, {100 * block['cumulative_seconds'] / p['wall_seconds']:.0f} % "
               "of its profile" if block else "faster part jobs (the longest one decides when the notebook can start)"
               if st.get("parts") else "splitting it into part jobs that run beside the others")
        items.append((name + (" and its part jobs" if st.get("parts") else ""), seconds, cut))
    if (stages.get("pdf") or {}).get("seconds") is not None:
        items.append(("PDF exports", stages["pdf"]["seconds"], "fewer pages"))
    return sorted(items, key=lambda it: -it[1])[:n]


def rest_split_sentence(train: dict) -> str:
    """Where the training time outside the steps and the refresh is paid: inside the epochs (the
    validation set embedded and scored every epoch, which picks the checkpoint, and bookkeeping) and
    once per job (start-up, loading, saving); and whether the part inside the epochs alone is over
    the goal. Empty without the split."""
    inside, outside = train.get("rest_in_epochs_seconds"), train.get("rest_outside_epochs_seconds")
    if inside is None or outside is None or not train.get("seconds"):
        return ""
    total = train["seconds"]
    said = (f" Of it, {inside:,.0f} s ({100 * inside / total:.1f} %) is paid inside the epochs (the validation set "
            f"embedded and scored every epoch, which picks the checkpoint, and bookkeeping) and {outside:,.0f} s "
            f"({100 * outside / total:.1f} %) once per job (start-up, loading, saving).")
    if inside / total > REST_BUDGET:
        said += (f" With no per-job cost at all, the part inside the epochs would still be above the "
                 f"{100 * REST_BUDGET:.0f} % goal: meeting it needs a cheaper validation each epoch, not fewer processes.")
    return said


def floor_lines(cpu: dict, profiles: dict | None = None) -> list[str]:
    """The cpu run against its floor: the training steps' job seconds spread over every core (no
    change that keeps the steps can end the run sooner), the wall time over that floor, the cores'
    busy share, and the three largest items left with what each would take to cut."""
    train = (cpu.get("stages") or {}).get("training") or {}
    if train.get("step_seconds") is None or not cpu.get("floor_seconds"):
        return []
    cores = cpu.get("cores", 1)
    said = (f"The training steps alone (forward, backward and optimiser passes of the {train['jobs']} training jobs, "
            f"one thread per job) took {train['step_seconds']:,.0f} s of job time: on {cores} core"
            f"{'s' * (cores > 1)} no run can end sooner than {cpu['floor_seconds'] / 60:,.0f} min, the floor.")
    if cpu.get("wall_seconds"):
        said += (f" The run took {cpu['wall_seconds'] / 60:,.0f} min of wall time, {cpu['wall_seconds'] / cpu['floor_seconds']:.2f} "
                 f"times the floor, with the cores busy {100 * cpu['busy_share']:.0f} % of it.")
    rest = train.get("rest_seconds")
    if rest is not None:
        share = rest / train["seconds"]
        said += (f" Training time outside the steps and the bank refresh is {100 * share:.1f} % of training time "
                 f"({'within' if share <= REST_BUDGET else 'above'} the {100 * REST_BUDGET:.0f} % goal).")
        said += rest_split_sentence(train)
    lines = ["", said]
    items = largest_items(cpu, profiles)
    if items:
        lines += ["", "The three largest items left, and what it would take to cut each:", ""]
        lines += [f"- {what}: {seconds:,.0f} s of job time; to cut it: {cut}." for what, seconds, cut in items]
    return lines


def markdown(bench: dict) -> str:
    """The README's benchmark block: the table with the spread of each ratio over the recorded bench
    runs, and where and when it was measured."""
    frame = table(bench)
    history = bench.get("history", [])
    lines = ["| measurement | measured | ratio | | range over bench runs |", "| --- | --- | ---: | --- | --- |"]
    for r in frame.itertuples(index=False):
        ratio = "" if r.ratio != r.ratio else f"{r.ratio:.2f}"
        seen = [h["ratios"][r.measurement] for h in history if r.measurement in h["ratios"]]
        spread = (f"{min(seen + [r.ratio]):.2f} to {max(seen + [r.ratio]):.2f} ({len(seen) + 1} runs)"
                  if seen and r.ratio == r.ratio else "")
        lines.append(f"| {r.measurement} | {r.measured} | {ratio} | {r[3]} | {spread} |")
    m = bench["machine"]
    lines += ["", f"Measured by `./run_all.sh bench` on {bench['started'][:10]}: {m['cpu_model']} "
                  f"({m['torch_cpu_capability']}), {bench['threads']} threads; `results/benchmarks.json`. The "
                  "`cpu run` rows read the job records of the last `./run_all.sh` in this folder. Ratios vary between "
                  "runs on a shared machine (the last column); the efficiency notebook measures search and votes "
                  "again inside that run (Results block), so the two blocks differ by this spread."]
    lines += floor_lines(bench.get("cpu_run") or {}, bench.get("profiles"))
    lines += profile_lines(bench.get("profiles") or {}, run_stages=(bench.get("cpu_run") or {}).get("stages"))
    gpu = bench.get("training_stage_cuda")
    if gpu:
        cpu_train = ((bench.get("cpu_run") or {}).get("stages") or {}).get("training") or {}
        here = f", against {cpu_train['seconds']:,.0f} s of job time here" if cpu_train.get("seconds") else ""
        lines += ["", f"On a GPU ({gpu['device']}; `python -m attnknn_lib.workflow.training_stage --device cuda`, "
                      f"{gpu['measured'].split(',')[0]}): the cpu profile's {gpu['jobs']} training runs took "
                      f"{gpu['wall_seconds']:,.0f} s of wall time in {gpu['workers']} processes and "
                      f"{gpu['job_seconds']:,.0f} s of job time{here} (`results/training_stage_cuda.json`, with each "
                      "group's validation accuracy)."]
    lines += device_check_lines(bench.get("device_check_cuda"), bench.get("device_check_cuda_repeats") or [])
    return "\n".join(lines)


def device_check_lines(check: dict | None, repeats: list[dict] = ()) -> list[str]:
    """Main's Fashion-MNIST comparison measured on a GPU machine (:mod:`.device_check`): its wall time
    and how many of its seed-level verdicts equal the committed cpu record's, naming those that differ;
    then each repeat on another GPU, with how many of its verdicts, and of their values and intervals,
    equal the first GPU's (what tells a GPU's kernels from chance)."""
    if not check:
        return []
    def said_of(v: dict) -> str:
        return f"{v['verdict']} [{v['low']:+.4f}, {v['high']:+.4f}]"

    differ = [f"{key.replace('_', ' ')}: {said_of(v['device'])} there, {said_of(v['committed'])} here"
              for key, v in check["verdicts"].items() if v["committed"] and v["device"]["verdict"] != v["committed"]["verdict"]]
    parts = sorted(check["part_seconds"].values())
    said = (f"Main's Fashion-MNIST comparison on a GPU ({check['device']}, {check['cpu_count']} CPU cores; "
            f"`python -m attnknn_lib.workflow.device_check --device cuda`, {check['measured'].split(',')[0]}): each of "
            f"its {len(parts)} seeds trains its Attn-KNN and CNN there and is measured as a part, "
            f"{len(parts)} side by side ({parts[0]:,.0f}-{parts[-1]:,.0f} s each), {check['wall_seconds']:,.0f} s of wall "
            f"time in all; {check['equal']} of its {check['of']} seed-level verdicts equal the cpu record's")
    said += (" (" + "; ".join(differ) + ")." if differ else ".")
    said += " (`results/device_check_cuda.json`; the ablation, the replay and the MixUp control left out.)"
    for again in repeats:
        keys = [k for k in again["verdicts"] if k in check["verdicts"]]
        verdict = sum(again["verdicts"][k]["device"]["verdict"] == check["verdicts"][k]["device"]["verdict"] for k in keys)
        exact = sum(again["verdicts"][k]["device"] == check["verdicts"][k]["device"] for k in keys)
        said += (f" Repeated on another GPU ({again['device']}, {again['wall_seconds']:,.0f} s of wall time, "
                 f"{again['measured'].split(',')[0]}): {again['equal']} of {again['of']} verdicts equal the cpu "
                 f"record's, and {verdict} of {len(keys)} equal the {check['device']}'s, with the same values and "
                 f"intervals in {exact} of {len(keys)}")
        said += (": the two GPUs compute the same numbers, so the verdicts that differ from the cpu record's follow "
                 "from GPU against CPU arithmetic, not from run-to-run variation." if exact == len(keys) else ".")
    return ["", said]


BENCH_START, BENCH_END = "<!-- bench:start -->", "<!-- bench:end -->"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="./run_all.sh bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-smoke", action="store_true", help="skip the smoke workflow (about 5 minutes)")
    ap.add_argument("--repeats", type=int, default=BenchConfig.repeats, help="timed repeats per measurement (median)")
    ap.add_argument("--out", default=None, help="write benchmarks.json here instead of results/ (README untouched)")
    args = ap.parse_args(argv)
    try:
        cfg = BenchConfig(repeats=args.repeats, smoke=not args.no_smoke)
        if cfg.smoke and shutil.which("latexmk") is None:
            raise ConfigError("latexmk not found: the smoke workflow builds the paper; install the LaTeX tools "
                              "(see README) or pass --no-smoke")
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
        replace_block(REPO_ROOT / "README.md", BENCH_START, BENCH_END, markdown(bench))
    print(f"[bench] wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

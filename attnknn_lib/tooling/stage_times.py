"""The bench's run times: the smoke workflow end to end and the stage times of the last cpu run in a folder."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path

from attnknn_lib.base.errors import AttnKNNError
from attnknn_lib.base.files import read_json
from attnknn_lib.base.paths import REPO_ROOT, Paths
from attnknn_lib.experiments.framework import catalog
from attnknn_lib.tooling import schedule
from attnknn_lib.workflow.plan import STATE, TIMES
from attnknn_lib.workflow.profiles import resolve

SMOKE_BUDGET_S = 6 * 60
NOTEBOOK_BUDGET_S = 15 * 60  # each notebook job (and each part job) of the cpu profile, in job time


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

    spans: list[tuple[str, float, float]] = []  # (stage, start, end) of every job record read: the run's wall time

    def timed(stage: str, name: str) -> float | None:
        f = times / f"{stage}-{name}.json"
        if not f.exists():
            return None
        rec = read_json(f)
        if rec.get("finished"):
            end = datetime.fromisoformat(rec["finished"]).timestamp()
            spans.append((stage, end - rec["seconds"], end))
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
        backward and optimiser over the epoch's batches), ``refresh_seconds`` (the clean memory's
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
        # an experiment's job time: its measure job and its notebook job (which renders); a run from
        # before the two were apart has the notebook job alone
        measured, rendered = timed("measure", name), timed("notebook", name)
        s = None if measured is None and rendered is None else (measured or 0.0) + (rendered or 0.0)
        source = "job"
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
    wall = covered_seconds([(s, e) for _, s, e in spans]) if spans else None
    cores = os.cpu_count() or 1
    steps = stages["training"]["step_seconds"]
    plan_path = root / STATE / "plan.json"
    at_width = None
    if plan_path.exists() and complete:  # the same jobs on a wider machine (and with the GPU's training)
        plan = read_json(plan_path)
        jobs = schedule.run_jobs(times, plan)
        at_width = schedule.widths(jobs)
        gpu_path = root / "results" / "training_stage_cuda.json"
        if gpu_path.exists():
            gpu = read_json(gpu_path)
            on_gpu = schedule.with_device_training(jobs, plan, gpu.get("runs", []))
            at_width["gpu_training"] = {"device": gpu["device"], **schedule.widths(on_gpu, (16,))}
    return {"stages": stages, "total_seconds": total, "wall_seconds": wall, "complete": complete, "cores": cores,
            "idle_by_stage": schedule.idle_by_stage(spans, cores), "at_width": at_width,
            # the job time over the core time the wall time gave: how busy the cores were
            "busy_share": total / (wall * cores) if wall else None,
            # the training steps spread over every core: no schedule of these jobs ends sooner
            "floor_seconds": steps / cores if steps is not None else None}


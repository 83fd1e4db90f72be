"""What the last run would take on more cores: its jobs, with their recorded wall times and the
workflow's dependencies, scheduled again at another width.

A job waits for the jobs it reads (a part and a measurement for their models and parts, a notebook for
its measurement, a PDF for its notebook, the report for every measurement, the paper for the report
and every notebook),
and a free core takes the ready job with the longest chain still behind it (critical-path list
scheduling, what the workflow's priorities approximate). Each job keeps its recorded time: the jobs
run one thread each, so a wider machine runs more of them at once, not each faster. A timed
measurement (the efficiency experiment's) runs alone on every core in the workflow; here it holds one
core, so the estimate is a little short where it is on the critical path.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path

from attnknn_lib.base.files import read_json


@dataclass(frozen=True)
class Job:
    """One job of a run: its name (``stage-name``, as its time record is named), its wall seconds and
    the names of the jobs it waits for."""

    name: str
    seconds: float
    after: tuple[str, ...] = field(default=())


def chain_seconds(jobs: dict[str, Job]) -> dict[str, float]:
    """Per job, its seconds plus the longest chain of jobs that wait on it:
    c(j) = t(j) + max over jobs w waiting for j of c(w) (0 when none waits)."""
    waiting: dict[str, list[str]] = {n: [] for n in jobs}
    for job in jobs.values():
        for dep in job.after:
            if dep in waiting:
                waiting[dep].append(job.name)
    out: dict[str, float] = {}

    def chain(name: str) -> float:
        if name not in out:
            stack = [name]
            while stack:  # iterative: a run has hundreds of jobs in chains a few deep
                top = stack[-1]
                todo = [w for w in waiting[top] if w not in out]
                if todo:
                    stack.extend(todo)
                    continue
                stack.pop()
                out[top] = jobs[top].seconds + max((out[w] for w in waiting[top]), default=0.0)
        return out[name]

    for name in jobs:
        chain(name)
    return out


def critical_path_seconds(jobs: dict[str, Job]) -> float:
    """The longest chain of waiting jobs: no number of cores ends the run sooner."""
    return max(chain_seconds(jobs).values(), default=0.0)


def makespan(jobs: dict[str, Job], width: int) -> float:
    """Wall seconds of ``jobs`` on ``width`` cores, one job per core, a free core taking the ready job
    with the longest chain behind it (:func:`chain_seconds`). A dependency outside ``jobs`` counts as
    done."""
    if width < 1:
        raise ValueError(f"width={width} is out of range; allowed: [1, inf]")
    chains = chain_seconds(jobs)
    pending = {n: {d for d in j.after if d in jobs} for n, j in jobs.items()}
    waiting: dict[str, list[str]] = {n: [] for n in jobs}
    for n, deps in pending.items():
        for d in deps:
            waiting[d].append(n)
    ready = [(-chains[n], n) for n, deps in pending.items() if not deps]
    heapq.heapify(ready)
    running: list[tuple[float, str]] = []  # (end time, job)
    now = 0.0
    while ready or running:
        while ready and len(running) < width:
            _, n = heapq.heappop(ready)
            heapq.heappush(running, (now + jobs[n].seconds, n))
        now, done = heapq.heappop(running)
        for w in waiting[done]:
            pending[w].discard(done)
            if not pending[w]:
                heapq.heappush(ready, (-chains[w], w))
    return now


def run_jobs(times: Path, plan: dict) -> dict[str, Job]:
    """The jobs of the run whose time records are in ``times`` (``.attnknn/times``), with the
    dependencies of ``plan`` (the workflow's plan: each experiment's models, parts and notebook); a job
    without a record is left out (its dependants wait for nothing in its place)."""
    def seconds(stage: str, name: str) -> float | None:
        f = Path(times) / f"{stage}-{name}.json"
        return read_json(f)["seconds"] if f.exists() else None

    jobs: dict[str, Job] = {}

    def add(stage: str, name: str, after: list[str]) -> None:
        s = seconds(stage, name)
        if s is not None:
            jobs[f"{stage}-{name}"] = Job(f"{stage}-{name}", s, tuple(after))

    for rid in plan.get("runs", {}):
        add("train", rid, [])
    for name, exp in plan.get("experiments", {}).items():
        models = [f"train-{rid}" for rid in exp.get("runs", [])]
        parts = [f"part-{name}-{p}" for p in exp.get("parts", [])]
        for p in exp.get("parts", []):
            add("part", f"{name}-{p}", models)
        add("measure", name, models + parts)
        add("notebook", name, [f"measure-{name}"])
        add("pdf", Path(exp["notebook"]).stem, [f"notebook-{name}"])
    measures = [f"measure-{n}" for n in plan.get("experiments", {})]
    add("report", "report", measures)
    # the paper reads the tables and figures the notebooks draw
    add("paper", "paper", ["report-report", *measures, *(f"notebook-{n}" for n in plan.get("experiments", {}))])
    return jobs


def widths(jobs: dict[str, Job], cores: tuple[int, ...] = (2, 8, 16)) -> dict:
    """The run's job seconds, its critical path and its wall seconds at each width of ``cores``."""
    return {"job_seconds": sum(j.seconds for j in jobs.values()), "jobs": len(jobs),
            "critical_path_seconds": critical_path_seconds(jobs),
            "wall_seconds": {str(w): makespan(jobs, w) for w in cores}}


def with_device_training(jobs: dict[str, Job], plan: dict, device_runs: list[dict]) -> dict[str, Job]:
    """``jobs`` with each training job's seconds replaced by those its model took on another device
    (``device_runs``: the rows of :mod:`.training_stage`, matched by the run's label)."""
    by_label = {r["label"]: r["seconds"] for r in device_runs}
    out = dict(jobs)
    for rid, label in plan.get("runs", {}).items():
        name = f"train-{rid}"
        if name in out and label in by_label:
            out[name] = Job(name, by_label[label], out[name].after)
    return out


def idle_by_stage(spans: list[tuple[str, float, float]], cores: int) -> dict[str, float]:
    """Idle core-seconds of a run, by the stage that was running when cores stood idle: ``spans`` is
    [(stage, start, end)] of every job; over each stretch where n < ``cores`` jobs ran, the idle
    (cores - n) x its length is shared equally among the stages of the jobs running then. Stretches
    where no job ran (a run paused between sessions) are not counted."""
    events = sorted({t for _, s, e in spans for t in (s, e)})
    out: dict[str, float] = {}
    for a, b in zip(events, events[1:]):
        running = [stage for stage, s, e in spans if s <= a and e >= b]
        if running and len(running) < cores:
            share = (cores - len(running)) * (b - a) / len(running)
            for stage in running:
                out[stage] = out.get(stage, 0.0) + share
    return out

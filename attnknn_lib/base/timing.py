"""Measuring cost: medians of repeated timings, power-law fits on log-log axes, and the memory
this machine has."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from attnknn_lib.base.files import write_json


def median_seconds(fn: Callable[[], object], repeats: int = 3, warmup: int = 1) -> float:
    """Median wall seconds of ``repeats`` calls of ``fn`` after ``warmup`` untimed calls (the
    machine is shared and noisy: the median ignores a slow outlier)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def loglog_fit(x, y) -> dict[str, float]:
    """Least-squares line through (log10 x, log10 y): y ~ 10^intercept * x^slope. Returns
    {slope, intercept, r2}; points with x <= 0 or y <= 0 are left out."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = (x > 0) & (y > 0)
    if ok.sum() < 2:
        return {"slope": float("nan"), "intercept": float("nan"), "r2": float("nan")}
    lx, ly = np.log10(x[ok]), np.log10(y[ok])
    slope, intercept = np.polyfit(lx, ly, 1)
    resid = ly - (slope * lx + intercept)
    ss = ((ly - ly.mean()) ** 2).sum()
    return {"slope": float(slope), "intercept": float(intercept),
            "r2": float(1 - (resid ** 2).sum() / ss) if ss > 0 else 1.0}


def total_ram_bytes() -> int:
    """Physical memory of this machine (bytes)."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


def peak_memory_gb() -> float:
    """This process's peak resident memory so far, in GB (Linux reports kilobytes, macOS bytes)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (2 ** 30 if sys.platform == "darwin" else 2 ** 20)


def record_time(folder: Path, stage: str, name: str, seconds: float, **extra) -> Path:
    """``<folder>/<stage>-<name>.json`` (folder: ``<root>/.attnknn/times``): the wall time of one
    finished job, read by ``./run_all.sh bench`` for the stage times of the last run."""
    return write_json(Path(folder) / f"{stage}-{name}.json",
                      {"stage": stage, "name": name, "seconds": round(seconds, 2),
                       "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"), **extra})

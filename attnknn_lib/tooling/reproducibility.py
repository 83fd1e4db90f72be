"""What two runs of the same code, profile and seed must share: a result without its clock readings.

On one machine, the same profile and seed give the same results JSON apart from timing and
timestamp fields (a test runs the smoke profile twice and compares :func:`comparable` views).
Across machines, numbers may differ in the last digits: float sums are ordered by the thread
count and by the instruction set the kernels dispatch to (AVX2, AVX-512; FAISS and MKL pick at
run time), and GPU kernels differ again; ``provenance.machine`` records each of these.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from attnknn_lib.experiments.framework import catalog

# fields that hold clock readings (or whether a model came from the cache) in every experiment
TIMING_KEYS = frozenset({"started", "wall_seconds", "seconds", "train_seconds", "timings", "loaded_from_cache"})
TIMING_SUFFIXES = ("_s", "_us", "_ms", "_seconds", "_gflops", "_per_epoch")


def is_timing_key(key: str) -> bool:
    return key in TIMING_KEYS or key.endswith(TIMING_SUFFIXES)


def comparable(obj: Any, timed: tuple[str, ...] = (), _path: str = "") -> Any:
    """``obj`` without timing fields: the keys of :data:`TIMING_KEYS`, keys ending in a time unit,
    and the dotted paths of ``timed`` (``*`` matches one key; an experiment's declared ``timed`` lists the
    sections that are measurements of time, e.g. ``"results.gemm"``)."""
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            path = f"{_path}.{key}" if _path else str(key)
            if is_timing_key(str(key)) or any(fnmatch.fnmatchcase(path, p) for p in timed):
                continue
            out[key] = comparable(value, timed, path)
        return out
    if isinstance(obj, list):
        return [comparable(v, timed, _path) for v in obj]
    return obj


def record_view(record: dict) -> dict:
    """:func:`comparable` of a results record, with its experiment's declared ``timed`` paths."""

    name = record.get("experiment")
    return comparable(record, catalog.get(name).timed if name in catalog.names() else ())

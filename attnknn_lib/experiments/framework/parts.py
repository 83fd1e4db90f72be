"""A measurement cut into parts that the workflow runs as jobs of their own.

An experiment whose measurement would take longer than one job should (main, the k-sweep, the
attention study and the real regimes) declares ``parts(cfg)`` (names such as ``seed0``) and
``run_part(cfg, paths, part)``. The workflow runs one job per part beside the other jobs; each writes
its result under ``<artifacts>/parts/<experiment>/<config fingerprint>/<part>.pkl`` with the key it
was computed under (the config's fingerprint and the experiment's measurement key). The measure
job's ``run`` then asks :func:`part_result` for each part: a stored result under the same key is
read, anything else (no file, another config or code, a notebook recomputing on its own) is
computed here and stored. Either way the record is made from
the same objects. A run with part jobs and one that computes every part in one process give the
same numbers, up to the last bit of some floats (measured on the smoke profile: the real regimes'
records equal, the study's 903 of its floats apart by about 1e-17, as one process orders a few
reductions differently); no printed digit differs.

Results are pickled, not JSON: they are intermediate (never read by a person) and must come back
exactly as computed (NaN, tuples, integer keys, arrays). A measurement longer than one working session
keeps its finished parts in the repository (``./run_all.sh keep``, :mod:`attnknn_lib.workflow.kept_parts`),
and a run copies them back here before its jobs start.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attnknn_lib.base.files import atomic_write
from attnknn_lib.base.paths import Paths
from attnknn_lib.base.provenance import bind_measure_key, config_fingerprint

PARTS = "parts"  # under the artifacts folder


def part_dir(cfg, experiment: str) -> str:
    """The folder of ``experiment``'s parts under this config, relative to the artifacts folder: one
    per config, so runs of other parameters that share the artifacts folder never overwrite them."""
    return f"{PARTS}/{experiment}/{config_fingerprint(cfg.to_dict())}"


def part_file(paths: Paths, cfg, experiment: str, part: str) -> Path:
    """Where part ``part`` of ``experiment`` under ``cfg`` keeps its result."""
    return paths.artifacts / part_dir(cfg, experiment) / f"{part}.pkl"


def part_key(cfg, experiment: str) -> dict[str, str]:
    """What a stored part must have been computed under to be read: the config and the code (the
    measurement key this process took before it computed anything:
    :func:`~attnknn_lib.base.provenance.bind_measure_key`)."""
    return {"config": config_fingerprint(cfg.to_dict()), "code": bind_measure_key(experiment).key}


def stored(paths: Paths, cfg, experiment: str, part: str) -> Any | None:
    """The stored result of a part under this config and code, else None."""
    path = part_file(paths, cfg, experiment, part)
    if not path.exists():
        return None
    try:
        with open(path, "rb") as f:
            kept = pickle.load(f)
        return kept["result"] if kept.get("key") == part_key(cfg, experiment) else None
    except Exception:  # a truncated, foreign or unreadable file (any unpickling error): computed again
        return None


def part_seconds(paths: Paths, cfg, experiment: str, parts: list[str]) -> float | None:
    """The compute seconds the stored parts took (the record's own wall time only reads them), or
    None where a part has no stored time."""
    total = 0.0
    for part in parts:
        try:
            with open(part_file(paths, cfg, experiment, part), "rb") as f:
                seconds = pickle.load(f).get("seconds")
        except Exception:
            return None
        if seconds is None:
            return None
        total += seconds
    return total


def part_result(paths: Paths, cfg, experiment: str, part: str, compute: Callable[[], Any]) -> Any:
    """The result of one part: read when stored under this config and code (a part job of the
    workflow computed it), else ``compute()``d and stored (written atomically), unless a measurement
    file changed while it computed (:class:`~attnknn_lib.base.errors.SourcesChangedError`)."""
    kept = stored(paths, cfg, experiment, part)
    if kept is not None:
        return kept
    key = part_key(cfg, experiment)  # taken before computing; stamped only if the code is still that
    start = time.perf_counter()
    result = compute()
    bind_measure_key(experiment).stamp()
    blob = pickle.dumps({"key": key, "part": part, "result": result,
                         "seconds": round(time.perf_counter() - start, 2)})
    atomic_write(part_file(paths, cfg, experiment, part), lambda f: f.write(blob))
    return result

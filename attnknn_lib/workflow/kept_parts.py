"""Parts of a measurement kept in the repository, so that a measurement longer than one working
session resumes on a fresh clone.

A part job (:mod:`attnknn_lib.experiments.framework.parts`) stores its result in the artifacts folder,
which is not committed: a clone made before the measurement finished starts it again. ``./run_all.sh
keep`` copies every stored part whose key is today's (the config's fingerprint and the experiment's
measurement key) into ``results/parts/<experiment>/<config fingerprint>/<part>.pkl``, to be committed;
``./run_all.sh`` (a run, not a render) copies a kept part back into the artifacts folder before the
jobs start, when the artifacts folder lacks it and its key is today's, so the workflow sees it done.
A kept part under another key is left where it is and never read: the code or config that would use it
measures differently.

Nothing here is measurement code: the parts are read and written as the part jobs store them, and the
experiments' measurement keys do not depend on this module.
"""

from __future__ import annotations

import pickle
import shutil
from dataclasses import dataclass
from pathlib import Path

from attnknn_lib.base.paths import REPO_ROOT
from attnknn_lib.base.provenance import measure_code
from attnknn_lib.experiments.framework import catalog
from attnknn_lib.experiments.framework.parts import part_dir

KEPT = REPO_ROOT / "results"  # kept parts live under results/parts/, as under the artifacts folder


@dataclass(frozen=True)
class PartSet:
    """One experiment's parts under one config: where they are stored and the key they need."""

    experiment: str
    folder: str  # parts/<experiment>/<config fingerprint>, relative to the artifacts folder or KEPT
    code: str  # the measurement key a stored part must carry
    parts: tuple[str, ...]

    @property
    def key(self) -> dict[str, str]:
        return {"config": Path(self.folder).name, "code": self.code}


def part_sets(resolved: dict[str, dict]) -> list[PartSet]:
    """The part sets of the experiments of ``resolved`` (name -> parameters) that are measured in parts."""
    out = []
    for name, params in resolved.items():
        exp = catalog.get(name)
        if exp.parts:
            cfg = exp.Config(**params)
            out.append(PartSet(name, part_dir(cfg, name), measure_code(name), tuple(exp.parts(cfg))))
    return out


def key_of(path: Path) -> dict | None:
    """The key a stored part was computed under, or None for a file that cannot be read as a part."""
    try:
        with open(path, "rb") as f:
            return pickle.load(f).get("key")
    except Exception:  # a truncated or foreign file: not a part
        return None


def _copy(sets: list[PartSet], source: Path, target: Path) -> list[str]:
    """Copy every part of ``sets`` stored under ``source`` with today's key and absent under ``target``."""
    copied = []
    for ps in sets:
        for part in ps.parts:
            src, dst = source / ps.folder / f"{part}.pkl", target / ps.folder / f"{part}.pkl"
            if src.exists() and not dst.exists() and key_of(src) == ps.key:
                dst.parent.mkdir(parents=True, exist_ok=True)
                tmp = dst.with_name(f".{dst.name}.tmp")
                shutil.copy2(src, tmp)
                tmp.replace(dst)  # whole or absent: Snakemake must never see half a part
                copied.append(f"{ps.experiment}/{part}")
    return copied


def keep(resolved: dict[str, dict], artifacts: Path, kept: Path = KEPT) -> list[str]:
    """Copy the stored parts of ``resolved`` with today's key from ``artifacts`` into ``kept``/parts/...;
    returns the parts copied (``experiment/part``)."""
    return _copy(part_sets(resolved), artifacts, kept)


def restore(resolved: dict[str, dict], artifacts: Path, kept: Path = KEPT) -> list[str]:
    """Copy the kept parts of ``resolved`` with today's key into ``artifacts`` where it lacks them;
    returns the parts copied."""
    return _copy(part_sets(resolved), kept, artifacts)


def summary(resolved: dict[str, dict], artifacts: Path, kept: Path = KEPT) -> list[str]:
    """Per experiment measured in parts: how many of its parts are kept and stored under today's key."""
    lines = []
    for ps in part_sets(resolved):
        def count(root: Path) -> int:
            return sum(key_of(root / ps.folder / f"{p}.pkl") == ps.key for p in ps.parts)
        lines.append(f"{ps.experiment}: {count(kept)} of {len(ps.parts)} parts kept in {kept.name}/{ps.folder}, "
                     f"{count(artifacts)} stored in the artifacts folder")
    return lines

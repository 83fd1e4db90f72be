"""The study's parts: their names, read and spelled by one value (``Part``), and which parts a config has."""

from __future__ import annotations

import re
from dataclasses import dataclass

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.experiments.attention_study.config import Config
from attnknn_lib.experiments.attention_study.measure.training_runs import _end_to_end_run, _long_tail_run

SETTINGS_PER_PART = 2  # memory settings per seed part: a seed's four in one job took 10-15 min, the longest 893 s
KINDS = ("seed", "collapse", "longtail", "e2e", "second")  # each kind's name starts with it
CHUNK_LETTERS = "bcdefghijklmnopqrstuvwxyz"  # a seed part's suffix after its first chunk of settings
_SEEDED = re.compile(r"(seed|collapse|longtail|e2e)(-?[0-9]+)([b-z]?)")


@dataclass(frozen=True)
class Part:
    """One part of the study, as its name reads: ``seed0`` (seed 0's first chunk of settings, with its
    diagnostics and neighbour lists), ``seed0b``, ``seed0c``, ... (its next chunks), ``collapse0``,
    ``longtail0``, ``e2e0`` (seed 0's collapse sweep, long-tailed memory and end-to-end control) or
    ``second_digits`` (the second dataset digits). The workflow stores each part's result under its name."""

    kind: str  # one of KINDS
    seed: int | None = None  # every kind but "second"
    chunk: int = 0  # a "seed" part's chunk of settings (setting_chunks)
    dataset: str | None = None  # a "second" part's dataset

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"part kind={self.kind!r} is not allowed; choose one of: {', '.join(KINDS)}")
        seeded = self.kind != "second"
        if seeded != (self.seed is not None) or seeded == (self.dataset is not None) \
                or (self.chunk and self.kind != "seed"):
            raise ConfigError(f"{self!r}: a 'second' part names a dataset, any other a seed; only 'seed' has a chunk")

    @property
    def name(self) -> str:
        """The part's name: ``seed0``, ``seed0b``, ``collapse0``, ``longtail0``, ``e2e0``, ``second_digits``."""
        if self.kind == "second":
            return f"second_{self.dataset}"
        return f"{self.kind}{self.seed}" + ("" if self.chunk == 0 else CHUNK_LETTERS[self.chunk - 1])

    @classmethod
    def parse(cls, name: str) -> Part:
        """The part that ``name`` names (the inverse of :attr:`name`)."""
        if name.startswith("second_"):
            return cls("second", dataset=name.removeprefix("second_"))
        match = _SEEDED.fullmatch(name)
        if match is None or (match[3] and match[1] != "seed"):
            raise ConfigError(f"part={name!r} is not a part name of {', '.join(KINDS)}")
        return cls(match[1], int(match[2]), CHUNK_LETTERS.index(match[3]) + 1 if match[3] else 0)


def setting_chunks(cfg: Config) -> list[tuple[str, ...]]:
    """The memory settings of a seed, :data:`SETTINGS_PER_PART` per part job, in ``cfg.settings`` order."""
    return [cfg.settings[i:i + SETTINGS_PER_PART] for i in range(0, len(cfg.settings), SETTINGS_PER_PART)]


def seed_part_names(seed: int, chunks: int) -> list[str]:
    """The part names of one seed's settings: ``seed0`` (the first chunk, with the seed's diagnostics and
    neighbour lists), then ``seed0b``, ``seed0c``, ... for the next."""
    return [Part("seed", seed, j).name for j in range(chunks)]


def parts(cfg: Config) -> list[str]:
    """Per seed, its memory settings in parts of :data:`SETTINGS_PER_PART` (:func:`seed_part_names`); per
    seed of each, its collapse sweep, its long-tailed memory and its end-to-end control; one per second
    dataset (:mod:`~attnknn_lib.experiments.framework.parts`): the workflow runs them as jobs of their own, so no
    job holds the whole study (a seed with all of it took 18-20 min of job time, its four settings alone
    10-15)."""
    chunks = len(setting_chunks(cfg))
    return [p for seed in cfg.seeds for p in seed_part_names(seed, chunks)] \
        + [Part("collapse", seed).name for seed in collapse_seeds(cfg)] \
        + [Part("longtail", seed).name for seed in cfg.seeds if _long_tail_run(cfg, seed)] \
        + [Part("e2e", seed).name for seed in cfg.seeds if _end_to_end_run(cfg, seed)] \
        + [Part("second", dataset=name).name for name in cfg.second_datasets]


def collapse_seeds(cfg: Config) -> tuple[int, ...]:
    """The seeds of the collapse sweep: the first ``collapse_seeds``, where the clean memory is studied."""
    return tuple(cfg.seeds[:cfg.collapse_seeds]) if "clean" in cfg.settings else ()

"""The declaration of an experiment: one :class:`Experiment` object per experiment package.

An experiment is a package ``attnknn_lib/experiments/<name>/`` of one shape, each part a module or
a package of modules:

* ``config``: ``NAME``, ``NOTEBOOK``, the frozen ``Config`` dataclass (its own knobs on top of
  the shared recipe) and ``ARTIFACTS``, the only place its output file names are spelled;
* ``measure``: ``runs(cfg)`` (the training runs it needs), ``run(cfg, paths)`` (the analysis,
  which writes its result record) and ``MEASUREMENT``, the :class:`Measurement` that wires them; with
  ``config``, the code of the record's measurement key;
* ``views``: what is drawn from a record (tables, figures, macros, README lines, findings);
* ``__init__.py``: ``EXPERIMENT = Experiment(...)``, read by the workflow, the report, the tests
  and the profiles (:mod:`attnknn_lib.experiments.framework.catalog` finds it; nothing lists experiments by hand).

Adding an experiment is one such package and one notebook (``notebooks/<NOTEBOOK>``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnknn_lib.base.files import write_text
from attnknn_lib.base.paths import Paths
from attnknn_lib.base.provenance import bind_measure_key

KINDS = ("record", "data", "table", "figure")
MEASURED = ("record", "data")  # written by the measurement; tables and figures are drawn from them
SCOPES = ("dataset", "primary", "experiment")
FIGURE_FORMATS = ("pdf", "png")  # every figure is written in both (report.figures.save_output_figure)


@dataclass(frozen=True)
class Output:
    """One output of an experiment, by the key its writers and notebook use.

    ``kind``: a results ``record`` (``results/<name>_<dataset>.json``), measured ``data`` a figure
    is drawn from beside the record (``results/<stem>.npz``: arrays a person does not read), a LaTeX
    ``table`` (``results/tables/<stem>.tex``) or a ``figure`` (``figures/<stem>.pdf`` and ``.png``).
    ``scope``: one per dataset of the config, one for its primary dataset only, or one per
    experiment (no dataset in the name). ``suffix`` follows the stem (``_calibration``);
    ``when(cfg)`` says whether this config writes it (default: always). ``drawn_from`` (figures):
    what the figure needs besides the record's numbers, the key of a ``data`` output or a field of
    the record's results; a record measured before it was stored cannot be drawn again, and
    rendering keeps the figure as it was."""

    key: str
    kind: str
    suffix: str = ""
    scope: str = "dataset"
    when: Callable[[Any], bool] | None = None
    drawn_from: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS or self.scope not in SCOPES:
            raise ValueError(f"output {self.key!r}: kind {self.kind!r} / scope {self.scope!r}; allowed kinds "
                             f"{', '.join(KINDS)}, scopes {', '.join(SCOPES)}")


def record(key: str = "record") -> Output:
    return Output(key, "record")


def table(key: str, suffix: str = "", scope: str = "dataset", when=None) -> Output:
    return Output(key, "table", suffix, scope, when)


def data(key: str, suffix: str, scope: str = "dataset", when=None) -> Output:
    return Output(key, "data", suffix, scope, when)


def figure(key: str, suffix: str = "", scope: str = "dataset", when=None, drawn_from: str | None = None) -> Output:
    return Output(key, "figure", suffix, scope, when, drawn_from)


def _one_dataset(cfg) -> tuple[str, ...]:
    return (cfg.dataset,)


@dataclass(frozen=True)
class Artifacts:
    """Every file an experiment writes, relative to the output root: the only place the names are
    spelled. ``files(cfg)`` is what the workflow expects of the notebook job (a job that writes
    one more or one less fails); writers and notebooks ask for a path by key."""

    name: str
    outputs: tuple[Output, ...]
    datasets: Callable[[Any], tuple[str, ...]] = _one_dataset
    primary: Callable[[Any], str] | None = None  # the dataset of "primary" outputs (default: the first)

    def __post_init__(self) -> None:
        keys = [o.key for o in self.outputs]
        if len(set(keys)) != len(keys):
            raise ValueError(f"experiment {self.name}: an output key is declared twice in {keys}")

    def output(self, key: str) -> Output:
        for o in self.outputs:
            if o.key == key:
                return o
        raise KeyError(f"experiment {self.name} declares no output {key!r}; declared: "
                       f"{', '.join(o.key for o in self.outputs)}")

    def stem(self, key: str, dataset: str | None = None) -> str:
        """The file name without folder and extension, e.g. ``k_sweep_fashion_mnist_calibration``."""
        o = self.output(key)
        if o.scope == "experiment":
            return f"{self.name}{o.suffix}"
        if dataset is None:
            raise ValueError(f"output {key!r} of {self.name} is named per dataset: give the dataset")
        return f"{self.name}_{dataset}{o.suffix}"

    def relative(self, key: str, dataset: str | None = None, ext: str = "png") -> str:
        """The path of one output relative to the output root (figures: the ``ext`` file)."""
        o, stem = self.output(key), self.stem(key, dataset)
        if o.kind == "record":
            return f"results/{stem}.json"
        if o.kind == "data":
            return f"results/{stem}.npz"
        if o.kind == "table":
            return f"results/tables/{stem}.tex"
        return f"figures/{stem}.{ext}"

    def path(self, paths: Paths, key: str, dataset: str | None = None, ext: str = "png") -> Path:
        """The output's path under ``paths`` (figures: the ``ext`` file)."""
        return paths.root / self.relative(key, dataset, ext)

    @property
    def record_key(self) -> str:
        return next(o.key for o in self.outputs if o.kind == "record")

    def png(self, paths: Paths, key: str, dataset: str | None = None) -> str:
        """The PNG of figure ``key``, as a string (for a notebook's ``Image``)."""
        return str(self.path(paths, key, dataset, "png"))

    def record_path(self, paths: Paths, dataset: str | None = None) -> Path:
        return self.path(paths, self.record_key, dataset)

    def record_file(self, dataset: str | None = None) -> str:
        """``results/<name>_<dataset>.json``, relative to the output root (captions cite it)."""
        return self.relative(self.record_key, dataset)

    def write_table(self, paths: Paths, key: str, dataset: str | None, text: str) -> Path:
        """Write the LaTeX table ``key`` atomically."""
        if self.output(key).kind != "table":
            raise ValueError(f"output {key!r} of {self.name} is not a table")
        return write_text(self.path(paths, key, dataset), text)


    def primary_dataset(self, cfg) -> str:
        return self.primary(cfg) if self.primary else self.datasets(cfg)[0]

    def _scope(self, o: Output, cfg) -> tuple[str | None, ...]:
        return {"dataset": self.datasets(cfg), "primary": (self.primary_dataset(cfg),),
                "experiment": (None,)}[o.scope]

    def files(self, cfg, kind: str | tuple[str, ...] | None = None) -> list[str]:
        """Every file this config writes (of ``kind`` only, if given), relative to the output root."""
        kinds = (kind,) if isinstance(kind, str) else kind
        out = []
        for o in self.outputs:
            if o.when is not None and not o.when(cfg) or kinds is not None and o.kind not in kinds:
                continue
            for d in self._scope(o, cfg):
                exts = FIGURE_FORMATS if o.kind == "figure" else ("",)
                out += [self.relative(o.key, d, ext) for ext in exts]
        return out

    def measured(self, cfg) -> list[str]:
        """The files the measurement writes (records and data), relative to the output root."""
        return self.files(cfg, MEASURED)

    def undrawable(self, cfg, root: Path) -> list[str]:
        """The figure files under ``root`` that cannot be drawn again from what the measurement left
        there: their ``drawn_from`` data file is missing, or their record lacks that field."""
        out = []
        for o in self.outputs:
            if o.kind != "figure" or o.drawn_from is None or o.when is not None and not o.when(cfg):
                continue
            for d in self._scope(o, cfg):
                if any(x.key == o.drawn_from for x in self.outputs):
                    there = (root / self.relative(o.drawn_from, d)).exists()
                else:
                    rec = root / self.relative(self.record_key, d)
                    there = rec.exists() and o.drawn_from in json.loads(rec.read_text()).get("results", {})
                if not there:
                    out += [self.relative(o.key, d, ext) for ext in FIGURE_FORMATS]
        return out


    def written(self, paths: Paths, cfg, kind: str = "table") -> list[Path]:
        """The paths of this config's outputs of one kind (figures: the PNGs), e.g. for a notebook's
        list of the tables it wrote."""
        return [paths.root / f for f in self.files(cfg, kind) if not f.endswith(".pdf")]


@dataclass(frozen=True)
class Views:
    """What the report reads off an experiment's records (all of one profile)."""

    macros: Callable[[list[dict]], dict[str, str]]  # the paper's numbers
    readme_lines: Callable[[list[dict]], list[str]]  # the README results block
    readme_section: str | None = None  # its heading there (None: the lines lead the block)
    answer_lines: Callable[[list[dict]], list[str]] | None = None  # the README's first lines, if any


@dataclass(frozen=True)
class Measurement:
    """What an experiment's measurement runs, declared in its ``measure`` module (``MEASUREMENT``), so
    that the wiring is part of the measurement key, as the code it names is."""

    runs: Callable[[Any], list]  # cfg -> the training runs it needs (jobs of the workflow)
    run: Callable[[Any, Paths], dict]  # (cfg, paths) -> its result record, written
    # the record's sections that are measurements of time ("results.gemm"; "*" matches one key): a
    # timed experiment's notebook job runs alone, on every core, and reruns compare without them
    timed: tuple[str, ...] = ()
    # a measurement cut into parts the workflow runs as jobs of their own (:mod:`.parts`): cfg -> the
    # part names, and (cfg, paths, part) -> computes and stores that part; ``run`` then reads them
    parts: Callable[[Any], list[str]] | None = None
    run_part: Callable[[Any, Paths, str], object] | None = None


@dataclass(frozen=True)
class Experiment:
    """One experiment, declared once (see the module docstring)."""

    name: str
    notebook: str  # file name under notebooks/
    Config: type
    measurement: Measurement
    views: Views
    artifacts: Artifacts
    question: str  # the README's experiments table: what it asks
    models: str  # ... and which models it uses
    # declared, its record not measured yet: why (the default run leaves it out; --only NAME runs it, and
    # status says so); empty for an experiment the default run measures
    awaiting: str = ""

    @property
    def runs(self) -> Callable[[Any], list]:
        return self.measurement.runs

    @property
    def timed(self) -> tuple[str, ...]:
        return self.measurement.timed

    @property
    def parts(self) -> Callable[[Any], list[str]] | None:
        return self.measurement.parts

    def run(self, cfg, paths: Paths) -> dict:
        """Measure: the measurement key is taken first, so the record it writes carries the key of
        the code that ran (:func:`~attnknn_lib.base.provenance.bind_measure_key`)."""
        bind_measure_key(self.name)
        return self.measurement.run(cfg, paths)

    def run_part(self, cfg, paths: Paths, part: str) -> object:
        """One part of the measurement, its key taken first as in :meth:`run`."""
        if self.measurement.run_part is None:
            raise ValueError(f"experiment {self.name} is not measured in parts")
        bind_measure_key(self.name)
        return self.measurement.run_part(cfg, paths, part)

    def __post_init__(self) -> None:
        if self.artifacts.name != self.name:
            raise ValueError(f"experiment {self.name}: its artifacts are named {self.artifacts.name!r}")
        if not any(o.kind == "record" for o in self.artifacts.outputs):
            raise ValueError(f"experiment {self.name} declares no results record")

    def outputs(self, cfg) -> list[str]:
        return self.artifacts.files(cfg)

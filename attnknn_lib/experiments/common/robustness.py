"""What the label-noise and long-tail experiments share: their config, settings, retraining loop and verdicts.

Each asks how the rules behave when the
training data changes, in two settings, ``bank`` (main's models, only the memory changes:
the prototype's setting) and ``trained`` (Attn-KNN and the CNN retrained on the changed data, on a
training subset with fewer epochs where the profile says so, so the grid fits the budget)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace

from attnknn_lib.base.errors import check_choice, check_range
from attnknn_lib.base.knobs import int_csv, knob
from attnknn_lib.data.registry import DATASET_NAMES, REGISTRY
from attnknn_lib.data.spec import DataSpec, load_base, prepare
from attnknn_lib.evaluation.verdicts import MARGINS, seed_difference
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.experiments.common.shared import ExperimentConfig
from attnknn_lib.experiments.framework.declaration import Artifacts


@dataclass(frozen=True)
class RobustnessConfig(ExperimentConfig):
    """Knobs shared by the noise and long-tail experiments."""

    dataset: str = knob("fashion_mnist", "dataset")
    seeds: tuple[int, ...] = knob((0, 1, 2, 3, 4), "seeds of main's models (setting bank)")
    retrain: bool = knob(True, "setting trained: retrain Attn-KNN and the CNN on the changed data")
    retrain_seeds: tuple[int, ...] = knob((0, 1, 2, 3, 4), "training seeds of setting trained")
    retrain_max_train: int = knob(10000, "training rows of setting trained before any change (0 keeps the recipe's)")
    retrain_epochs: int = knob(2, "epochs of setting trained (0 keeps the recipe's)")
    n_boot: int = knob(200, "bootstrap resamples for the 95 % intervals")

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "seeds", int_csv("seeds", self.seeds))
        object.__setattr__(self, "retrain_seeds", int_csv("retrain_seeds", self.retrain_seeds))
        check_choice("dataset", self.dataset, DATASET_NAMES)
        for name in ("retrain_max_train", "retrain_epochs"):
            check_range(name, getattr(self, name), 0, None)
        check_range("n_boot", self.n_boot, 1, None)
        for name in (f.name for f in fields(self) if f.name.startswith("margin_")):
            check_range(name, getattr(self, name), 0.0, None)

    def margin(self, metric: str) -> float | None:
        """The declared equivalence margin of a metric (the config's ``margin_<metric>`` knob, else the
        library's; None for ECE, which is described only)."""
        return getattr(self, f"margin_{metric}", MARGINS.get(metric))

    def main_spec(self) -> DataSpec:
        """The data of main's models (setting bank)."""
        return core.data_spec(self, self.dataset)

    def retrain_recipe(self):
        """The recipe of setting trained: fewer epochs where the profile says so."""
        r = self.recipe()
        if not self.retrain_epochs:
            return r
        key = "epochs" if REGISTRY[self.dataset].kind == "image" else "tabular_epochs"
        return replace(r, **{key: self.retrain_epochs})

    def retrain_spec(self) -> DataSpec:
        """The data of setting trained before the experiment's change (noise or imbalance)."""
        return core.data_spec(self, self.dataset, **({"max_train": self.retrain_max_train}
                                                     if self.retrain_max_train else {}))

    def retrain_description(self) -> dict:
        spec = self.retrain_spec()
        return {"seeds": list(self.retrain_seeds), "n_train_before_change": spec.max_train or None,
                "epochs": self.retrain_recipe().train_config(REGISTRY[self.dataset].kind, 0).epochs}

    def runs_for(self, trained_specs: Callable[[int], dict[str, DataSpec]]):
        """Main's Attn-KNN and CNN (setting bank) and the retrained ones (setting trained: per seed,
        ``trained_specs(seed)`` gives the changed data), each once."""
        out = core.model_runs(self, self.main_spec(), self.seeds)
        if self.retrain:
            for seed in self.retrain_seeds:
                for spec in trained_specs(seed).values():
                    out += core.model_runs(self.retrain_recipe(), spec, (seed,))
        return list({r.id: r for r in out}.values())


def trained_cells(cfg: RobustnessConfig, paths, device, specs: Callable[[int], dict[str, DataSpec]], evaluate) -> dict:
    """Setting trained: for each retrain seed and condition (``specs(seed)``: key -> the changed data),
    the retrained Attn-KNN and CNN, with a memory of the new embedding labelled as it was trained,
    scored by the experiment's ``evaluate(cfg, emb, prepared, attention, cnn, seed)``."""
    recipe, base = cfg.retrain_recipe(), load_base(cfg.retrain_spec())
    cells: dict[str, dict] = {}
    for seed in cfg.retrain_seeds:
        for key, spec in specs(seed).items():
            prepared = prepare(spec, base)
            run_, attn, cnn_model = core.trained_pair(recipe, prepared, seed, paths, device)
            emb = core.bank_of(core.frozen_embeddings(run_, attn, prepared, paths, device), prepared.dataset.train.y,
                               cfg.k, reference=True)
            cells.setdefault(key, {})[str(seed)] = evaluate(
                cfg, emb, prepared, attn.attention, core.cnn_method(cnn_model, prepared, device), seed)
    return cells


def bank_cells(cfg: RobustnessConfig, paths, device, specs: Callable[[int], dict[str, DataSpec]], memory: Callable,
               evaluate) -> dict:
    """Setting bank: for each of main's seeds and each condition (``specs(seed)``: key -> the changed
    data), the memory ``memory(frozen, prepared)`` builds from main's frozen embedding, scored by
    the experiment's ``evaluate(cfg, emb, prepared, attention, cnn, seed)``."""
    base = load_base(cfg.main_spec())
    clean = prepare(cfg.main_spec(), base)
    cells: dict[str, dict] = {}
    for seed in cfg.seeds:
        run_, attn, cnn_model = core.trained_pair(cfg, clean, seed, paths, device)
        frozen = core.frozen_embeddings(run_, attn, clean, paths, device)
        cnn = core.cnn_method(cnn_model, clean, device)
        for key, spec in specs(seed).items():
            prepared = prepare(spec, base)
            cells.setdefault(key, {})[str(seed)] = evaluate(cfg, memory(frozen, prepared), prepared, attn.attention,
                                                            cnn, seed)
    return cells


def run_settings(cfg: RobustnessConfig, paths, artifacts: Artifacts, *, bank_specs: Callable[[int], dict[str, DataSpec]],
                 memory: Callable, trained_specs: Callable[[int], dict[str, DataSpec]], evaluate, summarise,
                 verdicts: Callable[[dict, RobustnessConfig], dict], about: dict[str, dict], **entries) -> dict:
    """Both settings of a robustness experiment: cells per condition and seed, their summaries
    (``summarise(per_seed)``) and the experiment's ``verdicts(results, cfg)`` (stored as
    ``results["verdicts"]``), written as the experiment's declared record. ``about`` gives each
    setting's description and grid entries; ``entries`` are the results' own grid entries.
    Returns the record."""
    device, prov, clock = core.begin(cfg)
    settings = {"bank": {**about["bank"], "seeds": list(cfg.seeds),
                         "cells": bank_cells(cfg, paths, device, bank_specs, memory, evaluate)}}
    if cfg.retrain:
        settings["trained"] = {**about["trained"], **cfg.retrain_description(),
                               "cells": trained_cells(cfg, paths, device, trained_specs, evaluate)}
    for s in settings.values():
        s["curves"] = {key: summarise(per_seed) for key, per_seed in s["cells"].items()}
    prepared = prepare(cfg.main_spec(), load_base(cfg.main_spec()))
    results = {"dataset": prepared.dataset.summary(), "class_names": list(prepared.dataset.class_names), **entries,
               "k": cfg.k, "settings": settings}
    results["verdicts"] = verdicts(results, cfg)
    results["timings"] = {"seconds": clock()}
    return core.write_record(paths, artifacts, cfg.dataset, cfg, prov, {cfg.dataset: prepared.fingerprint()},
                             results)[1]


SPLITS = {"accuracy": "test_raw", "ece": "test_calibrated"}
"""The metrics of a robustness verdict and the split each is read on: accuracy as predicted, ECE after
calibration (described, never judged)."""


def reference_of(cell: dict) -> str:
    """The method a cell's verdicts read against: the tuned vote (``reference``), or, in a record from
    before it was scored here, the best kNN vote at k (``best_baseline``)."""
    return "reference" if "reference" in cell["summary"] else "best_baseline"


def cell_difference(cell: dict, a: str, b: str, metric: str = "accuracy", split: str = "test_raw",
                    margin: float | None = None) -> dict:
    """Seed-level verdict of method ``a`` minus ``b`` in one (setting, condition) cell of a noise or
    long-tail record, from the per-seed values of its summary (a t interval over the seeds' paired
    differences; these records keep no bootstrap over test points, so the interval counts seeds only),
    against ``margin`` (None: the library's)."""
    return seed_difference(cell["summary"][a][split][metric]["values"], cell["summary"][b][split][metric]["values"],
                           metric, margin)


def cell_verdicts(cell: dict, cfg: RobustnessConfig, pairs: tuple[tuple[str, str], ...]) -> dict:
    """One cell's verdicts: ``reference`` (:func:`reference_of`) and, for each (a, b) of ``pairs``
    whose methods the cell has (b ``reference`` stands for :func:`reference_of`), the entry
    ``"<a>_vs_<b>"`` = {a, b (the method read), accuracy, ece} with each metric's seed-level
    difference against the config's margin (:data:`SPLITS`)."""
    ref = reference_of(cell)
    out: dict = {"reference": ref}
    for a, b in pairs:
        against = ref if b == "reference" else b
        if a in cell["summary"] and against in cell["summary"]:
            out[f"{a}_vs_{b}"] = {"a": a, "b": against, **{
                metric: cell_difference(cell, a, against, metric, split, cfg.margin(metric))
                for metric, split in SPLITS.items()}}
    return out


def settings_verdicts(results: dict, cfg: RobustnessConfig, pairs: tuple[tuple[str, str], ...]) -> dict:
    """{"settings": {setting: {condition: :func:`cell_verdicts`}}} of every cell of a noise or
    long-tail record's results (pure: the results and the config's margins decide it)."""
    return {"settings": {sname: {key: cell_verdicts(cell, cfg, pairs) for key, cell in s["curves"].items()}
                         for sname, s in results["settings"].items()}}

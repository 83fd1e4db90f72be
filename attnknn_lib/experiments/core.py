"""What every experiment does the same way.

An experiment is a module under :mod:`attnknn_lib.experiments` with

* ``NAME`` and ``NOTEBOOK`` (``notebooks/<NOTEBOOK>``), ``Config`` (a frozen dataclass extending
  :class:`~attnknn_lib.config.ExperimentConfig` with only its own knobs);
* ``runs(cfg) -> list[TrainingRun]``: the models it needs (the workflow trains them as jobs);
* ``outputs(cfg) -> list[str]``: the files it writes, relative to the output root;
* the analysis functions its notebook calls.

This module holds the shared steps: the data spec of a dataset under the recipe, loading (or,
when a notebook runs alone, training) a run's model, embedding the splits into a memory bank with
the labels the experiment says, and writing one result record through one atomic helper.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import numpy as np

from ..cache import load_or_train
from ..config import Recipe
from ..evaluation import Embedded, embed_all
from ..io import write_json
from ..paths import Paths
from ..provenance import Provenance
from ..runs import DataSpec, Prepared, TrainingRun, make_run
from ..runtime import pick_device, set_threads
from ..training import TrainResult
from ..transforms import tta_views


def data_spec(recipe: Recipe, name: str, **changes) -> DataSpec:
    """The dataset ``name`` with the recipe's subset sizes and split, plus an experiment's changes
    (noise, imbalance)."""
    return DataSpec(name, max_train=recipe.max_train, max_val=recipe.max_val, max_test=recipe.max_test,
                    val_fraction=recipe.val_fraction, **changes)


def model_runs(recipe: Recipe, data: DataSpec, seeds: tuple[int, ...], kinds=("attnknn", "cnn")) -> list[TrainingRun]:
    return [make_run(recipe.recipe(), data, kind, seed) for seed in seeds for kind in kinds]


def start(recipe: Recipe):
    """Threads and device, decided once per notebook."""
    set_threads(recipe.threads or None)
    return pick_device(recipe.device)


def trained(run: TrainingRun, paths: Paths, prepared: Prepared) -> tuple[TrainResult, bool]:
    """The run's model from the cache (the workflow trained it), or trained here when a notebook
    runs alone. Returns (result, loaded_from_cache)."""
    return load_or_train(run, paths.artifacts, prepared)


def embed(model, prepared: Prepared, n_views: int, k_max: int, device, bank_labels: np.ndarray | None = None
          ) -> Embedded:
    """Embed train (the bank, labelled with ``bank_labels``: the prepared training labels by
    default, i.e. noisy where the experiment made them noisy), and val / test under TTA views."""
    ds = prepared.dataset
    return embed_all(model.embedder, ds, tta_views(ds, n_views), k_max, train_labels=bank_labels, device=device)


def result_path(paths: Paths, experiment: str, dataset: str | None = None) -> Path:
    return paths.results / (f"{experiment}_{dataset}.json" if dataset else f"{experiment}.json")


def write_record(paths: Paths, experiment: str, dataset: str | None, cfg, prov: Provenance,
                 data_fingerprints: dict[str, str], results: dict) -> tuple[Path, dict]:
    """``results/<experiment>[_<dataset>].json`` = {experiment, dataset, profile, config, provenance, results}."""
    record = {"experiment": experiment, "dataset": dataset, "profile": cfg.profile, "config": cfg.to_dict(),
              "provenance": prov.record(data_fingerprints), "results": results}
    return write_json(result_path(paths, experiment, dataset), record), record


def timer() -> Callable[[], float]:
    """A clock: each call returns the seconds since :func:`timer` was called."""
    t0 = time.perf_counter()
    return lambda: round(time.perf_counter() - t0, 2)

"""What every experiment does the same way.

An experiment is a package under :mod:`attnknn_lib.experiments` that declares itself once
(:mod:`attnknn_lib.experiments.framework.declaration`). This module holds the shared steps: the data spec of a dataset under the recipe, loading (or,
when a notebook runs alone, training) a run's model, embedding the splits into a memory with
the labels the experiment says, and writing one result record through one atomic helper.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attnknn_lib.base.files import write_json, write_npz
from attnknn_lib.base.knobs import knob
from attnknn_lib.base.paths import Paths
from attnknn_lib.base.provenance import Provenance, bind_measure_key
from attnknn_lib.base.runtime import pick_device, set_threads
from attnknn_lib.data.spec import DataSpec, Prepared
from attnknn_lib.data.transforms import to_tensor, tta_views
from attnknn_lib.evaluation.head_scores import attention_scorer
from attnknn_lib.evaluation.inference import embed as embed_rows
from attnknn_lib.evaluation.methods import Embedded, MethodProbs, attnknn_method, cnn_methods, embed_all, knn_methods
from attnknn_lib.evaluation.metrics import METRICS
from attnknn_lib.evaluation.reference import REFERENCE_K, Search, reference_method, references
from attnknn_lib.evaluation.tuned_attention import tuned_attentions
from attnknn_lib.experiments.framework.declaration import Artifacts
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.headroom import loo_agreement
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.training.cache import load_or_train
from attnknn_lib.training.loops import TrainResult
from attnknn_lib.training.recipe import Recipe
from attnknn_lib.training.runs import TrainingRun, make_run


def data_spec(recipe: Recipe, name: str, **changes) -> DataSpec:
    """The dataset ``name`` with the recipe's subset sizes and split, plus an experiment's changes
    (noise, imbalance)."""
    base = {"max_train": recipe.max_train, "max_val": recipe.max_val, "max_test": recipe.max_test,
            "val_fraction": recipe.val_fraction}
    return DataSpec(name, **{**base, **changes})


def model_runs(recipe: Recipe, data: DataSpec, seeds: tuple[int, ...], kinds=("attnknn", "cnn")) -> list[TrainingRun]:
    return [make_run(recipe.recipe(), data, kind, seed) for seed in seeds for kind in kinds]


def start(recipe: Recipe):
    """Threads and device, decided once per notebook."""
    set_threads(recipe.threads or None)
    return pick_device(recipe.device)


def begin(cfg) -> tuple[object, Provenance, Callable[[], float]]:
    """What every experiment's ``run`` starts with: threads and device (:func:`start`), the
    provenance of its record, and a clock for its wall seconds."""
    device = start(cfg)
    return device, Provenance(cfg.to_dict(), str(device)), timer()


def trained(run: TrainingRun, paths: Paths, prepared: Prepared) -> tuple[TrainResult, bool]:
    """The run's model from the cache (the workflow trained it), or trained here when a notebook
    runs alone. Returns (result, loaded_from_cache)."""
    return load_or_train(run, paths.artifacts, prepared)


def trained_pair(recipe: Recipe, prepared: Prepared, seed: int, paths: Paths, device):
    """Attn-KNN and CNN of one seed on ``prepared`` (from the cache, or trained here when a notebook
    runs alone), on ``device``: (Attn-KNN run, Attn-KNN model, CNN model)."""
    models = {r.kind: (r, trained(r, paths, prepared)[0].model.to(device))
              for r in model_runs(recipe, prepared.spec, (seed,))}
    return models["attnknn"][0], models["attnknn"][1], models["cnn"][1]


def embed_views(model, prepared: Prepared, n_views: int, k_max: int, device, bank_labels: np.ndarray | None = None
          ) -> Embedded:
    """Embed train (the memory, labelled with ``bank_labels``: the prepared training labels by
    default, i.e. noisy where the experiment made them noisy), and val / test under TTA views."""
    ds = prepared.dataset
    return embed_all(model.embedder, ds, tta_views(ds, n_views), k_max, train_labels=bank_labels, device=device)


@dataclass(frozen=True)
class Frozen:
    """Original-view embeddings of every train / val / test row under one trained embedder: the
    experiments that change only the memory (its labels, its rows, k) start from these."""

    train: np.ndarray  # (N_train, D)
    val: np.ndarray  # (N_val, D)
    test: np.ndarray  # (N_test, D)
    train_ids: np.ndarray  # (N_train,) source ids of the training rows, to map subsets onto them


def frozen_embeddings(run: TrainingRun, model, prepared: Prepared, paths: Paths, device) -> Frozen:
    """The embeddings of ``run``'s trained model on ``prepared``'s rows, cached under
    ``<artifacts>/embeddings/<run id>.npz`` (the id names the model exactly; the data fingerprint
    stored with them must match, else they are recomputed)."""
    path = paths.artifacts / "embeddings" / f"{run.id}.npz"
    ds, fp = prepared.dataset, prepared.fingerprint()
    if path.exists():
        try:
            with np.load(path) as z:
                if str(z["data_fingerprint"]) == fp:
                    return Frozen(z["train"], z["val"], z["test"], z["train_ids"])
        except Exception:  # an unreadable cache file is recomputed below
            pass
    # one thread, whatever the job's: the cache is shared by every job that reads this model, and a
    # float sum split over more threads differs in its last bits, so the first job to get here (an
    # order the scheduler decides) would otherwise decide every later job's numbers
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        emb = {s: embed_rows(model.embedder, to_tensor(ds, getattr(ds, s)), 1024, device, desc=f"embed {s}")
               for s in ("train", "val", "test")}
    finally:
        torch.set_num_threads(threads)
    write_npz(path, compress=False, data_fingerprint=np.array(fp), train_ids=ds.train.ids, **emb)
    return Frozen(emb["train"], emb["val"], emb["test"], ds.train.ids)


LOO_K = 16  # a memory row's nearest other rows behind its label agreement (the tuned vote's filter)
MEMORY = ("memory", "self")  # Embedded.neighbours key of each memory row's nearest other rows


def bank_of(frozen: Frozen, labels: np.ndarray, k_max: int, rows: np.ndarray | None = None,
            index_type: str = "flat_l2", reference: bool = False) -> Embedded:
    """A memory of the training rows ``rows`` (default: all) labelled ``labels`` (one per
    kept row), with the k_max nearest memory rows of every val and test embedding searched once.
    ``reference``: search deep enough for :func:`reference_of` too (val and test to
    :data:`~attnknn_lib.evaluation.reference.REFERENCE_K`, every memory row to its :data:`LOO_K`
    nearest other rows), so that relabelled copies (:func:`relabel`) search nothing again."""
    train = frozen.train if rows is None else frozen.train[rows]
    bank = MemoryBank(index_type).build(train, labels)
    out = Embedded(bank, {"original": frozen.val}, {"original": frozen.test}, {})
    depth = max(k_max, REFERENCE_K) if reference else k_max
    for split in ("val", "test"):
        out.neighbours[(split, "original")] = bank.search(getattr(out, split)["original"], min(depth, len(bank)))
    if reference:
        out.neighbours[MEMORY] = memory_neighbours(bank)
    return out


def memory_neighbours(bank: MemoryBank) -> Neighbourhood:
    """Each memory row's :data:`LOO_K` nearest other rows (behind its leave-one-out label agreement)."""
    return bank.search_excluding(bank.embeddings, min(LOO_K, len(bank) - 1), np.arange(len(bank)))


def searcher(bank: MemoryBank, queries: dict[str, np.ndarray], known: dict[str, Neighbourhood] | None = None) -> Search:
    """``search(split, k)`` over one embedding's memory: each split searched at most once more, at
    the widest k asked for (``known``: neighbours already searched). The labels may differ between
    memories of one embedding; the geometry does not. ``search(split, k, idx)``: the queries ``idx``
    only, searched anew (and not kept) when k is wider than what is kept: the blocks of
    :func:`~attnknn_lib.evaluation.reference.reference_methods` with ``chunked``."""
    cache: dict[str, Neighbourhood] = dict(known or {})

    def search(split: str, k: int, idx: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        if idx is not None and (split not in cache or cache[split].rows.shape[1] < k):
            nb = bank.search(queries[split][idx], k)  # a block of queries, not kept: the wide votes of the NLL search
            return nb.rows, nb.sq_dist
        if split not in cache or cache[split].rows.shape[1] < k:
            cache[split] = bank.search(queries[split], k)
        nb = cache[split]
        rows = slice(None) if idx is None else idx
        return nb.rows[rows, :k], nb.sq_dist[rows, :k]
    return search


def _reference_inputs(emb: Embedded) -> tuple[np.ndarray, np.ndarray, Search]:
    """(memory labels, each row's leave-one-out agreement, ``search(split, k)``) of ``emb``'s memory,
    reading the neighbours :func:`bank_of` searched and searching deeper only when asked to."""
    labels = emb.bank.labels
    if MEMORY not in emb.neighbours:
        emb.neighbours[MEMORY] = memory_neighbours(emb.bank)
    loo = loo_agreement(labels[emb.neighbours[MEMORY].rows], labels)
    splits = ("val", "test")
    search = searcher(emb.bank, {s: getattr(emb, s)["original"] for s in splits},
                      {s: emb.neighbours[(s, "original")] for s in splits if (s, "original") in emb.neighbours})
    return labels, loo, search


def reference_of(emb: Embedded, prepared: Prepared) -> MethodProbs:
    """The tuned vote on ``emb``'s memory, as labelled there (noisy labels
    under noise, the long-tailed subset's), tuned on ``prepared``'s validation labels:
    :func:`~attnknn_lib.evaluation.reference.reference_method` (vote rule, temperature, k, label-consistency
    filter, prior exponent). Reads the neighbours :func:`bank_of` searched with ``reference=True``
    and searches deeper only when the chosen k needs it."""
    labels, loo, search = _reference_inputs(emb)
    return reference_method(search, labels, loo, prepared.dataset.val.y, prepared.dataset.num_classes)


def references_of(emb: Embedded, prepared: Prepared) -> tuple[MethodProbs, MethodProbs]:
    """:func:`reference_of` and the same search tuned for the calibration endpoint (the reference of
    a calibration claim, :func:`~attnknn_lib.evaluation.reference.references`), from one search."""
    labels, loo, search = _reference_inputs(emb)
    return references(search, labels, loo, prepared.dataset.val.y, prepared.dataset.num_classes, chunked=True)


def tuned_attention_of(attention, emb: Embedded, prepared: Prepared, k_start: int, device=None,
                       cache: dict | None = None) -> tuple[MethodProbs, MethodProbs]:
    """The attention with the tuned vote's knobs on ``emb``'s memory (k from the tuned vote's ladder, the
    consistency filter and the prior exponent chosen on ``prepared``'s validation labels;
    :func:`~attnknn_lib.evaluation.tuned_attention.tuned_attentions`): tuned on accuracy, and for the
    calibration endpoint. It reads from ``k_start`` neighbours (the tuned vote's search depth) on,
    deeper while its choice sits at the largest k read; ``cache`` shares the attention's scores between
    memories of one embedding that differ only in their labels."""
    labels, loo, search = _reference_inputs(emb)
    queries = {s: getattr(emb, s)["original"] for s in ("val", "test")}
    scorer = attention_scorer(attention, emb.bank, queries, search, labels, loo, cache, device)
    prior = np.bincount(labels, minlength=prepared.dataset.num_classes) / len(labels)
    return tuned_attentions(scorer, prepared.dataset.val.y, prior, prepared.dataset.num_classes, k_start, len(labels))


def relabel(emb: Embedded, labels: np.ndarray) -> Embedded:
    """The same bank and neighbours with other labels (e.g. noisy ones): no new search."""
    labels = np.asarray(labels, dtype=np.int64)
    bank = copy.copy(emb.bank)
    bank.labels = labels
    nbs = {key: Neighbourhood(labels[nb.rows], nb.sq_dist, nb.rows) for key, nb in emb.neighbours.items()}
    return Embedded(bank, emb.val, emb.test, nbs)


def rows_of(frozen: Frozen, ids: np.ndarray) -> np.ndarray:
    """Positions in ``frozen.train`` of the training rows with source ids ``ids`` (a subset)."""
    order = np.argsort(frozen.train_ids)
    pos = order[np.searchsorted(frozen.train_ids, ids, sorter=order)]
    if not np.array_equal(frozen.train_ids[pos], ids):
        raise ValueError("some training rows of the subset are not in the embedded training split")
    return pos


def cnn_method(model, prepared: Prepared, device) -> MethodProbs:
    """The CNN's softmax on val and test (original view)."""
    return cnn_methods(model, prepared.dataset, tta_views(prepared.dataset, 1), device=device)["cnn"]


def vote_methods(emb: Embedded, prepared: Prepared, attention, k: int,
                 cnn: MethodProbs | None = None, reference: bool = False) -> dict[str, MethodProbs]:
    """uniform / distance / cosine kNN (knobs tuned on ``prepared``'s validation labels, noisy
    where they are), Attn-KNN, the tuned vote (``reference``: :func:`reference_of`)
    and the CNN when given: the methods of the robustness experiments."""
    methods = knn_methods(emb, prepared.dataset, k)
    methods["attnknn"] = attnknn_method(attention, emb, k)
    if reference:
        methods["reference"] = reference_of(emb, prepared)
    if cnn is not None:
        methods["cnn"] = cnn
    return methods


def aggregate_seeds(per_seed: dict[str, dict[str, dict]]) -> dict:
    """Mean and s.d. (ddof 1; None for one seed: no spread to show) over seeds of every method's
    test metrics, raw and calibrated.
    ``per_seed`` = {seed: {method: scored entry of :func:`attnknn_lib.evaluation.methods.score`}}; a method
    is aggregated over the seeds that have it (``seeds`` says which)."""
    out = {}
    for m in dict.fromkeys(m for methods in per_seed.values() for m in methods):
        seeds = [s for s in per_seed if m in per_seed[s]]
        entry = {"label": per_seed[seeds[0]][m]["label"], "seeds": seeds}
        for split in ("test_raw", "test_calibrated"):
            entry[split] = {}
            for metric in METRICS:
                v = np.array([per_seed[s][m][split][metric]["value"] for s in seeds])
                entry[split][metric] = {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1 else None,
                                        "values": v.tolist()}
        out[m] = entry
    return out


def write_record(paths: Paths, artifacts: Artifacts, dataset: str | None, cfg, prov: Provenance,
                 data_fingerprints: dict[str, str], results: dict) -> tuple[Path, dict]:
    """The record (the declared ``results/<experiment>_<dataset>.json``) = {experiment, dataset,
    profile, config, provenance, results}. Its measurement key is the one taken when the measurement
    started (:func:`~attnknn_lib.base.provenance.bind_measure_key`); nothing is written if a
    measurement file changed since."""
    key = bind_measure_key(artifacts.name).stamp()
    record = {"experiment": artifacts.name, "dataset": dataset, "profile": cfg.profile, "config": cfg.to_dict(),
              "provenance": {**prov.record(data_fingerprints), "measure_code": key},
              "results": results}
    return write_json(artifacts.record_path(paths, dataset), record), record


def timer() -> Callable[[], float]:
    """A clock: each call returns the seconds since :func:`timer` was called."""
    t0 = time.perf_counter()
    return lambda: round(time.perf_counter() - t0, 2)


@dataclass(frozen=True)
class ExperimentConfig(Recipe):
    """Base of every experiment's config: the recipe plus the profile name."""

    profile: str = knob("cpu", "configs/NAME.yaml these values come from (recorded in every result)")

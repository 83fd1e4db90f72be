"""The frozen memory of one seed: main's embedding, its neighbour lists and each setting's labels."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnknn_lib.base.paths import Paths
from attnknn_lib.data.label_noise import inject_label_noise
from attnknn_lib.data.spec import Prepared, prepare
from attnknn_lib.evaluation.reference import Search
from attnknn_lib.experiments.attention_study.config import Config, parse_setting
from attnknn_lib.experiments.attention_study.measure.training_runs import runs
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.headroom import loo_agreement, loo_agreement_without
from attnknn_lib.knn.neighbourhood import Neighbourhood


@dataclass
class Memory:
    """The frozen memory of one seed under one setting: its labels, which were flipped, and the
    neighbourhoods of training queries (a subset, themselves excluded), validation and test."""

    embeddings: torch.Tensor  # (M, D)
    labels: np.ndarray  # (M,) possibly noisy
    flipped: np.ndarray  # (M,) bool
    loo: np.ndarray  # (M,) leave-one-out label agreement of each row under these labels
    train: Neighbourhood
    val: Neighbourhood
    test: Neighbourhood


def memory_setting(frozen, clean_labels: np.ndarray, self_nb: Neighbourhood, val_nb: Neighbourhood, test_nb: Neighbourhood,
                   val_y: np.ndarray, test_y: np.ndarray, train_rows: np.ndarray, setting: str, num_classes: int,
                   cfg: Config, seed: int) -> Memory:
    """The memory's labels under ``setting`` (seed ``seed`` draws its own flips) and every split's
    neighbourhoods with those labels."""
    kind, rate = parse_setting(setting)
    if rate:
        labels, flipped = inject_label_noise(clean_labels, rate, num_classes, kind, seed=cfg.noise_seed + seed)
    else:
        labels, flipped = np.asarray(clean_labels), np.zeros(len(clean_labels), dtype=bool)
    labels = np.asarray(labels, dtype=np.int64)
    loo = loo_agreement(labels[self_nb.rows[:, :cfg.loo_k]], labels)  # (M,)

    def hoods(q: np.ndarray, nb: Neighbourhood, target: np.ndarray, agreement: np.ndarray | None = None) -> Neighbourhood:
        agreement = loo[nb.rows] if agreement is None else agreement
        return Neighbourhood(query=q, rows=nb.rows, sq_dist=nb.sq_dist.astype(np.float32), labels=labels[nb.rows],
                             loo=agreement.astype(np.float32), target=np.asarray(target, dtype=np.int64))

    # a training query is a memory row: its neighbours' agreement must not count its own label
    sub = Neighbourhood(None, self_nb.sq_dist[train_rows], self_nb.rows[train_rows])
    train = hoods(frozen.train[train_rows], sub, labels[train_rows],
                  loo_agreement_without(train_rows, sub.rows, self_nb.rows, labels, cfg.loo_k))
    return Memory(torch.from_numpy(frozen.train), labels, np.asarray(flipped, bool), loo, train,
                  hoods(frozen.val, val_nb, val_y), hoods(frozen.test, test_nb, test_y))


def _train_rows(n: int, size: int, seed: int) -> np.ndarray:
    """The memory rows that train a head: a seeded subset of ``size`` of the ``n``, sorted; every
    row when ``size`` is 0 (or at least n)."""
    if size == 0 or size >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).permutation(n)[:size])


@dataclass
class SeedMemory:
    """What every memory setting of one seed is built from: main's frozen embedding, its memory, the
    neighbour lists (training queries without themselves) and the tuned vote's search over them."""

    prepared: Prepared
    trained: object  # the cached training result: model, history, best epoch
    frozen: object
    bank: MemoryBank
    self_nb: Neighbourhood
    val_nb: Neighbourhood
    test_nb: Neighbourhood
    rows: np.ndarray  # the training queries of the heads
    search: Search

    def setting(self, cfg: Config, setting: str, seed: int) -> Memory:
        """The memory of ``setting`` (:func:`memory_setting`) on this seed."""
        ds = self.prepared.dataset
        return memory_setting(self.frozen, ds.train.y, self.self_nb, self.val_nb, self.test_nb, ds.val.y, ds.test.y,
                              self.rows, setting, ds.num_classes, cfg, seed)


def seed_memory(cfg: Config, paths: Paths, seed: int) -> SeedMemory:
    """Main's Attn-KNN of ``seed`` (cached), its frozen embedding, bank and neighbour lists."""
    cpu = torch.device("cpu")
    prepared = prepare(core.data_spec(cfg, cfg.dataset))
    ds = prepared.dataset
    k_max = min(cfg.k_max, len(ds.train) - 1)
    run_ = runs(cfg)[cfg.seeds.index(seed)]
    trained = core.trained(run_, paths, prepared)[0]
    frozen = core.frozen_embeddings(run_, trained.model.to(cpu), prepared, paths, cpu)
    bank = MemoryBank().build(frozen.train, ds.train.y)
    self_nb = bank.search_excluding(frozen.train, max(k_max, cfg.loo_k + 1), np.arange(len(frozen.train)))
    return SeedMemory(prepared, trained, frozen, bank, self_nb, bank.search(frozen.val, k_max),
                      bank.search(frozen.test, k_max), _train_rows(len(frozen.train), cfg.train_queries, seed),
                      core.searcher(bank, {"val": frozen.val, "test": frozen.test}))

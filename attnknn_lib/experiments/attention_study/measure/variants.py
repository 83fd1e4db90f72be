"""The attention variants on a frozen memory: building, fitting and cross-fitting one, and the collapse sweep.

Every variant searches its learning rate under the one budget (:func:`_fit_searched`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.base.paths import Paths
from attnknn_lib.base.runtime import seed_everything
from attnknn_lib.evaluation.methods import MethodProbs
from attnknn_lib.experiments.attention_study.config import VARIANTS, Config
from attnknn_lib.experiments.attention_study.measure.ceilings import against_reference, reference_entry
from attnknn_lib.experiments.attention_study.measure.memory import Memory, seed_memory
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.knn.votes import break_ties, effective_neighbours, score_range
from attnknn_lib.models import MultiHeadNeighbourAttention
from attnknn_lib.models.neighbour_heads import (
    AdaptiveK,
    BlindAttention,
    DifferenceAttention,
    LabelAwareAttention,
    NeighbourReadout,
    QueryOnly,
)
from attnknn_lib.training.head_fitting import head_scores, predict, train_head
from attnknn_lib.training.metric_learning import search_learning_rates

ENTROPY = {"blind_bonus": 0.01, "blind_none": 0.0, "blind_penalty": -0.01, "blind_heldout": 0.01}  # others: 0


def build_variant(name: str, cfg: Config, num_classes: int, k: int) -> torch.nn.Module:
    if name.startswith("blind"):
        return BlindAttention(MultiHeadNeighbourAttention(cfg.attention_config(num_classes)))
    if name in ("label_aware", "label_aware_heldout"):
        return LabelAwareAttention(num_classes, cfg.embed_dim)
    if name == "readout":
        return NeighbourReadout(num_classes, cfg.embed_dim)
    if name == "query_only":
        return QueryOnly(num_classes, cfg.embed_dim)
    if name == "adaptive_k":
        return AdaptiveK(num_classes, k)
    raise ConfigError(f"variant={name!r} is not allowed; choose one of: {', '.join(VARIANTS)}")


def _fit(cfg: Config, name: str, train: Neighbourhood, val: Neighbourhood, mem: Memory, num_classes: int,
         k: int, seed: int, lr: float):
    """One variant at one learning rate (:func:`_fit_probe`'s training, the variant's entropy term)."""
    return _fit_probe(cfg, lambda: build_variant(name, cfg, num_classes, k), train, val, mem, num_classes, seed, lr,
                      name=name, entropy_weight=ENTROPY.get(name, 0.0))


def _fit_probe(cfg: Config, build: Callable[[], torch.nn.Module], train: Neighbourhood, val: Neighbourhood,
               mem: Memory, num_classes: int, seed: int, lr: float, name: str = "linear probe",
               entropy_weight: float = 0.0):
    """A head (a variant, or the linear probe, made by ``build`` after seeding) at one learning rate: at
    most ``cfg.head_epochs``, stopped at a plateau of ``cfg.head_patience`` epochs, its best epoch on ``val``."""
    seed_everything(seed)
    return train_head(build(), train, val, mem.embeddings, num_classes, epochs=cfg.head_epochs, lr=lr,
                      batch_size=cfg.head_batch_size, entropy_weight=entropy_weight, seed=seed, name=name,
                      patience=cfg.head_patience)


def _fit_searched(cfg: Config, name: str, train: Neighbourhood, sel: Neighbourhood, mem: Memory, num_classes: int,
                  k: int, seed: int):
    """The one budget every learner shares (:func:`~attnknn_lib.training.metric_learning.search_learning_rates`):
    every learning rate of ``cfg.head_lrs``, the grid extended by ``LR_STEP`` past an end while the
    best sits there (at most ``LR_EXTENSIONS`` times), each rate trained by :func:`_fit`; every
    (learning rate, epoch) scored is one configuration. The best on ``sel``
    (:func:`~attnknn_lib.training.loops.selection_key`: accuracy, then lower NLL) and what was searched:
    ``edge`` when the chosen rate still sits at an end of the grid, ``plateau`` when its training reached
    a plateau (:func:`reached_plateau`, also when it did so on the last epoch)."""
    best, lrs, at_end, fits = search_learning_rates(
        lambda lr: _fit(cfg, name, train, sel, mem, num_classes, k, seed, lr=lr), cfg.head_lrs,
        lambda res: res.history[res.best_epoch - 1])
    res = fits[best]
    return res, {"lr": best, "lrs": lrs, "configs": sum(len(f.history) for f in fits.values()), "edge": at_end,
                 "plateau": reached_plateau(len(res.history), res.best_epoch, cfg.head_patience)}


def reached_plateau(epochs_run: int, best_epoch: int, patience: int) -> bool:
    """Whether a run's score stopped improving: its best epoch lies at least ``patience`` epochs
    before its last (a run stopped by its patience, also when that happens on the last epoch allowed)."""
    return epochs_run - best_epoch >= patience


AS_TRAINED = "as trained"  # the collapse sweep's head that the other settings change

COLLAPSE = {  # name -> (what changes, learning rate factor, attention config changes, q/k init scale)
    AS_TRAINED: ("the prototype head without the entropy bonus", 1.0, {}, 1.0),
    "lr / 10": ("learning rate divided by 10", 0.1, {}, 1.0),
    "lr x 10": ("learning rate multiplied by 10", 10.0, {}, 1.0),
    "sharp start": ("temperatures start at 0.1 instead of 0.5 (scores x 5)", 1.0, {"tau_init": 0.1}, 1.0),
    "wide bounds": ("temperature bounds [0.005, 20], start 0.05 (scores x 10)", 1.0,
                    {"tau_min": 0.005, "tau_max": 20.0, "tau_init": 0.05}, 1.0),
    "large init": ("query and key projections initialised 4 x larger (scores x 16)", 1.0, {}, 4.0),
    "all sharp": ("lr x 10, wide bounds and large init together", 10.0,
                  {"tau_min": 0.005, "tau_max": 20.0, "tau_init": 0.05}, 4.0),
}
"""What could hold the label-blind attention at uniform weights, swept on the frozen clean memory."""
DIFFERENCE = "difference score"  # the sweep's head whose score reads q - n_j (TabR's feature), trained the same way
MAIN_ATTNKNN = "main's Attn-KNN"  # main's attention as trained end to end, measured beside the sweep, not retrained
BESIDE = {DIFFERENCE: "score = MLP(q - n_j), TabR's difference feature; no temperature",
          MAIN_ATTNKNN: "main's attention as trained end to end (entropy bonus), not retrained"}


def collapse_what(name: str) -> str:
    """What a row of the collapse sweep changes or is."""
    return COLLAPSE[name][0] if name in COLLAPSE else BESIDE[name]


def _mechanism(cfg: Config, head: torch.nn.Module, val, test, mem: Memory, ds, seed: int, reference: tuple,
               temperatures: list[float] | None) -> dict:
    """A head on the clean memory's test queries: effective k, the within-neighbourhood score range
    (:func:`~attnknn_lib.knn.votes.score_range`) beside its temperatures (None: it has none),
    accuracy and paired differences to the tuned vote."""
    c = ds.num_classes
    pv, _ = predict(head, val, mem.embeddings, c)
    pt, wt = predict(head, test, mem.embeddings, c)
    scored, diff = against_reference(cfg, MethodProbs(pv, pt), ds, seed, reference)
    return {"effective_k": float(effective_neighbours(wt).mean()),
            "score_range": score_range(head_scores(head, test, mem.embeddings)), "temperatures": temperatures,
            "accuracy": scored["test_raw"]["accuracy"]["value"], "diff_reference": diff}


def collapse_sweep(cfg: Config, mem: Memory, ds, seed: int, reference: tuple, main_attention=None) -> dict:
    """Per :data:`COLLAPSE` setting: the label-blind head (no entropy term) trained at k on the frozen
    clean memory; then the :data:`DIFFERENCE` head trained the same way, and ``main_attention`` (main's
    Attn-KNN, when given) as it is: each one's :func:`_mechanism` (effective k, score range beside the
    temperatures, test accuracy, paired differences to the tuned vote) and the trained ones' best epoch
    and validation curve."""
    c, k = ds.num_classes, cfg.k
    train, val = mem.train.take(np.arange(len(mem.train)), k), mem.val.take(np.arange(len(mem.val)), k)
    test = mem.test.take(np.arange(len(mem.test)), k)
    out = {}

    def fit(head: torch.nn.Module, name: str, lr_factor: float):
        return train_head(head, train, val, mem.embeddings, c, epochs=cfg.head_epochs, lr=cfg.head_lr * lr_factor,
                          batch_size=cfg.head_batch_size, entropy_weight=0.0, seed=seed, name=f"collapse {name}",
                          patience=cfg.head_patience)

    for name, (_, lr_factor, changes, init) in COLLAPSE.items():
        seed_everything(seed)
        att = MultiHeadNeighbourAttention(replace(cfg.attention_config(c), **changes))
        with torch.no_grad():
            for proj in (att.q_proj, att.k_proj):
                proj.weight.mul_(init)
        res = fit(BlindAttention(att), name, lr_factor)
        out[name] = {**_mechanism(cfg, res.model, val, test, mem, ds, seed, reference,
                                  [float(t) for t in att.temperatures().detach()]),
                     "best_epoch": res.best_epoch, "val_accuracy_curve": [row["val_accuracy"] for row in res.history]}
    seed_everything(seed)
    res = fit(DifferenceAttention(c, cfg.embed_dim), DIFFERENCE, 1.0)
    out[DIFFERENCE] = {**_mechanism(cfg, res.model, val, test, mem, ds, seed, reference, None),
                       "best_epoch": res.best_epoch, "val_accuracy_curve": [row["val_accuracy"] for row in res.history]}
    if main_attention is not None:
        out[MAIN_ATTNKNN] = _mechanism(cfg, BlindAttention(main_attention), val, test, mem, ds, seed, reference,
                                       [float(t) for t in main_attention.temperatures().detach()])
    return out


HELDOUT_SELECT = 0.2  # share of a held-out variant's training half that picks its epoch


def train_variant(cfg: Config, name: str, mem: Memory, k: int, num_classes: int, seed: int) -> dict:
    """One variant at k: validation and test probabilities, test weights, training history.

    Held-out variants (``*_heldout``) train on clean validation queries instead, cross-fitted: two
    halves; each model trains on most of one half, picks its epoch and learning rate
    (:func:`_fit_searched`) on the rest of that half
    (:data:`HELDOUT_SELECT`) and predicts the other half, so no validation prediction comes from a
    model that trained on it or was selected on it; the test probabilities are the two models' mean."""
    val, test = mem.val.take(np.arange(len(mem.val)), k), mem.test.take(np.arange(len(mem.test)), k)
    if not name.endswith("_heldout"):
        res, info = _fit_searched(cfg, name, mem.train.take(np.arange(len(mem.train)), k), val, mem, num_classes, k,
                                  seed)
        pv, _ = predict(res.model, val, mem.embeddings, num_classes)
        pt, wt = predict(res.model, test, mem.embeddings, num_classes)
        return {"val": pv, "test": pt, "weights": wt, "history": [res.history], "best_epoch": [res.best_epoch],
                "search": [info]}
    rng = np.random.default_rng(seed)
    halves = np.array_split(rng.permutation(len(val)), 2)
    pv = np.zeros((len(val), num_classes))
    pts, wts, hist, best, search = [], [], [], [], []
    for a, b in ((0, 1), (1, 0)):
        n_sel = max(1, int(round(HELDOUT_SELECT * len(halves[a]))))
        fit_rows, sel_rows = halves[a][n_sel:], halves[a][:n_sel]
        res, info = _fit_searched(cfg, name, val.take(fit_rows), val.take(sel_rows), mem, num_classes, k, seed + a)
        search.append(info)
        pv[halves[b]] = predict(res.model, val.take(halves[b]), mem.embeddings, num_classes)[0]
        p, w = predict(res.model, test, mem.embeddings, num_classes)
        pts.append(p)
        wts.append(w)
        hist.append(res.history)
        best.append(res.best_epoch)
    return {"val": pv, "test": break_ties(np.mean(pts, 0), test.labels), "weights": np.mean(wts, 0),
            "history": hist, "best_epoch": best, "search": search}


def measure_collapse(cfg: Config, paths: Paths, seed: int) -> dict:
    """The collapse sweep (:func:`collapse_sweep`) of one seed on its clean memory, against that
    memory's reference: a part of its own, as it takes about as long as the rest of the seed."""
    sm = seed_memory(cfg, paths, seed)
    mem = sm.setting(cfg, "clean", seed)
    _, ref_probs, _ = reference_entry(cfg, mem, sm.search, sm.prepared.dataset, seed)
    return collapse_sweep(cfg, mem, sm.prepared.dataset, seed, ref_probs, sm.trained.model.attention.cpu())

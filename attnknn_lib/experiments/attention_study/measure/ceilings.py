"""The rules that learn nothing on a memory: headroom per k, the two ceilings and the tuned vote.

The tuned vote is the reference: :func:`against_reference` scores a method against it (paired
differences on test), :func:`main_attention` main's Attn-KNN."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from attnknn_lib.evaluation.calibration import Calibrator
from attnknn_lib.evaluation.head_scores import attention_scorer
from attnknn_lib.evaluation.inference import attnknn_probs
from attnknn_lib.evaluation.methods import T_GRID, TAU_GRID, MethodProbs, score
from attnknn_lib.evaluation.metrics import accuracy, nll
from attnknn_lib.evaluation.reference import FILTER, Search, reference_method, references
from attnknn_lib.evaluation.tuned_attention import tuned_attentions
from attnknn_lib.evaluation.verdicts import HEADLINE_BOOT
from attnknn_lib.experiments.attention_study.config import Config
from attnknn_lib.experiments.attention_study.measure.memory import Memory
from attnknn_lib.experiments.attention_study.measure.pairing import _paired
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.headroom import consistency_weights, headroom, rank_weights
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.knn.votes import effective_neighbours, knn_probs, vote

DECAYS = (1.0, 2.0, 4.0, 8.0, 16.0)  # rank-decay lengths of the geometry-only ceiling
THRESHOLDS = FILTER["thetas"]  # leave-one-out agreement thresholds of the label-aware ceiling (up to 1)


def _rule_probs(rule: str, param: float | None, hoods: Neighbourhood, k: int, num_classes: int) -> np.ndarray:
    lab, d = hoods.labels[:, :k], hoods.sq_dist[:, :k]
    if rule == "rank":
        return vote(rank_weights(lab.shape, param), lab, num_classes)
    if rule == "consistency":
        return vote(consistency_weights(hoods.loo[:, :k], param), lab, num_classes)
    return knn_probs(rule, d, lab, num_classes, param, k)


def ceilings(mem: Memory, ks: tuple[int, ...], num_classes: int) -> dict:
    """Best geometry-only rule and best label-aware rule: (rule, param, k) with the best validation
    accuracy (ties: lower validation NLL), scored once on test."""
    grids = {"geometry": [("uniform", None)] + [("distance", t) for t in TAU_GRID] +
             [("cosine", t) for t in T_GRID] + [("rank", d) for d in DECAYS],
             "label_aware": [("consistency", t) for t in THRESHOLDS]}
    out = {}
    for family, grid in grids.items():
        best, key = None, None
        for k in ks:
            for rule, param in grid:
                p = _rule_probs(rule, param, mem.val, k, num_classes)
                kk = (accuracy(p, mem.val.target), -nll(p, mem.val.target))
                if key is None or kk > key:
                    best, key = (rule, param, k), kk
        rule, param, k = best
        out[family] = {"rule": rule, "param": param, "k": k, "val_accuracy": key[0],
                       "test_accuracy": accuracy(_rule_probs(rule, param, mem.test, k, num_classes), mem.test.target)}
    return out


def headroom_table(mem: Memory, ks: tuple[int, ...], num_classes: int) -> dict:
    """Per k: :func:`~attnknn_lib.knn.headroom.headroom` on the test queries."""
    return {str(k): headroom(mem.test.labels, mem.test.target, num_classes, k) for k in ks}


def against_reference(cfg: Config, probs: MethodProbs, ds, seed: int, reference: tuple,
                      n_boot: int | None = None) -> tuple[dict, dict]:
    """One method scored (calibrator fitted on validation, test metrics raw and calibrated) and its
    paired differences to the tuned vote's test probabilities ``reference`` (raw, calibrated;
    ``n_boot`` test resamples, default the config's)."""
    scored = score({"method": probs}, ds, n_boot=cfg.n_boot, seed=seed)["method"]
    cal = Calibrator(**scored["calibrator"]).apply(probs.test)
    return scored, {split: _paired(cfg, p, reference[i], ds.test.y, seed, n_boot)
                    for i, (split, p) in enumerate((("raw", probs.test), ("calibrated", cal)))}


def main_attention(cfg: Config, attention, bank: MemoryBank, frozen, neighbours: tuple[Neighbourhood, Neighbourhood], ds,
                   seed: int, reference: tuple, labels: np.ndarray | None = None,
                   reference_nll: tuple | None = None, knobs: Knobs | None = None, keep: dict | None = None) -> dict:
    """Main's Attn-KNN (its own attention vote at k on its own embedding, over the memory's
    ``labels``: noisy ones under noise, default the memory's) against the tuned vote
    on that memory: paired differences (accuracy raw, ECE, NLL and Brier calibrated), and against
    the NLL-tuned vote (``reference_nll``). Main makes the clean comparison, so it takes main's
    resample count (``HEADLINE_BOOT``): one interval. With ``knobs``, also the same attention with
    the tuned vote's knobs chosen on validation (``"tuned"``, :func:`tuned_main_attention`); the fixed-k
    numbers stay as the diagnostic."""
    if labels is not None:
        bank = copy.copy(bank)
        bank.labels = np.asarray(labels, dtype=np.int64)
        neighbours = tuple(Neighbourhood(bank.labels[nb.rows], nb.sq_dist, nb.rows) for nb in neighbours)
    pv, _ = attnknn_probs(attention, bank, frozen.val, cfg.k, neighbours=neighbours[0])
    pt, wt = attnknn_probs(attention, bank, frozen.test, cfg.k, neighbours=neighbours[1])
    scored, diff = against_reference(cfg, MethodProbs(pv, pt), ds, seed, reference, n_boot=HEADLINE_BOOT)
    out = {"val_accuracy": scored["val"]["accuracy"], "test_raw": scored["test_raw"],
           "test_calibrated": scored["test_calibrated"], "effective_k": float(effective_neighbours(wt).mean()),
           "diff_reference": diff}
    if reference_nll is not None:
        cal = Calibrator(**scored["calibrator"]).apply(pt)
        out["diff_reference_nll"] = {"calibrated": _paired(cfg, cal, reference_nll[1], ds.test.y, seed, HEADLINE_BOOT)}
    if knobs is not None:
        out["tuned"] = tuned_main_attention(cfg, attention, bank, frozen, ds, seed, reference, reference_nll, knobs,
                                            bank.labels if labels is None else labels, keep)
    return out


@dataclass
class Knobs:
    """What the attention with the tuned vote's knobs reads on one memory: the search over main's embedding,
    each memory row's leave-one-out agreement under this memory's labels, the tuned vote's search
    depth (where its k starts) and a cache of the attention's scores shared by the seed's memories."""

    search: Search
    loo: np.ndarray
    k_start: int
    cache: dict = field(default_factory=dict)


def tuned_main_attention(cfg: Config, attention, bank: MemoryBank, frozen, ds, seed: int, reference: tuple,
                         reference_nll: tuple | None, knobs: Knobs, labels: np.ndarray, keep: dict | None = None) -> dict:
    """Main's Attn-KNN with the tuned vote's knobs on this memory (k from its ladder, filter and prior
    chosen on the clean validation labels: :func:`~attnknn_lib.evaluation.tuned_attention.tuned_attentions`):
    its choice (and whether its k differs from the k it was trained at), the open edges, its scores,
    the paired differences to the tuned vote (accuracy raw, ECE, NLL, Brier calibrated) and, the one
    tuned for the calibration endpoint, to the NLL-tuned vote (NLL, Brier calibrated). ``keep``
    receives its test probabilities under ``"test"``: the accuracy-tuned one raw, the calibration
    endpoint's after calibration (the learned metric is compared with them)."""
    labels = np.asarray(labels, dtype=np.int64)
    scorer = attention_scorer(attention, bank, {"val": frozen.val, "test": frozen.test}, knobs.search, labels,
                              knobs.loo, knobs.cache)
    prior = np.bincount(labels, minlength=ds.num_classes) / len(labels)
    acc, cal = tuned_attentions(scorer, ds.val.y, prior, ds.num_classes, knobs.k_start, len(labels))
    scored, diff = against_reference(cfg, acc, ds, seed, reference, n_boot=HEADLINE_BOOT)
    info = acc.info
    out = {"label": info["label"], "k": info["choice"]["k"], "k_trained": cfg.k,
           "k_differs": info["choice"]["k"] != cfg.k, "edges": info["edges"], "k_searched": info["k_searched"],
           "configs": info["configs"], "val_accuracy": scored["val"]["accuracy"], "test_raw": scored["test_raw"],
           "test_calibrated": scored["test_calibrated"], "diff_reference": diff,
           "calibration": {"label": cal.info["label"], "tuned_on": cal.info["tuned_on"], "edges": cal.info["edges"]}}
    if reference_nll is not None:
        cal_scored = score({"m": cal}, ds, n_boot=1, seed=seed)["m"]
        p = Calibrator(**cal_scored["calibrator"]).apply(cal.test)
        out["calibration"]["test_calibrated"] = {m: cal_scored["test_calibrated"][m]["value"] for m in ("nll", "brier")}
        out["diff_reference_nll"] = {"calibrated": _paired(cfg, p, reference_nll[1], ds.test.y, seed, HEADLINE_BOOT)}
        if keep is not None:
            keep["test"] = (acc.test, p)
    return out


def reference_entry(cfg: Config, mem: Memory, search: Search, ds, seed: int) -> tuple[dict, tuple, tuple]:
    """The tuned vote on this memory (:func:`~attnknn_lib.evaluation.reference.
    reference_method`: rule, temperature, k, consistency filter and prior exponent tuned on
    validation accuracy), scored once on test, with the same search tuned on NLL
    (:func:`~attnknn_lib.evaluation.reference.references`, the reference of the
    calibration endpoints); the test probabilities raw and calibrated of each. Validation labels
    are the clean ones (the memory alone is noisy), so every calibrator sees clean labels."""
    ref, by_nll = references(search, mem.labels, mem.loo, ds.val.y, ds.num_classes, cfg.reference_k, chunked=True)
    filt = reference_method(search, mem.labels, mem.loo, ds.val.y, ds.num_classes, cfg.reference_k, **FILTER)
    both = score({"reference": ref, "filter": filt, "reference_nll": by_nll}, ds, n_boot=cfg.n_boot, seed=seed)
    scored = both["reference"]
    entry = {**ref.info, "val_accuracy": scored["val"]["accuracy"], "test_raw": scored["test_raw"],
             "test_calibrated": scored["test_calibrated"],
             "filter": {"label": filt.info["label"], "edges": filt.info["edges"], "configs": filt.info["configs"],
                        "val_accuracy": both["filter"]["val"]["accuracy"],
                        "test_accuracy": both["filter"]["test_raw"]["accuracy"]["value"],
                        "diff_reference": _paired(cfg, filt.test, ref.test, ds.test.y, seed)},
             "reference_nll": {"label": by_nll.info["label"], "tuned_on": by_nll.info["tuned_on"],
                               "candidates": by_nll.info["candidates"], "edges": by_nll.info["edges"],
                               "k_searched": by_nll.info["k_searched"], "k_gain": by_nll.info.get("k_gain"),
                               "test_calibrated": both["reference_nll"]["test_calibrated"]}}
    nll_probs = (by_nll.test, Calibrator(**both["reference_nll"]["calibrator"]).apply(by_nll.test))
    return entry, (ref.test, Calibrator(**scored["calibrator"]).apply(ref.test)), nll_probs

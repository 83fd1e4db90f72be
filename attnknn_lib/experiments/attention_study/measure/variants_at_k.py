"""Every variant at one k in one setting and seed, against the tuned kNN rule at k and the tuned vote."""

from __future__ import annotations

import numpy as np

from attnknn_lib.evaluation.calibration import Calibrator
from attnknn_lib.evaluation.methods import Embedded, MethodProbs, best_baseline, knn_methods, score
from attnknn_lib.evaluation.metrics import accuracy, nll
from attnknn_lib.evaluation.reference import Search
from attnknn_lib.experiments.attention_study.config import Config
from attnknn_lib.experiments.attention_study.measure.ceilings import _rule_probs
from attnknn_lib.experiments.attention_study.measure.learnable_headroom import learnable
from attnknn_lib.experiments.attention_study.measure.memory import Memory
from attnknn_lib.experiments.attention_study.measure.pairing import _paired
from attnknn_lib.experiments.attention_study.measure.variants import train_variant
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.headroom import captured, flip_detection, headroom
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.knn.votes import RULES, effective_neighbours
from attnknn_lib.models.neighbour_heads import k_ladder


def _baseline(mem: Memory, k: int, num_classes: int, ds) -> tuple[str, dict[str, MethodProbs]]:
    """The kNN rules at k with their knobs tuned on validation, and the best of them."""
    bank = MemoryBank()
    bank.labels = mem.labels
    nb = {(s, "original"): Neighbourhood(h.labels, h.sq_dist, h.rows) for s, h in (("val", mem.val), ("test", mem.test))}
    emb = Embedded(bank, {"original": mem.val.query}, {"original": mem.test.query}, nb)
    methods = knn_methods(emb, ds, k)
    methods = {r: methods[r] for r in RULES}
    return best_baseline(methods, ds.val.y), methods


def setting_k(cfg: Config, mem: Memory, k: int, ds, seed: int, with_adaptive: bool,
              keep: dict | None = None, reference: tuple | None = None, reference_nll: tuple | None = None,
              search: Search | None = None, k_ref: int | None = None) -> dict:
    """Every variant at k in one setting and seed, scored against the tuned kNN rule at k and,
    given ``reference`` (its test probabilities raw and calibrated), against the strongest
    non-learned rule. ``keep`` (a dict) receives each variant's test weights, test probabilities
    and validation accuracy, for the neighbour gallery."""
    c = ds.num_classes
    best, rules = _baseline(mem, k, c, ds)
    methods = {"baseline": rules[best]}
    extra = {}
    names = [v for v in cfg.variants if v != "adaptive_k" or with_adaptive]
    for name in names:
        kk = max(k_ladder(mem.test.rows.shape[1])) if name == "adaptive_k" else k
        out = train_variant(cfg, name, mem, kk, c, seed)
        methods[name] = MethodProbs(out["val"], out["test"])
        if keep is not None:
            keep[name] = {"weights": out["weights"], "test": out["test"],
                          "val_accuracy": accuracy(out["val"], ds.val.y)}
        test_rows = mem.test.rows[:, :kk]
        info = {"history": out["history"], "best_epoch": out["best_epoch"], "k": kk,
                "effective_k": float(effective_neighbours(out["weights"]).mean()),
                **({"search": out["search"]} if "search" in out else {})}
        if mem.flipped.any():
            info["flips"] = flip_detection(out["weights"], mem.flipped[test_rows])
        extra[name] = info
    scored = score(methods, ds, n_boot=cfg.n_boot, seed=seed)
    uniform = accuracy(rules["uniform"].test, ds.test.y)
    recall = float((mem.test.labels[:, :k] == ds.test.y[:, None]).any(1).mean())
    probs = {}
    for name, m in methods.items():
        cal = Calibrator(**scored[name]["calibrator"])
        probs[name] = (m.test, cal.apply(m.test))
    out = {"baseline_rule": best, "uniform_accuracy": uniform, "recall": recall, "methods": {}}
    for name in methods:
        entry = {"val_accuracy": scored[name]["val"]["accuracy"], "val_nll_calibrated": scored[name]["val"]["nll_calibrated"],
                 "test_raw": scored[name]["test_raw"], "test_calibrated": scored[name]["test_calibrated"]}
        if name != "baseline":
            entry.update(extra[name])
            kk = extra[name]["k"]  # each method's own neighbourhood (the k-mixture reads more than k)
            own = headroom(mem.test.labels, ds.test.y, c, kk)
            entry["captured"] = None if name == "query_only" else captured(  # the control reads no neighbour
                scored[name]["test_raw"]["accuracy"]["value"], own["uniform_accuracy"], own["recall"])
            entry["diff"] = {split: _paired(cfg, probs[name][i], probs["baseline"][i], ds.test.y, seed)
                             for i, split in enumerate(("raw", "calibrated"))}
        if reference is not None:
            entry["diff_reference"] = {split: _paired(cfg, probs[name][i], reference[i], ds.test.y, seed)
                                       for i, split in enumerate(("raw", "calibrated"))}
        if reference_nll is not None:
            entry["diff_reference_nll"] = {"calibrated": _paired(cfg, probs[name][1], reference_nll[1], ds.test.y,
                                                                 seed)}
        out["methods"][name] = entry
    if reference is not None:
        out["learner"], out["learnable"] = learnable(cfg, mem, k, ds, seed, reference, out["methods"], search,
                                                     k_ref)
    if "adaptive_k" in methods:
        out["methods"]["adaptive_k"]["fixed_k"] = best_fixed_k(cfg, mem, probs["adaptive_k"], extra["adaptive_k"]["k"],
                                                               ds, seed)
    return out


def best_fixed_k(cfg: Config, mem: Memory, adaptive_test: tuple[np.ndarray, np.ndarray], k_max: int, ds,
                 seed: int) -> dict:
    """Adaptive k against its own reference: the uniform vote at the one k of its ladder with the
    best validation accuracy (ties: lower validation NLL), scored on test; the paired differences
    adaptive minus fixed (accuracy raw, ECE and NLL after each one's calibration)."""
    c = ds.num_classes
    ladder = k_ladder(k_max)
    k_best = max(ladder, key=lambda kk: (accuracy(_rule_probs("uniform", None, mem.val, kk, c), mem.val.target),
                                         -nll(_rule_probs("uniform", None, mem.val, kk, c), mem.val.target)))
    fixed = MethodProbs(_rule_probs("uniform", None, mem.val, k_best, c),
                        _rule_probs("uniform", None, mem.test, k_best, c))
    scored = score({"fixed": fixed}, ds, n_boot=cfg.n_boot, seed=seed)["fixed"]
    fixed_cal = Calibrator(**scored["calibrator"]).apply(fixed.test)
    return {"k": int(k_best), "accuracy": scored["test_raw"]["accuracy"]["value"],
            "diff": {split: _paired(cfg, a, b, ds.test.y, seed)
                     for split, a, b in (("raw", adaptive_test[0], fixed.test),
                                         ("calibrated", adaptive_test[1], fixed_cal))}}

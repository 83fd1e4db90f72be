"""long_tail: the training runs it needs and the analysis that writes its record."""

from __future__ import annotations

import numpy as np

from attnknn_lib.base.paths import Paths
from attnknn_lib.evaluation.methods import MethodProbs, best_baseline, score
from attnknn_lib.evaluation.metrics import accuracy, nll, per_class_accuracy
from attnknn_lib.experiments.common import record_verdicts
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.experiments.common.robustness import (
    run_settings,
    settings_verdicts,
)
from attnknn_lib.experiments.framework.declaration import Measurement
from attnknn_lib.experiments.long_tail.config import ARTIFACTS, BETAS, GROUPS, LABELS, REMEDIED, Config
from attnknn_lib.knn.votes import prior_correction


def runs(cfg: Config):
    """Main's Attn-KNN and CNN (setting bank) and the models retrained on each imbalanced subset."""
    return cfg.runs_for(cfg.conditions(cfg.retrain_spec()))


def tune_beta(probs: MethodProbs, prior: np.ndarray, val_labels: np.ndarray) -> MethodProbs:
    """Prior-corrected version of a method, beta chosen on validation (highest accuracy; ties: lower NLL)."""
    curve = {b: (accuracy(prior_correction(probs.val, prior, b), val_labels),
                 -nll(prior_correction(probs.val, prior, b), val_labels)) for b in BETAS}
    beta = max(BETAS, key=lambda b: curve[b])
    return MethodProbs(prior_correction(probs.val, prior, beta), prior_correction(probs.test, prior, beta),
                       {"beta": beta, "val_accuracy_curve": {str(b): v[0] for b, v in curve.items()}})


def class_groups(sizes: np.ndarray) -> dict[str, list[int]]:
    """Classes sorted by their size in the memory (largest first), split into head / middle / tail thirds."""
    order = np.argsort(-np.asarray(sizes), kind="stable")
    return {g: [int(c) for c in part] for g, part in zip(GROUPS, np.array_split(order, len(GROUPS)))}


def evaluate(cfg: Config, emb, prepared, attention, cnn: MethodProbs, seed: int) -> dict:
    """Every method and remedy on one (possibly imbalanced) bank: scored, with per-class accuracy."""
    ds = prepared.dataset
    sizes = np.bincount(prepared.dataset.train.y, minlength=ds.num_classes)
    prior = sizes / sizes.sum()
    methods = core.vote_methods(emb, prepared, attention, cfg.k, cnn, reference=True)
    scored = score(methods, ds, n_boot=cfg.n_boot, seed=seed)
    best = best_baseline(methods, ds.val.y, scored)
    scored["best_baseline"] = {**scored[best], "info": {**scored[best]["info"], "rule": best}}
    methods["best_baseline"] = methods[best]
    remedies = {name: tune_beta(methods[base], prior, ds.val.y) for name, base in REMEDIED.items()}
    methods.update(remedies)
    scored.update(score(remedies, ds, n_boot=cfg.n_boot, seed=seed))
    groups = class_groups(sizes)
    for m, entry in scored.items():
        entry["label"] = LABELS[m]
        acc_c = per_class_accuracy(methods[m].test, ds.test.y, ds.num_classes)
        entry["per_class_accuracy"] = acc_c.tolist()
        entry["group_accuracy"] = {g: float(np.nanmean(acc_c[idx])) for g, idx in groups.items()}
    return {"methods": scored, "best_baseline": best, "class_sizes": sizes.tolist(), "groups": groups,
            "by_size": [int(c) for c in np.argsort(-sizes, kind="stable")]}


def _summarise(per_seed: dict[str, dict]) -> dict:
    seeds = list(per_seed)
    methods = per_seed[seeds[0]]["methods"]
    return {"summary": core.aggregate_seeds({s: per_seed[s]["methods"] for s in seeds}),
            "best_baseline": [per_seed[s]["best_baseline"] for s in seeds],
            # the class order is drawn per seed, so sizes per class and the head / middle / tail
            # groups are kept per seed; by rank (largest first) the sizes are averaged over seeds
            "class_sizes_by_seed": {s: per_seed[s]["class_sizes"] for s in seeds},
            "groups_by_seed": {s: per_seed[s]["groups"] for s in seeds},
            "class_order": {s: per_seed[s]["by_size"] for s in seeds},
            # the r-th largest class's accuracy, averaged over seeds (the class order differs per seed)
            "size_ranked_sizes": np.mean([sorted(per_seed[s]["class_sizes"], reverse=True) for s in seeds], 0).tolist(),
            "size_ranked_accuracy": {m: np.mean([np.asarray(per_seed[s]["methods"][m]["per_class_accuracy"])
                                                 [per_seed[s]["by_size"]] for s in seeds], 0).tolist()
                                     for m in methods},
            "group_accuracy": {m: {g: float(np.mean([per_seed[s]["methods"][m]["group_accuracy"][g] for s in seeds]))
                                   for g in GROUPS} for m in methods},
            "beta": {m: [per_seed[s]["methods"][m]["info"]["beta"] for s in seeds] for m in REMEDIED}}


COMPARED = (("attnknn", "reference"), ("attnknn_balanced", "reference"), ("attnknn", "best_baseline"),
            ("attnknn_balanced", "best_baseline_balanced"))
"""The verdicts of every cell: Attn-KNN, as it is and with the prior correction, minus the tuned vote
(the reference of every claim); and each minus the fixed-k vote, the corrected one with the
correction on both."""


def verdicts(results: dict, cfg: Config) -> dict:
    """Every verdict of the record, from its results and the config's margins: for each setting and
    ratio, the method its claims read against (``reference``: the tuned vote, or in a record from
    before it the best kNN vote) and each pair of :data:`COMPARED`, accuracy and calibrated ECE
    (:func:`~attnknn_lib.experiments.common.robustness.settings_verdicts`)."""
    return settings_verdicts(results, cfg, COMPARED)


def with_verdicts(record: dict) -> dict:
    """A long-tail record measured before verdicts were stored, with them added and its config's margin
    knobs at their defaults (nothing is measured; see :mod:`~attnknn_lib.experiments.common.record_verdicts`)."""
    return record_verdicts.with_verdicts(record, Config, verdicts)


def _subset_bank(cfg: Config):
    """The memory of an imbalanced subset: main's frozen embedding of the subset's training rows."""
    return lambda frozen, sub: core.bank_of(frozen, sub.dataset.train.y, cfg.k,
                                            rows=core.rows_of(frozen, sub.dataset.train.ids), reference=True)


def run(cfg: Config, paths: Paths) -> dict:
    """Both settings; writes ``results/long_tail_<dataset>.json`` and returns its record."""
    return run_settings(
        cfg, paths, ARTIFACTS, bank_specs=cfg.conditions(cfg.main_spec()),
        memory=_subset_bank(cfg), evaluate=evaluate, summarise=_summarise, verdicts=verdicts,
        trained_specs=cfg.conditions(cfg.retrain_spec()),
        about={"bank": {"description": "memory bank built from the imbalanced subset; main's models"},
               "trained": {"description": "models retrained on the imbalanced subset"}},
        ratios=list(cfg.ratios), betas=list(BETAS),
        calibration={"fitted_on": "every validation row with its label: the imbalance is in the training rows only, "
                                  "validation labels are clean"})


MEASUREMENT = Measurement(runs=runs, run=run)

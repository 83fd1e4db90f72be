"""The learnable headroom: the learners (boosted trees, the held-out label-aware attention) against
the tuned vote."""

from __future__ import annotations

import numpy as np

from attnknn_lib.evaluation.learnable import SELECT_SHARE, learned_rule
from attnknn_lib.evaluation.methods import MethodProbs
from attnknn_lib.evaluation.reference import Search
from attnknn_lib.experiments.attention_study.config import Config
from attnknn_lib.experiments.attention_study.measure.ceilings import against_reference
from attnknn_lib.experiments.attention_study.measure.memory import Memory
from attnknn_lib.experiments.attention_study.measure.variants import train_variant
from attnknn_lib.knn.neighbourhood import Neighbourhood

LEARNERS = ("gbm", "label_aware_heldout")  # the learners behind the learnable headroom (clean held-out targets)


def gbm_learner(mem: Memory, k: int, num_classes: int, seed: int, search: Search | None = None) -> dict:
    """The boosted-trees learner at k on ``mem``'s neighbourhoods (:func:`~attnknn_lib.evaluation.learnable.
    learned_rule`, cross-fitted on the clean validation queries; the prior is the memory's class shares).
    Where k exceeds the neighbours ``mem`` holds, ``search`` reads deeper (labels and agreements of
    this memory), so the learner can read as many neighbours as the tuned vote chose."""
    prior = np.bincount(mem.labels, minlength=num_classes) / len(mem.labels)

    def hood(split: str) -> Neighbourhood:
        h = getattr(mem, split)
        if search is None or k <= h.labels.shape[1]:
            return Neighbourhood(h.labels, h.sq_dist, h.rows, h.loo)
        rows, sq = search(split, k)
        return Neighbourhood(mem.labels[rows], sq, rows, mem.loo[rows])
    return learned_rule(hood("val"), mem.val.target, hood("test"), prior, num_classes, k, seed)


def fold_queries(n_val: int) -> list[int]:
    """How many validation queries each of the learner's two folds fits on (its half, less the
    fifth it tunes on: :data:`~attnknn_lib.evaluation.learnable.SELECT_SHARE`)."""
    return [len(h) - max(1, int(round(SELECT_SHARE * len(h)))) for h in np.array_split(np.arange(n_val), 2)]


def learners(cfg: Config, mem: Memory, k: int, ds, seed: int, search: Search | None = None,
             k_ref: int | None = None) -> dict[str, MethodProbs]:
    """Every learner of :data:`LEARNERS`, as methods whose ``info`` holds its tuning budget (the
    configurations scored, both folds together): the boosted trees read max(k, ``k_ref``)
    neighbours (the tuned vote's chosen k: no cap the tuned vote does not share), the label-aware
    attention k."""
    fit = gbm_learner(mem, max(k, k_ref or k), ds.num_classes, seed, search)
    att = train_variant(cfg, "label_aware_heldout", mem, k, ds.num_classes, seed)
    return {"gbm": MethodProbs(fit["val"], fit["test"], info={"gbm_configs": fit["configs"],
                                                              "gbm_k": max(k, k_ref or k)}),
            "label_aware_heldout": MethodProbs(att["val"], att["test"],
                                               info={"attention_configs": sum(f["configs"] for f in att["search"])})}


def learnable(cfg: Config, mem: Memory, k: int, ds, seed: int, reference: tuple, methods: dict,
              search: Search | None = None, k_ref: int | None = None) -> tuple[dict, dict]:
    """The boosted-trees learner (:func:`~attnknn_lib.evaluation.learnable.learned_rule`, cross-fitted
    on clean validation queries) reading max(k, ``k_ref``) neighbours, ``k_ref`` being the
    tuned vote's chosen k, against the tuned vote; and the learnable headroom: the learner of
    :data:`LEARNERS` with the best (out-of-fold) validation accuracy minus the tuned vote, paired on test."""
    k_learn = max(k, k_ref or k)
    fit = gbm_learner(mem, k_learn, ds.num_classes, seed, search)
    probs = MethodProbs(fit["val"], fit["test"])
    scored, diff = against_reference(cfg, probs, ds, seed, reference)
    learner = {"val_accuracy": scored["val"]["accuracy"], "test_raw": scored["test_raw"],
               "test_calibrated": scored["test_calibrated"], "folds": fit["folds"], "configs": fit["configs"],
               "features": fit["features"], "diff_reference": diff, "k": k_learn,
               "fold_queries": fold_queries(len(ds.val.y))}
    pool = {"gbm": learner, **{n: methods[n] for n in LEARNERS if n in methods}}
    best = max(pool, key=lambda n: pool[n]["val_accuracy"])
    return learner, {"learner": best, "diff_reference": pool[best]["diff_reference"]}

"""The neighbour gallery: a few test queries per setting with their neighbours' labels, weights and predictions.

The record keeps these cases (numbers only); no view draws them: the figure that showed them with
their images was dropped, its images never having been committed beside the record."""

from __future__ import annotations

import numpy as np

from attnknn_lib.experiments.attention_study.config import Config
from attnknn_lib.experiments.attention_study.measure.memory import Memory
from attnknn_lib.knn.votes import break_ties, vote

# variants whose weights are over the same k neighbours as the uniform vote (the gallery's best variant)
GALLERY_VARIANTS = ("blind_bonus", "blind_none", "blind_penalty", "blind_heldout", "label_aware", "label_aware_heldout",
                    "readout")
PROTOTYPE = "blind_bonus"  # the prototype's attention: label-blind scores, entropy bonus +0.01


def gallery_queries(labels: np.ndarray, target: np.ndarray, flipped: np.ndarray, num_classes: int,
                    noisy: bool) -> dict[str, int]:
    """Test queries for the neighbour gallery, each the first in test order that fits its rule.

    Clean memory: *correct* (the uniform vote is right although the k labels are mixed), *wrong*
    (the uniform vote is wrong), *near tie* (the two largest label counts differ by at most one).
    Noisy memory: *flipped neighbours* (the most flipped labels among the k; the first such query).
    ``labels`` (N, k) are the neighbours' memory labels, ``flipped`` (N, k) whether each was flipped."""
    counts = np.stack([(labels == c).sum(1) for c in range(num_classes)], 1)
    top2 = np.sort(counts, 1)[:, -2:]
    pred = break_ties(counts.astype(np.float64), labels).argmax(1)
    if noisy:
        return {"flipped neighbours": int(np.argmax(flipped.sum(1)))}
    rules = {"correct": (pred == target) & (top2[:, 1] < labels.shape[1]),
             "wrong": pred != target,
             "near tie": top2[:, 1] - top2[:, 0] <= 1}
    return {name: int(np.flatnonzero(hit)[0]) for name, hit in rules.items() if hit.any()}


def gallery(mem: Memory, kept: dict, setting: str, k: int, ds) -> dict:
    """The gallery's cases of one setting (first seed): per query its label, its k neighbours' rows,
    memory labels and flips, and the weights and predictions of the uniform vote, the prototype
    attention and the best variant (best validation accuracy among :data:`GALLERY_VARIANTS`)."""
    c = ds.num_classes
    labels, rows = mem.test.labels[:, :k], mem.test.rows[:, :k]
    flipped = mem.flipped[rows]
    queries = gallery_queries(labels, ds.test.y, flipped, c, bool(mem.flipped.any()))
    candidates = [v for v in GALLERY_VARIANTS if v in kept]
    best = max(candidates, key=lambda v: kept[v]["val_accuracy"]) if candidates else None
    shown = {"uniform": None, **({PROTOTYPE: kept[PROTOTYPE]} if PROTOTYPE in kept else {}),
             **({best: kept[best]} if best else {})}
    uniform = vote(np.full(labels.shape, 1.0 / k), labels, c)
    cases = {}
    for name, q in queries.items():
        key = f"{setting} | {name}"
        weights = {m: ([round(1.0 / k, 5)] * k if v is None else [round(float(w), 5) for w in v["weights"][q, :k]])
                   for m, v in shown.items()}
        preds = {m: int((uniform if v is None else v["test"])[q].argmax()) for m, v in shown.items()}
        cases[key] = {"setting": setting, "rule": name, "query": q, "label": int(ds.test.y[q]),
                      "neighbour_labels": labels[q].tolist(), "flipped": flipped[q].tolist(),
                      "weights": weights, "predictions": preds, "best_variant": best}
    return cases


def _gallery_k(cfg: Config) -> int:
    return cfg.k if cfg.k in cfg.variant_ks else max(cfg.variant_ks)

"""Evaluation of every method of the main comparison on validation and test.

All kNN rules share one memory: the training-set embeddings of the trained Attn-KNN
embedder, so the comparison isolates the voting rule. For each method we produce validation
and test probabilities; knobs (tau, T, the "best baseline") are chosen on validation, a
calibrator is fitted on validation, and the test set is scored once, raw and calibrated, with
bootstrap intervals.

Methods
-------
uniform, distance (tau tuned), cosine (T tuned), attnknn, attnknn_tta, best_baseline_tta (the
baseline with the best validation accuracy, with TTA), attnknn_kens (mean over k in {5, 10, 20}),
attnknn_adaptive (per query, the smallest k in {5, 10, 20} not below the attention's effective
number of neighbours exp(H(w)) at k = 20), cnn, cnn_tta. TTA averages probabilities over the
deterministic views of :func:`attnknn_lib.data.transforms.tta_views`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from attnknn_lib.data.registry import Dataset
from attnknn_lib.data.transforms import View, to_tensor
from attnknn_lib.evaluation.bootstrap import bootstrap_ci
from attnknn_lib.evaluation.calibration import Calibrator, fit_calibrator
from attnknn_lib.evaluation.inference import attnknn_probs, cnn_probs, embed
from attnknn_lib.evaluation.metrics import accuracy, nll
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.knn.votes import RULES, break_ties, effective_neighbours, knn_probs
from attnknn_lib.models import CNNClassifier, MultiHeadNeighbourAttention

K_ENSEMBLE = (5, 10, 20)
TAU_GRID = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)  # Euclidean distances of unit vectors: [0, 2]
T_GRID = (0.005, 0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.2, 0.5, 1.0)  # cosine similarities: [-1, 1]
METHOD_LABELS = {  # main's methods, in the order its tables list them
    "uniform": "Uniform kNN", "distance": "Distance kNN", "cosine": "Cosine kNN",
    "attnknn": "Attn-KNN", "attnknn_tta": "Attn-KNN + TTA", "best_baseline_tta": "Best baseline + TTA",
    "attnknn_kens": "Attn-KNN k-ensemble", "attnknn_adaptive": "Attn-KNN adaptive k",
    "cnn": "CNN", "cnn_tta": "CNN + TTA", "cnn_mixup": "CNN trained with MixUp (control)",
    "fixed_vote": "Fixed softmax vote, trained end to end (control)",
}
OTHER_LABELS = {  # methods that only the other experiments score
    "best_baseline": "Best kNN (val.)", "attnknn_retrained": "Attn-KNN (attention trained at k)",
    "best_baseline_balanced": "Best kNN + prior correction", "attnknn_balanced": "Attn-KNN + prior correction",
    "cnn_balanced": "CNN + prior correction", "reference": "Strongest rule (val.)",
    "reference_nll": "Strongest rule (calibration endpoint)",
    "attnknn_tuned": "Attn-KNN, knobs tuned (val.)",
    "attnknn_tuned_nll": "Attn-KNN, knobs tuned (calibration endpoint)",
}


def method_labels(*names: str, **renamed: str) -> dict[str, str]:
    """The one label table, restricted to ``names`` (in that order); ``renamed`` gives a name a
    label that says more in one experiment's context (e.g. attnknn="Attn-KNN (as trained)")."""
    table = {**METHOD_LABELS, **OTHER_LABELS, **renamed}
    unknown = [n for n in names if n not in table]
    if unknown:
        raise KeyError(f"no label for method(s) {unknown}; known: {sorted(table)}")
    return {n: table[n] for n in names}


@dataclass
class MethodProbs:
    val: np.ndarray  # (N_val, C)
    test: np.ndarray  # (N_test, C)
    info: dict = field(default_factory=dict)  # tuned knobs, chosen baseline, ...


@dataclass
class Embedded:
    """Embeddings of one model: bank (train, original view) and every view of val and test."""

    bank: MemoryBank
    val: dict[str, np.ndarray]
    test: dict[str, np.ndarray]
    neighbours: dict[tuple[str, str], Neighbourhood]  # (split, view) -> k_max nearest memory rows


def embed_all(embedder: torch.nn.Module, dataset: Dataset, views: dict[str, View], k_max: int,
              train_labels: np.ndarray | None = None, index_type: str = "flat_l2", batch_size: int = 1024,
              device: torch.device | str = "cpu") -> Embedded:
    """Embed train (the memory), and val and test under every view; search k_max neighbours once."""
    labels = dataset.train.y if train_labels is None else train_labels
    bank_emb = embed(embedder, to_tensor(dataset, dataset.train), batch_size, device, desc="embed train")
    bank = MemoryBank(index_type).build(bank_emb, labels)
    out = Embedded(bank, {}, {}, {})
    for split_name in ("val", "test"):
        x = to_tensor(dataset, getattr(dataset, split_name))
        for view_name, view in views.items():
            e = embed(embedder, x, batch_size, device, view, desc=f"embed {split_name}/{view_name}")
            getattr(out, split_name)[view_name] = e
            out.neighbours[(split_name, view_name)] = bank.search(e, k_max)
    return out


def _tune(rule: str, grid: tuple[float, ...], nb: Neighbourhood, y: np.ndarray, k: int, c: int) -> tuple[float, dict]:
    """The grid value with the lowest validation NLL (ties: the first), and the whole curve."""
    curve = {g: nll(knn_probs(rule, nb.sq_dist, nb.labels, c, g, k), y) for g in grid}
    return min(curve, key=curve.get), {str(g): v for g, v in curve.items()}


def _mean_vote(probs: list[np.ndarray], emb: Embedded, split: str) -> np.ndarray:
    """The mean of several votes of one split (TTA views, k values), ties broken again by the nearest
    neighbour of the original view: averaging can tie classes that no single vote tied."""
    return break_ties(np.mean(probs, axis=0), emb.neighbours[(split, "original")].labels)


def _tta_mean(fn, views: list[str], split: str, emb: Embedded) -> np.ndarray:
    return _mean_vote([fn(split, v) for v in views], emb, split)


def knn_methods(emb: Embedded, dataset: Dataset, k: int) -> dict[str, MethodProbs]:
    """uniform, distance and cosine kNN (knobs tuned on validation), plus the best of them with TTA."""
    c, yv = dataset.num_classes, dataset.val.y
    views = list(emb.val)
    params: dict[str, float | None] = {"uniform": None}
    curves = {}
    params["distance"], curves["distance"] = _tune("distance", TAU_GRID, emb.neighbours[("val", "original")], yv, k, c)
    params["cosine"], curves["cosine"] = _tune("cosine", T_GRID, emb.neighbours[("val", "original")], yv, k, c)

    def probs(rule: str, split: str, view: str) -> np.ndarray:
        nb = emb.neighbours[(split, view)]
        return knn_probs(rule, nb.sq_dist, nb.labels, c, params[rule], k)

    out = {}
    for rule in RULES:
        info = {"k": k, "param": params[rule], "param_name": {"distance": "tau", "cosine": "T"}.get(rule)}
        if rule in curves:
            info["val_nll_curve"] = curves[rule]
        out[rule] = MethodProbs(probs(rule, "val", "original"), probs(rule, "test", "original"), info)
    best = best_baseline(out, yv)
    if len(views) > 1:
        out["best_baseline_tta"] = MethodProbs(
            _tta_mean(lambda s, v: probs(best, s, v), views, "val", emb),
            _tta_mean(lambda s, v: probs(best, s, v), views, "test", emb),
            {"baseline": best, "views": views, "k": k, "param": params[best]})
    return out


def _attn_probs(attention: MultiHeadNeighbourAttention, emb: Embedded, split: str, view: str, k: int) -> np.ndarray:
    q = getattr(emb, split)[view]
    return attnknn_probs(attention, emb.bank, q, k, neighbours=emb.neighbours[(split, view)])[0]


def best_baseline(methods: dict[str, MethodProbs], val_labels: np.ndarray, scored: dict[str, dict] | None = None) -> str:
    """The kNN rule with the highest validation accuracy; ties go to the lower calibrated validation
    NLL (read from ``scored``, the output of :func:`score`, when given: no second calibrator fit)."""
    def key(rule: str) -> tuple[float, float]:
        if scored is not None:
            return scored[rule]["val"]["accuracy"], -scored[rule]["val"]["nll_calibrated"]
        p = methods[rule].val
        return accuracy(p, val_labels), -nll(fit_calibrator(p, val_labels).apply(p), val_labels)

    return max(RULES, key=key)


def attnknn_method(attention: MultiHeadNeighbourAttention, emb: Embedded, k: int) -> MethodProbs:
    """Attn-KNN at k on the original view."""
    return MethodProbs(_attn_probs(attention, emb, "val", "original", k),
                       _attn_probs(attention, emb, "test", "original", k), {"k": k})


def attnknn_methods(attention: MultiHeadNeighbourAttention, emb: Embedded, k: int,
                    k_ensemble: tuple[int, ...] = K_ENSEMBLE) -> dict[str, MethodProbs]:
    """Attn-KNN at k; with TTA; k-ensemble; adaptive k (see module docstring)."""
    views = list(emb.val)

    def probs(split: str, view: str, kk: int) -> np.ndarray:
        return _attn_probs(attention, emb, split, view, kk)

    out = {"attnknn": attnknn_method(attention, emb, k)}
    if len(views) > 1:
        out["attnknn_tta"] = MethodProbs(_tta_mean(lambda s, v: probs(s, v, k), views, "val", emb),
                                         _tta_mean(lambda s, v: probs(s, v, k), views, "test", emb), {"views": views})
    by_k = {s: {kk: probs(s, "original", kk) for kk in k_ensemble} for s in ("val", "test")}
    out["attnknn_kens"] = MethodProbs(_mean_vote(list(by_k["val"].values()), emb, "val"),
                                      _mean_vote(list(by_k["test"].values()), emb, "test"), {"k_values": list(k_ensemble)})
    adaptive, chosen = {}, {}
    k_max = max(k_ensemble)
    for s in ("val", "test"):
        q = getattr(emb, s)["original"]
        _, w = attnknn_probs(attention, emb.bank, q, k_max, neighbours=emb.neighbours[(s, "original")])
        k_eff = effective_neighbours(w)
        ks = np.array(sorted(k_ensemble))
        pick = ks[np.minimum(np.searchsorted(ks, k_eff - 1e-9), len(ks) - 1)]  # smallest k >= k_eff
        adaptive[s] = np.select([(pick == kk)[:, None] for kk in ks], [by_k[s][kk] for kk in ks])
        chosen[s] = {int(kk): int((pick == kk).sum()) for kk in ks}
    out["attnknn_adaptive"] = MethodProbs(adaptive["val"], adaptive["test"], {"k_values": list(k_ensemble),
                                                                                "chosen_k_counts": chosen})
    return out


def cnn_methods(model: CNNClassifier, dataset: Dataset, views: dict[str, View], batch_size: int = 1024,
                device: torch.device | str = "cpu") -> dict[str, MethodProbs]:
    """CNN softmax, and its TTA average."""
    x = {s: to_tensor(dataset, getattr(dataset, s)) for s in ("val", "test")}
    per_view = {(s, v): cnn_probs(model, x[s], batch_size, device, fn) for s in x for v, fn in views.items()}
    out = {"cnn": MethodProbs(per_view[("val", "original")], per_view[("test", "original")])}
    if len(views) > 1:
        out["cnn_tta"] = MethodProbs(np.mean([per_view[("val", v)] for v in views], 0),
                                     np.mean([per_view[("test", v)] for v in views], 0), {"views": list(views)})
    return out


def score(methods: dict[str, MethodProbs], dataset: Dataset, n_boot: int = 1000, seed: int = 0,
          calibration: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, dict]:
    """Per method: calibrator fitted on validation; test metrics raw and calibrated with bootstrap CIs.
    ``calibration`` = (validation rows, their clean labels) fits the calibrators on that slice instead
    of every validation row with its (possibly noisy) labels: a calibrator fitted on noisy labels
    measures the noise, not the method."""
    out = {}
    for name, m in methods.items():
        cal: Calibrator = (fit_calibrator(m.val, dataset.val.y) if calibration is None
                           else fit_calibrator(m.val[calibration[0]], calibration[1]))
        out[name] = {
            "label": METHOD_LABELS.get(name, name),
            "info": m.info,
            "calibrator": cal.to_dict(),
            "val": {"accuracy": accuracy(m.val, dataset.val.y), "nll": nll(m.val, dataset.val.y),
                    "nll_calibrated": nll(cal.apply(m.val), dataset.val.y)},
            "test_raw": bootstrap_ci(m.test, dataset.test.y, n_boot=n_boot, seed=seed),
            "test_calibrated": bootstrap_ci(cal.apply(m.test), dataset.test.y, n_boot=n_boot, seed=seed),
        }
    return out

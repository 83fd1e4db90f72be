"""The learned-metric family on each memory of the study: NCA and the linear probe trained on main's
frozen embedding with this memory's labels (noisy ones under noise), validation labels clean.

Per setting: each against the tuned vote (accuracy as voted; NCA tuned for
the calibration endpoint against the NLL-tuned vote, NLL and Brier after calibration), and main's
Attn-KNN with the tuned vote's knobs against NCA (attention against the classic way to learn a metric
with the same vote). Seed-level verdicts come from
:func:`~attnknn_lib.experiments.attention_study.measure.summary.summarise_learned`.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from attnknn_lib.evaluation.calibration import Calibrator
from attnknn_lib.evaluation.methods import MethodProbs
from attnknn_lib.evaluation.verdicts import HEADLINE_BOOT
from attnknn_lib.experiments.attention_study.config import Config
from attnknn_lib.experiments.attention_study.measure.ceilings import against_reference
from attnknn_lib.experiments.attention_study.measure.memory import Memory, SeedMemory
from attnknn_lib.experiments.attention_study.measure.pairing import _paired
from attnknn_lib.experiments.attention_study.measure.variants import _fit_probe, reached_plateau
from attnknn_lib.experiments.common.learned_metric import learned_metric_of, nca_methods
from attnknn_lib.models.neighbour_heads import LinearProbe
from attnknn_lib.training.head_fitting import predict
from attnknn_lib.training.metric_learning import search_learning_rates


def _info(info: dict) -> dict:
    """What the record keeps of a learned method's search: its choice and budget, NCA's training."""
    keep = {key: info[key] for key in ("label", "configs", "edges", "k_searched", "C", "cs", "edge", "converged", "lr",
                                       "lrs", "best_epoch", "epochs_run", "plateau") if key in info}
    if "nca" in info:
        nca = info["nca"]
        keep["nca"] = {key: nca[key] for key in ("lr", "lrs", "best_epoch", "epochs_run", "plateau", "edge", "configs")}
        keep["nca"]["val_curve"] = [row["val_accuracy"] for row in nca["history"]]
    return keep


def probe_as_variants(cfg: Config, mem: Memory, num_classes: int, seed: int) -> MethodProbs:
    """The linear probe (:class:`~attnknn_lib.models.neighbour_heads.LinearProbe`, the query alone) trained
    as the variants are (:func:`~attnknn_lib.experiments.attention_study.measure.variants._fit_searched`'s
    budget): every memory training query of this setting with its labels, the learning-rate grid
    ``cfg.head_lrs`` extended at its ends, at most ``cfg.head_epochs`` with patience ``cfg.head_patience``,
    the rate and epoch chosen on validation."""
    train, val, test = (h.take(np.arange(len(h)), cfg.k) for h in (mem.train, mem.val, mem.test))
    best, lrs, at_end, fits = search_learning_rates(
        lambda lr: _fit_probe(cfg, lambda: LinearProbe(num_classes, mem.embeddings.shape[1], mem.embeddings), train,
                              val, mem, num_classes, seed, lr),
        cfg.head_lrs, lambda res: res.history[res.best_epoch - 1])
    res = fits[best]
    pv, _ = predict(res.model, val, mem.embeddings, num_classes)
    pt, _ = predict(res.model, test, mem.embeddings, num_classes)
    return MethodProbs(pv, pt, {"label": "linear probe, trained as the variants", "lr": best, "lrs": lrs,
                                "edge": at_end, "configs": sum(len(f.history) for f in fits.values()),
                                "best_epoch": res.best_epoch, "epochs_run": len(res.history),
                                "plateau": reached_plateau(len(res.history), res.best_epoch, cfg.head_patience)})


def _learned_methods(cfg: Config, sm: SeedMemory, mem: Memory, seed: int) -> dict[str, MethodProbs]:
    """NCA (accuracy and NLL) and the linear probe on this memory: the probe trained as the variants
    are with ``cfg.probe_as_heads`` (lbfgs's probe then not fitted at all), else lbfgs's."""
    ds = sm.prepared.dataset
    if not cfg.probe_as_heads:
        emb = SimpleNamespace(bank=SimpleNamespace(embeddings=sm.frozen.train, labels=mem.labels),
                              val={"original": sm.frozen.val}, test={"original": sm.frozen.test})
        return learned_metric_of(emb, sm.prepared, cfg, seed, loo_k=cfg.loo_k, reference_k=cfg.reference_k)
    memory = SimpleNamespace(x=np.asarray(sm.frozen.train, dtype=np.float32), y=np.asarray(mem.labels))
    val, test = SimpleNamespace(x=sm.frozen.val, y=ds.val.y), SimpleNamespace(x=sm.frozen.test, y=ds.test.y)
    nca = nca_methods(memory, val, test, ds.num_classes, seed, k=min(cfg.k, len(memory.y) - 1), loo_k=cfg.loo_k,
                      reference_k=min(cfg.reference_k, len(memory.y)), **cfg.nca_training())
    return {**{name: MethodProbs(pv, pt, info) for name, (pv, pt, info) in nca.items()},
            "linear_probe": probe_as_variants(cfg, mem, ds.num_classes, seed)}


def learned_metric_entry(cfg: Config, sm: SeedMemory, mem: Memory, seed: int, reference: tuple,
                         reference_nll: tuple, attention: tuple[np.ndarray, np.ndarray] | None) -> dict:
    """NCA, NCA tuned for the calibration endpoint and the linear probe on this memory, each scored and
    compared with the references (see the module docstring); ``attention``: main's Attn-KNN with the
    rule's knobs on this memory, test probabilities raw and calibrated, compared with NCA."""
    ds = sm.prepared.dataset
    methods = _learned_methods(cfg, sm, mem, seed)
    out: dict = {}
    cal: dict[str, np.ndarray] = {}
    for name in ("nca", "linear_probe", "nca_nll"):
        scored, diff = against_reference(cfg, methods[name], ds, seed, reference, n_boot=HEADLINE_BOOT)
        cal[name] = Calibrator(**scored["calibrator"]).apply(methods[name].test)
        out[name] = {**_info(methods[name].info), "val_accuracy": scored["val"]["accuracy"],
                     "test_raw": scored["test_raw"], "test_calibrated": scored["test_calibrated"]}
        if name == "nca_nll":  # the calibration endpoint: against the NLL-tuned vote
            out[name]["diff_reference_nll"] = {"calibrated": _paired(cfg, cal[name], reference_nll[1], ds.test.y,
                                                                     seed, HEADLINE_BOOT)}
        else:
            out[name]["diff_reference"] = diff
    if attention is not None:
        out["attnknn_tuned_vs_nca"] = {
            "raw": _paired(cfg, attention[0], methods["nca"].test, ds.test.y, seed, HEADLINE_BOOT),
            "calibrated": _paired(cfg, attention[1], cal["nca_nll"], ds.test.y, seed, HEADLINE_BOOT)}
    return out


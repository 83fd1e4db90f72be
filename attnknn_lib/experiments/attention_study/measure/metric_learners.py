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
from attnknn_lib.experiments.common.learned_metric import learned_metric_of


def _info(info: dict) -> dict:
    """What the record keeps of a learned method's search: its choice and budget, NCA's training."""
    keep = {key: info[key] for key in ("label", "configs", "edges", "k_searched", "C", "cs", "edge", "converged")
            if key in info}
    if "nca" in info:
        nca = info["nca"]
        keep["nca"] = {key: nca[key] for key in ("lr", "lrs", "best_epoch", "epochs_run", "plateau", "edge", "configs")}
        keep["nca"]["val_curve"] = [row["val_accuracy"] for row in nca["history"]]
    return keep


def learned_metric_entry(cfg: Config, sm: SeedMemory, mem: Memory, seed: int, reference: tuple,
                         reference_nll: tuple, attention: tuple[np.ndarray, np.ndarray] | None) -> dict:
    """NCA, NCA tuned for the calibration endpoint and the linear probe on this memory, each scored and
    compared with the references (see the module docstring); ``attention``: main's Attn-KNN with the
    rule's knobs on this memory, test probabilities raw and calibrated, compared with NCA."""
    ds = sm.prepared.dataset
    emb = SimpleNamespace(bank=SimpleNamespace(embeddings=sm.frozen.train, labels=mem.labels),
                          val={"original": sm.frozen.val}, test={"original": sm.frozen.test})
    methods: dict[str, MethodProbs] = learned_metric_of(emb, sm.prepared, cfg, seed, loo_k=cfg.loo_k,
                                                        reference_k=cfg.reference_k)
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


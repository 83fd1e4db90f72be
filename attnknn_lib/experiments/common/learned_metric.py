"""The learned metrics with the same vote, on one fixed embedding: NCA, the nonlinear learned metric
(when a config asks for it) and the linear probe.

* **NCA** (:func:`nca_methods`): the linear map of :func:`~attnknn_lib.training.metric_learning.fit_nca`
  (trained on the memory, its epoch and learning rate chosen on validation), then every split mapped,
  the memory searched again in the mapped space, and the tuned vote re-tuned
  there (:func:`~attnknn_lib.evaluation.reference.references`: rule, k, filter, prior, on validation
  accuracy, and the same search on validation NLL). "NCA" is the tuned vote in the learned space;
  ``nca_nll`` is its calibration version, as ``reference_nll`` is the tuned vote's.

  Mapped rows are **not** re-normalised one by one: that would change the neighbours NCA was trained
  for. The whole mapped space is divided by one number, the mean norm of the mapped memory rows,
  which changes no neighbour order and puts the distances on the scale the tuned vote's temperature grids
  were built for (unit vectors; at the identity map the factor is 1 and nothing changes). The
  tuned vote's "cosine" vote there reads s = 1 - d / 2 as on unit vectors, a shifted distance vote.
* **linear probe** (:func:`probe_method`): multinomial logistic regression on the embedding
  (:func:`~attnknn_lib.evaluation.linear_probe.linear_probe`), the parametric reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from attnknn_lib.base.errors import check_range
from attnknn_lib.base.knobs import float_csv, knob
from attnknn_lib.evaluation.linear_probe import linear_probe
from attnknn_lib.evaluation.methods import Embedded, MethodProbs
from attnknn_lib.evaluation.reference import REFERENCE_K, references
from attnknn_lib.experiments.common.shared import ExperimentConfig, searcher
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.headroom import headroom, loo_agreement
from attnknn_lib.training.metric_learning import fit_nca
from attnknn_lib.training.nonlinear_metric import fit_mlp_metric


@dataclass(frozen=True)
class NcaKnobs(ExperimentConfig):
    """NCA's training budget, one definition for every experiment that trains the learned metric."""

    nca_lrs: tuple[float, ...] = knob((0.003, 0.01, 0.03), "AdamW learning rates of NCA's map, the grid extended "
                                                           "past an end while the best sits there")
    nca_epochs: int = knob(100, "most epochs of NCA (one pass over the memory each); it stops at a plateau, which a "
                                "full-size cell had not reached by epoch 40")
    nca_patience: int = knob(5, "NCA stops after this many epochs without a better validation score")
    nca_batch_size: int = knob(1024, "memory rows per NCA step (the queries of its leave-one-out softmax)")
    nca_candidates: int = knob(2048, "memory rows drawn per NCA step as the softmax's candidates (ModernNCA's "
                                     "sampling; the whole memory when it is smaller)")
    nonlinear_metric: bool = knob(False, "also train the nonlinear learned metric (an MLP map trained as NCA is, "
                                         "with NCA's budget) and vote in its space")
    mlp_hidden: int = knob(256, "hidden units of the nonlinear learned metric's MLP")

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "nca_lrs", float_csv("nca_lrs", self.nca_lrs, 1e-6, 10.0))
        for name in ("nca_epochs", "nca_patience", "nca_batch_size", "nca_candidates", "mlp_hidden"):
            check_range(name, getattr(self, name), 1, None)

    def nca_training(self) -> dict:
        """:func:`~attnknn_lib.training.metric_learning.fit_nca`'s budget arguments."""
        return {"lrs": self.nca_lrs, "epochs": self.nca_epochs, "patience": self.nca_patience,
                "batch_size": self.nca_batch_size, "candidates": self.nca_candidates}


LEARNED = ("nca", "nca_nll")  # the learned metric tuned on validation accuracy / on validation NLL (calibrated)
NONLINEAR = ("mlp_metric", "mlp_metric_nll")  # the nonlinear learned metric, the same two ways
MethodOut = tuple[np.ndarray, np.ndarray, dict]  # validation probabilities, test probabilities, info


def mapped(matrix: np.ndarray, memory: np.ndarray, *splits: np.ndarray) -> tuple[float, list[np.ndarray]]:
    """(scale, [memory and every split mapped by ``matrix`` and divided by scale]): scale is the mean
    norm of the mapped memory rows (see the module docstring)."""
    z = memory @ matrix.T
    scale = float(np.linalg.norm(z, axis=1).mean())
    return scale, [np.ascontiguousarray(a / scale, dtype=np.float32) for a in (z, *(s @ matrix.T for s in splits))]


def nca_methods(memory, val, test, num_classes: int, seed: int, *, k: int, loo_k: int, reference_k: int,
                lrs: tuple[float, ...], epochs: int, patience: int, batch_size: int,
                candidates: int) -> dict[str, MethodOut]:
    """``nca`` and ``nca_nll`` on rows ``memory``, ``val``, ``test`` (each with ``x`` and ``y``): NCA
    trained at the heads' ``k`` (see the module docstring), the tuned vote searched from ``reference_k``
    neighbours in the mapped space, each row's label agreement over its ``loo_k`` nearest other rows
    there. Both infos hold the tuned vote's choice and the NCA training (``nca``), the scale and the
    headroom at k in the mapped space (recall and uniform vote on test)."""
    fit = fit_nca(memory.x, memory.y, val.x, val.y, num_classes, k, lrs, epochs, patience, batch_size, candidates,
                  seed)
    scale, (mem, vx, tx) = mapped(fit.matrix, memory.x, val.x, test.x)
    return _voted_in_learned_space(LEARNED, "nca", fit.info, scale, mem, vx, tx, memory.y, val.y, test.y,
                                   num_classes, k=k, loo_k=loo_k, reference_k=reference_k)


def mlp_metric_methods(memory, val, test, num_classes: int, seed: int, *, k: int, loo_k: int, reference_k: int,
                       lrs: tuple[float, ...], epochs: int, patience: int, batch_size: int, candidates: int,
                       hidden: int) -> dict[str, MethodOut]:
    """``mlp_metric`` and ``mlp_metric_nll``: the nonlinear learned metric
    (:func:`~attnknn_lib.training.nonlinear_metric.fit_mlp_metric`, NCA's budget) in place of NCA's
    linear map, then the same re-retrieval, scaling and tuned vote as :func:`nca_methods`."""
    fit = fit_mlp_metric(memory.x, memory.y, val.x, val.y, num_classes, k, lrs, epochs, patience, batch_size,
                         candidates, seed, hidden=hidden)
    z = [fit.model.embed(a).astype(np.float64) for a in (memory.x, val.x, test.x)]
    scale = float(np.linalg.norm(z[0], axis=1).mean())
    mem, vx, tx = (np.ascontiguousarray(a / scale, dtype=np.float32) for a in z)
    return _voted_in_learned_space(NONLINEAR, "mlp_metric", fit.info, scale, mem, vx, tx, memory.y, val.y, test.y,
                                   num_classes, k=k, loo_k=loo_k, reference_k=reference_k)


def _voted_in_learned_space(names: tuple[str, str], what: str, training: dict, scale: float, mem: np.ndarray,
                            vx: np.ndarray, tx: np.ndarray, memory_y: np.ndarray, val_y: np.ndarray,
                            test_y: np.ndarray, num_classes: int, *, k: int, loo_k: int,
                            reference_k: int) -> dict[str, MethodOut]:
    """The memory searched again in a learned space and the tuned vote (on accuracy, on NLL) there."""
    bank = MemoryBank().build(mem, memory_y)
    own = bank.search_excluding(mem, loo_k, np.arange(len(memory_y)))
    loo = loo_agreement(memory_y[own.rows], memory_y)
    search = searcher(bank, {"val": vx, "test": tx})
    ref, ref_nll = references(search, memory_y, loo, val_y, num_classes, reference_k)
    room = headroom(memory_y[search("test", k)[0]], test_y, num_classes, k)
    shared = {what: training, "scale": scale, "headroom_at_k": room}
    return {name: (m.val, m.test, {**m.info, **shared}) for name, m in zip(names, (ref, ref_nll))}


def probe_method(memory, val, test, num_classes: int, seed: int) -> dict[str, MethodOut]:
    """``linear_probe``: the probe's validation and test probabilities and what was searched."""
    return {"linear_probe": linear_probe(memory.x, memory.y, val.x, val.y, test.x, num_classes, seed)}

LABELS = {  # method -> label in tables and text
    "nca": "NCA (learned metric)",
    "nca_nll": "NCA, tuned on NLL",
    "linear_probe": "linear probe",
}


LEARNED_METHODS = (*LEARNED, "linear_probe")  # the learned-metric family, as methods of an experiment


def learned_metric_of(emb: Embedded, prepared, cfg: NcaKnobs, seed: int, loo_k: int = 16,
                      reference_k: int = REFERENCE_K) -> dict[str, MethodProbs]:
    """The learned-metric family on ``emb``'s memory as labelled there (noisy labels under noise):
    NCA at ``cfg.k`` (:func:`nca_methods`, its epoch chosen on ``prepared``'s validation labels, the
    rule re-tuned in the learned space) and the linear probe, as methods scored like any other."""
    ds = prepared.dataset
    memory = SimpleNamespace(x=np.asarray(emb.bank.embeddings, dtype=np.float32), y=np.asarray(emb.bank.labels))
    val = SimpleNamespace(x=emb.val["original"], y=ds.val.y)
    test = SimpleNamespace(x=emb.test["original"], y=ds.test.y)
    out = {**nca_methods(memory, val, test, ds.num_classes, seed, k=min(cfg.k, len(memory.y) - 1), loo_k=loo_k,
                         reference_k=min(reference_k, len(memory.y)), **cfg.nca_training()),
           **probe_method(memory, val, test, ds.num_classes, seed)}
    if cfg.nonlinear_metric:
        out.update(mlp_metric_methods(memory, val, test, ds.num_classes, seed, k=min(cfg.k, len(memory.y) - 1),
                                      loo_k=loo_k, reference_k=min(reference_k, len(memory.y)), hidden=cfg.mlp_hidden,
                                      **cfg.nca_training()))
    return {name: MethodProbs(pv, pt, info) for name, (pv, pt, info) in out.items()}

"""The comparison on one fixed embedding, shared by the experiments that measure where a learned
neighbour weighting has room to win (the positive control and the real regimes).

Given a labelled memory, validation and test rows of one embedding (the embedding stays frozen),
:func:`compare` measures, in this order:

1. **headroom** before any head is trained: the headroom table (recall, uniform vote, fixable
   share) at the heads' k and at the tuned vote's chosen k, and the geometry-only ceiling (the best
   distance / cosine / uniform vote over at most the heads' k neighbours, tuned on validation);
2. **the tuned vote**
   (:func:`~attnknn_lib.evaluation.reference.references`), tuned on validation accuracy, and the
   same search tuned on validation NLL (the reference of the calibration endpoints);
3. **learnable headroom**: the boosted-trees learner of the attention study
   (:func:`~attnknn_lib.evaluation.learnable.learned_rule`, cross-fitted on validation) reading as
   many neighbours as the tuned vote's chosen k (at least the heads' k);
4. **the learned metrics with the same vote** (:mod:`~attnknn_lib.experiments.common.learned_metric`):
   NCA (a linear map trained with the NCA loss over the memory, then re-retrieval and the tuned vote's
   whole search in the learned space; ``nca`` tuned on accuracy, ``nca_nll`` on NLL) and the linear
   probe (logistic regression on the embedding, the parametric reference);
5. **the heads** (:data:`HEADS`; Attn-KNN is the paper's attention with the prototype's loss)
   trained on memory queries (each query's own row excluded from its neighbours), their epoch
   chosen on validation, scored once on test: accuracy as voted, NLL and Brier after a calibrator
   fitted on validation, and their effective k = exp(entropy of the weights), mean over test queries;
   then the controls (:data:`CONTROLS`: the query-only MLP, which reads no neighbour) with the heads'
   budget, and with ``probe_as_heads`` the linear probe too (:data:`PROBE`; lbfgs's probe of step 4 is then
   kept as the diagnostic :data:`PROBE_LBFGS`);
6. **Attn-KNN with the tuned vote's knobs** (:data:`TUNED`): the trained Attn-KNN head read over more
   neighbours, with k, the label-consistency filter and the prior exponent chosen on validation as
   the tuned vote chooses them (:func:`~attnknn_lib.evaluation.tuned_attention.tuned_attentions`; its
   scores of a neighbour do not depend on the others read, so k = the heads' k is in the grid and
   gives the head as trained). ``attnknn_tuned`` is tuned on accuracy, ``attnknn_tuned_nll`` for the
   calibration endpoints; the head at its trained k stays as a diagnostic.

Every method is compared with both references; every head (and Attn-KNN with the tuned vote's knobs)
also with each learned metric measured (``nca`` on accuracy, ``nca_nll`` on NLL and Brier; the
nonlinear metric's ``mlp_metric`` and ``mlp_metric_nll`` the same way when ``nonlinear_metric`` is on):
attention against the classic way to learn a metric.

7. **Attn-KNN and its variants at k_w** (opt in: ``wide_heads``): the heads of :data:`WIDE_HEADS`
   trained again at k_w, the tuned vote's chosen k clipped to [``wide_k_min``, ``wide_k_max``], on the
   same queries with the same budget; Attn-KNN at k_w is also read with the tuned vote's knobs
   (:data:`WIDE_TUNED`), the label-conditioned and self-attention variants only at k_w.

An experiment may add its own methods (the positive control's oracle weights) through ``extras``.
:func:`summarise` turns one setting's seeds into seed-level intervals and verdicts: every seed has
its own test rows, so the seeds' differences are independent and carry the test set's sampling
error, and the interval takes no extra test term (:func:`~attnknn_lib.evaluation.verdicts.seed_level`
with ``test_se`` 0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from attnknn_lib.base.errors import ConfigError, check_range
from attnknn_lib.base.knobs import csv, float_csv, knob
from attnknn_lib.base.runtime import seed_everything
from attnknn_lib.evaluation.bootstrap import resampled_endpoints
from attnknn_lib.evaluation.calibration import fit_calibrator
from attnknn_lib.evaluation.head_scores import attention_scorer
from attnknn_lib.evaluation.learnable import learned_rule
from attnknn_lib.evaluation.metrics import METRICS, accuracy, nll
from attnknn_lib.evaluation.reference import (
    REFERENCE_K,
    Choice,
    Search,
    reference_probs,
    references,
    tune_reference,
)
from attnknn_lib.evaluation.tuned_attention import tuned_attentions
from attnknn_lib.evaluation.verdicts import MARGINS, resolvable, seed_level
from attnknn_lib.experiments.common.learned_metric import (
    LEARNED,
    NONLINEAR,
    NcaKnobs,
    mlp_metric_methods,
    nca_methods,
    probe_method,
)
from attnknn_lib.experiments.common.shared import searcher
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.headroom import headroom, loo_agreement, loo_agreement_without
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.knn.votes import effective_neighbours
from attnknn_lib.models import AttentionConfig, MultiHeadNeighbourAttention
from attnknn_lib.models.neighbour_heads import (
    BlindAttention,
    LabelAwareAttention,
    LinearProbe,
    NeighbourReadout,
    QueryOnly,
)
from attnknn_lib.training.head_fitting import predict, train_head
from attnknn_lib.training.loops import TrainResult
from attnknn_lib.training.metric_learning import search_learning_rates

HEADS = (
    "attnknn",  # the paper's multi-head attention with the prototype's loss (entropy bonus 0.01)
    "blind_none",  # the same attention without the entropy bonus
    "label_aware",  # scores from distances, ranks, label shares and agreement
    "readout",  # TabR-style: values E[y] + MLP(q - n) and an MLP readout, not a vote
)
"""The heads a config may train (their names for a reader are the views': ``report.findings.HEAD_NAMES``)."""
WIDE_HEADS = {
    "attnknn": "attnknn_wide",  # Attn-KNN trained at k_w, then read with the tuned vote's knobs
    "label_bias": "attnknn_label_wide",  # with the per-neighbour label-conditioned bias, trained and read at k_w
    "self_attention": "attnknn_self_wide",  # its neighbours first attend to each other, trained and read at k_w
}
"""The heads a config may also train at k_w, the tuned vote's chosen k clipped to [wide_k_min, wide_k_max]
(their method names). The two variants' scores of a neighbour depend on the others read, so they are
read at the k they were trained at."""
WIDE_TUNED = ("attnknn_wide_tuned", "attnknn_wide_tuned_nll")  # Attn-KNN at k_w with the tuned vote's knobs
CONTROLS = ("query_only",)  # trained like the heads, never a head to choose: the readout's MLP on the query alone
PROBE = "linear_probe"  # with probe_as_heads: the linear probe trained as the heads are; lbfgs's as PROBE_LBFGS
PROBE_LBFGS = "linear_probe_lbfgs"  # then a diagnostic: the probe as the exploratory records trained it
ENDPOINTS = (("accuracy", "raw"), ("nll", "calibrated"), ("brier", "calibrated"))
"""What each head is judged on against the tuned vote: accuracy as voted, NLL and Brier after the
calibrator fitted on validation (proper scores; ECE is only described)."""
TUNED = ("attnknn_tuned", "attnknn_tuned_nll")  # Attn-KNN with the tuned vote's knobs: on accuracy / for calibration
REFERENCES = ("reference", "reference_nll")  # tuned on validation accuracy / on validation NLL (calibrated)
CALIBRATION_ENDPOINTS = ("nll", "brier")  # judged against both references
RESOLVED_AT = (3, 5)  # seed counts at which the smallest resolvable difference is reported


class Rows(Protocol):
    """One split of an embedding: unit vectors ``x`` (N, D) and labels ``y`` (N,)."""

    x: np.ndarray
    y: np.ndarray


Extras = Callable[[Search, int], dict[str, tuple[np.ndarray, np.ndarray, dict]]]
"""An experiment's own methods: given the search and the tuned vote's chosen k, name ->
(validation probabilities, test probabilities, info)."""


@dataclass(frozen=True)
class HeadKnobs(NcaKnobs):
    """The knobs of the comparison on a fixed embedding, on top of the shared recipe (whose k,
    num_heads and entropy weight are Attn-KNN's). One definition for every experiment that uses it."""

    heads: tuple[str, ...] = knob(("attnknn", "label_aware", "readout"), "heads trained on the frozen embedding "
                                                                         "(among those of HEADS)")
    # 16,000 queries: the budget every head family shares (the study's variants too); training on
    # all 54,000 memory rows of Fashion-MNIST would cost the study's heads four times more CPU time
    train_queries: int = knob(16000, "training queries per head (a seeded subset of the memory; 0: every memory "
                                     "row), each query's own row excluded from its neighbours")
    head_epochs: int = knob(32, "most epochs per head; it stops earlier at a plateau (head_patience)")
    head_patience: int = knob(5, "a head stops after this many epochs without a better validation score")
    head_batch_size: int = knob(256, "training queries per step of a head")
    head_lr: float = knob(0.01, "AdamW learning rate of the heads")
    head_lrs: tuple[float, ...] = knob((), "learning-rate grid of the heads, extended past an end while the best "
                                           "sits there, as NCA's is (empty: head_lr alone)")
    probe_as_heads: bool = knob(False, "the linear probe trained as the heads are (their optimiser, learning rates, "
                                       "queries, epochs and patience); lbfgs's probe then stays as a diagnostic")
    lbfgs_probe: bool = knob(True, "the lbfgs probe (C tuned on validation); with probe_as_heads a diagnostic, "
                                   "which false leaves out")
    wide_heads: tuple[str, ...] = knob((), "heads also trained at k_w, the tuned vote's k clipped to [wide_k_min, "
                                           "wide_k_max] (among those of WIDE_HEADS; empty: none)")
    wide_k_min: int = knob(32, "smallest k_w: a second training at k_w always differs from the first at k")
    wide_k_max: int = knob(256, "largest k_w")
    loo_k: int = knob(16, "neighbours of a memory row behind its leave-one-out agreement")
    reference_k: int = knob(REFERENCE_K, "neighbours searched for the strongest rule that learns nothing, doubled "
                                         "while its chosen k is the largest searched")
    moved_share: float = knob(0.9, "declared before the run: a head 'moves from uniform' when its mean effective k "
                                   "on test is below this share of k")
    margin_accuracy: float = knob(MARGINS["accuracy"], "equivalence margin of accuracy differences")
    margin_nll: float = knob(MARGINS["nll"], "equivalence margin of NLL differences")
    margin_brier: float = knob(MARGINS["brier"], "equivalence margin of Brier differences")

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "heads", csv(self.heads))
        for h in self.heads:
            if h not in HEADS:
                raise ConfigError(f"heads={h!r} is not allowed; choose among: {', '.join(HEADS)}")
        object.__setattr__(self, "wide_heads", csv(self.wide_heads) if self.wide_heads not in ((), [], "", None) else ())
        for h in self.wide_heads:
            if h not in WIDE_HEADS:
                raise ConfigError(f"wide_heads={h!r} is not allowed; choose among: {', '.join(WIDE_HEADS)}")
        check_range("wide_k_min", self.wide_k_min, 1, None)
        if self.wide_k_max < self.wide_k_min:
            raise ConfigError(f"wide_k_max={self.wide_k_max} is not allowed; give at least wide_k_min={self.wide_k_min}")
        check_range("train_queries", self.train_queries, 0, None)  # 0: every memory row
        if not (self.lbfgs_probe or self.probe_as_heads):
            raise ConfigError("lbfgs_probe=False is allowed only with probe_as_heads=True (else no linear probe "
                              "is trained)")
        if self.head_lrs not in ((), [], "", None):
            object.__setattr__(self, "head_lrs", float_csv("head_lrs", self.head_lrs, 1e-6, 10.0))
        else:
            object.__setattr__(self, "head_lrs", ())
        for name in ("head_epochs", "head_patience", "head_batch_size", "loo_k", "reference_k"):
            check_range(name, getattr(self, name), 1, None)
        check_range("moved_share", self.moved_share, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
        for name in ("head_lr", "margin_accuracy", "margin_nll", "margin_brier"):
            check_range(name, getattr(self, name), 0.0, None)

    def check_dims(self, name: str, dims: int) -> None:
        """The attention splits the embedding's dimensions into ``num_heads`` heads."""
        if dims % self.num_heads:
            raise ConfigError(f"{name} = {dims} is not allowed with num_heads={self.num_heads}; give a multiple of "
                              f"num_heads (the attention splits the dimensions into heads)")

    def margin(self, metric: str) -> float:
        return getattr(self, f"margin_{metric}")


def scores(val: np.ndarray, test: np.ndarray, val_y: np.ndarray, test_y: np.ndarray,
           counts: np.ndarray | None = None) -> dict:
    """One method's numbers: validation accuracy and NLL, and every test metric raw and after the
    calibrator fitted on validation (clean labels). With bootstrap ``counts`` (R, N) over the test rows,
    also ``resampled``: each endpoint (accuracy as voted, NLL and Brier calibrated) on every resample
    (:func:`~attnknn_lib.evaluation.bootstrap.resampled_endpoints`)."""
    cal = fit_calibrator(val, val_y)
    out = {"val_accuracy": accuracy(val, val_y), "val_nll": nll(val, val_y), "calibrator": cal.to_dict(),
           "raw": {m: fn(test, test_y) for m, fn in METRICS.items()},
           "calibrated": {m: fn(cal.apply(test), test_y) for m, fn in METRICS.items()}}
    if counts is not None:
        raw, calibrated = resampled_endpoints(test, test_y, counts), resampled_endpoints(cal.apply(test), test_y, counts)
        out["resampled"] = {"accuracy": raw["accuracy"], **{e: calibrated[e] for e in CALIBRATION_ENDPOINTS}}
    return out


def differences(a: dict, b: dict) -> dict:
    """A minus B on the endpoints: accuracy as voted, NLL and Brier (and ECE, described) calibrated."""
    return {"accuracy": a["raw"]["accuracy"] - b["raw"]["accuracy"],
            **{m: a["calibrated"][m] - b["calibrated"][m] for m in ("nll", "brier", "ece")}}


def geometry_ceiling(val: Neighbourhood, test: Neighbourhood, val_y: np.ndarray, num_classes: int,
                     prior: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray]:
    """The best vote that reweights only by geometry (uniform, distance, cosine; no filter, no prior)
    over at most the k neighbours a head reads, tuned on validation."""
    tuned = tune_reference(val, val_y, prior, num_classes, thetas=(None,), betas=(0.0,))
    choice: Choice = tuned["choice"]
    return ({"label": choice.label(), "configs": tuned["configs"]},
            reference_probs(choice, val, prior, num_classes), reference_probs(choice, test, prior, num_classes))


def build_head(name: str, num_heads: int, num_classes: int, dims: int,
               memory: torch.Tensor | None = None) -> torch.nn.Module:
    """The head (or control) ``name``; ``memory`` (M, D) gives the linear probe its standardisation."""
    if name in ("attnknn", "blind_none", "attnknn_wide", "attnknn_label_wide", "attnknn_self_wide"):
        return BlindAttention(MultiHeadNeighbourAttention(AttentionConfig(
            num_classes, dims, num_heads, label_bias=name == "attnknn_label_wide",
            neighbour_self_attention=name == "attnknn_self_wide")))
    if name == "label_aware":
        return LabelAwareAttention(num_classes, dims)
    if name == "query_only":
        return QueryOnly(num_classes, dims)
    if name == PROBE:
        return LinearProbe(num_classes, dims, memory)
    return NeighbourReadout(num_classes, dims)


def lr_search(fit: Callable[[float], TrainResult], lrs: tuple[float, ...]) -> tuple[TrainResult, dict]:
    """The heads' learning-rate search, by the rule every learner shares
    (:func:`~attnknn_lib.training.metric_learning.search_learning_rates`). Returns (the best run, {lr, lrs,
    edge, configs})."""
    best, grid, at_end, fits = search_learning_rates(fit, lrs, lambda res: res.history[res.best_epoch - 1])
    return fits[best], {"lr": best, "lrs": grid, "edge": at_end, "configs": sum(len(f.history) for f in fits.values())}


def train_heads(cfg: HeadKnobs, memory: np.ndarray, num_classes: int, hoods: dict[str, Neighbourhood],
                seed: int, names: tuple[str, ...] | None = None, models: dict | None = None) -> dict:
    """Every head of ``names`` (default ``cfg.heads``; a control of :data:`CONTROLS` trains the same
    way): validation and test probabilities, and what training did; ``models`` (a dict the caller
    keeps) receives each trained head."""
    mem = torch.from_numpy(np.ascontiguousarray(memory, dtype=np.float32))
    out = {}
    for name in names or cfg.heads:
        seed_everything(seed)
        head = build_head(name, cfg.num_heads, num_classes, memory.shape[1], mem)
        entropy = cfg.entropy_weight if name == "attnknn" or name in WIDE_HEADS.values() else 0.0  # Attn-KNN's loss

        def fit(lr: float, name=name, entropy=entropy):
            seed_everything(seed)
            return train_head(build_head(name, cfg.num_heads, num_classes, memory.shape[1], mem), hoods["train"],
                              hoods["val"], mem, num_classes, epochs=cfg.head_epochs, lr=lr,
                              batch_size=cfg.head_batch_size, entropy_weight=entropy, seed=seed, name=name,
                              patience=cfg.head_patience)

        if cfg.head_lrs:
            res, grid = lr_search(fit, cfg.head_lrs)
            head = res.model
        else:
            res = train_head(head, hoods["train"], hoods["val"], mem, num_classes, epochs=cfg.head_epochs,
                             lr=cfg.head_lr, batch_size=cfg.head_batch_size, entropy_weight=entropy, seed=seed,
                             name=name, patience=cfg.head_patience)
        pv, _ = predict(res.model, hoods["val"], mem, num_classes)
        pt, wt = predict(res.model, hoods["test"], mem, num_classes)
        info = {"best_epoch": res.best_epoch, "epochs_run": len(res.history),
                "plateau": len(res.history) - res.best_epoch >= cfg.head_patience,
                "effective_k": float(effective_neighbours(wt).mean())}
        if cfg.head_lrs:
            info.update(grid)
        if isinstance(head, BlindAttention):
            info["temperatures"] = [float(t) for t in head.attention.temperatures().detach()]
        out[name] = (pv, pt, info)
        if models is not None:
            models[name] = res.model
    return out


def compare(cfg: HeadKnobs, memory: Rows, val: Rows, test: Rows, num_classes: int, seed: int,
            extras: Extras | None = None, counts: np.ndarray | None = None) -> dict:
    """Everything measured on one embedding and seed (see the module docstring): the headroom at
    the heads' k and at the tuned vote's, every method's scores, and every method minus each reference.
    With bootstrap ``counts`` (R, N) over the test rows (seeds that share their test rows share them):
    ``resampled``, per method its endpoints on every resample (:func:`scores`), which
    :func:`paired_test_errors` turns into each comparison's test term."""
    k = cfg.k
    bank = MemoryBank().build(memory.x, memory.y)
    own = bank.search_excluding(memory.x, max(k, cfg.loo_k + 1), np.arange(len(memory.y)))  # each row's other rows
    loo = loo_agreement(memory.y[own.rows[:, :cfg.loo_k]], memory.y)
    prior = np.bincount(memory.y, minlength=num_classes) / len(memory.y)
    search = searcher(bank, {"val": val.x, "test": test.x})
    search("val", cfg.reference_k), search("test", cfg.reference_k)  # searched once, read by every part

    def hood(split: str, kk: int) -> Neighbourhood:
        rows, sq = search(split, kk)
        return Neighbourhood(memory.y[rows], sq, rows, loo[rows])

    def hoods_of(rows: np.ndarray, sq: np.ndarray, query: np.ndarray, target: np.ndarray,
                 agreement: np.ndarray | None = None) -> Neighbourhood:
        agree = loo[rows] if agreement is None else agreement
        return Neighbourhood(query=query, rows=rows, sq_dist=sq.astype(np.float32), labels=memory.y[rows],
                             loo=agree.astype(np.float32), target=target)

    n_train = min(cfg.train_queries or len(memory.y), len(memory.y))
    train_rows = np.sort(np.random.default_rng([seed, 2]).choice(len(memory.y), n_train, replace=False))
    t_rows, t_sq = own.rows[train_rows, :k], own.sq_dist[train_rows, :k]
    hoods = {"train": hoods_of(t_rows, t_sq, memory.x[train_rows], memory.y[train_rows],
                               loo_agreement_without(train_rows, t_rows, own.rows, memory.y, cfg.loo_k)),
             **{s: hoods_of(*search(s, k), q.x, q.y) for s, q in (("val", val), ("test", test))}}

    probs, info = {}, {}
    ref, ref_nll = references(search, memory.y, loo, val.y, num_classes, cfg.reference_k, chunked=True)
    for name, m in zip(REFERENCES, (ref, ref_nll)):
        probs[name], info[name] = (m.val, m.test), m.info
    k_ref = info["reference"]["choice"]["k"]
    info["geometry"], *probs["geometry"] = geometry_ceiling(hood("val", k), hood("test", k), val.y, num_classes,
                                                             prior)
    for name, (pv, pt, extra_info) in (extras(search, k_ref) if extras else {}).items():
        probs[name], info[name] = (pv, pt), extra_info
    learned = {**nca_methods(memory, val, test, num_classes, seed, k=k, loo_k=cfg.loo_k, reference_k=cfg.reference_k,
                             **cfg.nca_training()),
               **(probe_method(memory, val, test, num_classes, seed) if cfg.lbfgs_probe else {})}
    if cfg.nonlinear_metric:
        learned.update(mlp_metric_methods(memory, val, test, num_classes, seed, k=k, loo_k=cfg.loo_k,
                                          reference_k=cfg.reference_k, hidden=cfg.mlp_hidden, **cfg.nca_training()))
    for name, (pv, pt, extra_info) in learned.items():
        probs[name], info[name] = (pv, pt), extra_info
    k_learn = max(k, k_ref)
    fit = learned_rule(hood("val", k_learn), val.y, hood("test", k_learn), prior, num_classes, k_learn, seed)
    probs["learner"], info["learner"] = (fit["val"], fit["test"]), {"k": k_learn, "configs": fit["configs"],
                                                                     "folds": fit["folds"]}
    trained: dict = {}
    for name, (pv, pt, head_info) in train_heads(cfg, memory.x, num_classes, hoods, seed, models=trained).items():
        probs[name], info[name] = (pv, pt), head_info

    def with_vote_settings(head: str, names: tuple[str, str], extra: dict) -> None:
        """Trained ``head`` read with the tuned vote's knobs (on accuracy, for calibration), from the
        tuned vote's search depth on."""
        scorer = attention_scorer(trained[head].attention, bank, {"val": val.x, "test": test.x}, search, memory.y,
                                  loo)
        tuned = tuned_attentions(scorer, val.y, prior, num_classes, info["reference"]["k_searched"], len(memory.y))
        for name, m in zip(names, tuned):
            probs[name], info[name] = (m.val, m.test), {**m.info, **extra}

    if "attnknn" in trained:
        with_vote_settings("attnknn", TUNED, {})
    if cfg.probe_as_heads and cfg.lbfgs_probe:  # the one budget's probe takes the name; lbfgs's, a diagnostic
        probs[PROBE_LBFGS], info[PROBE_LBFGS] = probs.pop(PROBE), info.pop(PROBE)
    controls = (*CONTROLS, PROBE) if cfg.probe_as_heads else CONTROLS
    for name, (pv, pt, head_info) in train_heads(cfg, memory.x, num_classes, hoods, seed, controls).items():
        head_info.pop("effective_k")  # its weights are uniform by convention: no sharpness to report
        probs[name], info[name] = (pv, pt), head_info
    if cfg.wide_heads:
        k_w = min(max(k_ref, cfg.wide_k_min), cfg.wide_k_max, len(memory.y) - 1)
        wide = bank.search_excluding(memory.x, max(k_w, cfg.loo_k + 1), np.arange(len(memory.y)))
        w_rows, w_sq = wide.rows[train_rows, :k_w], wide.sq_dist[train_rows, :k_w]
        hoods_w = {"train": hoods_of(w_rows, w_sq, memory.x[train_rows], memory.y[train_rows],
                                     loo_agreement_without(train_rows, w_rows, own.rows, memory.y, cfg.loo_k)),
                   **{s: hoods_of(*search(s, k_w), q.x, q.y) for s, q in (("val", val), ("test", test))}}
        names = tuple(WIDE_HEADS[h] for h in cfg.wide_heads)
        for name, (pv, pt, head_info) in train_heads(cfg, memory.x, num_classes, hoods_w, seed, names,
                                                     models=trained).items():
            probs[name], info[name] = (pv, pt), {**head_info, "k_trained": k_w}
        if "attnknn_wide" in trained:  # read with the tuned vote's knobs, as Attn-KNN at k is
            with_vote_settings("attnknn_wide", WIDE_TUNED, {"k_trained": k_w})

    scored = {name: {**scores(pv, pt, val.y, test.y, counts), "info": info[name]} for name, (pv, pt) in probs.items()}
    resampled = {name: m.pop("resampled") for name, m in scored.items() if "resampled" in m}
    diffs = {name: {r: differences(scored[name], scored[r]) for r in REFERENCES}
             for name in scored if name not in REFERENCES}
    metrics = tuple(r for r in (*LEARNED, *NONLINEAR) if r in scored)  # the learned metrics measured
    attention = (*cfg.heads, *(t for t in (*TUNED, *WIDE_HEADS.values(), *WIDE_TUNED) if t in scored))
    for name in attention:  # attention against each learned metric
        diffs[name].update({r: differences(scored[name], scored[r]) for r in metrics})
    test_labels = memory.y[search("test", max(k, k_ref))[0]]
    out = {"headroom": {"at_k": headroom(test_labels, test.y, num_classes, k),
                        "at_reference_k": headroom(test_labels, test.y, num_classes, k_ref)},
           "methods": scored, "diff": diffs}
    return {**out, "resampled": resampled} if counts is not None else out


PairedErrors = Callable[[str, str, str], float]
"""(method, reference, endpoint) -> the test rows' standard error of the seed-mean difference."""


def paired_test_errors(per_seed: dict[str, dict]) -> PairedErrors:
    """The test term of every comparison when the seeds read the same test rows (each seed a
    :func:`compare` output with ``resampled``, drawn with the same counts): the s.d. over resamples r of

        (1 / S) sum_s [m_r(A_s) - m_r(B_s)]

    the paired bootstrap of :func:`~attnknn_lib.evaluation.bootstrap.paired_bootstrap_diff`, averaged
    over the seeds before the s.d. is taken, so an error the seeds share stays in."""
    seeds = list(per_seed)

    def se(name: str, ref: str, metric: str) -> float:
        d = np.mean([per_seed[s]["resampled"][name][metric] - per_seed[s]["resampled"][ref][metric] for s in seeds],
                    axis=0)
        return float(np.std(d, ddof=1))
    return se


def summarise(cfg: HeadKnobs, per_seed: dict[str, dict], test_se: PairedErrors | None = None) -> dict:
    """One setting over its seeds (each a :func:`compare` output). Per comparison and endpoint: the
    seed-level interval and verdict (independent test rows per seed, so no test term; seeds that read
    the same test rows give ``test_se``, from :func:`paired_test_errors`) and the
    smallest difference it resolves at :data:`RESOLVED_AT` seeds (against each reference, and for
    the heads against the learned metric: accuracy against the accuracy-tuned one, NLL and Brier
    against both); per method the means; per head its
    mean effective k and whether it moved from uniform (below ``moved_share`` x k); the headroom
    means, the tuned vote's choices per seed and the grid edges it reached."""
    seeds = list(per_seed)
    first = per_seed[seeds[0]]
    out = {"diff": {}, "effective_k": {}, "moved": {}, "means": {}}
    for name in first["diff"]:
        out["diff"][name] = {}
        for ref in first["diff"][name]:  # the references, and the learned metric for a head
            entry = {}
            for metric in ("accuracy", *CALIBRATION_ENDPOINTS):
                if ref in (REFERENCES[1], LEARNED[1], NONLINEAR[1]) and metric == "accuracy":
                    continue
                d = [per_seed[s]["diff"][name][ref][metric] for s in seeds]
                term = test_se(name, ref, metric) if test_se else 0.0
                v = seed_level(d, term, metric, cfg.margin(metric))
                if len(d) > 1:
                    v["resolvable"] = {str(n): resolvable(v["seed_sd"], term, n) for n in RESOLVED_AT}
                entry[metric] = v
            out["diff"][name][ref] = entry
    for name in first["methods"]:
        m = [per_seed[s]["methods"][name] for s in seeds]
        out["means"][name] = {"accuracy": float(np.mean([x["raw"]["accuracy"] for x in m])),
                              **{e: float(np.mean([x["calibrated"][e] for x in m])) for e in ("nll", "brier", "ece")}}
        if "effective_k" in m[0]["info"]:
            eff = float(np.mean([x["info"]["effective_k"] for x in m]))
            out["effective_k"][name] = eff
            k_trained = m[0]["info"]["k_trained"] if name in WIDE_HEADS.values() else cfg.k
            out["moved"][name] = eff < cfg.moved_share * k_trained
    out["headroom"] = {key: {f: float(np.mean([per_seed[s]["headroom"][key][f] for s in seeds]))
                             for f in ("recall", "uniform_accuracy", "fixable", "all_agree_right")}
                       for key in ("at_k", "at_reference_k")}
    out["reference_k"] = [per_seed[s]["methods"]["reference"]["info"]["choice"]["k"] for s in seeds]
    out["reference_labels"] = [per_seed[s]["methods"]["reference"]["info"]["label"] for s in seeds]
    out["reference_nll_labels"] = [per_seed[s]["methods"]["reference_nll"]["info"]["label"] for s in seeds]
    out["edges"] = sorted({e for s in seeds for r in REFERENCES for e in per_seed[s]["methods"][r]["info"]["edges"]})
    return out


def k_range(ks: list[int]) -> str:
    """The rule's k over seeds: one value, or the lowest and highest. No view reads it any more (they
    read :func:`~attnknn_lib.experiments.common.fixed_embedding_views.k_range`, with an en dash); it goes
    with the next change that moves this module's measurement key anyway."""
    return f"{min(ks)}" if min(ks) == max(ks) else f"{min(ks)}-{max(ks)}"

"""attention_study: the training runs it needs and the analysis that writes its record."""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import numpy as np
import torch

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.base.files import write_npz
from attnknn_lib.base.paths import Paths
from attnknn_lib.base.progress import bar, write
from attnknn_lib.base.runtime import seed_everything
from attnknn_lib.base.timing import peak_memory_gb
from attnknn_lib.data.label_noise import inject_label_noise
from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.data.spec import Prepared, prepare
from attnknn_lib.evaluation.bootstrap import paired_bootstrap_diff
from attnknn_lib.evaluation.calibration import Calibrator
from attnknn_lib.evaluation.inference import attnknn_probs
from attnknn_lib.evaluation.learnable import SELECT_SHARE, learned_rule
from attnknn_lib.evaluation.methods import (
    T_GRID,
    TAU_GRID,
    Embedded,
    MethodProbs,
    attnknn_method,
    best_baseline,
    knn_methods,
    score,
)
from attnknn_lib.evaluation.metrics import accuracy, nll
from attnknn_lib.evaluation.reference import FILTER, Neighbourhood, Search, reference_method, references
from attnknn_lib.evaluation.verdicts import HEADLINE_BOOT, resolvable, seed_level, split_level
from attnknn_lib.experiments import shared as core
from attnknn_lib.experiments.attention_study.config import ARTIFACTS, NAME, VARIANTS, Config, parse_setting
from attnknn_lib.experiments.parts import part_result, part_seconds
from attnknn_lib.knn.bank import MemoryBank, Neighbors
from attnknn_lib.knn.headroom import (
    captured,
    consistency_weights,
    flip_detection,
    headroom,
    loo_agreement,
    loo_agreement_without,
    rank_weights,
)
from attnknn_lib.knn.votes import RULES, break_ties, effective_neighbours, knn_probs, vote, vote_has_gradient
from attnknn_lib.models import MultiHeadNeighborAttention
from attnknn_lib.models.neighbour_heads import (
    AdaptiveK,
    BlindAttention,
    LabelAwareAttention,
    NeighbourReadout,
    QueryOnly,
    k_ladder,
)
from attnknn_lib.training.head_fitting import Neighbourhoods, predict, train_head
from attnknn_lib.training.loops import selection_key

ENTROPY = {"blind_bonus": 0.01, "blind_none": 0.0, "blind_penalty": -0.01, "blind_heldout": 0.01}  # others: 0
DECAYS = (1.0, 2.0, 4.0, 8.0, 16.0)  # rank-decay lengths of the geometry-only ceiling
THRESHOLDS = FILTER["thetas"]  # leave-one-out agreement thresholds of the label-aware ceiling (up to 1)
COMPARED = (("accuracy", "raw"), ("ece", "calibrated"), ("nll", "calibrated"), ("brier", "calibrated"))
PROPER = (("nll", "calibrated"), ("brier", "calibrated"))  # judged against the reference tuned on NLL
PAIR = "_pair"  # a per-seed difference's probabilities, kept for the pooled bootstrap; not written to the record
POOLED_BOOT_SEED = 0  # the pooled bootstrap's one draw of test resamples, shared by every seed (as in main)


def _paired(cfg: Config, a: np.ndarray, b: np.ndarray, labels: np.ndarray, seed: int,
            n_boot: int | None = None) -> dict:
    """A minus B paired on one seed's test points (:func:`~attnknn_lib.evaluation.bootstrap.paired_bootstrap_diff`,
    ``n_boot`` resamples, default the config's), holding the two probability arrays, the test labels
    and the resample count under :data:`PAIR` for :func:`pooled_test_se`."""
    n_boot = cfg.n_boot if n_boot is None else n_boot
    return {**paired_bootstrap_diff([a], [b], labels, n_boot=n_boot, seed=seed), PAIR: (a, b, labels, n_boot)}


def pooled_test_se(diffs: list[dict]) -> dict[str, float]:
    """The test points' share of a seed-level interval: the s.d. of the mean difference over seeds
    under one set of test resamples applied to every seed (the paired bootstrap over S runs). Every
    seed is scored on the same test points, so their sampling error is shared across seeds; this is
    the estimate main's verdicts use, so a comparison made in both experiments gets one interval."""
    pairs = [d[PAIR] for d in diffs]
    labels = pairs[0][2]
    if any(not np.array_equal(p[2], labels) for p in pairs):
        raise ConfigError("the pooled bootstrap needs every seed scored on the same test points; these differ")
    if len({p[3] for p in pairs}) > 1:
        raise ConfigError(f"the pooled bootstrap needs one resample count; got {sorted({p[3] for p in pairs})}")
    pooled = paired_bootstrap_diff([p[0] for p in pairs], [p[1] for p in pairs], labels, n_boot=pairs[0][3],
                                   seed=POOLED_BOOT_SEED)
    return {metric: v["se"] for metric, v in pooled.items()}


def drop_pairs(obj):
    """``obj`` with every :data:`PAIR` entry removed, in place (the record holds numbers, not arrays)."""
    if isinstance(obj, dict):
        obj.pop(PAIR, None)
        for v in obj.values():
            drop_pairs(v)
    elif isinstance(obj, list):
        for v in obj:
            drop_pairs(v)
    return obj


def runs(cfg: Config):
    """Main's Attn-KNN runs of the dataset (shared with main: trained once), then the end-to-end
    runs without the entropy bonus (:func:`end_to_end_runs`)."""
    return core.model_runs(cfg, core.data_spec(cfg, cfg.dataset), cfg.seeds, kinds=("attnknn",)) + \
        long_tail_runs(cfg) + end_to_end_runs(cfg) + [r for name in cfg.second_datasets for r in second_runs(cfg, name)]


def second_runs(cfg: Config, name: str):
    """Main's Attn-KNN of each stratified hold-out split of tabular ``name`` (split r, seed r: the
    runs main trains with the same recipe, so they are trained once)."""
    return [core.model_runs(cfg, core.data_spec(cfg, name, split_seed=r), (r,), kinds=("attnknn",))[0]
            for r in range(cfg.second_splits)]


SECOND_METHODS = ("reference", "attnknn", "uniform", "learnable")  # the strongest rule, main's attention, the vote
# at k, and the better learner (of :data:`LEARNERS`, on its out-of-fold validation accuracy)
SECOND_DIFFS = ("attnknn", "uniform", "learnable")  # compared with the reference, split-level


def second_dataset(cfg: Config, paths: Paths, name: str) -> dict:
    """The study's core comparison on a second dataset, so the conclusion does not rest on one image
    set: for each hold-out split, main's Attn-KNN (its attention at k on its own embedding), the
    uniform vote at k and the learnable headroom's learners (:data:`LEARNERS` at k, cross-fitted on
    the clean validation queries, the same budgets as on the first dataset) against the strongest
    rule that learns nothing, on the clean memory and with noise in the memory's labels (each split
    draws its own flips); validation and test labels clean. Verdicts are split-level (corrected
    resampled t: the splits share their data)."""
    cpu = torch.device("cpu")
    per_split, sizes = [], None
    for r, run_ in enumerate(second_runs(cfg, name)):
        prepared = prepare(run_.data)
        ds = prepared.dataset
        c = ds.num_classes
        sizes = (len(ds.test), len(ds.train))
        model = core.trained(run_, paths, prepared)[0].model.to(cpu)
        frozen = core.frozen_embeddings(run_, model, prepared, paths, cpu)
        clean = core.bank_of(frozen, ds.train.y, cfg.k, reference=True)
        k = min(cfg.k, len(ds.train) - 1)
        self_nb = clean.bank.search_excluding(frozen.train, max(k, cfg.loo_k + 1), np.arange(len(frozen.train)))
        val_nb, test_nb = (clean.neighbors[(split, "original")] for split in ("val", "test"))
        rows = _train_rows(len(frozen.train), cfg.train_queries, r)
        entry = {}
        for setting in cfg.settings:
            mem = memory_setting(frozen, ds.train.y, self_nb, val_nb, test_nb, ds.val.y, ds.test.y, rows, setting,
                                 c, cfg, r)
            emb = core.relabel(clean, mem.labels)
            ref = core.reference_of(emb, prepared)
            deeper = core.searcher(clean.bank, {"val": frozen.val, "test": frozen.test})
            methods = {"reference": ref, "attnknn": attnknn_method(model.attention, emb, cfg.k),
                       "uniform": knn_methods(emb, ds, cfg.k)["uniform"],
                       **learners(cfg, mem, k, ds, r, deeper, ref.info["choice"]["k"])}
            scored = score(methods, ds, n_boot=1, seed=r)  # split-level intervals: no test-point bootstrap
            best = max(LEARNERS, key=lambda n: scored[n]["val"]["accuracy"])
            entry[setting] = {m: {metric: scored[m][f"test_{split}"][metric]["value"] for metric, split in COMPARED}
                              for m in methods}
            entry[setting]["learnable"] = entry[setting][best]
            entry[setting]["learner"] = best
            entry[setting]["learner_val_accuracy"] = {n: scored[n]["val"]["accuracy"] for n in LEARNERS}
            entry[setting]["recall"] = float((mem.test.labels[:, :k] == ds.test.y[:, None]).any(1).mean())
            entry[setting]["reference_choice"] = ref.info["label"]
            entry[setting]["reference_k"] = ref.info["choice"]["k"]
            entry[setting]["reference_configs"] = ref.info["configs"]
            entry[setting]["budgets"] = methods["gbm"].info | methods["label_aware_heldout"].info
        per_split.append(entry)
    summary = {}
    for setting in cfg.settings:
        e = [p[setting] for p in per_split]
        summary[setting] = {
            "reference_k": [x["reference_k"] for x in e],
            "recall": float(np.mean([x["recall"] for x in e])),
            "learners": [x["learner"] for x in e],
            "mean": {m: {metric: float(np.mean([x[m][metric] for x in e])) for metric, _ in COMPARED}
                     for m in (*SECOND_METHODS, *LEARNERS)},
            **{f"{m}_vs_reference": {metric: split_level([x[m][metric] - x["reference"][metric] for x in e], *sizes,
                                                          metric, margin=cfg.margin(metric)) for metric, _ in COMPARED}
               for m in SECOND_DIFFS}}
    return {"dataset": name, "title": REGISTRY[name].title, "splits": len(per_split), "n_test": sizes[0],
            "n_train": sizes[1], "k": cfg.k, "per_split": per_split, "summary": summary}


LONG_TAIL_PREP_SEED = 0  # the long-tail experiment's default imbalance_seed: seed s draws class order s


def long_tail_setting(cfg: Config) -> str | None:
    """The long-tailed memory's name in the record, e.g. 'long_tail/0.01'; None when it is off."""
    return f"long_tail/{cfg.long_tail_ratio:g}" if cfg.long_tail_ratio else None


def long_tail_runs(cfg: Config):
    """Attn-KNN retrained on the long-tailed subset, one per ``long_tail_seeds``: the data and recipe
    of the long-tail experiment's setting ``trained`` at ``long_tail_ratio`` (same run ids with the
    default knobs, so those models are trained once)."""
    if not cfg.long_tail_ratio:
        return []
    recipe = cfg.recipe()
    if cfg.long_tail_epochs:
        key = "epochs" if REGISTRY[cfg.dataset].kind == "image" else "tabular_epochs"
        recipe = replace(recipe, **{key: cfg.long_tail_epochs})
    base = core.data_spec(cfg, cfg.dataset, **({"max_train": cfg.long_tail_max_train} if cfg.long_tail_max_train
                                                else {}))
    return [core.model_runs(recipe, replace(base, imbalance=cfg.long_tail_ratio, prep_seed=LONG_TAIL_PREP_SEED + s),
                            (s,), kinds=("attnknn",))[0] for s in cfg.long_tail_seeds]


NO_BONUS = 0.0  # the end-to-end control's entropy weight: no pull towards uniform weights


def end_to_end_runs(cfg: Config):
    """Main's Attn-KNN recipe with the entropy bonus off, first ``end_to_end_seeds`` seeds: does
    joint training itself drive the attention to uniform weights? None if the recipe has no bonus."""
    if not cfg.end_to_end_seeds or cfg.entropy_weight == NO_BONUS:
        return []
    recipe = replace(cfg.recipe(), entropy_weight=NO_BONUS)
    return core.model_runs(recipe, core.data_spec(cfg, cfg.dataset), cfg.seeds[:cfg.end_to_end_seeds],
                           kinds=("attnknn",))


@dataclass
class Memory:
    """The frozen memory of one seed under one setting: its labels, which were flipped, and the
    neighbourhoods of training queries (a subset, themselves excluded), validation and test."""

    embeddings: torch.Tensor  # (M, D)
    labels: np.ndarray  # (M,) possibly noisy
    flipped: np.ndarray  # (M,) bool
    loo: np.ndarray  # (M,) leave-one-out label agreement of each row under these labels
    train: Neighbourhoods
    val: Neighbourhoods
    test: Neighbourhoods


def memory_setting(frozen, clean_labels: np.ndarray, self_nb: Neighbors, val_nb: Neighbors, test_nb: Neighbors,
                   val_y: np.ndarray, test_y: np.ndarray, train_rows: np.ndarray, setting: str, num_classes: int,
                   cfg: Config, seed: int) -> Memory:
    """The memory's labels under ``setting`` (seed ``seed`` draws its own flips) and every split's
    neighbourhoods with those labels."""
    kind, rate = parse_setting(setting)
    if rate:
        labels, flipped = inject_label_noise(clean_labels, rate, num_classes, kind, seed=cfg.noise_seed + seed)
    else:
        labels, flipped = np.asarray(clean_labels), np.zeros(len(clean_labels), dtype=bool)
    labels = np.asarray(labels, dtype=np.int64)
    loo = loo_agreement(labels[self_nb.indices[:, :cfg.loo_k]], labels)  # (M,)

    def hoods(q: np.ndarray, nb: Neighbors, target: np.ndarray, agreement: np.ndarray | None = None) -> Neighbourhoods:
        agreement = loo[nb.indices] if agreement is None else agreement
        return Neighbourhoods(q, nb.indices, nb.sq_dist.astype(np.float32), labels[nb.indices],
                              agreement.astype(np.float32), np.asarray(target, dtype=np.int64))

    # a training query is a memory row: its neighbours' agreement must not count its own label
    sub = Neighbors(self_nb.indices[train_rows], self_nb.sq_dist[train_rows], None)
    train = hoods(frozen.train[train_rows], sub, labels[train_rows],
                  loo_agreement_without(train_rows, sub.indices, self_nb.indices, labels, cfg.loo_k))
    return Memory(torch.from_numpy(frozen.train), labels, np.asarray(flipped, bool), loo, train,
                  hoods(frozen.val, val_nb, val_y), hoods(frozen.test, test_nb, test_y))


def _rule_probs(rule: str, param: float | None, hoods: Neighbourhoods, k: int, num_classes: int) -> np.ndarray:
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


def build_variant(name: str, cfg: Config, num_classes: int, k: int) -> torch.nn.Module:
    if name.startswith("blind"):
        return BlindAttention(MultiHeadNeighborAttention(cfg.attention_config(num_classes)))
    if name in ("label_aware", "label_aware_heldout"):
        return LabelAwareAttention(num_classes, cfg.embed_dim)
    if name == "readout":
        return NeighbourReadout(num_classes, cfg.embed_dim)
    if name == "query_only":
        return QueryOnly(num_classes, cfg.embed_dim)
    if name == "adaptive_k":
        return AdaptiveK(num_classes, k)
    raise ConfigError(f"variant={name!r} is not allowed; choose one of: {', '.join(VARIANTS)}")


def _fit(cfg: Config, name: str, train: Neighbourhoods, val: Neighbourhoods, mem: Memory, num_classes: int,
         k: int, seed: int, lr: float | None = None, epochs: int | None = None, patience: int | None = None):
    seed_everything(seed)
    head = build_variant(name, cfg, num_classes, k)
    return train_head(head, train, val, mem.embeddings, num_classes, epochs=epochs or cfg.head_epochs,
                      lr=lr or cfg.head_lr, batch_size=cfg.head_batch_size, entropy_weight=ENTROPY.get(name, 0.0),
                      seed=seed, name=name, patience=patience or cfg.head_patience)


SEARCHED = ("label_aware_heldout",)  # variants that are also learners of the learnable headroom: the learner's budget
LR_STEP = 3.0  # factor by which the learning-rate grid is extended past an end where the best sits
LR_EXTENSIONS = 2  # times it is extended


def _fit_searched(cfg: Config, name: str, train: Neighbourhoods, sel: Neighbourhoods, mem: Memory, num_classes: int,
                  k: int, seed: int):
    """A learner's tuning budget: every learning rate of ``cfg.learner_lrs`` (the grid extended by
    :data:`LR_STEP` past an end while the best sits there, at most :data:`LR_EXTENSIONS` times), each
    trained up to ``cfg.learner_epochs`` and stopped at a plateau (``cfg.learner_patience`` epochs
    without a better score on ``sel``); every (learning rate, epoch) scored is one configuration. The
    best on ``sel`` (:func:`~attnknn_lib.training.loops.selection_key`: accuracy, then lower NLL) and
    what was searched: ``edge`` when the chosen rate still sits at an end of the grid, ``plateau`` when
    its training reached a plateau (:func:`reached_plateau`, also when it did so on the last epoch)."""
    lrs, fits = sorted(cfg.learner_lrs), {}
    for extension in range(LR_EXTENSIONS + 1):
        for lr in lrs:
            if lr not in fits:
                fits[lr] = _fit(cfg, name, train, sel, mem, num_classes, k, seed, lr=lr, epochs=cfg.learner_epochs,
                                patience=cfg.learner_patience)
        best = max(lrs, key=lambda lr: selection_key(fits[lr].history[fits[lr].best_epoch - 1]))
        at_end = len(lrs) > 1 and best in (lrs[0], lrs[-1])
        if not at_end or extension == LR_EXTENSIONS:
            break
        lrs = [best / LR_STEP, *lrs] if best == lrs[0] else [*lrs, best * LR_STEP]
    res = fits[best]
    return res, {"lr": best, "lrs": lrs, "configs": sum(len(f.history) for f in fits.values()), "edge": at_end,
                 "plateau": reached_plateau(len(res.history), res.best_epoch, cfg.learner_patience)}


def reached_plateau(epochs_run: int, best_epoch: int, patience: int) -> bool:
    """Whether a run's score stopped improving: its best epoch lies at least ``patience`` epochs
    before its last (a run stopped by its patience, also when that happens on the last epoch allowed)."""
    return epochs_run - best_epoch >= patience


AS_TRAINED = "as trained"  # the collapse sweep's head that the other settings change

COLLAPSE = {  # name -> (what changes, learning rate factor, attention config changes, q/k init scale)
    AS_TRAINED: ("the prototype head without the entropy bonus", 1.0, {}, 1.0),
    "lr / 10": ("learning rate divided by 10", 0.1, {}, 1.0),
    "lr x 10": ("learning rate multiplied by 10", 10.0, {}, 1.0),
    "sharp start": ("temperatures start at 0.1 instead of 0.5 (scores x 5)", 1.0, {"tau_init": 0.1}, 1.0),
    "wide bounds": ("temperature bounds [0.005, 20], start 0.05 (scores x 10)", 1.0,
                    {"tau_min": 0.005, "tau_max": 20.0, "tau_init": 0.05}, 1.0),
    "large init": ("query and key projections initialised 4 x larger (scores x 16)", 1.0, {}, 4.0),
    "all sharp": ("lr x 10, wide bounds and large init together", 10.0,
                  {"tau_min": 0.005, "tau_max": 20.0, "tau_init": 0.05}, 4.0),
}
"""What could hold the label-blind attention at uniform weights, swept on the frozen clean memory."""


def collapse_sweep(cfg: Config, mem: Memory, ds, seed: int, reference: tuple) -> dict:
    """Per :data:`COLLAPSE` setting: the label-blind head (no entropy term) trained at k on the frozen
    clean memory; its effective k on test, test accuracy, and paired differences to the reference."""
    c, k = ds.num_classes, cfg.k
    train, val = mem.train.take(np.arange(len(mem.train)), k), mem.val.take(np.arange(len(mem.val)), k)
    test = mem.test.take(np.arange(len(mem.test)), k)
    out = {}
    for name, (_, lr_factor, changes, init) in COLLAPSE.items():
        seed_everything(seed)
        att = MultiHeadNeighborAttention(replace(cfg.attention_config(c), **changes))
        with torch.no_grad():
            for proj in (att.q_proj, att.k_proj):
                proj.weight.mul_(init)
        res = train_head(BlindAttention(att), train, val, mem.embeddings, c, epochs=cfg.head_epochs,
                         lr=cfg.head_lr * lr_factor, batch_size=cfg.head_batch_size, entropy_weight=0.0, seed=seed,
                         name=f"collapse {name}", patience=cfg.head_patience)
        pv, _ = predict(res.model, val, mem.embeddings, c)
        pt, wt = predict(res.model, test, mem.embeddings, c)
        scored, diff = against_reference(cfg, MethodProbs(pv, pt), ds, seed, reference)
        out[name] = {"effective_k": float(effective_neighbours(wt).mean()),
                     "accuracy": scored["test_raw"]["accuracy"]["value"], "best_epoch": res.best_epoch,
                     "temperatures": [float(t) for t in att.temperatures().detach()], "diff_reference": diff}
    return out


HELDOUT_SELECT = 0.2  # share of a held-out variant's training half that picks its epoch


def train_variant(cfg: Config, name: str, mem: Memory, k: int, num_classes: int, seed: int) -> dict:
    """One variant at k: validation and test probabilities, test weights, training history.

    Held-out variants (``*_heldout``) train on clean validation queries instead, cross-fitted: two
    halves; each model trains on most of one half, picks its epoch (and, for :data:`SEARCHED`
    learners, its learning rate: :func:`_fit_searched`) on the rest of that half
    (:data:`HELDOUT_SELECT`) and predicts the other half, so no validation prediction comes from a
    model that trained on it or was selected on it; the test probabilities are the two models' mean."""
    val, test = mem.val.take(np.arange(len(mem.val)), k), mem.test.take(np.arange(len(mem.test)), k)
    if not name.endswith("_heldout"):
        res = _fit(cfg, name, mem.train.take(np.arange(len(mem.train)), k), val, mem, num_classes, k, seed)
        pv, _ = predict(res.model, val, mem.embeddings, num_classes)
        pt, wt = predict(res.model, test, mem.embeddings, num_classes)
        return {"val": pv, "test": pt, "weights": wt, "history": [res.history], "best_epoch": [res.best_epoch]}
    rng = np.random.default_rng(seed)
    halves = np.array_split(rng.permutation(len(val)), 2)
    pv = np.zeros((len(val), num_classes))
    pts, wts, hist, best, search = [], [], [], [], []
    for a, b in ((0, 1), (1, 0)):
        n_sel = max(1, int(round(HELDOUT_SELECT * len(halves[a]))))
        fit_rows, sel_rows = halves[a][n_sel:], halves[a][:n_sel]
        if name in SEARCHED:
            res, info = _fit_searched(cfg, name, val.take(fit_rows), val.take(sel_rows), mem, num_classes, k, seed + a)
            search.append(info)
        else:
            res = _fit(cfg, name, val.take(fit_rows), val.take(sel_rows), mem, num_classes, k, seed + a)
        pv[halves[b]] = predict(res.model, val.take(halves[b]), mem.embeddings, num_classes)[0]
        p, w = predict(res.model, test, mem.embeddings, num_classes)
        pts.append(p)
        wts.append(w)
        hist.append(res.history)
        best.append(res.best_epoch)
    return {"val": pv, "test": break_ties(np.mean(pts, 0), test.labels), "weights": np.mean(wts, 0),
            "history": hist, "best_epoch": best, **({"search": search} if search else {})}


def _baseline(mem: Memory, k: int, num_classes: int, ds) -> tuple[str, dict[str, MethodProbs]]:
    """The kNN rules at k with their knobs tuned on validation, and the best of them."""
    bank = MemoryBank()
    bank.labels = mem.labels
    nb = {(s, "original"): Neighbors(h.rows, h.sq_dist, h.labels) for s, h in (("val", mem.val), ("test", mem.test))}
    emb = Embedded(bank, {"original": mem.val.query}, {"original": mem.test.query}, nb)
    methods = knn_methods(emb, ds, k)
    methods = {r: methods[r] for r in RULES}
    return best_baseline(methods, ds.val.y), methods


def against_reference(cfg: Config, probs: MethodProbs, ds, seed: int, reference: tuple,
                      n_boot: int | None = None) -> tuple[dict, dict]:
    """One method scored (calibrator fitted on validation, test metrics raw and calibrated) and its
    paired differences to the reference's test probabilities ``reference`` (raw, calibrated;
    ``n_boot`` test resamples, default the config's)."""
    scored = score({"method": probs}, ds, n_boot=cfg.n_boot, seed=seed)["method"]
    cal = Calibrator(**scored["calibrator"]).apply(probs.test)
    return scored, {split: _paired(cfg, p, reference[i], ds.test.y, seed, n_boot)
                    for i, (split, p) in enumerate((("raw", probs.test), ("calibrated", cal)))}


def main_attention(cfg: Config, attention, bank: MemoryBank, frozen, neighbours: tuple[Neighbors, Neighbors], ds,
                   seed: int, reference: tuple, labels: np.ndarray | None = None,
                   reference_nll: tuple | None = None) -> dict:
    """Main's Attn-KNN (its own attention vote at k on its own embedding, over the memory's
    ``labels``: noisy ones under noise, default the bank's) against the strongest non-learned rule
    on that memory: paired differences (accuracy raw, ECE, NLL and Brier calibrated), and against
    the rule tuned on NLL (``reference_nll``). Main makes the clean comparison, so it takes main's
    resample count (``HEADLINE_BOOT``): one interval."""
    if labels is not None:
        bank = copy.copy(bank)
        bank.labels = np.asarray(labels, dtype=np.int64)
        neighbours = tuple(Neighbors(nb.indices, nb.sq_dist, bank.labels[nb.indices]) for nb in neighbours)
    pv, _ = attnknn_probs(attention, bank, frozen.val, cfg.k, neighbors=neighbours[0])
    pt, wt = attnknn_probs(attention, bank, frozen.test, cfg.k, neighbors=neighbours[1])
    scored, diff = against_reference(cfg, MethodProbs(pv, pt), ds, seed, reference, n_boot=HEADLINE_BOOT)
    out = {"val_accuracy": scored["val"]["accuracy"], "test_raw": scored["test_raw"],
           "test_calibrated": scored["test_calibrated"], "effective_k": float(effective_neighbours(wt).mean()),
           "diff_reference": diff}
    if reference_nll is not None:
        cal = Calibrator(**scored["calibrator"]).apply(pt)
        out["diff_reference_nll"] = {"calibrated": _paired(cfg, cal, reference_nll[1], ds.test.y, seed, HEADLINE_BOOT)}
    return out


def reference_entry(cfg: Config, mem: Memory, search: Search, ds, seed: int) -> tuple[dict, tuple, tuple]:
    """The strongest non-learned rule on this memory (:func:`~attnknn_lib.evaluation.reference.
    reference_method`: rule, temperature, k, consistency filter and prior exponent tuned on
    validation accuracy), scored once on test, with the same search tuned on NLL
    (:func:`~attnknn_lib.evaluation.reference.references`, the reference of the
    calibration endpoints); the test probabilities raw and calibrated of each. Validation labels
    are the clean ones (the memory alone is noisy), so every calibrator sees clean labels."""
    ref, by_nll = references(search, mem.labels, mem.loo, ds.val.y, ds.num_classes, cfg.reference_k)
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
                               "test_calibrated": both["reference_nll"]["test_calibrated"]}}
    nll_probs = (by_nll.test, Calibrator(**both["reference_nll"]["calibrator"]).apply(by_nll.test))
    return entry, (ref.test, Calibrator(**scored["calibrator"]).apply(ref.test)), nll_probs


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


LEARNERS = ("gbm", "label_aware_heldout")  # the learners behind the learnable headroom (clean held-out targets)


def gbm_learner(mem: Memory, k: int, num_classes: int, seed: int, search: Search | None = None) -> dict:
    """The boosted-trees learner at k on ``mem``'s neighbourhoods (:func:`~attnknn_lib.evaluation.learnable.
    learned_rule`, cross-fitted on the clean validation queries; the prior is the memory's class shares).
    Where k exceeds the neighbours ``mem`` holds, ``search`` reads deeper (labels and agreements of
    this memory), so the learner can read as many neighbours as the reference chose."""
    prior = np.bincount(mem.labels, minlength=num_classes) / len(mem.labels)

    def hood(split: str) -> Neighbourhood:
        h = getattr(mem, split)
        if search is None or k <= h.labels.shape[1]:
            return Neighbourhood(h.labels, h.sq_dist, h.loo)
        rows, sq = search(split, k)
        return Neighbourhood(mem.labels[rows], sq, mem.loo[rows])
    return learned_rule(hood("val"), mem.val.target, hood("test"), prior, num_classes, k, seed)


def fold_queries(n_val: int) -> list[int]:
    """How many validation queries each of the learner's two folds fits on (its half, less the
    fifth it tunes on: :data:`~attnknn_lib.evaluation.learnable.SELECT_SHARE`)."""
    return [len(h) - max(1, int(round(SELECT_SHARE * len(h)))) for h in np.array_split(np.arange(n_val), 2)]


def learners(cfg: Config, mem: Memory, k: int, ds, seed: int, search: Search | None = None,
             k_ref: int | None = None) -> dict[str, MethodProbs]:
    """Every learner of :data:`LEARNERS`, as methods whose ``info`` holds its tuning budget (the
    configurations scored, both folds together): the boosted trees read max(k, ``k_ref``)
    neighbours (the reference's chosen k: no cap the reference does not share), the label-aware
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
    reference's chosen k, against the reference; and the learnable headroom: the learner of
    :data:`LEARNERS` with the best (out-of-fold) validation accuracy minus the reference, paired on test."""
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


def long_tail_entry(cfg: Config, paths: Paths, run_, seed: int) -> dict:
    """Headroom, ceilings and variants on the memory of a model retrained on the long-tailed subset
    (its own frozen embedding; clean labels; validation and test as in every setting)."""
    cpu = torch.device("cpu")
    prepared = prepare(run_.data)
    ds = prepared.dataset
    model = core.trained(run_, paths, prepared)[0].model.to(cpu)
    frozen = core.frozen_embeddings(run_, model, prepared, paths, cpu)
    k_max = min(cfg.k_max, len(frozen.train) - 1)
    bank = MemoryBank().build(frozen.train, ds.train.y)
    self_nb = bank.search_excluding(frozen.train, max(k_max, cfg.loo_k + 1), np.arange(len(frozen.train)))
    val_nb, test_nb = bank.search(frozen.val, k_max), bank.search(frozen.test, k_max)
    mem = memory_setting(frozen, ds.train.y, self_nb, val_nb, test_nb, ds.val.y, ds.test.y,
                         _train_rows(len(frozen.train), cfg.train_queries, seed), "clean", ds.num_classes, cfg, seed)
    ks = tuple(k for k in cfg.headroom_ks if k <= k_max)
    search = core.searcher(bank, {"val": frozen.val, "test": frozen.test})
    reference, ref_probs, nll_probs = reference_entry(cfg, mem, search, ds, seed)
    return {"headroom": headroom_table(mem, ks, ds.num_classes), "ceilings": ceilings(mem, ks, ds.num_classes),
            "flipped_share": 0.0, "memory_size": len(frozen.train), "run": run_.id, "reference": reference,
            "attnknn": main_attention(cfg, model.attention, bank, frozen, (val_nb, test_nb), ds, seed, ref_probs,
                                      reference_nll=nll_probs),
            "variants": {str(k): setting_k(cfg, mem, k, ds, seed, with_adaptive=k == max(cfg.variant_ks),
                                           reference=ref_probs, reference_nll=nll_probs, search=search,
                                           k_ref=reference["choice"]["k"])
                         for k in cfg.variant_ks if k <= k_max}}


END_TO_END = {"prototype": "prototype recipe (entropy bonus, weight 0.01)", "no_bonus": "same, no entropy bonus"}


def end_to_end(cfg: Config, paths: Paths, prepared, models: dict, seed: int) -> dict:
    """Per jointly trained Attn-KNN (``models``: name -> (run, TrainResult); the prototype recipe
    and the same recipe without the entropy bonus): its own attention at k on its own embedding
    against the kNN rule tuned on that embedding (paired differences, accuracy raw, ECE and NLL
    after calibration), the effective k of its test weights, its temperatures and its per-epoch
    head entropy; and the no-bonus model minus the prototype on the same test points."""
    ds, cpu = prepared.dataset, torch.device("cpu")
    out: dict = {}
    probs = {}
    for name, (run_, res) in models.items():
        model = res.model.to(cpu)
        emb = core.bank_of(core.frozen_embeddings(run_, model, prepared, paths, cpu), ds.train.y, cfg.k)
        methods = core.vote_methods(emb, prepared, model.attention, cfg.k)
        scored = score(methods, ds, n_boot=cfg.n_boot, seed=seed)
        best = best_baseline(methods, ds.val.y, scored)
        _, w = attnknn_probs(model.attention, emb.bank, emb.test["original"], cfg.k,
                             neighbors=emb.neighbors[("test", "original")])
        cal = {m: Calibrator(**scored[m]["calibrator"]).apply(methods[m].test) for m in ("attnknn", best)}
        probs[name] = (methods["attnknn"].test, cal["attnknn"])
        out[name] = {
            "run": run_.id, "baseline_rule": best, "best_epoch": res.best_epoch, "epochs": len(res.history),
            "test_raw": scored["attnknn"]["test_raw"], "test_calibrated": scored["attnknn"]["test_calibrated"],
            "baseline_accuracy": scored[best]["test_raw"]["accuracy"]["value"],
            "effective_k": float(effective_neighbours(w).mean()),
            "temperatures": [row["temperatures"] for row in res.history],
            "head_entropy": [row.get("diag_head_entropy") for row in res.history],
            "diff": {"raw": _paired(cfg, methods["attnknn"].test, methods[best].test, ds.test.y, seed),
                     "calibrated": _paired(cfg, cal["attnknn"], cal[best], ds.test.y, seed)}}
    if len(probs) == 2:
        out["no_bonus_minus_prototype"] = {
            split: _paired(cfg, probs["no_bonus"][i], probs["prototype"][i], ds.test.y, seed)
            for i, split in enumerate(("raw", "calibrated"))}
    return out


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


def gallery(mem: Memory, kept: dict, setting: str, k: int, ds) -> tuple[dict, dict]:
    """The gallery's cases of one setting (first seed): per query its label, its k neighbours' rows,
    memory labels and flips, and the weights and predictions of the uniform vote, the prototype
    attention and the best variant (best validation accuracy among :data:`GALLERY_VARIANTS`); the
    images go to a separate dict of arrays (the record keeps only numbers)."""
    c = ds.num_classes
    labels, rows = mem.test.labels[:, :k], mem.test.rows[:, :k]
    flipped = mem.flipped[rows]
    queries = gallery_queries(labels, ds.test.y, flipped, c, bool(mem.flipped.any()))
    candidates = [v for v in GALLERY_VARIANTS if v in kept]
    best = max(candidates, key=lambda v: kept[v]["val_accuracy"]) if candidates else None
    shown = {"uniform": None, **({PROTOTYPE: kept[PROTOTYPE]} if PROTOTYPE in kept else {}),
             **({best: kept[best]} if best else {})}
    uniform = vote(np.full(labels.shape, 1.0 / k), labels, c)
    cases, images = {}, {}
    for name, q in queries.items():
        key = f"{setting} | {name}"
        weights = {m: ([round(1.0 / k, 5)] * k if v is None else [round(float(w), 5) for w in v["weights"][q, :k]])
                   for m, v in shown.items()}
        preds = {m: int((uniform if v is None else v["test"])[q].argmax()) for m, v in shown.items()}
        cases[key] = {"setting": setting, "rule": name, "query": q, "label": int(ds.test.y[q]),
                      "neighbour_labels": labels[q].tolist(), "flipped": flipped[q].tolist(),
                      "weights": weights, "predictions": preds, "best_variant": best}
        tag = gallery_key(setting, name)
        images[f"{tag}_query"] = ds.test.x[q]
        images[f"{tag}_neighbours"] = ds.train.x[rows[q]]
    return cases, images


def gallery_path(paths: Paths, dataset: str):
    return paths.artifacts / f"{NAME}_{dataset}_gallery.npz"


def gallery_key(setting: str, rule: str) -> str:
    """The images' key prefix of one case in the gallery's npz."""
    return f"{setting.replace('/', '_')}_{rule.replace(' ', '_')}"


DIAG_KEYS = ("diag_gradient_share", "train_entropy", "diag_head_entropy", "diag_score_spread",
             "diag_entropy_grad_ratio", "val_accuracy")


def diagnostics(history: list[dict], hoods: dict[str, Neighbourhoods], k: int) -> dict:
    """Per epoch of main's Attn-KNN training: the :data:`DIAG_KEYS` and the temperatures; and the
    share of queries whose vote carries a gradient on each split of the trained embedding at k."""
    per_epoch = {key: [row.get(key) for row in history] for key in DIAG_KEYS}
    per_epoch["temperatures"] = [row["temperatures"] for row in history]
    shares = {s: float(vote_has_gradient(h.labels[:, :k], h.target).mean()) for s, h in hoods.items()}
    return {"per_epoch": per_epoch, "gradient_share": shares}


def _train_rows(n: int, size: int, seed: int) -> np.ndarray:
    return np.sort(np.random.default_rng(seed).permutation(n)[:min(size, n)])


SETTINGS_PER_PART = 2  # memory settings per seed part: a seed's four in one job took 10-15 min, the longest 893 s


def setting_chunks(cfg: Config) -> list[tuple[str, ...]]:
    """The memory settings of a seed, :data:`SETTINGS_PER_PART` per part job, in ``cfg.settings`` order."""
    return [cfg.settings[i:i + SETTINGS_PER_PART] for i in range(0, len(cfg.settings), SETTINGS_PER_PART)]


def seed_part_names(seed: int, chunks: int) -> list[str]:
    """The part names of one seed's settings: ``seed0`` (the first chunk, with the seed's diagnostics and
    neighbour lists), then ``seed0b``, ``seed0c``, ... for the next."""
    return [f"seed{seed}" + ("" if j == 0 else "bcdefghijklmnopqrstuvwxyz"[j - 1]) for j in range(chunks)]


def parts(cfg: Config) -> list[str]:
    """Per seed, its memory settings in parts of :data:`SETTINGS_PER_PART` (:func:`seed_part_names`); per
    seed of each, its collapse sweep, its long-tailed memory and its end-to-end control; one per second
    dataset (:mod:`~attnknn_lib.experiments.parts`): the workflow runs them as jobs of their own, so no
    job holds the whole study (a seed with all of it took 18-20 min of job time, its four settings alone
    10-15)."""
    chunks = len(setting_chunks(cfg))
    return [p for seed in cfg.seeds for p in seed_part_names(seed, chunks)] \
        + [f"collapse{seed}" for seed in collapse_seeds(cfg)] \
        + [f"longtail{seed}" for seed in cfg.seeds if _long_tail_run(cfg, seed)] \
        + [f"e2e{seed}" for seed in cfg.seeds if _end_to_end_run(cfg, seed)] \
        + [f"second_{name}" for name in cfg.second_datasets]


def _long_tail_run(cfg: Config, seed: int):
    return next((r for r in long_tail_runs(cfg) if r.seed == seed), None)


def _end_to_end_run(cfg: Config, seed: int):
    return next((r for r in end_to_end_runs(cfg) if r.seed == seed), None)


def collapse_seeds(cfg: Config) -> tuple[int, ...]:
    """The seeds of the collapse sweep: the first ``collapse_seeds``, where the clean memory is studied."""
    return tuple(cfg.seeds[:cfg.collapse_seeds]) if "clean" in cfg.settings else ()


def _gallery_k(cfg: Config) -> int:
    return cfg.k if cfg.k in cfg.variant_ks else max(cfg.variant_ks)


@dataclass
class SeedMemory:
    """What every memory setting of one seed is built from: main's frozen embedding, its bank, the
    neighbour lists (training queries without themselves) and the rule search over them."""

    prepared: Prepared
    trained: object  # the cached training result: model, history, best epoch
    frozen: object
    bank: MemoryBank
    self_nb: Neighbors
    val_nb: Neighbors
    test_nb: Neighbors
    rows: np.ndarray  # the training queries of the heads
    search: Search

    def setting(self, cfg: Config, setting: str, seed: int) -> Memory:
        """The memory of ``setting`` (:func:`memory_setting`) on this seed."""
        ds = self.prepared.dataset
        return memory_setting(self.frozen, ds.train.y, self.self_nb, self.val_nb, self.test_nb, ds.val.y, ds.test.y,
                              self.rows, setting, ds.num_classes, cfg, seed)


def seed_memory(cfg: Config, paths: Paths, seed: int) -> SeedMemory:
    """Main's Attn-KNN of ``seed`` (cached), its frozen embedding, bank and neighbour lists."""
    cpu = torch.device("cpu")
    prepared = prepare(core.data_spec(cfg, cfg.dataset))
    ds = prepared.dataset
    k_max = min(cfg.k_max, len(ds.train) - 1)
    run_ = runs(cfg)[cfg.seeds.index(seed)]
    trained = core.trained(run_, paths, prepared)[0]
    frozen = core.frozen_embeddings(run_, trained.model.to(cpu), prepared, paths, cpu)
    bank = MemoryBank().build(frozen.train, ds.train.y)
    self_nb = bank.search_excluding(frozen.train, max(k_max, cfg.loo_k + 1), np.arange(len(frozen.train)))
    return SeedMemory(prepared, trained, frozen, bank, self_nb, bank.search(frozen.val, k_max),
                      bank.search(frozen.test, k_max), _train_rows(len(frozen.train), cfg.train_queries, seed),
                      core.searcher(bank, {"val": frozen.val, "test": frozen.test}))


def measure_collapse(cfg: Config, paths: Paths, seed: int) -> dict:
    """The collapse sweep (:func:`collapse_sweep`) of one seed on its clean memory, against that
    memory's reference: a part of its own, as it takes about as long as the rest of the seed."""
    sm = seed_memory(cfg, paths, seed)
    mem = sm.setting(cfg, "clean", seed)
    _, ref_probs, _ = reference_entry(cfg, mem, sm.search, sm.prepared.dataset, seed)
    return collapse_sweep(cfg, mem, sm.prepared.dataset, seed, ref_probs)


def measure_end_to_end(cfg: Config, paths: Paths, seed: int) -> dict:
    """The end-to-end control of one seed (:func:`end_to_end`): main's Attn-KNN against the same
    recipe trained without the entropy bonus; a part of its own."""
    prepared = prepare(core.data_spec(cfg, cfg.dataset))
    run_ = runs(cfg)[cfg.seeds.index(seed)]
    control = _end_to_end_run(cfg, seed)
    return end_to_end(cfg, paths, prepared, {"prototype": (run_, core.trained(run_, paths, prepared)[0]),
                                             "no_bonus": (control, core.trained(control, paths, prepared)[0])}, seed)


def measure_seed(cfg: Config, paths: Paths, seed: int, chunk: int = 0) -> dict:
    """One seed's memory settings of chunk ``chunk`` (:func:`setting_chunks`; the collapse sweep,
    long-tailed memory and end-to-end control are parts of their own): each setting's headroom,
    ceilings, references, main's Attn-KNN and variants; the gallery's cases and images on the first
    seed. The first chunk also gives the seed's diagnostics and writes its neighbour lists (with every
    setting's memory labels) under the artifacts."""
    sm = seed_memory(cfg, paths, seed)
    prepared, trained, frozen, bank = sm.prepared, sm.trained, sm.frozen, sm.bank
    val_nb, test_nb, search = sm.val_nb, sm.test_nb, sm.search
    ds = prepared.dataset
    c = ds.num_classes
    k_max = min(cfg.k_max, len(ds.train) - 1)
    k_gallery = _gallery_k(cfg)
    gallery_cases: dict = {}
    gallery_images: dict = {}
    settings = {}
    for setting in setting_chunks(cfg)[chunk]:
        mem = sm.setting(cfg, setting, seed)
        entry = {"headroom": headroom_table(mem, tuple(k for k in cfg.headroom_ks if k <= k_max), c),
                 "ceilings": ceilings(mem, tuple(k for k in cfg.headroom_ks if k <= k_max), c),
                 "flipped_share": float(mem.flipped.mean())}
        entry["reference"], ref_probs, nll_probs = reference_entry(cfg, mem, search, ds, seed)
        # main's Attn-KNN (trained end to end on clean labels), voting over this memory's labels
        entry["attnknn"] = main_attention(cfg, trained.model.attention, bank, frozen, (val_nb, test_nb), ds,
                                          seed, ref_probs, labels=mem.labels, reference_nll=nll_probs)
        if setting in cfg.variant_settings:
            kept: dict = {}
            entry["variants"] = {str(k): setting_k(cfg, mem, k, ds, seed, with_adaptive=k == max(cfg.variant_ks),
                                                   keep=kept if k == k_gallery and seed == cfg.seeds[0] else None,
                                                   reference=ref_probs, reference_nll=nll_probs,
                                                   search=search, k_ref=entry["reference"]["choice"]["k"])
                                 for k in cfg.variant_ks if k <= k_max}
            if kept:
                cases, images = gallery(mem, kept, setting, k_gallery, ds)
                gallery_cases.update(cases)
                gallery_images.update(images)
        settings[setting] = entry
        # one line per setting in the part job's log: where its time and memory go
        write(f"[attention_study] seed {seed}, {setting}: done, peak memory {peak_memory_gb():.1f} GB")
    out = {"per_seed": {"settings": settings}, "gallery_cases": gallery_cases, "gallery_images": gallery_images}
    if chunk == 0:
        arrays = {}
        for setting in cfg.settings:  # every setting's labels: cheap beside its measurement
            mem = sm.setting(cfg, setting, seed)
            key = setting.replace("/", "_")
            arrays[f"memory_labels_{key}"] = mem.labels
            arrays[f"flipped_{key}"] = mem.flipped
        clean = sm.setting(cfg, "clean", seed)
        hoods = {"train": clean.train, "val": clean.val, "test": clean.test}
        out["per_seed"].update({"diagnostics": diagnostics(trained.history, hoods, cfg.k),
                                "best_epoch": trained.best_epoch})
        write_npz(paths.artifacts / f"{NAME}_{cfg.dataset}_s{seed}_neighbours.npz", test_labels=ds.test.y,
                  test_neighbour_rows=test_nb.indices, test_neighbour_sq_dist=test_nb.sq_dist,
                  test_neighbour_labels=ds.train.y[test_nb.indices], memory_ids=ds.train.ids, **arrays)
    return out


def _compute_part(cfg: Config, paths: Paths, part: str):
    if part.startswith("second_"):
        return second_dataset(cfg, paths, part.removeprefix("second_"))
    if part.startswith("collapse"):
        return measure_collapse(cfg, paths, int(part.removeprefix("collapse")))
    if part.startswith("longtail"):
        seed = int(part.removeprefix("longtail"))
        return long_tail_entry(cfg, paths, _long_tail_run(cfg, seed), seed)
    if part.startswith("e2e"):
        return measure_end_to_end(cfg, paths, int(part.removeprefix("e2e")))
    number = part.removeprefix("seed")
    chunk = "bcdefghijklmnopqrstuvwxyz".index(number[-1]) + 1 if number[-1].isalpha() else 0
    return measure_seed(cfg, paths, int(number.rstrip("bcdefghijklmnopqrstuvwxyz")), chunk)


def run_part(cfg: Config, paths: Paths, part: str):
    """Part ``part`` (see :func:`parts`), computed and stored unless stored under this config and code."""
    core.start(cfg)
    return part_result(paths, cfg, NAME, part, lambda: _compute_part(cfg, paths, part))


def run(cfg: Config, paths: Paths) -> dict:
    """Headroom, diagnostics and variants for every seed and the second datasets (each a part,
    :func:`parts`: stored by the workflow's part jobs, or computed here), the summary and the
    gallery; writes ``results/attention_study_<d>.json``."""
    device, prov, clock = core.begin(cfg)
    prepared = prepare(core.data_spec(cfg, cfg.dataset))
    ds = prepared.dataset
    part = {p: part_result(paths, cfg, NAME, p, lambda p=p: _compute_part(cfg, paths, p))
            for p in bar(parts(cfg), desc="parts")}
    chunks = {seed: [part[p] for p in seed_part_names(seed, len(setting_chunks(cfg)))] for seed in cfg.seeds}
    per_seed = {str(seed): chunks[seed][0]["per_seed"] for seed in cfg.seeds}
    for seed in cfg.seeds:
        for more in chunks[seed][1:]:
            per_seed[str(seed)]["settings"].update(more["per_seed"]["settings"])
        # the settings in cfg.settings order, whichever part computed them
        per_seed[str(seed)]["settings"] = {st: per_seed[str(seed)]["settings"][st] for st in cfg.settings}
    for seed in collapse_seeds(cfg):
        per_seed[str(seed)]["settings"]["clean"]["collapse"] = part[f"collapse{seed}"]
    for seed in cfg.seeds:
        if f"longtail{seed}" in part:
            per_seed[str(seed)]["settings"][long_tail_setting(cfg)] = part[f"longtail{seed}"]
        if f"e2e{seed}" in part:
            per_seed[str(seed)]["end_to_end"] = part[f"e2e{seed}"]
    gallery_cases = {k: v for seed in cfg.seeds for p in chunks[seed] for k, v in p["gallery_cases"].items()}
    gallery_images = {k: v for seed in cfg.seeds for p in chunks[seed] for k, v in p["gallery_images"].items()}
    if gallery_images:
        write_npz(gallery_path(paths, cfg.dataset), **gallery_images)
    summary = summarise(cfg, per_seed)
    results = {"dataset": ds.summary(), "seeds": list(cfg.seeds), "per_seed": drop_pairs(per_seed),
               "summary": drop_pairs(summary), "gallery": {"seed": cfg.seeds[0], "k": _gallery_k(cfg),
                                                               "class_names": list(ds.class_names),
                                                               "cases": gallery_cases},
               "second": {name: part[f"second_{name}"] for name in cfg.second_datasets},
               # the record's wall time only reads the parts; what computing them took is kept beside it
               "timings": {"seconds": clock(), "parts_seconds": part_seconds(paths, cfg, NAME, parts(cfg))}}
    return core.write_record(paths, ARTIFACTS, cfg.dataset, cfg, prov, {cfg.dataset: prepared.fingerprint()}, results)[1]


def _mean_sd(values: list[float | None]) -> dict:
    v = np.array([x for x in values if x is not None], dtype=np.float64)
    if not v.size:
        return {"mean": None, "std": None, "values": []}
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else None, "values": v.tolist()}


def summarise(cfg: Config, per_seed: dict) -> dict:
    """Means over seeds of the headroom and ceilings; per setting, k and variant: accuracy, the
    seed-level differences to the tuned baseline with verdicts, effective k, captured headroom,
    flip detection; the variant chosen on validation."""
    all_seeds = list(per_seed)
    names = list(dict.fromkeys(st for s in all_seeds for st in per_seed[s]["settings"]))
    out: dict = {"settings": {}}
    for setting in names:
        seeds = [s for s in all_seeds if setting in per_seed[s]["settings"]]  # the long-tailed memory: fewer
        entry = per_seed[seeds[0]]["settings"][setting]
        s_out = {"seeds": [int(s) for s in seeds], "headroom": {}, "ceilings": {}}
        for k in entry["headroom"]:
            rows = [per_seed[s]["settings"][setting]["headroom"][k] for s in seeds]
            s_out["headroom"][k] = {key: _mean_sd([r[key] for r in rows])["mean"] for key in rows[0]
                                    if key not in ("k", "fixable_within")}
            s_out["headroom"][k]["fixable_within"] = {m: float(np.mean([r["fixable_within"][m] for r in rows]))
                                                      for m in rows[0]["fixable_within"]}
        for fam in entry["ceilings"]:
            rows = [per_seed[s]["settings"][setting]["ceilings"][fam] for s in seeds]
            s_out["ceilings"][fam] = {"test_accuracy": _mean_sd([r["test_accuracy"] for r in rows]),
                                      "choices": [f"{r['rule']} {r['param'] if r['param'] is not None else ''} k={r['k']}"
                                                  .replace("  ", " ") for r in rows]}
        if "reference" in entry:
            refs = [per_seed[s]["settings"][setting]["reference"] for s in seeds]
            if "reference_nll" in refs[0]:
                rn = [r["reference_nll"] for r in refs]
                s_out["reference_nll"] = {"nll_calibrated": _mean_sd([r["test_calibrated"]["nll"]["value"] for r in rn]),
                                          "brier_calibrated": _mean_sd([r["test_calibrated"]["brier"]["value"] for r in rn]),
                                          "choices": [r["label"] for r in rn], "tuned_on": [r["tuned_on"] for r in rn],
                                          "edges": sorted({e for r in rn for e in r["edges"]})}
            s_out["reference"] = {"accuracy": _mean_sd([r["test_raw"]["accuracy"]["value"] for r in refs]),
                                  "ece_calibrated": _mean_sd([r["test_calibrated"]["ece"]["value"] for r in refs]),
                                  "nll_calibrated": _mean_sd([r["test_calibrated"]["nll"]["value"] for r in refs]),
                                  "brier_calibrated": _mean_sd([r["test_calibrated"]["brier"]["value"] for r in refs]),
                                  "k": [int(r["choice"]["k"]) for r in refs],
                                  "choices": [r["label"] for r in refs], "configs": [r["configs"] for r in refs],
                                  "edges": sorted({e for r in refs for e in r["edges"]}),
                                  "k_searched": [r["k_searched"] for r in refs]}
            if "attnknn" in entry:
                ms = [per_seed[s]["settings"][setting]["attnknn"] for s in seeds]
                s_out["attnknn"] = {"accuracy": _mean_sd([m["test_raw"]["accuracy"]["value"] for m in ms]),
                                    "effective_k": _mean_sd([m["effective_k"] for m in ms]),
                                    "verdicts_reference": seed_verdicts(cfg, [m["diff_reference"] for m in ms])}
                if "diff_reference_nll" in ms[0]:
                    s_out["attnknn"]["verdicts_reference_nll"] = seed_verdicts(
                        cfg, [m["diff_reference_nll"] for m in ms], PROPER)
            with_sweep = [s for s in seeds if "collapse" in per_seed[s]["settings"][setting]]
            if with_sweep:
                sweeps = [per_seed[s]["settings"][setting]["collapse"] for s in with_sweep]
                s_out["collapse"] = {"seeds": [int(s) for s in with_sweep], "settings": {
                    name: {"what": COLLAPSE[name][0],
                           "effective_k": _mean_sd([w[name]["effective_k"] for w in sweeps]),
                           "accuracy": _mean_sd([w[name]["accuracy"] for w in sweeps]),
                           "verdicts_reference": seed_verdicts(cfg, [w[name]["diff_reference"] for w in sweeps])}
                    for name in sweeps[0]}}
            if "filter" in refs[0]:
                fs = [r["filter"] for r in refs]
                s_out["reference"]["filter"] = {
                    "accuracy": _mean_sd([f["test_accuracy"] for f in fs]), "choices": [f["label"] for f in fs],
                    "edges": sorted({e for f in fs for e in f["edges"]}),
                    "verdict_reference": seed_level([f["diff_reference"]["accuracy"]["value"] for f in fs],
                                                    pooled_test_se([f["diff_reference"] for f in fs])["accuracy"],
                                                    "accuracy", margin=cfg.margin_accuracy)}
        if "variants" in entry:
            s_out["variants"] = {}
            for k in entry["variants"]:
                k_out = {"methods": {}}
                runs_k = [per_seed[s]["settings"][setting]["variants"][k] for s in seeds]
                k_out["uniform_accuracy"] = _mean_sd([r["uniform_accuracy"] for r in runs_k])["mean"]
                k_out["recall"] = _mean_sd([r["recall"] for r in runs_k])["mean"]
                k_out["baseline_rules"] = [r["baseline_rule"] for r in runs_k]
                for name in runs_k[0]["methods"]:
                    ms = [r["methods"][name] for r in runs_k]
                    m_out = {"val_accuracy": _mean_sd([m["val_accuracy"] for m in ms]),
                             "accuracy": _mean_sd([m["test_raw"]["accuracy"]["value"] for m in ms]),
                             "ece_calibrated": _mean_sd([m["test_calibrated"]["ece"]["value"] for m in ms]),
                             "nll_calibrated": _mean_sd([m["test_calibrated"]["nll"]["value"] for m in ms])}
                    if "diff_reference" in ms[0]:
                        m_out["verdicts_reference"] = seed_verdicts(cfg, [m["diff_reference"] for m in ms])
                    if "diff_reference_nll" in ms[0]:
                        m_out["verdicts_reference_nll"] = seed_verdicts(cfg, [m["diff_reference_nll"] for m in ms],
                                                                        PROPER)
                    if name != "baseline":
                        m_out["effective_k"] = _mean_sd([m["effective_k"] for m in ms])
                        m_out["captured"] = _mean_sd([m["captured"] for m in ms])
                        m_out["best_epochs"] = [e for m in ms for e in m["best_epoch"]]
                        m_out["epochs"] = cfg.learner_epochs if "search" in ms[0] else cfg.head_epochs
                        m_out["no_plateau"] = sum(not reached_plateau(len(h), b, cfg.head_patience)
                                                  for m in ms for h, b in zip(m["history"], m["best_epoch"]))
                        m_out["fits"] = sum(len(m["history"]) for m in ms)
                        if "search" in ms[0]:
                            m_out["search"] = search_summary([f for m in ms for f in m["search"]])
                        if "flips" in ms[0]:
                            m_out["flip_ratio"] = _mean_sd([m["flips"]["ratio"] for m in ms])
                            m_out["flip_auroc"] = _mean_sd([m["flips"]["auroc"] for m in ms])
                        m_out["verdicts"] = seed_verdicts(cfg, [m["diff"] for m in ms])
                        if "fixed_k" in ms[0]:
                            fk = [m["fixed_k"] for m in ms]
                            m_out["fixed_k"] = {"k": [f["k"] for f in fk],
                                                "accuracy": _mean_sd([f["accuracy"] for f in fk]),
                                                "verdicts": seed_verdicts(cfg, [f["diff"] for f in fk])}
                    k_out["methods"][name] = m_out
                variants = [n for n in k_out["methods"] if n != "baseline"]
                if "learner" in runs_k[0]:
                    k_out.update(summarise_learnable(cfg, runs_k, k_out["methods"]))
                k_out["chosen"] = max(variants, key=lambda n: k_out["methods"][n]["val_accuracy"]["mean"]) \
                    if variants else None
                s_out["variants"][k] = k_out
        out["settings"][setting] = s_out
    e2e = {s: per_seed[s]["end_to_end"] for s in all_seeds if "end_to_end" in per_seed[s]}
    if e2e:
        out["end_to_end"] = summarise_end_to_end(cfg, e2e)
    return out


def summarise_learnable(cfg: Config, runs_k: list[dict], methods: dict) -> dict:
    """Over seeds at one k: the boosted-trees learner against the reference, the learnable headroom
    (best learner minus the reference, seed-level), and per variant the share of it captured:
    mean(variant - reference) / mean(best learner - reference), None when the headroom does not
    establish a gain (seed-level verdict not "better": no room a learner could show)."""
    ls = [r["learner"] for r in runs_k]
    room = seed_verdicts(cfg, [r["learnable"]["diff_reference"] for r in runs_k])
    out = {"learner": {"accuracy": _mean_sd([x["test_raw"]["accuracy"]["value"] for x in ls]),
                       "val_accuracy": _mean_sd([x["val_accuracy"] for x in ls]),
                       "configs": [x["configs"] for x in ls],
                       "rounds": [f["rounds"] for x in ls for f in x["folds"]],
                       "edges": sum(f["edge"] for x in ls for f in x["folds"]),
                       "verdicts_reference": seed_verdicts(cfg, [x["diff_reference"] for x in ls]),
                       "k": [x["k"] for x in ls], "fold_queries": ls[0]["fold_queries"]},
           "learnable": {"learners": [r["learnable"]["learner"] for r in runs_k], "verdicts": room}}
    head = room["accuracy"]["value"]
    for name, m in methods.items():
        if name != "baseline" and "verdicts_reference" in m and name != "query_only":
            m["captured_learnable"] = (m["verdicts_reference"]["accuracy"]["value"] / head
                                       if room["accuracy"]["verdict"] == "better" else None)
    return out


def search_summary(folds: list[dict]) -> dict:
    """A searched learner's budget over its fits (one per seed and fold): configurations scored,
    chosen learning rates, and how many fits chose a rate at an end of the grid or stopped short
    of a plateau."""
    return {"configs": [f["configs"] for f in folds], "lrs": [f["lr"] for f in folds],
            "edges": sum(f["edge"] for f in folds), "no_plateau": sum(not f["plateau"] for f in folds),
            "fits": len(folds)}


RESOLVED_AT = (3, 5)  # seed counts at which each endpoint's smallest resolvable difference is reported


def seed_verdicts(cfg: Config, diffs: list[dict], compared: tuple = COMPARED) -> dict:
    """Seed-level verdicts (``compared``: accuracy raw, ECE, NLL and Brier calibrated) from one paired
    difference per seed (``{"raw": ..., "calibrated": ...}``, each from :func:`_paired`): the per-seed
    values and, as the test points' share of the interval, the pooled paired bootstrap's s.e.
    (:func:`pooled_test_se`); with the smallest difference the interval resolves at 3 and 5 seeds
    (:func:`~attnknn_lib.evaluation.verdicts.resolvable`, from the measured spreads)."""
    se = {split: pooled_test_se([d[split] for d in diffs]) for split in dict.fromkeys(s for _, s in compared)}
    out = {}
    for metric, split in compared:
        v = seed_level([d[split][metric]["value"] for d in diffs], se[split][metric], metric, margin=cfg.margin(metric))
        if v["n_seeds"] > 1:
            v["resolvable"] = {str(n): resolvable(v["seed_sd"], v["test_se"], n) for n in RESOLVED_AT}
        out[metric] = v
    return out


def summarise_end_to_end(cfg: Config, per_seed: dict) -> dict:
    """Over the seeds with an end-to-end control: each model's test accuracy, calibrated ECE and
    NLL, effective k, selected epochs, last temperatures and head entropy per epoch, its verdicts
    against its own tuned kNN rule; the no-bonus model minus the prototype, with verdicts."""
    out: dict = {"seeds": [int(s) for s in per_seed], "models": {}}
    for name in END_TO_END:
        es = [e[name] for e in per_seed.values()]
        out["models"][name] = {
            "accuracy": _mean_sd([e["test_raw"]["accuracy"]["value"] for e in es]),
            "ece_calibrated": _mean_sd([e["test_calibrated"]["ece"]["value"] for e in es]),
            "nll_calibrated": _mean_sd([e["test_calibrated"]["nll"]["value"] for e in es]),
            "baseline_accuracy": _mean_sd([e["baseline_accuracy"] for e in es]),
            "baseline_rules": [e["baseline_rule"] for e in es],
            "effective_k": _mean_sd([e["effective_k"] for e in es]),
            "best_epochs": [e["best_epoch"] for e in es], "epochs": es[0]["epochs"],
            "temperatures_last": np.mean([e["temperatures"][-1] for e in es], 0).tolist(),
            "head_entropy": [float(np.mean([e["head_entropy"][i] for e in es])) if es[0]["head_entropy"][i] is not None
                             else None for i in range(len(es[0]["head_entropy"]))],
            "verdicts": seed_verdicts(cfg, [e["diff"] for e in es])}
    out["no_bonus_minus_prototype"] = {
        "accuracy": _mean_sd([e["no_bonus_minus_prototype"]["raw"]["accuracy"]["value"] for e in per_seed.values()]),
        "verdicts": seed_verdicts(cfg, [e["no_bonus_minus_prototype"] for e in per_seed.values()])}
    return out

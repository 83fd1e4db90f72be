"""positive_control: the analysis that writes its record.

It needs no model of the workflow: the memory, validation and test embeddings are generated
(:mod:`attnknn_lib.data.synthetic`), and the heads train here on them in seconds. At each nuisance
scale (the knob) and seed, in this order:

1. **headroom** before any head is trained: the headroom table at Attn-KNN's k and at the
   reference's chosen k (recall, uniform vote, fixable share), the geometry-only ceiling at k (the
   best distance / cosine / uniform vote with k <= Attn-KNN's k, tuned on validation), and the
   generator's own geometry: the k retrieved neighbours reweighted by their distance in the
   informative block (``oracle inside k``), the same at the tuned vote's k, and the vote over the
   nearest rows in the informative block alone (``oracle retrieval``);
2. **the tuned vote** (:func:`~attnknn_lib.evaluation.reference.reference_method`),
   tuned on validation accuracy, and the same search tuned on validation NLL (the reference of
   the calibration endpoints);
3. **learnable headroom**: the boosted-trees learner of the attention study
   (:func:`~attnknn_lib.evaluation.learnable.learned_rule`, cross-fitted on validation) reading as
   many neighbours as the tuned vote's chosen k (at least Attn-KNN's k);
4. **the heads** (:data:`~.config.HEADS`; Attn-KNN is the paper's attention with the prototype's
   loss) trained on memory queries (each query's own row excluded), their epoch chosen on
   validation, scored once on test: accuracy as voted, NLL and Brier after a calibrator fitted on
   validation, and their effective k = exp(entropy of the weights), mean over test queries.

Besides: the learned metrics (NCA, the linear probe) and the query-only control of the comparison;
per scale the **share of the room** each method captures, (method - rule) / (oracle - rule) in test
accuracy against the re-retrieval oracle and against the oracle weights inside k (:func:`shares`);
and a **diagnostic of the label-aware head** (:func:`label_aware_diagnostic`): it reads distances,
ranks and label shares but no coordinates, so it can only reweight by the distance the retrieval
measured. Trained again with the informative-block distances of the same neighbours in place of
those, it shows whether the missing input or the learner is what fails; the rank correlation of its
weights with the informative distances says how far its weighting follows the oracle's.

Every seed draws its own centres, points and test set, so the seeds' differences are independent
and carry the test set's sampling error: the seed-level interval takes no extra test term
(:func:`~attnknn_lib.evaluation.verdicts.seed_level` with ``test_se`` 0).
"""

from __future__ import annotations

import numpy as np
import torch

from attnknn_lib.base.paths import Paths
from attnknn_lib.base.progress import bar
from attnknn_lib.base.provenance import config_fingerprint
from attnknn_lib.base.runtime import seed_everything
from attnknn_lib.data.synthetic import GeneratedTask, generate
from attnknn_lib.evaluation.methods import TAU_GRID
from attnknn_lib.evaluation.metrics import accuracy, nll
from attnknn_lib.evaluation.reference import Search
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.experiments.common.fixed_embedding import REFERENCES, build_head, compare, summarise
from attnknn_lib.experiments.framework.declaration import Measurement
from attnknn_lib.experiments.framework.parts import part_result, part_seconds
from attnknn_lib.experiments.positive_control.config import ARTIFACTS, DATASET, ENDPOINTS, NAME, Config
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.headroom import loo_agreement, loo_agreement_without
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.knn.votes import knn_probs
from attnknn_lib.training.head_fitting import predict, train_head

ORACLES = {"retrieval": "oracle_retrieval", "inside_k": "oracle_inside_k"}  # share of the room: denominators
DIAGNOSED = "label_aware"  # the head the diagnostic trains again on informative distances


def runs(cfg: Config) -> list:
    """No training run of the workflow: the heads train inside the notebook job on generated data."""
    return []


def informative_sq_dist(task: GeneratedTask, queries: np.ndarray, rows: np.ndarray, chunk: int = 512) -> np.ndarray:
    """||q_inf - n_inf||^2 of each query's retrieved rows (N, K) in the informative block alone."""
    mem = task.memory.informative
    out = np.empty(rows.shape, dtype=np.float64)
    for s in range(0, len(rows), chunk):
        diff = mem[rows[s:s + chunk]] - queries[s:s + chunk, None, :]  # (B, K, d_i)
        out[s:s + chunk] = (diff.astype(np.float64) ** 2).sum(-1)
    return out


def oracle_reweighting(task: GeneratedTask, search, k: int) -> tuple[dict, np.ndarray, np.ndarray]:
    """The k rows the retrieval returns, reweighted by exp(-r_inf / tau) (r_inf: distance in the
    informative block, which the generator knows and a head must learn), tau tuned on validation
    (accuracy, then NLL): the room that lies inside these k neighbours."""
    c = task.task.num_classes
    d, y = {}, {}
    for split, q, target in (("val", task.val.informative, task.val.y), ("test", task.test.informative, task.test.y)):
        rows, _ = search(split, k)
        d[split], y[split] = (informative_sq_dist(task, q, rows), task.memory.y[rows]), target
    def key(tau: float) -> tuple[float, float]:
        p = knn_probs("distance", d["val"][0], d["val"][1], c, tau, k)
        return accuracy(p, y["val"]), -nll(p, y["val"])

    best = max(TAU_GRID, key=key)
    pv = knn_probs("distance", d["val"][0], d["val"][1], c, best, k)
    pt = knn_probs("distance", d["test"][0], d["test"][1], c, best, k)
    return {"k": k, "tau": best}, pv, pt


def oracle_retrieval(task: GeneratedTask, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The uniform vote over each query's k nearest rows in the informative block alone."""
    bank = MemoryBank().build(task.memory.informative, task.memory.y)
    c = task.task.num_classes
    return tuple(knn_probs("uniform", nb.sq_dist, nb.labels, c, None, k)
                 for nb in (bank.search(task.val.informative, k), bank.search(task.test.informative, k)))


def rank_correlation(weights: np.ndarray, score: np.ndarray) -> float:
    """Mean over queries of the Spearman correlation between a head's weights (N, K) and ``score``
    (N, K) over the query's K neighbours (rows where either is constant left out; NaN if all are)."""
    def ranks(a: np.ndarray) -> np.ndarray:
        r = a.argsort(1).argsort(1).astype(np.float64)
        return r - r.mean(1, keepdims=True)
    rw, rs = ranks(weights), ranks(score)
    den = np.sqrt((rw ** 2).sum(1) * (rs ** 2).sum(1))
    ok = (den > 0) & (np.ptp(weights, 1) > 0) & (np.ptp(score, 1) > 0)
    return float(((rw * rs).sum(1)[ok] / den[ok]).mean()) if ok.any() else float("nan")


def label_aware_diagnostic(cfg: Config, task: GeneratedTask, seed: int) -> dict:
    """Why the label-aware head fails here: the head trained as in the comparison (the same
    neighbours, seed and budget, so the same head) and again with each neighbour's distance replaced
    by its distance in the informative block (an input the generator knows, of the same neighbours).
    Per variant: validation and test accuracy, and the rank correlation of its test weights with
    the informative distance (-r_inf: 1 is the oracle's order) and with the retrieved distance;
    beside them the rank correlation of the retrieved with the informative distance (what a head
    that follows the retrieved distance gets for free) and the uniform vote's test accuracy."""
    k, m = cfg.k, task.memory
    bank = MemoryBank().build(m.x, m.y)
    own = bank.search_excluding(m.x, max(k, cfg.loo_k + 1), np.arange(len(m.y)))
    loo = loo_agreement(m.y[own.rows[:, :cfg.loo_k]], m.y)
    n_train = min(cfg.train_queries or len(m.y), len(m.y))  # the comparison's training queries
    train_rows = np.sort(np.random.default_rng([seed, 2]).choice(len(m.y), n_train, replace=False))
    t_rows = own.rows[train_rows, :k]
    splits = {"train": (m.x[train_rows], m.informative[train_rows], m.y[train_rows], t_rows, own.sq_dist[train_rows, :k],
                        loo_agreement_without(train_rows, t_rows, own.rows, m.y, cfg.loo_k))}
    for name, q in (("val", task.val), ("test", task.test)):
        nb = bank.search(q.x, k)
        splits[name] = (q.x, q.informative, q.y, nb.rows, nb.sq_dist, loo[nb.rows])
    inf = {s: informative_sq_dist(task, v[1], v[3]) for s, v in splits.items()}
    mem = torch.from_numpy(np.ascontiguousarray(m.x, dtype=np.float32))
    out = {"retrieved_vs_informative": rank_correlation(-splits["test"][4], -inf["test"]),
           "uniform_accuracy": accuracy(knn_probs("uniform", splits["test"][4], m.y[splits["test"][3]], cfg.num_classes),
                                        splits["test"][2])}
    for variant in ("as_retrieved", "informative"):
        hoods = {s: Neighbourhood(query=v[0], rows=v[3], labels=m.y[v[3]], target=v[2], loo=v[5].astype(np.float32),
                                  sq_dist=(v[4] if variant == "as_retrieved" else inf[s]).astype(np.float32))
                 for s, v in splits.items()}
        seed_everything(seed)
        head = build_head(DIAGNOSED, cfg.num_heads, cfg.num_classes, m.x.shape[1])
        res = train_head(head, hoods["train"], hoods["val"], mem, cfg.num_classes, epochs=cfg.head_epochs,
                         lr=cfg.head_lr, batch_size=cfg.head_batch_size, seed=seed, name=DIAGNOSED,
                         patience=cfg.head_patience)
        pv, _ = predict(res.model, hoods["val"], mem, cfg.num_classes)
        pt, wt = predict(res.model, hoods["test"], mem, cfg.num_classes)
        out[variant] = {"val_accuracy": accuracy(pv, task.val.y), "accuracy": accuracy(pt, task.test.y),
                        "best_epoch": res.best_epoch, "epochs_run": len(res.history),
                        "weights_vs_informative": rank_correlation(wt, -inf["test"]),
                        "weights_vs_retrieved": rank_correlation(wt, -splits["test"][4])}
    return out


def shares(per_seed: dict[str, dict], min_room: float) -> dict:
    """Per oracle of :data:`ORACLES` and method (every one but the references): the share of the room
    it captures, (acc_method - acc_rule) / (acc_oracle - acc_rule) in test accuracy (acc_rule: the
    tuned vote's), per seed (None where that seed's room is below ``min_room``, the
    accuracy margin: a smaller room is no room, and a share of it is noise), their mean (None unless
    every seed has room) and the ratio of the mean gain to the mean room (``of_means``, None where
    the mean room is below ``min_room``)."""
    seeds = list(per_seed)
    acc = {s: {n: m["raw"]["accuracy"] for n, m in per_seed[s]["methods"].items()} for s in seeds}
    out = {}
    for key, oracle in ORACLES.items():
        room = [acc[s][oracle] - acc[s]["reference"] for s in seeds]
        out[key] = {"room": room, "min_room": min_room, "methods": {}}
        for name in acc[seeds[0]]:
            if name in REFERENCES:
                continue
            gain = [acc[s][name] - acc[s]["reference"] for s in seeds]
            each = [g / r if r >= min_room else None for g, r in zip(gain, room)]
            out[key]["methods"][name] = {
                "per_seed": each, "mean": None if None in each else float(np.mean(each)),
                "of_means": float(np.mean(gain) / np.mean(room)) if np.mean(room) >= min_room else None}
    return out


def level_seed(cfg: Config, scale: float, seed: int) -> dict:
    """Everything measured at one nuisance scale and seed: the comparison on the generated embedding
    (:func:`~attnknn_lib.experiments.common.fixed_embedding.compare`) with the generator's oracle weights
    added as methods (see the module docstring)."""
    task = generate(cfg.task(scale), seed)

    def oracles(search: Search, k_ref: int) -> dict:
        out = {}
        for name, kk in (("oracle_inside_k", cfg.k), ("oracle_reference_k", k_ref)):
            info, pv, pt = oracle_reweighting(task, search, kk)
            out[name] = (pv, pt, info)
        out["oracle_retrieval"] = (*oracle_retrieval(task, cfg.k), {"k": cfg.k})
        return out

    out = compare(cfg, task.memory, task.val, task.test, cfg.num_classes, seed, extras=oracles)
    if DIAGNOSED in cfg.heads:
        out["label_aware_diagnostic"] = label_aware_diagnostic(cfg, task, seed)
    return out


def summarise_level(cfg: Config, per_seed: dict[str, dict]) -> dict:
    """One scale over its seeds (:func:`~attnknn_lib.experiments.common.fixed_embedding.summarise`),
    the shares of the room (:func:`shares`) and the label-aware diagnostic's means over seeds."""
    out = {**summarise(cfg, per_seed), "shares": shares(per_seed, cfg.margin_accuracy)}
    diag = [p["label_aware_diagnostic"] for p in per_seed.values() if "label_aware_diagnostic" in p]
    if diag:
        out["label_aware_diagnostic"] = {
            **{f: float(np.mean([d[f] for d in diag])) for f in ("retrieved_vs_informative", "uniform_accuracy")},
            **{v: {f: float(np.mean([d[v][f] for d in diag])) for f in ("accuracy", "weights_vs_informative",
                                                                          "weights_vs_retrieved")}
               for v in ("as_retrieved", "informative")}}
    return out


def parts(cfg: Config) -> list[str]:
    """One part per (scale, seed) (:mod:`~attnknn_lib.experiments.framework.parts`): the workflow runs
    them as jobs side by side, and a run stopped half-way resumes from the cells it stored."""
    return [f"scale{scale:g}_seed{seed}" for scale in cfg.nuisance_scales for seed in cfg.seeds]


def _cell(part: str) -> tuple[float, int]:
    scale, seed = part.removeprefix("scale").split("_seed")
    return float(scale), int(seed)


def run_part(cfg: Config, paths: Paths, part: str) -> dict:
    """Part ``scaleS_seedN`` (see :func:`parts`), computed and stored unless stored under this config and code."""
    core.start(cfg)
    scale, seed = _cell(part)
    return part_result(paths, cfg, NAME, part, lambda: level_seed(cfg, scale, seed))


def run(cfg: Config, paths: Paths) -> dict:
    """Every level x seed (:func:`level_seed`, stored by the workflow's part jobs or computed here),
    the level summaries, and the record."""
    _, prov, _ = core.begin(cfg)
    levels = {}
    per: dict[float, dict] = {}
    for part in bar(parts(cfg), desc="positive control (level, seed)"):
        scale, seed = _cell(part)
        per.setdefault(scale, {})[str(seed)] = part_result(paths, cfg, NAME, part, lambda: level_seed(cfg, scale, seed))
    for scale, per_seed in per.items():
        levels[f"{scale:g}"] = {"nuisance_scale": scale, "per_seed": per_seed, "summary": summarise_level(cfg, per_seed)}
    results = {"k": cfg.k, "seeds": list(cfg.seeds), "heads": list(cfg.heads),
               "endpoints": [list(e) for e in ENDPOINTS], "moved_threshold": cfg.moved_share * cfg.k,
               "levels": levels, "task": {f: getattr(cfg.task(0.0), f) for f in (
                   "num_classes", "clusters_per_class", "informative_dims", "nuisance_dims", "cluster_sd",
                   "n_memory", "n_val", "n_test")},
               "timings": {"parts_seconds": part_seconds(paths, cfg, NAME, parts(cfg))}}
    fingerprint = config_fingerprint({"generator": results["task"], "scales": list(cfg.nuisance_scales),
                                      "seeds": list(cfg.seeds)})
    return core.write_record(paths, ARTIFACTS, DATASET, cfg, prov, {DATASET: fingerprint}, results)[1]


MEASUREMENT = Measurement(runs=runs, run=run, parts=parts, run_part=run_part)

"""positive_control: the analysis that writes its record.

It needs no model of the workflow: the memory, validation and test embeddings are generated
(:mod:`attnknn_lib.data.synthetic`), and the heads train here on them in seconds. At each nuisance
scale (the knob) and seed, in this order:

1. **headroom** before any head is trained: the headroom table at Attn-KNN's k and at the
   reference's chosen k (recall, uniform vote, fixable share), the geometry-only ceiling at k (the
   best distance / cosine / uniform vote with k <= Attn-KNN's k, tuned on validation), and the
   generator's own geometry: the k retrieved neighbours reweighted by their distance in the
   informative block (``oracle inside k``), the same at the reference's k, and the vote over the
   nearest rows in the informative block alone (``oracle retrieval``);
2. **the strongest rule that learns nothing** (:func:`~attnknn_lib.evaluation.reference.reference_method`),
   tuned on validation accuracy, and the same search tuned on validation NLL (the reference of
   the calibration endpoints);
3. **learnable headroom**: the boosted-trees learner of the attention study
   (:func:`~attnknn_lib.evaluation.learnable.learned_rule`, cross-fitted on validation) reading as
   many neighbours as the reference's chosen k (at least Attn-KNN's k);
4. **the heads** (:data:`~.config.HEADS`; Attn-KNN is the paper's attention with the prototype's
   loss) trained on memory queries (each query's own row excluded), their epoch chosen on
   validation, scored once on test: accuracy as voted, NLL and Brier after a calibrator fitted on
   validation, and their effective k = exp(entropy of the weights), mean over test queries.

Every seed draws its own centres, points and test set, so the seeds' differences are independent
and carry the test set's sampling error: the seed-level interval takes no extra test term
(:func:`~attnknn_lib.evaluation.verdicts.seed_level` with ``test_se`` 0).
"""

from __future__ import annotations

import numpy as np

from attnknn_lib.base.paths import Paths
from attnknn_lib.base.progress import bar
from attnknn_lib.base.provenance import config_fingerprint
from attnknn_lib.data.synthetic import GeneratedTask, generate
from attnknn_lib.evaluation.methods import TAU_GRID
from attnknn_lib.evaluation.metrics import accuracy, nll
from attnknn_lib.evaluation.reference import Search
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.experiments.common.fixed_embedding import HEADS, compare, summarise
from attnknn_lib.experiments.positive_control.config import ARTIFACTS, DATASET, ENDPOINTS, Config
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.votes import knn_probs


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

    return compare(cfg, task.memory, task.val, task.test, cfg.num_classes, seed, extras=oracles)


def summarise_level(cfg: Config, per_seed: dict[str, dict]) -> dict:
    """One scale over its seeds (:func:`~attnknn_lib.experiments.common.fixed_embedding.summarise`)."""
    return summarise(cfg, per_seed)


def run(cfg: Config, paths: Paths) -> dict:
    """Every level x seed (:func:`level_seed`), the level summaries, and the record."""
    _, prov, _ = core.begin(cfg)
    levels = {}
    cells = [(s, seed) for s in cfg.nuisance_scales for seed in cfg.seeds]
    per = {}
    for scale, seed in bar(cells, desc="positive control (level, seed)"):
        per.setdefault(scale, {})[str(seed)] = level_seed(cfg, scale, seed)
    for scale, per_seed in per.items():
        levels[f"{scale:g}"] = {"nuisance_scale": scale, "per_seed": per_seed, "summary": summarise_level(cfg, per_seed)}
    results = {"k": cfg.k, "seeds": list(cfg.seeds), "heads": {h: HEADS[h][0] for h in cfg.heads},
               "endpoints": [list(e) for e in ENDPOINTS], "moved_threshold": cfg.moved_share * cfg.k,
               "levels": levels, "task": {f: getattr(cfg.task(0.0), f) for f in (
                   "num_classes", "clusters_per_class", "informative_dims", "nuisance_dims", "cluster_sd",
                   "n_memory", "n_val", "n_test")}}
    fingerprint = config_fingerprint({"generator": results["task"], "scales": list(cfg.nuisance_scales),
                                      "seeds": list(cfg.seeds)})
    return core.write_record(paths, ARTIFACTS, DATASET, cfg, prov, {DATASET: fingerprint}, results)[1]


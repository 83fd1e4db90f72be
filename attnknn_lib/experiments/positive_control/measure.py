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
import torch

from attnknn_lib.base.paths import Paths
from attnknn_lib.base.progress import bar
from attnknn_lib.base.provenance import config_fingerprint
from attnknn_lib.base.runtime import seed_everything
from attnknn_lib.data.synthetic import GeneratedTask, generate
from attnknn_lib.evaluation.calibration import fit_calibrator
from attnknn_lib.evaluation.learnable import learned_rule
from attnknn_lib.evaluation.methods import TAU_GRID
from attnknn_lib.evaluation.metrics import METRICS, accuracy, nll
from attnknn_lib.evaluation.reference import (
    Choice,
    Neighbourhood,
    reference_probs,
    references,
    tune_reference,
)
from attnknn_lib.evaluation.verdicts import resolvable, seed_level
from attnknn_lib.experiments import shared as core
from attnknn_lib.experiments.positive_control.config import ARTIFACTS, DATASET, ENDPOINTS, HEADS, Config
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.headroom import headroom, loo_agreement, loo_agreement_without
from attnknn_lib.knn.votes import effective_neighbours, knn_probs
from attnknn_lib.models import AttentionConfig, MultiHeadNeighborAttention
from attnknn_lib.models.neighbour_heads import BlindAttention, LabelAwareAttention, NeighbourReadout
from attnknn_lib.training.head_fitting import Neighbourhoods, predict, train_head

REFERENCES = ("reference", "reference_nll")  # tuned on validation accuracy / on validation NLL (calibrated)
CALIBRATION_ENDPOINTS = ("nll", "brier")  # judged against both references


def runs(cfg: Config) -> list:
    """No training run of the workflow: the heads train inside the notebook job on generated data."""
    return []


def scores(val: np.ndarray, test: np.ndarray, val_y: np.ndarray, test_y: np.ndarray) -> dict:
    """One method's numbers: validation accuracy and NLL, and every test metric raw and after the
    calibrator fitted on validation (clean labels: the generated labels carry no noise)."""
    cal = fit_calibrator(val, val_y)
    return {"val_accuracy": accuracy(val, val_y), "val_nll": nll(val, val_y), "calibrator": cal.to_dict(),
            "raw": {m: fn(test, test_y) for m, fn in METRICS.items()},
            "calibrated": {m: fn(cal.apply(test), test_y) for m, fn in METRICS.items()}}


def differences(a: dict, b: dict) -> dict:
    """A minus B on the endpoints: accuracy as voted, NLL and Brier (and ECE, described) calibrated."""
    return {"accuracy": a["raw"]["accuracy"] - b["raw"]["accuracy"],
            **{m: a["calibrated"][m] - b["calibrated"][m] for m in ("nll", "brier", "ece")}}


def _hoods(task: GeneratedTask, rows: np.ndarray, sq: np.ndarray, loo: np.ndarray, query: np.ndarray,
           target: np.ndarray, agreement: np.ndarray | None = None) -> Neighbourhoods:
    labels = task.memory.y
    agree = loo[rows] if agreement is None else agreement
    return Neighbourhoods(query, rows, sq.astype(np.float32), labels[rows], agree.astype(np.float32), target)


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


def geometry_ceiling(val: Neighbourhood, test: Neighbourhood, val_y: np.ndarray, num_classes: int,
                     prior: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray]:
    """The best vote that reweights only by geometry (uniform, distance, cosine; no filter, no prior)
    over at most the k neighbours a head reads, tuned on validation."""
    tuned = tune_reference(val, val_y, prior, num_classes, thetas=(None,), betas=(0.0,))
    choice: Choice = tuned["choice"]
    return ({"label": choice.label(), "configs": tuned["configs"]},
            reference_probs(choice, val, prior, num_classes), reference_probs(choice, test, prior, num_classes))


def build_head(name: str, cfg: Config, num_classes: int, dims: int) -> torch.nn.Module:
    if name in ("attnknn", "blind_none"):
        return BlindAttention(MultiHeadNeighborAttention(AttentionConfig(num_classes, dims, cfg.num_heads)))
    if name == "label_aware":
        return LabelAwareAttention(num_classes, dims)
    return NeighbourReadout(num_classes, dims)


def train_heads(cfg: Config, task: GeneratedTask, hoods: dict[str, Neighbourhoods], seed: int) -> dict:
    """Every head of ``cfg.heads``: validation and test probabilities, test weights and what training did."""
    c, memory = task.task.num_classes, torch.from_numpy(task.memory.x)
    out = {}
    for name in cfg.heads:
        seed_everything(seed)
        head = build_head(name, cfg, c, task.task.dims)
        entropy = cfg.entropy_weight if name == "attnknn" else 0.0
        res = train_head(head, hoods["train"], hoods["val"], memory, c, epochs=cfg.head_epochs, lr=cfg.head_lr,
                         batch_size=cfg.head_batch_size, entropy_weight=entropy, seed=seed, name=name,
                         patience=cfg.head_patience)
        pv, _ = predict(res.model, hoods["val"], memory, c)
        pt, wt = predict(res.model, hoods["test"], memory, c)
        info = {"best_epoch": res.best_epoch, "epochs_run": len(res.history),
                "plateau": len(res.history) - res.best_epoch >= cfg.head_patience,
                "effective_k": float(effective_neighbours(wt).mean())}
        if isinstance(head, BlindAttention):
            info["temperatures"] = [float(t) for t in head.attention.temperatures().detach()]
        out[name] = (pv, pt, info)
    return out


def level_seed(cfg: Config, scale: float, seed: int) -> dict:
    """Everything measured at one nuisance scale and seed (see the module docstring)."""
    task = generate(cfg.task(scale), seed)
    mem, c, k = task.memory, cfg.num_classes, cfg.k
    val_y, test_y = task.val.y, task.test.y
    bank = MemoryBank().build(mem.x, mem.y)
    own = bank.search_excluding(mem.x, max(k, cfg.loo_k + 1), np.arange(len(mem.y)))  # each row's other rows
    loo = loo_agreement(mem.y[own.indices[:, :cfg.loo_k]], mem.y)
    prior = np.bincount(mem.y, minlength=c) / len(mem.y)
    search = core.searcher(bank, {"val": task.val.x, "test": task.test.x})
    search("val", cfg.reference_k), search("test", cfg.reference_k)  # searched once, read by every part

    def hood(split: str, kk: int) -> Neighbourhood:
        rows, sq = search(split, kk)
        return Neighbourhood(mem.y[rows], sq, loo[rows])

    train_rows = np.sort(np.random.default_rng([seed, 2]).choice(len(mem.y), cfg.train_queries, replace=False))
    t_rows, t_sq = own.indices[train_rows, :k], own.sq_dist[train_rows, :k]
    hoods = {"train": _hoods(task, t_rows, t_sq, loo, mem.x[train_rows], mem.y[train_rows],
                             loo_agreement_without(train_rows, t_rows, own.indices, mem.y, cfg.loo_k)),
             **{s: _hoods(task, *search(s, k), loo, getattr(task, s).x, getattr(task, s).y) for s in ("val", "test")}}

    probs, info = {}, {}
    ref, ref_nll = references(search, mem.y, loo, val_y, c, cfg.reference_k)
    for name, m in zip(REFERENCES, (ref, ref_nll)):
        probs[name], info[name] = (m.val, m.test), m.info
    k_ref = info["reference"]["choice"]["k"]
    info["geometry"], *probs["geometry"] = geometry_ceiling(hood("val", k), hood("test", k), val_y, c, prior)
    info["oracle_inside_k"], *probs["oracle_inside_k"] = oracle_reweighting(task, search, k)
    info["oracle_reference_k"], *probs["oracle_reference_k"] = oracle_reweighting(task, search, k_ref)
    probs["oracle_retrieval"], info["oracle_retrieval"] = oracle_retrieval(task, k), {"k": k}
    k_learn = max(k, k_ref)
    fit = learned_rule(hood("val", k_learn), val_y, hood("test", k_learn), prior, c, k_learn, seed)
    probs["learner"], info["learner"] = (fit["val"], fit["test"]), {"k": k_learn, "configs": fit["configs"],
                                                                     "folds": fit["folds"]}
    for name, (pv, pt, head_info) in train_heads(cfg, task, hoods, seed).items():
        probs[name], info[name] = (pv, pt), head_info

    scored = {name: {**scores(pv, pt, val_y, test_y), "info": info[name]} for name, (pv, pt) in probs.items()}
    diffs = {name: {ref: differences(scored[name], scored[ref]) for ref in REFERENCES}
             for name in scored if name not in REFERENCES}
    test_labels = search("test", max(k, k_ref))[0]
    return {"headroom": {"at_k": headroom(mem.y[test_labels], test_y, c, k),
                         "at_reference_k": headroom(mem.y[test_labels], test_y, c, k_ref)},
            "methods": scored, "diff": diffs}


def summarise_level(cfg: Config, per_seed: dict[str, dict]) -> dict:
    """Per comparison and endpoint: the seed-level interval and verdict (independent test sets per
    seed, so no test term), and the smallest difference it resolves at 3 and 5 seeds."""
    seeds = list(per_seed)
    first = per_seed[seeds[0]]
    out = {"diff": {}, "effective_k": {}, "moved": {}, "means": {}}
    for name in first["diff"]:
        out["diff"][name] = {}
        for ref in REFERENCES:
            entry = {}
            for metric in ("accuracy", *CALIBRATION_ENDPOINTS):
                if ref == "reference_nll" and metric == "accuracy":
                    continue
                d = [per_seed[s]["diff"][name][ref][metric] for s in seeds]
                v = seed_level(d, 0.0, metric, cfg.margin(metric))
                if len(d) > 1:
                    v["resolvable"] = {str(n): resolvable(v["seed_sd"], 0.0, n) for n in (3, 5)}
                entry[metric] = v
            out["diff"][name][ref] = entry
    for name in first["methods"]:
        m = [per_seed[s]["methods"][name] for s in seeds]
        out["means"][name] = {"accuracy": float(np.mean([x["raw"]["accuracy"] for x in m])),
                              **{e: float(np.mean([x["calibrated"][e] for x in m])) for e in ("nll", "brier", "ece")}}
        if "effective_k" in m[0]["info"]:
            eff = float(np.mean([x["info"]["effective_k"] for x in m]))
            out["effective_k"][name] = eff
            out["moved"][name] = eff < cfg.moved_share * cfg.k
    hr = {key: {f: float(np.mean([per_seed[s]["headroom"][key][f] for s in seeds]))
                for f in ("recall", "uniform_accuracy", "fixable", "all_agree_right")}
          for key in ("at_k", "at_reference_k")}
    out["headroom"] = hr
    out["reference_k"] = [per_seed[s]["methods"]["reference"]["info"]["choice"]["k"] for s in seeds]
    out["reference_labels"] = [per_seed[s]["methods"]["reference"]["info"]["label"] for s in seeds]
    out["reference_nll_labels"] = [per_seed[s]["methods"]["reference_nll"]["info"]["label"] for s in seeds]
    out["edges"] = sorted({e for s in seeds for r in REFERENCES for e in per_seed[s]["methods"][r]["info"]["edges"]})
    return out


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


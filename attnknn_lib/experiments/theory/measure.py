"""theory: the training runs it needs and the analysis that writes its record."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from attnknn_lib.base.paths import Paths
from attnknn_lib.base.progress import bar
from attnknn_lib.base.timing import loglog_fit, median_seconds
from attnknn_lib.data.spec import prepare
from attnknn_lib.data.transforms import to_tensor
from attnknn_lib.evaluation.inference import attnknn_probs, head_norms
from attnknn_lib.evaluation.inference import embed as embed_rows
from attnknn_lib.evaluation.methods import method_labels
from attnknn_lib.evaluation.metrics import accuracy, nll
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.experiments.framework.declaration import Measurement
from attnknn_lib.experiments.theory.config import ARTIFACTS, TIMED, Config
from attnknn_lib.knn.index_costs import IndexSetting, build, unit_vectors
from attnknn_lib.knn.topk import prefix_outputs, sampled_tail_attention, tail_masses, topk_attention
from attnknn_lib.knn.votes import uniform_weights, vote, weight_entropy
from attnknn_lib.models import MultiHeadNeighbourAttention

METHODS = method_labels("uniform", "attnknn", attnknn="Attn-KNN (as trained)")


def runs(cfg: Config):
    """Main's Attn-KNN and CNN runs of the dataset (shared with main: trained once)."""
    return core.model_runs(cfg, core.data_spec(cfg, cfg.dataset), cfg.seeds)


def cover_hart_bound(bayes_error: float, num_classes: int) -> float:
    """Asymptotic 1-NN error bound (Cover and Hart, 1967): R <= R* (2 - C R* / (C - 1))  (<= 2 R*)."""
    r, c = bayes_error, num_classes
    return r * (2.0 - c * r / (c - 1))


def weight_spread(weights: np.ndarray) -> dict[str, float]:
    """How far attention weights (B, k) are from uniform: H_i = -sum_j w_ij log w_ij,
    KL(w_i || 1/k) = log k - H_i, effective number of neighbours exp(H_i); means over queries."""
    h = weight_entropy(weights)
    k = weights.shape[1]
    return {"entropy": float(h.mean()), "kl_uniform": float((math.log(k) - h).mean()),
            "effective_k": float(np.exp(h).mean()), "k": k}


def truncation_ks(n: int, k_sqrt: int, training_k: int) -> list[int]:
    """Powers of two below n, plus round(sqrt(n)), the training k and n itself (the dense end)."""
    ks = {2 ** i for i in range(int(math.log2(n)) + 1) if 2 ** i < n} | {k_sqrt, training_k, n}
    return sorted(k for k in ks if 1 <= k <= n)


def error_fit(ks: list[int], errors: list[float], n: int) -> dict:
    """Log-log slope of the truncation error against k over the k <= n / 4 with a non-zero error
    (the error must reach 0 at k = n, which a power law cannot), with the range it used."""
    pts = [(k, e) for k, e in zip(ks, errors) if e > 1e-9 and k <= n // 4]
    fit = loglog_fit([k for k, _ in pts], [e for _, e in pts])
    return {**fit, "k_range": [pts[0][0], pts[-1][0]] if pts else None}


def k_curves(model, emb, test_emb: np.ndarray, test_y: np.ndarray, ks: list[int],
             num_classes: int) -> dict[str, dict[str, list[float]]]:
    """Test error and NLL of uniform kNN and of Attn-KNN (its trained attention applied at each k),
    on the memory ``emb`` (:func:`core.bank_of`, test neighbours searched to at least max(ks))."""
    nb = emb.neighbours[("test", "original")]
    out = {m: {"error": [], "nll": []} for m in METHODS}
    for k in ks:
        probs = {"uniform": vote(uniform_weights((len(nb.labels), k)), nb.labels[:, :k], num_classes),
                 "attnknn": attnknn_probs(model.attention, emb.bank, test_emb, k, neighbours=nb, batch_size=256)[0]}
        for m, p in probs.items():
            out[m]["error"].append(1.0 - accuracy(p, test_y))
            out[m]["nll"].append(nll(p, test_y))
    return out


def softmax_truncation(memory: torch.Tensor, labels: torch.Tensor, num_classes: int, queries: torch.Tensor,
                       ks: list[int], temperatures: tuple[float, ...], seed: int, chunk: int = 64) -> dict:
    """Plain softmax attention with scores q.k / T and the memory's one-hot labels as values: mean
    L1 error of top-k (and of top-k plus k sampled tail rows) against the dense output, and the
    dropped mass m_k, for each T and k."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for t in temperatures:
        err = {k: [] for k in ks}
        err_s = {k: [] for k in ks if k < len(memory)}
        mass = {k: [] for k in ks}
        for s in range(0, len(queries), chunk):
            scores = queries[s:s + chunk] @ memory.T / t  # (b, n)
            order = scores.argsort(dim=-1, descending=True)
            outs = prefix_outputs(scores, labels, sorted(set(ks) | {len(memory)}), order, num_classes)
            dense = outs[len(memory)]
            masses = tail_masses(scores, ks, order=order)
            for k in ks:
                err[k].append((outs[k] - dense).abs().sum(-1))
                mass[k].append(masses[k])
                if k in err_s:
                    est = sampled_tail_attention(scores, labels, k, k, gen, order, num_classes)
                    err_s[k].append((est - dense).abs().sum(-1))
        mean = lambda d: [float(torch.cat(d[k]).mean()) for k in d]  # noqa: E731
        e = mean(err)
        out[f"{t:g}"] = {"temperature": t, "error": e, "tail_mass": mean(mass), "sampled_error": mean(err_s),
                         "sampled_ks": list(err_s), "fit": error_fit(ks, e, len(memory))}
    return out


def attnknn_truncation(attention: MultiHeadNeighbourAttention, memory: torch.Tensor, labels: torch.Tensor,
                       queries: torch.Tensor, y: np.ndarray, ks: list[int], num_classes: int, chunk: int = 32) -> dict:
    """Attn-KNN's vote over its k nearest neighbours against the same per-head scores over the
    whole memory: mean L1 difference of the two class distributions, and the accuracy of each."""
    with torch.no_grad():
        keys = attention.keys(memory)
        err = {k: [] for k in ks}
        probs = {k: [] for k in ks}
        for s in range(0, len(queries), chunk):
            q = queries[s:s + chunk]
            sq = (2.0 - 2.0 * q @ memory.T).clamp_min(0.0)  # unit vectors
            scores = attention.dense_scores(q, keys, sq).double()  # (b, H, n)
            order = sq.argsort(dim=-1)  # nearest first: the index's notion of top-k
            per_head = [prefix_outputs(scores[:, h], labels, ks, order, num_classes) for h in range(scores.shape[1])]
            votes = {k: torch.stack([ph[k] for ph in per_head]).mean(0) for k in ks}  # mean over heads
            dense = votes[len(memory)]
            for k in ks:
                err[k].append((votes[k] - dense).abs().sum(-1))
                probs[k].append(votes[k])
    acc = {k: accuracy(torch.cat(probs[k]).numpy(), y) for k in ks}
    e = [float(torch.cat(err[k]).mean()) for k in ks]
    return {"error": e, "accuracy": [acc[k] for k in ks], "fit": error_fit(ks, e, len(memory))}


COST_TEMPERATURE = 0.1  # softmax temperature of the timed attention (its value does not change the cost)


def attention_costs(cfg: Config, dim: int, num_classes: int) -> dict:
    """µs per query of dense softmax attention over n memory rows, top-k attention with an exact
    top-k (the same scores, then the k largest), and top-k attention over an HNSW index's k
    nearest (search + softmax over k; build time reported apart), k = round(sqrt(n))."""

    queries = torch.from_numpy(unit_vectors(cfg.cost_queries, dim, seed=2))
    rows = {"n": [], "k": [], "dense_us": [], "topk_exact_us": [], "topk_hnsw_us": [], "hnsw_build_s": []}
    for n in bar(cfg.cost_sizes, desc="attention cost n"):
        mem_np = unit_vectors(n, dim, seed=3000 + n)
        mem = torch.from_numpy(mem_np)
        onehot = F.one_hot(torch.arange(n) % num_classes, num_classes).float()
        k = max(1, int(round(math.sqrt(n))))
        index, build_s = build(IndexSetting("hnsw"), mem_np)
        q_np = queries.numpy()

        def dense():
            return topk_attention(queries, mem, onehot, None, scale=1 / COST_TEMPERATURE)

        def exact():
            return topk_attention(queries, mem, onehot, k, scale=1 / COST_TEMPERATURE)

        def hnsw():
            d, idx = index.search(q_np, k)
            w = torch.from_numpy((1.0 - d / 2.0) / COST_TEMPERATURE).softmax(-1)  # cos = 1 - |q - x|^2 / 2
            return (w.unsqueeze(-1) * onehot[torch.from_numpy(idx)]).sum(1)

        with torch.no_grad():
            for key, fn in (("dense_us", dense), ("topk_exact_us", exact), ("topk_hnsw_us", hnsw)):
                rows[key].append(1e6 * median_seconds(fn, cfg.repeats) / len(queries))
        rows["n"].append(n)
        rows["k"].append(k)
        rows["hnsw_build_s"].append(build_s)
    rows["fit"] = {key: loglog_fit(rows["n"], rows[key]) for key in ("dense_us", "topk_exact_us", "topk_hnsw_us")}
    return rows


def geometry(histories: dict[str, list[dict]], k: int) -> dict:
    """Per seed and epoch: norms before normalisation (validation rows), per-head temperatures,
    attention entropy on the training batches, its KL to uniform and effective number of neighbours."""
    out = {}
    for seed, hist in histories.items():
        ent = [h["train_entropy"] for h in hist]
        out[seed] = {"epoch": [h["epoch"] for h in hist], "norm_mean": [h["val_norm_mean"] for h in hist],
                     "norm_std": [h["val_norm_std"] for h in hist], "temperatures": [h["temperatures"] for h in hist],
                     "train_entropy": ent, "kl_uniform": [math.log(k) - e for e in ent],
                     "effective_k": [math.exp(e) for e in ent]}
    return out


def run(cfg: Config, paths: Paths) -> dict:
    """Every analysis in one run; writes ``results/theory_<dataset>.json`` and returns its record."""
    device, prov, clock = core.begin(cfg)
    cpu = torch.device("cpu")
    prepared = prepare(core.data_spec(cfg, cfg.dataset))
    ds = prepared.dataset
    n = len(ds.train)
    k_sqrt = int(round(math.sqrt(n)))
    ks = sorted(k for k in set(cfg.k_values) | {k_sqrt} if k <= n - 1)
    tks = truncation_ks(n, k_sqrt, cfg.k)
    nq = min(cfg.truncation_queries, len(ds.test))
    curves, trunc, final, histories, cnn_probs = {}, {}, {}, {}, []
    softmax = None
    for seed in cfg.seeds:
        run_, model, cnn = core.trained_pair(cfg, prepared, seed, paths, cpu)
        histories[str(seed)] = core.trained(run_, paths, prepared)[0].history
        frozen = core.frozen_embeddings(run_, model, prepared, paths, cpu)
        emb = core.bank_of(frozen, ds.train.y, max(*ks, cfg.k))  # one search serves the curves and the weights
        curves[str(seed)] = k_curves(model, emb, frozen.test, ds.test.y, ks, ds.num_classes)
        cnn_probs.append(core.cnn_method(cnn, prepared, cpu).test)
        memory, labels = torch.from_numpy(frozen.train), torch.from_numpy(ds.train.y)
        queries = torch.from_numpy(frozen.test[:nq])
        trunc[str(seed)] = attnknn_truncation(model.attention, memory, labels, queries, ds.test.y[:nq], tks,
                                              ds.num_classes)
        if softmax is None:  # the plain attention's truncation on the first seed's embedding
            softmax = softmax_truncation(memory.double(), labels, ds.num_classes, queries.double(), tks,
                                         cfg.temperatures, cfg.tail_seed)
        with head_norms(model.embedder) as norms:
            embed_rows(model.embedder, to_tensor(ds, ds.test), 1024, cpu, desc="test norms")
        norms = torch.cat(norms)
        _, w = attnknn_probs(model.attention, emb.bank, frozen.test, cfg.k, neighbours=emb.neighbours[("test", "original")])
        final[str(seed)] = {"test_norm_mean": float(norms.mean()), "test_norm_std": float(norms.std()),
                            **weight_spread(w)}
    ens_error = 1.0 - accuracy(np.mean(cnn_probs, axis=0), ds.test.y)
    summary = {m: {key: {"mean": np.mean([curves[s][m][key] for s in curves], axis=0).tolist(),
                         "std": np.std([curves[s][m][key] for s in curves], axis=0, ddof=1).tolist()
                         if len(curves) > 1 else None} for key in ("error", "nll")} for m in METHODS}
    one_nn = summary["uniform"]["error"]["mean"][ks.index(1)] if 1 in ks else None
    results = {
        "dataset": ds.summary(), "seeds": list(cfg.seeds), "n_train": n, "k_sqrt": k_sqrt, "training_k": cfg.k,
        "k_values": ks, "curves": {"per_seed": curves, "summary": summary},
        "bayes_proxy": {"cnn_ensemble_error": ens_error, "cover_hart_bound": cover_hart_bound(ens_error, ds.num_classes),
                        "one_nn_error": one_nn, "num_classes": ds.num_classes, "models": len(cnn_probs)},
        "geometry": {"per_seed": geometry(histories, cfg.k), "final": final},
        "truncation": {"n": n, "queries": nq, "ks": tks, "softmax": softmax, "softmax_seed": cfg.seeds[0],
                       "attnknn": {"per_seed": trunc, "error": np.mean([trunc[s]["error"] for s in trunc], 0).tolist(),
                                   "accuracy": np.mean([trunc[s]["accuracy"] for s in trunc], 0).tolist()}},
        "cost": attention_costs(cfg, frozen.train.shape[1], ds.num_classes),
        "timings": {"seconds": clock()}}
    att = results["truncation"]["attnknn"]
    att["fit"] = error_fit(tks, att["error"], n)
    return core.write_record(paths, ARTIFACTS, cfg.dataset, cfg, prov, {cfg.dataset: prepared.fingerprint()}, results)[1]


MEASUREMENT = Measurement(runs=runs, run=run, timed=TIMED)

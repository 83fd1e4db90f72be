"""efficiency: the training runs it needs and the analysis that writes its record."""

from __future__ import annotations

import time

import numpy as np
import torch

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.base.paths import Paths
from attnknn_lib.base.progress import bar
from attnknn_lib.base.timing import loglog_fit, median_seconds, total_ram_bytes
from attnknn_lib.data.spec import prepare
from attnknn_lib.data.transforms import to_tensor
from attnknn_lib.evaluation.inference import attnknn_probs
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.experiments.efficiency.config import ARTIFACTS, TIMED, Config
from attnknn_lib.experiments.framework.declaration import Measurement
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.index_costs import (
    IndexSetting,
    build,
    configure,
    index_bytes,
    recall_at_k,
    search_seconds,
    unit_vectors,
)
from attnknn_lib.knn.votes import distance_weights, vote

# result sections that measure time (left out when two runs are compared: reproducibility.record_view)
STAGES = {"embed": "embedding forward pass", "search": "exact search (Flat L2)", "attention": "attention vote",
          "distance": "distance vote", "cnn": "CNN forward pass (reference)"}


def runs(cfg: Config):
    """Main's Attn-KNN and CNN runs of the dataset (shared with main: trained once)."""
    return core.model_runs(cfg, core.data_spec(cfg, cfg.dataset), cfg.seeds)


def measure_indexes(cfg: Config, bank: np.ndarray, queries: np.ndarray, settings: list[IndexSetting],
                    single: int) -> list[dict]:
    """Every setting on one bank: build seconds, µs per query (batched, single), recall@k, bytes.
    Settings that differ only in search knobs share one built index."""

    k = cfg.recall_k
    exact = build(IndexSetting("flat_l2"), bank)[0].search(queries, k)[1]
    built: dict[tuple, tuple[object, float]] = {}
    out = []
    for s in bar(settings, desc="indexes"):
        key = (s.kind, s.m, s.ef_construction, s.nlist)
        if key not in built:
            built[key] = build(s, bank)
        index, build_s = built[key]
        configure(index, s)
        found = index.search(queries, k)[1]
        size = index_bytes(index)
        out.append({"setting": s.to_dict(), "label": s.label, "n": len(bank), "build_s": build_s,
                    "batched_us": 1e6 * search_seconds(index, queries, k, True, cfg.repeats),
                    "single_us": 1e6 * search_seconds(index, queries[:single], k, False, cfg.repeats),
                    "recall": recall_at_k(found, exact), "index_bytes": size, "bytes_per_vector": size / len(bank)})
    return out


def add_memory_limits(rows: list[dict], dim: int, ram: int) -> None:
    """Bytes per vector of a memory built on each index (the index, plus the memory's float32
    copy of the embeddings, int64 label and float32 squared norm) and the largest n whose bank
    fits in ``ram`` bytes: n_max = ram / bytes per vector (computed, not run)."""
    extra = 4 * dim + 8 + 4
    for r in rows:
        r["bank_bytes_per_vector"] = r["bytes_per_vector"] + extra
        r["max_n_in_ram"] = int(ram // r["bank_bytes_per_vector"])


def gemm_yardstick(cfg: Config, bank: np.ndarray, queries: np.ndarray) -> dict:
    """Exact batched search as a fraction of this machine's fp32 GEMM: the search computes the
    (B, D) x (D, n) product (2 B n D FLOPs) plus a top-k. Each operation is timed in its own block
    (one warm-up call, then the repeats; torch's and FAISS's thread pools spin for a while after
    their last call, so alternating them call by call slows both), the GEMM before and after the
    searches so that a change in the machine's load shows in both; medians.
    ``flat_search_over_gemm`` is Flat L2 (the memory's index); Flat IP skips the norm terms."""
    n, d = bank.shape
    m = cfg.gemm_size
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(m, m, generator=g), torch.randn(m, m, generator=g)
    qt, xt = torch.from_numpy(np.ascontiguousarray(queries)), torch.from_numpy(np.ascontiguousarray(bank)).T.contiguous()
    flat = {kind: build(IndexSetting(kind), bank)[0] for kind in ("flat_l2", "flat_ip")}
    work = [("gemm", lambda: torch.matmul(a, b)), ("gemm_same_shape", lambda: torch.matmul(qt, xt)),
            ("flat_l2", lambda: flat["flat_l2"].search(queries, cfg.recall_k)),
            ("flat_ip", lambda: flat["flat_ip"].search(queries, cfg.recall_k)), ("gemm", lambda: torch.matmul(a, b))]
    times: dict[str, list[float]] = {}
    for key, fn in work:
        fn()  # warm-up
        for _ in range(cfg.repeats + 2):
            t0 = time.perf_counter()
            fn()
            times.setdefault(key, []).append(time.perf_counter() - t0)
    sec = {key: float(np.median(v)) for key, v in times.items()}
    rate = {"gemm": 2.0 * m ** 3 / sec["gemm"] / 1e9,
            **{key: 2.0 * len(queries) * n * d / sec[key] / 1e9 for key in ("gemm_same_shape", "flat_l2", "flat_ip")}}
    return {"gemm_gflops": rate["gemm"], "gemm_shape": [m] * 3, "gemm_same_shape_gflops": rate["gemm_same_shape"],
            "same_shape": [len(queries), n, d], "flat_search_gflops": rate["flat_l2"],
            "flat_search_over_gemm": rate["flat_l2"] / rate["gemm"],
            "flat_search_over_gemm_same_shape": rate["flat_l2"] / rate["gemm_same_shape"],
            "flat_ip_search_gflops": rate["flat_ip"], "flat_ip_search_over_gemm": rate["flat_ip"] / rate["gemm"],
            "repeats": cfg.repeats + 2}


def search_engines(bank: np.ndarray, queries: np.ndarray, batch: int, k: int, repeats: int) -> list[dict]:
    """FAISS Flat (inner product) against torch matmul + top-k on unit vectors, at the training
    step's size (one batch of queries) and the evaluation's (every query at once)."""
    idx = build(IndexSetting("flat_ip"), bank)[0]
    mem = torch.from_numpy(np.ascontiguousarray(bank))
    out = []
    for use, q in (("training step", queries[:batch]), ("evaluation", queries)):
        qt = torch.from_numpy(np.ascontiguousarray(q))
        faiss_s = median_seconds(lambda: idx.search(q, k), repeats)
        torch_s = median_seconds(lambda: (qt @ mem.T).topk(k, dim=1), repeats)
        out.append({"use": use, "queries": len(q), "n": len(bank), "k": k, "faiss_ms": 1e3 * faiss_s,
                    "torch_ms": 1e3 * torch_s, "faiss_over_torch": faiss_s / torch_s})
    return out


def prediction_costs(model, cnn, bank: MemoryBank, images: torch.Tensor, k: int, single: int, repeats: int) -> dict:
    """µs per query of each stage of a prediction, batched (all ``images`` at once) and one query
    at a time (the first ``single``): embedding, search, attention vote, distance vote, CNN."""
    num_classes = int(bank.labels.max()) + 1

    def stages(x: torch.Tensor) -> dict[str, callable]:
        with torch.no_grad():
            emb = model.embedder(x).numpy()
        nb = bank.search(emb, k)
        return {"embed": lambda: model.embedder(x), "search": lambda: bank.search(emb, k),
                "attention": lambda: attnknn_probs(model.attention, bank, emb, k, neighbours=nb),
                "distance": lambda: vote(distance_weights(np.sqrt(nb.sq_dist), 0.1), nb.labels, num_classes),
                "cnn": lambda: cnn(x)}

    model.eval()
    cnn.eval()
    out = {}
    with torch.no_grad():
        batched = stages(images)
        out["batched"] = {s: 1e6 * median_seconds(f, repeats) / len(images) for s, f in batched.items()}
        per_query = [stages(images[i:i + 1]) for i in range(single)]
        out["single"] = {s: 1e6 * median_seconds(lambda: [p[s]() for p in per_query], repeats) / single
                         for s in STAGES}
    for mode in ("batched", "single"):
        t = out[mode]
        total = t["embed"] + t["search"] + t["attention"]
        out[f"{mode}_shares"] = {"embed": t["embed"] / total, "search": t["search"] / total,
                                 "attention": t["attention"] / total, "attnknn_total_us": total,
                                 "attention_over_distance": t["attention"] / t["distance"],
                                 "attnknn_over_cnn": total / t["cnn"]}
    return out


def training_times(histories: dict[str, list[list[dict]]]) -> dict:
    """Median seconds per epoch over runs and epochs: the training loop alone (``train_seconds``)
    and the whole epoch with its memory rebuild and validation (``seconds``)."""
    out = {}
    for kind, runs_ in histories.items():
        rows = [h for hist in runs_ for h in hist]
        out[kind] = {"train_seconds_per_epoch": float(np.median([h["train_seconds"] for h in rows])),
                     "seconds_per_epoch": float(np.median([h["seconds"] for h in rows])),
                     "epochs": len(rows), "runs": len(runs_)}
    if {"attnknn", "cnn"} <= set(out):
        out["attnknn_over_cnn"] = out["attnknn"]["seconds_per_epoch"] / out["cnn"]["seconds_per_epoch"]
        out["attnknn_over_cnn_train_loop"] = (out["attnknn"]["train_seconds_per_epoch"]
                                              / out["cnn"]["train_seconds_per_epoch"])
    return out


def synthetic_scaling(cfg: Config, dim: int) -> dict:
    """Flat L2, the default HNSW and the default IVF-Flat on uniform unit vectors of each size:
    the same measurements as on the real bank, and log-log slopes against n."""

    settings = [IndexSetting("flat_l2"), cfg.default_hnsw(), IndexSetting("ivf_flat")]
    queries = unit_vectors(cfg.synthetic_queries, dim, seed=1)
    rows = []
    for n in bar(cfg.synthetic_sizes, desc="synthetic n"):
        rows += measure_indexes(cfg, unit_vectors(n, dim, seed=1000 + n), queries, settings,
                                min(cfg.single_queries, cfg.synthetic_queries))
    by_index = {}
    for s in settings:
        mine = [r for r in rows if r["label"] == s.label]
        ns = [r["n"] for r in mine]
        series = {m: [r[m] for r in mine] for m in ("build_s", "batched_us", "single_us", "recall", "bytes_per_vector")}
        fits = {m: loglog_fit(ns, series[m]) for m in ("build_s", "batched_us", "single_us")}
        by_index[s.label] = {"setting": s.to_dict(), "n": ns, **series, "fit": fits}
    return {"sizes": list(cfg.synthetic_sizes), "queries": cfg.synthetic_queries, "dim": dim, "by_index": by_index}


def run(cfg: Config, paths: Paths) -> dict:
    """Every measurement in one run; writes ``results/efficiency_<dataset>.json`` and returns its record."""
    device, prov, clock = core.begin(cfg)
    prepared = prepare(core.data_spec(cfg, cfg.dataset))
    ds = prepared.dataset
    histories: dict[str, list] = {"attnknn": [], "cnn": []}
    for r in core.model_runs(cfg, prepared.spec, cfg.seeds):
        histories[r.kind].append(core.trained(r, paths, prepared)[0].history)
    run_, model, cnn = core.trained_pair(cfg, prepared, cfg.seeds[0], paths, torch.device("cpu"))
    frozen = core.frozen_embeddings(run_, model, prepared, paths, torch.device("cpu"))
    bank_x = frozen.train
    nq = min(cfg.queries, len(frozen.test))
    if cfg.recall_k > len(bank_x) - 1:
        raise ConfigError(f"recall_k={cfg.recall_k} is out of range; allowed: 1..{len(bank_x) - 1}")
    queries = np.ascontiguousarray(frozen.test[:nq])
    single = min(cfg.single_queries, nq)
    ram = total_ram_bytes()
    real = measure_indexes(cfg, bank_x, queries, cfg.settings(), single)
    add_memory_limits(real, bank_x.shape[1], ram)
    flat = next(r for r in real if r["setting"]["kind"] == "flat_l2")
    default = next(r for r in real if r["setting"] == cfg.default_hnsw().to_dict())
    gemm = gemm_yardstick(cfg, bank_x, queries)
    engines = search_engines(bank_x, queries, cfg.batch_size, cfg.k, cfg.repeats)
    bank = MemoryBank("flat_l2").build(bank_x, ds.train.y)
    images = to_tensor(ds, ds.test)[:nq]
    prediction = prediction_costs(model, cnn, bank, images, cfg.k, single, cfg.repeats)
    synthetic = synthetic_scaling(cfg, bank_x.shape[1])
    results = {"dataset": ds.summary(), "seed": cfg.seeds[0], "n_bank": len(bank_x), "dim": int(bank_x.shape[1]),
               "recall_k": cfg.recall_k, "k": cfg.k, "queries": nq, "single_queries": single,
               "threads": torch.get_num_threads(), "ram_bytes": ram, "indexes": real,
               "default_hnsw": {"label": default["label"], "recall": default["recall"],
                                "batched_us": default["batched_us"], "single_us": default["single_us"],
                                "speedup_over_flat_single": flat["single_us"] / default["single_us"]},
               "gemm": gemm, "search_engines": engines, "prediction": prediction,
               "training": training_times(histories), "synthetic": synthetic, "timings": {"seconds": clock()}}
    return core.write_record(paths, ARTIFACTS, cfg.dataset, cfg, prov, {cfg.dataset: prepared.fingerprint()}, results)[1]


MEASUREMENT = Measurement(runs=runs, run=run, timed=TIMED)

"""What a FAISS index costs as a memory: build time, search time per query (batched, and one
query at a time), recall@k against exact search, and bytes per stored vector.

Indexes are built by :func:`attnknn_lib.knn.bank.build_index`, the function the memory uses,
so the settings measured here are the ones a memory can be given.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np

from attnknn_lib.base.errors import ConfigError, check_choice
from attnknn_lib.base.timing import median_seconds
from attnknn_lib.knn.bank import INDEX_TYPES, build_index


@dataclass(frozen=True)
class IndexSetting:
    """One index and its knobs (HNSW: m, ef_construction, ef_search; IVF: nlist, nprobe)."""

    kind: str
    m: int = 32
    ef_construction: int = 40
    ef_search: int = 64
    nlist: int | None = None
    nprobe: int = 8

    def __post_init__(self) -> None:
        check_choice("index kind", self.kind, INDEX_TYPES)
        for name in ("m", "ef_construction", "ef_search", "nprobe"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)!r} is out of range; allowed: >= 1")

    @property
    def label(self) -> str:
        if self.kind == "hnsw":
            return f"HNSW M={self.m} efC={self.ef_construction} efS={self.ef_search}"
        if self.kind == "ivf_flat":
            return f"IVF-Flat nprobe={self.nprobe}"
        return {"flat_l2": "Flat L2", "flat_ip": "Flat IP"}[self.kind]

    def to_dict(self) -> dict:
        return asdict(self)


def build(setting: IndexSetting, x: np.ndarray) -> tuple[object, float]:
    """The index of ``x`` (N, D) and its build seconds (IVF: k-means training included)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    t0 = time.perf_counter()
    index = build_index(x, setting.kind, setting.m, setting.ef_construction, setting.ef_search, setting.nlist,
                        setting.nprobe)
    return index, time.perf_counter() - t0


def configure(index, setting: IndexSetting) -> None:
    """Apply the search-time knobs of ``setting`` (efSearch, nprobe) to a built index."""
    if setting.kind == "hnsw":
        index.hnsw.efSearch = setting.ef_search
    elif setting.kind == "ivf_flat":
        index.nprobe = min(setting.nprobe, index.nlist)


def search_seconds(index, queries: np.ndarray, k: int, batched: bool = True, repeats: int = 3) -> float:
    """Seconds per query: all ``queries`` in one call (batched), or one call per query."""
    q = np.ascontiguousarray(queries, dtype=np.float32)
    if batched:
        total = median_seconds(lambda: index.search(q, k), repeats)
    else:
        total = median_seconds(lambda: [index.search(q[i:i + 1], k) for i in range(len(q))], repeats)
    return total / len(q)


def recall_at_k(found: np.ndarray, exact: np.ndarray) -> float:
    """mean_i |F_i & E_i| / k for found and exact neighbour ids (B, k) (the order within a row
    does not matter; -1 padding of an index that found fewer than k counts as a miss)."""
    found, exact = np.asarray(found), np.asarray(exact)
    if found.shape != exact.shape:
        raise ConfigError(f"found {found.shape} and exact {exact.shape} neighbour ids must have the same shape")
    hits = (found[:, :, None] == exact[:, None, :]).any(-1) & (found >= 0)
    return float(hits.mean())


def index_bytes(index) -> int:
    """Size of the serialised index: the vectors plus the index's own structures."""
    import faiss

    return int(faiss.serialize_index(index).nbytes)


def unit_vectors(n: int, d: int, seed: int = 0) -> np.ndarray:
    """n points drawn uniformly on the unit sphere in d dimensions (normalised Gaussians), float32."""
    x = np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


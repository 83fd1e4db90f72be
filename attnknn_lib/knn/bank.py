"""FAISS memory of (embedding, label) pairs with batched k-NN search.

Index types: ``flat_l2`` and ``flat_ip`` (exact), ``hnsw`` (graph, approximate), ``ivf_flat``
(inverted lists, approximate). Whatever the index, :meth:`MemoryBank.search` returns squared
Euclidean distances, so voting rules see one quantity (for unit vectors, cosine similarity is
``1 - d / 2``; see :func:`attnknn_lib.knn.votes.cosine_from_sq_dist`).

Training queries are themselves in the memory: :meth:`MemoryBank.search_excluding` searches
k + 1 neighbours and drops each query's own row, so a query never votes for itself (defect 1
of the prototype).
"""

from __future__ import annotations

import numpy as np

from attnknn_lib.base.errors import ConfigError, check_choice
from attnknn_lib.base.progress import bar
from attnknn_lib.knn.neighbourhood import Neighbourhood

INDEX_TYPES = ("flat_l2", "flat_ip", "hnsw", "ivf_flat")


def ivf_lists(n: int, nlist: int | None = None) -> int:
    """IVF list count for n vectors: ``nlist`` or 4 sqrt(n), capped so each list gets about 39
    training points (FAISS's minimum per centroid)."""
    nlist = nlist or int(round(4 * np.sqrt(n)))
    return max(1, min(nlist, n // 39 if n >= 39 else 1))


def build_index(x: np.ndarray, index_type: str = "flat_l2", hnsw_m: int = 32, ef_construction: int = 40,
                ef_search: int = 64, nlist: int | None = None, nprobe: int = 8):
    """A FAISS index of the rows of ``x`` (N, D) float32 (L2 metric, inner product for flat_ip)."""
    import faiss

    check_choice("index_type", index_type, INDEX_TYPES)
    n, d = x.shape
    metric = faiss.METRIC_INNER_PRODUCT if index_type == "flat_ip" else faiss.METRIC_L2
    if index_type in ("flat_l2", "flat_ip"):
        index = faiss.IndexFlat(d, metric)
    elif index_type == "hnsw":
        index = faiss.IndexHNSWFlat(d, hnsw_m, metric)
        index.hnsw.efConstruction = ef_construction
        index.hnsw.efSearch = ef_search
    else:
        lists = ivf_lists(n, nlist)
        index = faiss.IndexIVFFlat(faiss.IndexFlat(d, metric), d, lists, metric)
        index.train(x)
        index.nprobe = min(nprobe, lists)
    index.add(x)
    return index


class MemoryBank:
    """Embeddings and labels in a FAISS index.

    ``hnsw_m``/``ef_construction``/``ef_search`` tune HNSW (``ef_construction`` 40 is FAISS's
    default); ``nlist``/``nprobe`` tune IVF (:func:`ivf_lists`).
    """

    def __init__(self, index_type: str = "flat_l2", hnsw_m: int = 32, ef_search: int = 64,
                 nlist: int | None = None, nprobe: int = 8, batch_size: int = 4096, ef_construction: int = 40):
        check_choice("index_type", index_type, INDEX_TYPES)
        if batch_size < 1:
            raise ConfigError(f"batch_size={batch_size!r} is out of range; allowed: >= 1")
        self.index_type = index_type
        self.hnsw_m, self.ef_search, self.nlist, self.nprobe = hnsw_m, ef_search, nlist, nprobe
        self.ef_construction = ef_construction
        self.batch_size = batch_size
        self.index = None
        self.embeddings = np.empty((0, 0), dtype=np.float32)
        self.labels = np.empty(0, dtype=np.int64)
        self._sq_norms = np.empty(0, dtype=np.float32)

    def __len__(self) -> int:
        return len(self.labels)

    def build(self, embeddings: np.ndarray, labels: np.ndarray) -> MemoryBank:
        """(Re)build the index over ``embeddings`` (N, D) with ``labels`` (N,)."""
        x = np.ascontiguousarray(embeddings, dtype=np.float32)
        labels = np.asarray(labels, dtype=np.int64)
        if x.ndim != 2 or len(x) != len(labels) or len(x) == 0:
            raise ConfigError(f"memory bank needs embeddings (N, D) and labels (N,) with N >= 1; "
                              f"got {x.shape} and {labels.shape}")
        bad = int((~np.isfinite(x)).any(1).sum())
        if bad:  # FAISS would index them silently and return nonsense neighbours
            raise ConfigError(f"embeddings hold NaN or inf in {bad} of {len(x)} rows; the memory bank needs finite "
                              "vectors (check the model's training loss and inputs)")
        index = build_index(x, self.index_type, self.hnsw_m, self.ef_construction, self.ef_search, self.nlist,
                            self.nprobe)
        self.index, self.embeddings, self.labels = index, x, labels
        self._sq_norms = (x * x).sum(1)
        return self

    def _search_raw(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = np.ascontiguousarray(queries, dtype=np.float32)
        scores = np.empty((len(q), k), dtype=np.float32)
        idx = np.empty((len(q), k), dtype=np.int64)
        chunks = range(0, len(q), self.batch_size)
        for s in bar(chunks, desc="faiss search", disable=len(chunks) < 8):
            scores[s:s + self.batch_size], idx[s:s + self.batch_size] = self.index.search(q[s:s + self.batch_size], k)
        if self.index_type == "flat_ip":  # inner products -> squared distances: |q|^2 + |x|^2 - 2 q.x
            safe = np.where(idx >= 0, idx, 0)
            scores = (q * q).sum(1, keepdims=True) + self._sq_norms[safe] - 2.0 * scores
        return np.maximum(scores, 0.0), idx

    def _check(self, queries: np.ndarray, k: int, extra: int) -> None:
        if self.index is None:
            raise ConfigError("the memory bank is empty; call build(embeddings, labels) first")
        if not 1 <= k <= len(self) - extra:
            raise ConfigError(f"k={k!r} is out of range; allowed: 1..{len(self) - extra} for a bank of {len(self)}")
        if queries.ndim != 2 or queries.shape[1] != self.embeddings.shape[1]:
            raise ConfigError(f"queries must be (B, {self.embeddings.shape[1]}); got {queries.shape}")
        if not np.isfinite(queries).all():
            raise ConfigError(f"queries hold NaN or inf in {int((~np.isfinite(queries)).any(1).sum())} of "
                              f"{len(queries)} rows; search needs finite vectors")

    def search(self, queries: np.ndarray, k: int) -> Neighbourhood:
        """The k nearest memory rows of each query (B, D)."""
        self._check(queries, k, 0)
        d, idx = self._search_raw(queries, k)
        return self._pack(idx, d)

    def search_excluding(self, queries: np.ndarray, k: int, own_rows: np.ndarray) -> Neighbourhood:
        """The k nearest rows other than the query's own row(s) in the memory.

        ``own_rows`` is (B,) (the training query's row) or (B, m) (e.g. both sources of a MixUp
        image). Searches k + m and drops those rows wherever they rank (ties at distance 0 may
        put a duplicate first); if a row was not returned (approximate indexes can miss it) the
        farthest extra neighbours are dropped instead.
        """
        own = np.asarray(own_rows, dtype=np.int64)
        own = own[:, None] if own.ndim == 1 else own
        if own.ndim != 2 or own.shape[0] != len(queries):
            raise ConfigError(f"own_rows must be (B,) or (B, m) with B = {len(queries)} queries; got {own.shape}")
        m = own.shape[1]
        self._check(queries, k, m)
        d, idx = self._search_raw(queries, k + m)
        keep = ~(idx[:, :, None] == own[:, None, :]).any(-1)  # (B, k+m)
        keep &= np.cumsum(keep, axis=1) <= k  # first k survivors, nearest first
        return self._pack(idx[keep].reshape(len(idx), k), d[keep].reshape(len(idx), k))

    def _pack(self, idx: np.ndarray, d: np.ndarray) -> Neighbourhood:
        missing = idx < 0  # FAISS pads with -1 when an approximate index finds fewer than k
        if missing.any():
            raise ConfigError(f"the {self.index_type} index returned fewer neighbours than asked for "
                              f"({int(missing.sum())} missing); raise nprobe/ef_search or use flat_l2")
        return Neighbourhood(labels=self.labels[idx], sq_dist=d.astype(np.float32), rows=idx)

    def gather(self, indices: np.ndarray) -> np.ndarray:
        """Embeddings of memory rows: indices (B, k) -> (B, k, D)."""
        return self.embeddings[indices]

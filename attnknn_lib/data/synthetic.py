"""Generated embeddings whose room for a learned neighbour weighting is set by one knob (the
positive control).

Every class is a union of small clusters; the cluster centres of all classes are drawn uniformly
on the unit sphere of ``informative_dims`` dimensions, so the clusters of different classes
interleave and a wide neighbourhood mixes classes. A point is

    x = normalise([c + sigma z_1, (s / sqrt(d_n)) z_2])     z_1 ~ N(0, I_{d_i}), z_2 ~ N(0, I_{d_n})

with c its cluster's centre, sigma = ``cluster_sd`` and s = ``nuisance_scale``: the nuisance block
carries no label information, and its expected norm is s against the informative block's 1. The
retrieval measures distances over both blocks, so as s grows, points of other clusters (mostly of
other classes) come back among a query's k nearest. A vote that learns nothing cannot tell them
apart, and a larger k only adds more of them; a query/key projection that reads the informative
block can. At s = 0 there is no such room: the k nearest are the query's own cluster.

The whole vector is L2-normalised, as the method's embeddings are, so distances lie in [0, 2] like
the embedder's. The informative block alone (normalised) is returned too: it is the geometry the
generator knows and a learner has to find (the oracle view of the headroom).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnknn_lib.base.errors import check_range


@dataclass(frozen=True)
class ClusterTask:
    """The generator's knobs (see the module docstring)."""

    nuisance_scale: float  # s: expected norm of the nuisance block against the informative block's 1
    num_classes: int = 10
    clusters_per_class: int = 20
    informative_dims: int = 8
    nuisance_dims: int = 24
    cluster_sd: float = 0.15  # per informative dimension; centres lie on the unit sphere (0.15: some overlap)
    n_memory: int = 20000
    n_val: int = 5000
    n_test: int = 5000

    def __post_init__(self) -> None:
        check_range("nuisance_scale", self.nuisance_scale, 0.0, None)
        check_range("num_classes", self.num_classes, 2, None)
        check_range("clusters_per_class", self.clusters_per_class, 1, None)
        check_range("informative_dims", self.informative_dims, 2, None)
        check_range("nuisance_dims", self.nuisance_dims, 1, None)
        check_range("cluster_sd", self.cluster_sd, 0.0, None)
        for name in ("n_memory", "n_val", "n_test"):
            check_range(name, getattr(self, name), self.num_classes, None)

    @property
    def dims(self) -> int:
        return self.informative_dims + self.nuisance_dims


@dataclass(frozen=True)
class Split:
    x: np.ndarray  # (N, D) float32 unit vectors, both blocks
    informative: np.ndarray  # (N, d_i) float32 unit vectors, the informative block alone
    y: np.ndarray  # (N,) int64 class
    cluster: np.ndarray  # (N,) int64 cluster id (class = cluster // clusters_per_class)


@dataclass(frozen=True)
class GeneratedTask:
    task: ClusterTask
    memory: Split
    val: Split
    test: Split


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def generate(task: ClusterTask, seed: int) -> GeneratedTask:
    """Memory, validation and test points of ``task``; ``seed`` draws the centres and the points.

    The centres depend on the seed only (not on the nuisance scale), so the levels of one seed share
    their clusters and differ only in the nuisance block's scale."""
    centre_rng = np.random.default_rng([seed, 0])
    n_clusters = task.num_classes * task.clusters_per_class
    centres = _unit(centre_rng.standard_normal((n_clusters, task.informative_dims)))  # uniform on the sphere
    rng = np.random.default_rng([seed, 1])

    def split(n: int) -> Split:
        cluster = np.sort(rng.permutation(np.arange(n) % n_clusters))  # balanced: every cluster the same size +- 1
        cluster = rng.permutation(cluster)
        inf = centres[cluster] + task.cluster_sd * rng.standard_normal((n, task.informative_dims))
        nui = rng.standard_normal((n, task.nuisance_dims)) * (task.nuisance_scale / np.sqrt(task.nuisance_dims))
        return Split(_unit(np.concatenate([inf, nui], axis=1)), _unit(inf),
                     (cluster // task.clusters_per_class).astype(np.int64), cluster.astype(np.int64))

    return GeneratedTask(task, split(task.n_memory), split(task.n_val), split(task.n_test))

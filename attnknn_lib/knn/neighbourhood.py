"""A query's neighbourhood: its K nearest memory rows, nearest first, with what is read of them.

One type for every reader: the memory's search returns it (rows, squared distances, labels),
the tuned vote and the learnable-headroom learners read labels, distances and each row's
leave-one-out agreement, and the heads trained on a frozen embedding also read the queries'
embeddings and labels. A field a reader does not need stays ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np


@dataclass(frozen=True)
class Neighbourhood:
    """The K nearest memory rows of N queries, nearest first."""

    labels: np.ndarray | None  # (N, K) memory labels of the neighbours (None: not looked up)
    sq_dist: np.ndarray  # (N, K) squared Euclidean distances
    rows: np.ndarray | None = None  # (N, K) int64 memory rows
    loo: np.ndarray | None = None  # (N, K) leave-one-out label agreement of each neighbour's memory row
    query: np.ndarray | None = None  # (N, D) the queries' embeddings
    target: np.ndarray | None = None  # (N,) the queries' labels

    @property
    def k_max(self) -> int:
        return self.sq_dist.shape[1]

    def __len__(self) -> int:
        return self.sq_dist.shape[0]

    def take(self, idx: np.ndarray, k: int | None = None) -> Neighbourhood:
        """Queries ``idx``, their first ``k`` neighbours (all by default)."""
        k = k or self.k_max
        per_neighbour = {"labels", "sq_dist", "rows", "loo"}
        return Neighbourhood(**{f.name: None if (v := getattr(self, f.name)) is None
                                else v[idx, :k] if f.name in per_neighbour else v[idx] for f in fields(self)})

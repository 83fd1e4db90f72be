"""Long-tailed subsets with the exponential profile of CIFAR-LT.

Class c (0-based, of C) keeps ``n_c = max(1, floor(n_max * ratio ** (c / (C - 1))))`` samples,
where ``n_max`` is the size of the smallest class in the input, so that every class can supply
its quota and ``ratio = 1`` gives an exactly balanced subset. ``ratio = n_{C-1} / n_0`` is the
imbalance ratio (1, 0.1, 0.01 in the paper). Which samples are kept is seeded.
"""

from __future__ import annotations

import numpy as np

from attnknn_lib.base.errors import ConfigError, check_range


def long_tail_counts(class_sizes: np.ndarray, ratio: float) -> np.ndarray:
    """Per-class quotas of the exponential profile (see module docstring)."""
    check_range("imbalance ratio", ratio, 0.0, 1.0, low_inclusive=False)
    class_sizes = np.asarray(class_sizes)
    c = len(class_sizes)
    n_max = int(class_sizes.min())
    exponents = np.arange(c) / max(1, c - 1)
    # the small epsilon keeps floor() from dropping a sample to float round-off (e.g. 1000 * 0.1 ** 1)
    return np.maximum(1, np.floor(n_max * ratio ** exponents + 1e-9)).astype(np.int64)


def long_tail_indices(labels: np.ndarray, ratio: float, num_classes: int, seed: int = 0) -> np.ndarray:
    """Sorted positions of a long-tailed subset of ``labels``."""
    labels = np.asarray(labels)
    sizes = np.bincount(labels, minlength=num_classes)
    if sizes.min() == 0:
        raise ConfigError(f"class {int(np.argmin(sizes))} has no samples; a long-tail subset needs every class")
    counts = long_tail_counts(sizes, ratio)
    rng = np.random.default_rng(seed)
    keep = [rng.choice(np.flatnonzero(labels == c), size=counts[c], replace=False) for c in range(num_classes)]
    return np.sort(np.concatenate(keep))

"""Long-tailed subsets with the exponential profile of CIFAR-LT.

The class of rank r (0-based, of C) keeps ``n_r = max(1, floor(n_max * ratio ** (r / (C - 1))))``
samples, where ``n_max`` is the size of the smallest class in the input, so that every class can
supply its quota and ``ratio = 1`` gives an exactly balanced subset. ``ratio = n_{C-1} / n_0`` is
the imbalance ratio (1, 0.1, 0.01 in the paper). Which class gets which rank is a permutation
drawn from the seed (with rank = class index, the tail would always be the same classes, 7-9 on
Fashion-MNIST, which happen to be among the easiest); which samples are kept is seeded too.
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


def tail_order(num_classes: int, seed: int) -> np.ndarray:
    """The classes from largest to smallest quota: a permutation drawn from ``seed``."""
    return np.random.default_rng([seed, 7]).permutation(num_classes)


def long_tail_indices(labels: np.ndarray, ratio: float, num_classes: int, seed: int = 0) -> np.ndarray:
    """Sorted positions of a long-tailed subset of ``labels``; class ``tail_order(C, seed)[r]`` gets rank r."""
    labels = np.asarray(labels)
    sizes = np.bincount(labels, minlength=num_classes)
    if sizes.min() == 0:
        raise ConfigError(f"class {int(np.argmin(sizes))} has no samples; a long-tail subset needs every class")
    counts = np.empty(num_classes, dtype=np.int64)
    counts[tail_order(num_classes, seed)] = long_tail_counts(sizes, ratio)  # counts[c] of class c
    rng = np.random.default_rng(seed)
    keep = [rng.choice(np.flatnonzero(labels == c), size=counts[c], replace=False) for c in range(num_classes)]
    return np.sort(np.concatenate(keep))

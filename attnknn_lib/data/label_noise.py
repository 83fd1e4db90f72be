"""Synthetic label noise with an exact number of flips.

symmetric:  a flipped label moves to one of the other C-1 classes, uniformly.
asymmetric: a flipped label c moves to (c + 1) mod C (a fixed class-to-class confusion).

``round(rate * N)`` labels are flipped, chosen uniformly without replacement; every flipped
label differs from the original, so the realised noise rate is exactly the requested one
(up to rounding).
"""

from __future__ import annotations

import numpy as np

from attnknn_lib.base.errors import ConfigError, check_choice, check_range

NOISE_KINDS = ("symmetric", "asymmetric")


def inject_label_noise(labels: np.ndarray, rate: float, num_classes: int, kind: str = "symmetric",
                       seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(noisy_labels, flipped_mask)``; the input array is not modified."""
    check_choice("noise kind", kind, NOISE_KINDS)
    check_range("noise rate", rate, 0.0, 1.0)
    if num_classes < 2:
        raise ConfigError(f"num_classes={num_classes!r} is out of range; label noise needs at least 2 classes")
    labels = np.asarray(labels, dtype=np.int64)
    rng = np.random.default_rng(seed)
    n_flip = int(round(rate * len(labels)))
    flip = rng.choice(len(labels), size=n_flip, replace=False)
    noisy = labels.copy()
    if kind == "symmetric":
        # an offset in 1..C-1 lands uniformly on the other classes
        noisy[flip] = (labels[flip] + rng.integers(1, num_classes, size=n_flip)) % num_classes
    else:
        noisy[flip] = (labels[flip] + 1) % num_classes
    mask = np.zeros(len(labels), dtype=bool)
    mask[flip] = True
    return noisy, mask

"""The data an experiment trains on: a dataset plus the changes the experiment makes to it.

A :class:`DataSpec` names a dataset and how an experiment changes it before training (subset
sizes, label noise, class imbalance); :func:`prepare` applies it and keeps the clean labels.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from attnknn_lib.base.errors import ConfigError, check_choice, check_range
from attnknn_lib.base.provenance import config_fingerprint
from attnknn_lib.data.imbalance import long_tail_indices
from attnknn_lib.data.label_noise import NOISE_KINDS, inject_label_noise
from attnknn_lib.data.registry import Dataset, load_dataset


@dataclass(frozen=True)
class DataSpec:
    """A dataset as one experiment trains on it. Validation and test rows never change, except
    that ``noisy_val`` gives validation the same kind of noise (a user's validation labels are
    as noisy as their training labels); test labels are always clean."""

    name: str
    max_train: int = 0
    max_val: int = 0
    max_test: int = 0
    val_fraction: float = 0.1
    split_seed: int = 0  # fixed: every run of every method sees the same split
    noise: str = "none"  # none, symmetric or asymmetric (c -> c+1)
    noise_rate: float = 0.0
    noisy_val: bool = False
    imbalance: float = 1.0  # smallest / largest class size of the exponential profile (1: balanced)
    prep_seed: int = 0  # seed of the noise and imbalance draws

    def __post_init__(self) -> None:
        check_choice("noise", self.noise, ("none",) + NOISE_KINDS)
        check_range("noise_rate", self.noise_rate, 0.0, 1.0, high_inclusive=False)
        check_range("imbalance", self.imbalance, 0.0, 1.0, low_inclusive=False)
        if self.noise == "none" and self.noise_rate:
            raise ConfigError(f"noise_rate={self.noise_rate} needs noise=symmetric or asymmetric")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Prepared:
    """A dataset after an experiment's changes, with the clean training and validation labels kept
    (for analysis, and for calibrators that must see clean labels)."""

    spec: DataSpec
    dataset: Dataset  # train (subset, possibly noisy labels), val (possibly noisy), test (clean)
    clean_train_y: np.ndarray
    flipped: np.ndarray  # (N_train,) bool: which training labels the noise changed
    clean_val_y: np.ndarray | None = None  # validation labels before any noise

    def fingerprint(self) -> str:
        return config_fingerprint({"data": self.dataset.fingerprint(), "spec": self.spec.to_dict()})


def load_base(spec: DataSpec) -> Dataset:
    return load_dataset(spec.name, val_fraction=spec.val_fraction, split_seed=spec.split_seed,
                        max_train=spec.max_train or None, max_val=spec.max_val or None,
                        max_test=spec.max_test or None)


def prepare(spec: DataSpec, base: Dataset | None = None) -> Prepared:
    """Apply ``spec``'s imbalance (a subset of the training rows), then its label noise."""
    ds = base if base is not None else load_base(spec)
    train = ds.train
    if spec.imbalance < 1.0:
        train = train.subset(long_tail_indices(train.y, spec.imbalance, ds.num_classes, seed=spec.prep_seed))
    clean = train.y.copy()
    flipped = np.zeros(len(clean), dtype=bool)
    val = ds.val
    if spec.noise != "none" and spec.noise_rate > 0:
        noisy, flipped = inject_label_noise(clean, spec.noise_rate, ds.num_classes, spec.noise, seed=spec.prep_seed)
        train = train.with_labels(noisy)
        if spec.noisy_val:
            val = val.with_labels(inject_label_noise(val.y, spec.noise_rate, ds.num_classes, spec.noise,
                                                     seed=spec.prep_seed + 1)[0])
    return Prepared(spec, replace(ds, train=train, val=val), clean, flipped, ds.val.y.copy())

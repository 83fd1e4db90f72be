"""Training runs: what to train, on which (prepared) data, with a stable id.

A :class:`DataSpec` names a dataset and how an experiment changes it before training (subset
sizes, label noise, class imbalance); :func:`prepare` applies it. A :class:`TrainingRun` is a
data spec, a model kind (``attnknn`` or ``cnn``), its model and training configs and the seed;
its :attr:`~TrainingRun.id` hashes all of that plus the source of the training code, so a run
trains once and every experiment and notebook that needs it finds it in the model cache
(:mod:`attnknn_lib.cache`). ``python -m attnknn_lib.train`` trains one run (a workflow job).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from .datasets import Dataset, load_dataset
from .errors import ConfigError, check_choice, check_range
from .label_noise import NOISE_KINDS, inject_label_noise
from .long_tail import long_tail_indices
from .provenance import config_fingerprint

MODEL_KINDS = ("attnknn", "cnn")


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
    """A dataset after an experiment's changes, with the clean training labels kept for analysis."""

    spec: DataSpec
    dataset: Dataset  # train (subset, possibly noisy labels), val (possibly noisy), test (clean)
    clean_train_y: np.ndarray
    flipped: np.ndarray  # (N_train,) bool: which training labels the noise changed

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
    return Prepared(spec, replace(ds, train=train, val=val), clean, flipped)


@dataclass(frozen=True)
class TrainingRun:
    """One model to train: data, kind, configs, seed. ``id`` is stable across processes and machines."""

    data: DataSpec
    kind: str  # attnknn or cnn
    backbone: str
    backbone_kwargs: dict = field(default_factory=dict)
    attention: dict | None = None  # AttentionConfig fields except num_classes (attnknn only)
    train: dict = field(default_factory=dict)  # TrainConfig fields (seed included)

    def __post_init__(self) -> None:
        check_choice("model kind", self.kind, MODEL_KINDS)

    @property
    def seed(self) -> int:
        return int(self.train.get("seed", 0))

    @property
    def id(self) -> str:
        from .cache import training_code_fingerprint

        return f"{self.data.name}-{self.kind}-s{self.seed}-{config_fingerprint({**self.to_dict(), 'code': training_code_fingerprint()})}"

    @property
    def label(self) -> str:
        """A short human name for progress bars and messages."""
        extra = []
        if self.data.noise != "none":
            extra.append(f"{self.data.noise} noise {self.data.noise_rate:g}")
        if self.data.imbalance < 1:
            extra.append(f"imbalance {self.data.imbalance:g}")
        return f"{self.data.name} {'Attn-KNN' if self.kind == 'attnknn' else 'CNN'} seed {self.seed}" + (
            f" ({', '.join(extra)})" if extra else "")

    def to_dict(self) -> dict:
        return {"data": self.data.to_dict(), "kind": self.kind, "backbone": self.backbone,
                "backbone_kwargs": dict(self.backbone_kwargs), "attention": self.attention, "train": dict(self.train)}

    @classmethod
    def from_dict(cls, d: dict) -> "TrainingRun":
        return cls(DataSpec(**d["data"]), d["kind"], d["backbone"], dict(d.get("backbone_kwargs") or {}),
                   d.get("attention"), dict(d.get("train") or {}))

    def write_spec(self, folder: str | Path) -> Path:
        """``folder/<id>.json`` (rewritten only when its content changes, so file times stay put)."""
        from .io import write_text

        path = Path(folder) / f"{self.id}.json"
        text = json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"
        if not path.exists() or path.read_text() != text:
            write_text(path, text)
        return path


def make_run(recipe, data: DataSpec, kind: str, seed: int) -> TrainingRun:
    """The run of ``kind`` on ``data`` under a :class:`~attnknn_lib.config.Recipe`. The number of
    classes is read from the data when the model is built, so planning never loads a dataset."""
    from .datasets import REGISTRY

    data_kind = REGISTRY[data.name].kind
    backbone, kwargs = recipe.backbone(data_kind)
    attention = None
    if kind == "attnknn":
        attention = recipe.attention_config(2).to_dict()
        attention.pop("num_classes")
    return TrainingRun(data, kind, backbone, kwargs, attention, recipe.train_config(data_kind, seed).to_dict())

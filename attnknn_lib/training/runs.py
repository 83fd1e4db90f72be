"""Training runs: what to train, on which (prepared) data, with a stable id.

A :class:`TrainingRun` is a
data spec, a model kind (``attnknn`` or ``cnn``), its model and training configs and the seed;
its :attr:`~TrainingRun.id` hashes all of that plus the source of the training code, so a run
trains once and every experiment and notebook that needs it finds it in the model cache
(:mod:`attnknn_lib.training.cache`). ``python -m attnknn_lib.training.train_one`` trains one run (a workflow job).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

from attnknn_lib.base.errors import check_choice
from attnknn_lib.base.files import write_text
from attnknn_lib.base.provenance import PACKAGE_DIR, BoundKey, config_fingerprint, pinned_versions
from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.data.spec import DataSpec

MODEL_KINDS = ("attnknn", "cnn")

# library files whose source decides a trained model (the data enters through its fingerprint);
# files, not folders, so that a new module (an attention variant trained elsewhere) does not retrain
# every model. A test checks that every module the training loops import is here or in TRAINING_EXEMPT.
TRAINING_SOURCES = ("models/__init__.py", "models/neighbour_attention.py", "models/backbones.py", "models/classifiers.py",
                    "models/embedder.py", "models/losses.py", "data/transforms.py", "data/label_noise.py",
                    "data/imbalance.py", "data/spec.py", "knn/bank.py", "knn/neighbourhood.py", "knn/votes.py",
                    "evaluation/inference.py",
                    "evaluation/metrics.py", "training/loops.py", "training/train_config.py", "training/precision.py",
                    "training/selection.py", "training/neighbour_search.py", "training/attention_diagnostics.py",
                    "training/runs.py", "base/runtime.py")
# imported by training but cannot change a model: messages, progress bars, files, and the dataset
# loader (whose output is fingerprinted as data)
TRAINING_EXEMPT = ("base/errors.py", "base/progress.py", "base/files.py", "base/paths.py", "base/provenance.py",
                   "base/knobs.py", "data/registry.py", "training/cache.py")


# what a run saves rather than what it trains: hashed at its default, so a run that also keeps every
# epoch's weights (main's replay) is the same model as the recipe's run, trained once (see merge_runs)
SAVED_ONLY = {"keep_epochs": False}


@functools.cache
def training_key() -> BoundKey:
    """The key of :data:`TRAINING_SOURCES` (over their normalised source: a comment or docstring edit
    retrains nothing) and of the pinned computing packages, taken once per process, before the first
    model is trained or looked up: :func:`~attnknn_lib.training.cache.save` stamps a model with it
    only if no training source changed since."""
    return BoundKey.take("the training code", lambda: [PACKAGE_DIR / name for name in TRAINING_SOURCES],
                         pinned_versions())


def training_code_fingerprint() -> str:
    """The part of every run id that names the code and packages that train it (:func:`training_key`)."""
    return training_key().key


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
        trained = {**self.to_dict(), "train": {**self.train, **{k: v for k, v in SAVED_ONLY.items() if k in self.train}}}
        return f"{self.data.name}-{self.kind}-s{self.seed}-{config_fingerprint({**trained, 'code': training_code_fingerprint()})}"

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
    def from_dict(cls, d: dict) -> TrainingRun:
        return cls(DataSpec(**d["data"]), d["kind"], d["backbone"], dict(d.get("backbone_kwargs") or {}),
                   d.get("attention"), dict(d.get("train") or {}))

    def write_spec(self, folder: str | Path) -> Path:
        """``folder/<id>.json`` (rewritten only when its content changes, so file times stay put)."""

        path = Path(folder) / f"{self.id}.json"
        text = json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"
        if not path.exists() or path.read_text() != text:
            write_text(path, text)
        return path


def merge_runs(runs) -> dict[str, TrainingRun]:
    """``{id: run}`` with one run per id; of runs that differ only in what they save, the one that
    keeps its epochs' weights (it serves the others too)."""
    out: dict[str, TrainingRun] = {}
    for run in runs:
        if run.id not in out or (run.train.get("keep_epochs") and not out[run.id].train.get("keep_epochs")):
            out[run.id] = run
    return out


def make_run(recipe, data: DataSpec, kind: str, seed: int) -> TrainingRun:
    """The run of ``kind`` on ``data`` under a :class:`~attnknn_lib.training.recipe.Recipe`. The number of
    classes is read from the data when the model is built, so planning never loads a dataset."""

    data_kind = REGISTRY[data.name].kind
    backbone, kwargs = recipe.backbone(data_kind)
    attention = None
    if kind == "attnknn":
        attention = recipe.attention_config(2).to_dict()
        attention.pop("num_classes")
    return TrainingRun(data, kind, backbone, kwargs, attention, recipe.train_config(data_kind, seed).to_dict())

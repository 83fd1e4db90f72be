"""Trained models cached on disk, keyed by everything that determines them.

``<artifacts>/models/<dataset>/<kind>-<key>/`` holds ``model.pt`` (state dict) and
``train.json`` (history, selected epoch, seconds, the key's contents). The key hashes the model
and training configs, the data fingerprint, the training labels and the source of the modules
that train (so a code change retrains). Later notebooks load these instead of retraining.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn

from .io import read_json, write_json
from .provenance import PACKAGE_DIR, config_fingerprint
from .runtime import seed_everything
from .training import TrainResult

# modules whose source decides a trained model (the data enters through its fingerprint)
TRAINING_SOURCES = ("models", "training.py", "losses.py", "memory.py", "transforms.py", "runtime.py", "cache.py")


def training_code_fingerprint() -> str:
    h = hashlib.sha256()
    for name in TRAINING_SOURCES:
        path = PACKAGE_DIR / name
        for f in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def model_key(kind: str, model_config: dict, train_config: dict, data_fingerprint: str,
              train_labels: np.ndarray) -> dict:
    """Everything that determines a trained model."""
    return {"kind": kind, "model": model_config, "train": train_config, "data": data_fingerprint,
            "labels": hashlib.sha256(np.ascontiguousarray(train_labels, dtype=np.int64).tobytes()).hexdigest()[:16],
            "code": training_code_fingerprint()}


def load_or_train(artifacts: str | Path, dataset_name: str, key: dict, build: Callable[[], nn.Module],
                  train: Callable[[nn.Module], TrainResult], force: bool = False, seed: int = 0
                  ) -> tuple[TrainResult, bool]:
    """The cached model for ``key`` if there is one (and neither ``force`` nor ``$ATTNKNN_RETRAIN=1``,
    which ``./run_all.sh --force`` sets), else train and cache it. Returns (result, loaded_from_cache)."""
    force = force or os.environ.get("ATTNKNN_RETRAIN") == "1"
    folder = Path(artifacts) / "models" / dataset_name / f"{key['kind']}-{config_fingerprint(key)}"
    weights, meta = folder / "model.pt", folder / "train.json"
    if not force and weights.exists() and meta.exists():
        model = build()
        model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
        model.eval()
        info = read_json(meta)
        return TrainResult(model, info["history"], info["best_epoch"], info["seconds"]), True
    seed_everything(seed)  # initial weights depend on the seed only (torch's default seed is random per process)
    result = train(build())
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".pt.tmp")
    os.close(fd)
    torch.save({k: v.detach().cpu() for k, v in result.model.state_dict().items()}, tmp)
    os.replace(tmp, weights)
    write_json(meta, {"key": key, "history": result.history, "best_epoch": result.best_epoch,
                      "seconds": result.seconds})  # written last: its presence marks a complete entry
    return result, False

"""The model cache: one folder per training run, written atomically.

``<artifacts>/models/<run id>/`` holds ``model.pt`` (state dict) and ``train.json`` (the run's
spec, history per epoch, selected epoch, seconds, data fingerprint), and ``epochs.pt`` (every
epoch's state dict) for a run whose config keeps its epochs. The run id hashes the run's
spec and the source of the training code (a code change gives new ids, so models retrain). The
folder is assembled under a temporary name and renamed into place, so it exists complete or not
at all; a folder that fails to load (truncated, corrupt, another data fingerprint) is retrained.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import torch
from torch import nn

from attnknn_lib.base.files import read_json, write_json
from attnknn_lib.base.provenance import bf16_kernels
from attnknn_lib.base.runtime import seed_everything
from attnknn_lib.data.spec import Prepared, prepare
from attnknn_lib.models import AttentionConfig, build_attnknn, build_cnn
from attnknn_lib.training.loops import TrainConfig, TrainResult, train_attnknn, train_cnn
from attnknn_lib.training.runs import TrainingRun, training_key


def model_dir(artifacts: str | Path, run: TrainingRun) -> Path:
    return Path(artifacts) / "models" / run.id


def build_model(run: TrainingRun, prepared: Prepared) -> nn.Module:
    ds = prepared.dataset
    if run.kind == "attnknn":
        return build_attnknn(run.backbone, ds.input_shape, AttentionConfig(num_classes=ds.num_classes, **run.attention),
                             **run.backbone_kwargs)
    return build_cnn(run.backbone, ds.input_shape, ds.num_classes, **run.backbone_kwargs)


def _train(run: TrainingRun, prepared: Prepared, progress: bool) -> TrainResult:
    seed_everything(run.seed)  # initial weights depend on the seed only (torch's default seed is random per process)
    model = build_model(run, prepared)
    fn = train_attnknn if run.kind == "attnknn" else train_cnn
    return fn(model, prepared.dataset, TrainConfig(**run.train), progress=progress, name=run.label)


def load_cached(run: TrainingRun, prepared: Prepared, artifacts: str | Path) -> TrainResult | None:
    """The cached model of ``run``, or None if there is none or it cannot be used (then it is
    set aside with a warning, to be retrained)."""
    folder = model_dir(artifacts, run)
    weights, meta, epochs = folder / "model.pt", folder / "train.json", folder / "epochs.pt"
    keep = bool(run.train.get("keep_epochs"))
    if not (weights.exists() and meta.exists()) or (keep and not epochs.exists()):
        return None
    try:
        info = read_json(meta)
        if info.get("data_fingerprint") != prepared.fingerprint():
            raise ValueError("it was trained on other data")
        model = build_model(run, prepared)
        model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
        states = torch.load(epochs, map_location="cpu", weights_only=True) if keep else None
        if keep and len(states) != len(info["history"]):
            raise ValueError(f"epochs.pt holds {len(states)} epochs, the history {len(info['history'])}")
    except Exception as err:  # a truncated or corrupt file raises many types (EOFError, RuntimeError, ...)
        warnings.warn(f"cached model {folder.name} cannot be used ({type(err).__name__}: "
                      f"{str(err).splitlines()[0] if str(err) else ''}); retraining it", stacklevel=2)
        shutil.rmtree(folder, ignore_errors=True)
        return None
    model.eval()
    return TrainResult(model, info["history"], info["best_epoch"], info["seconds"], states)


def save(run: TrainingRun, prepared: Prepared, result: TrainResult, artifacts: str | Path) -> Path:
    """Write the run's folder under a temporary name, then rename it into place (atomic); refused
    when a training source changed since the process took its key (the model would be stored under
    the id of code that did not train it)."""
    training_key().stamp()
    folder = model_dir(artifacts, run)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    torch.save({k: v.detach().cpu() for k, v in result.model.state_dict().items()}, tmp / "model.pt")
    if result.epoch_states is not None:
        torch.save(result.epoch_states, tmp / "epochs.pt")
    write_json(tmp / "train.json", {"run": run.to_dict(), "run_id": run.id, "label": run.label,
                                    "data_fingerprint": prepared.fingerprint(), "history": result.history,
                                    "best_epoch": result.best_epoch, "seconds": result.seconds,
                                    "bf16_kernels": bf16_kernels()})  # what the bf16 steps' last digits depend on
    shutil.rmtree(folder, ignore_errors=True)  # an unusable earlier copy
    os.replace(tmp, folder)
    return folder


def load_or_train(run: TrainingRun, artifacts: str | Path, prepared: Prepared | None = None,
                  force: bool = False, progress: bool = True) -> tuple[TrainResult, bool]:
    """The cached model of ``run``, else train and cache it. ``force`` (or ``$ATTNKNN_RETRAIN=1``)
    retrains. Returns (result, loaded_from_cache)."""
    training_key()  # taken before anything is trained: the model is stamped with the code that trains it
    prepared = prepared if prepared is not None else prepare(run.data)
    force = force or os.environ.get("ATTNKNN_RETRAIN") == "1"
    if not force:
        cached = load_cached(run, prepared, artifacts)
        if cached is not None:
            return cached, True
    result = _train(run, prepared, progress)
    save(run, prepared, result, artifacts)
    return result, False

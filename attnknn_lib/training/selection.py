"""The checkpoint chosen on validation: per-epoch validation metrics and the best epoch's state (the test set plays no part)."""

from __future__ import annotations

import copy
import time

import numpy as np
from torch import nn

from attnknn_lib.base.progress import write as progress_write
from attnknn_lib.evaluation.metrics import accuracy, ece, nll
from attnknn_lib.training.train_config import TrainResult


def selection_key(row: dict) -> tuple[float, float]:
    """The rank of a scored epoch (or of any configuration scored the same way): higher validation
    accuracy first, then lower validation NLL."""
    return row["val_accuracy"], -row["val_nll"]


class _Selection:
    """Per-epoch validation metrics, and the state of the best epoch so far (highest validation
    accuracy; ties: lower validation NLL). The test set plays no part."""

    def __init__(self, name: str, model: nn.Module, val_labels: np.ndarray, progress: bool, keep_epochs: bool = False):
        self.name, self.model, self.val_labels, self.progress = name, model, val_labels, progress
        self.epoch_states: list[dict] | None = [] if keep_epochs else None
        self.history: list[dict] = []
        self.best: dict | None = None
        self.best_state: dict | None = None
        self.start = time.perf_counter()

    def add(self, row: dict, val_probs: np.ndarray, t0: float) -> None:
        y = self.val_labels
        row.update({"val_accuracy": accuracy(val_probs, y), "val_nll": nll(val_probs, y), "val_ece": ece(val_probs, y),
                    "seconds": time.perf_counter() - t0})
        self.history.append(row)
        if self.epoch_states is not None:
            self.epoch_states.append({k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()})
        if self.best is None or selection_key(row) > selection_key(self.best):
            self.best, self.best_state = row, copy.deepcopy(self.model.state_dict())
        if self.progress:
            progress_write(f"{self.name} epoch {row['epoch']}: loss {row['train_loss']:.3f}, val acc "
                       f"{row['val_accuracy']:.4f}, val ECE {row['val_ece']:.4f}, {row['seconds']:.0f} s")

    def result(self) -> TrainResult:
        self.model.load_state_dict(self.best_state)
        self.model.eval()
        return TrainResult(self.model, self.history, self.best["epoch"], time.perf_counter() - self.start,
                           self.epoch_states)

"""Torch views of a :class:`~attnknn_lib.datasets.Dataset`: per-sample transforms and a dataset
that returns the sample's position, so stored embeddings never depend on the sampler's order.

Images use torchvision's v2 transforms. Training: random crop with padding + horizontal flip.
Evaluation: normalisation only. Test-time augmentation (TTA) is a fixed list of deterministic
views (original, flip, four shifted crops), so TTA numbers are reproducible without a seed.
Tabular inputs are already standardised; they get no augmentation and a one-view TTA.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch.utils.data import Dataset as TorchDataset
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as TF

from .datasets import Dataset, DataSplit
from .errors import ConfigError

Transform = Callable[[object], torch.Tensor]


class ArrayDataset(TorchDataset):
    """``(input, label, position)`` triples over a :class:`DataSplit`.

    ``labels`` may override the split's labels (e.g. noisy training labels).
    """

    def __init__(self, split: DataSplit, transform: Transform | None = None, labels: np.ndarray | None = None):
        self.x = split.x
        self.y = torch.as_tensor(split.y if labels is None else labels, dtype=torch.long)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        x = self.x[i]
        x = self.transform(x) if self.transform is not None else torch.as_tensor(x)
        return x, self.y[i], i


class FixedCrop:
    """Pad by ``pad`` (zeros) and crop the original size at offset ``(top, left)``: a pixel shift."""

    def __init__(self, pad: int, top: int, left: int):
        self.pad, self.top, self.left = pad, top, left

    def __call__(self, img: torch.Tensor) -> torch.Tensor:
        h, w = img.shape[-2:]
        return TF.crop(TF.pad(img, [self.pad]), self.top, self.left, h, w)

    def __repr__(self) -> str:
        return f"FixedCrop(pad={self.pad}, top={self.top}, left={self.left})"


def _to_float() -> list:
    return [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]


def _normalize(dataset: Dataset) -> v2.Normalize:
    return v2.Normalize(list(dataset.mean), list(dataset.std))


def train_transform(dataset: Dataset, crop_padding: int | None = None, hflip: bool = True) -> Transform | None:
    """Random crop (padding 4 px for 32x32, 2 px for 28x28 by default) and horizontal flip."""
    if dataset.kind != "image":
        return None
    pad = crop_padding if crop_padding is not None else max(1, dataset.input_shape[-1] // 8 - 1)
    ops = _to_float() + [v2.RandomCrop(dataset.input_shape[-2:], padding=pad)]
    if hflip:
        ops.append(v2.RandomHorizontalFlip())
    return v2.Compose(ops + [_normalize(dataset)])


def eval_transform(dataset: Dataset) -> Transform | None:
    """Tensor conversion and normalisation with training-set statistics."""
    if dataset.kind != "image":
        return None
    return v2.Compose(_to_float() + [_normalize(dataset)])


def tta_transforms(dataset: Dataset, n_views: int = 6, shift: int | None = None) -> dict[str, Transform | None]:
    """Named deterministic TTA views: original, hflip, then crops shifted by ``shift`` px toward
    each corner (``n_views`` in 1..6). Tabular data has only the original view."""
    if dataset.kind != "image":
        return {"original": None}
    if not 1 <= n_views <= 6:
        raise ConfigError(f"n_views={n_views!r} is out of range; allowed: 1..6")
    s = shift if shift is not None else max(1, dataset.input_shape[-1] // 14)
    base, norm = _to_float(), _normalize(dataset)
    views: dict[str, Transform | None] = {
        "original": v2.Compose(base + [norm]),
        "hflip": v2.Compose(base + [v2.RandomHorizontalFlip(p=1.0), norm]),
    }
    for name, (top, left) in {"shift_tl": (0, 0), "shift_br": (2 * s, 2 * s),
                              "shift_tr": (0, 2 * s), "shift_bl": (2 * s, 0)}.items():
        views[name] = v2.Compose(base + [FixedCrop(s, top, left), norm])
    return dict(list(views.items())[:n_views])

"""Tensors for the models, and augmentation applied to whole batches.

A split is converted once to a float tensor (images: (N, C, H, W) scaled to [0, 1] and
normalised with the training mean/std; tabular: (N, F), already standardised). Augmentation
then works on batches, which on a two-core CPU is several times faster than per-sample
transform pipelines (measured: ~2,000 vs ~900 training images/s for the small CNN):

* training: random crop with zero padding (2 px at 28x28, 4 px at 32x32) + horizontal flip, drawn
  independently per image from a seeded generator (torchvision's RandomCrop/RandomHorizontalFlip
  semantics; padding is black in pixel space, i.e. ``-mean/std`` after normalisation);
* test-time augmentation (TTA): a fixed list of deterministic views (original, flip, four shifted
  crops), so TTA numbers are reproducible without a seed.

Tabular inputs get no augmentation and a one-view TTA.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import torch

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.data.registry import Dataset, DataSplit

View = Callable[[torch.Tensor], torch.Tensor]
TTA_VIEW_NAMES = ("original", "hflip", "shift_tl", "shift_br", "shift_tr", "shift_bl")


def to_tensor(dataset: Dataset, split: DataSplit) -> torch.Tensor:
    """The model input for every row of ``split``: (N, C, H, W) normalised images or (N, F) features."""
    if dataset.kind != "image":
        return torch.as_tensor(split.x, dtype=torch.float32)
    x = torch.from_numpy(np.ascontiguousarray(split.x)).permute(0, 3, 1, 2).float().div_(255.0)  # (N, C, H, W)
    # torchvision's normalize, written out: importing torchvision costs each job about 1.3 s
    mean = torch.as_tensor(list(dataset.mean), dtype=x.dtype).view(-1, 1, 1)
    std = torch.as_tensor(list(dataset.std), dtype=x.dtype).view(-1, 1, 1)
    return x.sub_(mean).div_(std)


def default_padding(dataset: Dataset) -> int:
    """2 px for 28x28, 4 px for 32x32 (the usual CIFAR setting), at least 1."""
    return max(1, dataset.input_shape[-1] // 8 - 1)


def _black(dataset: Dataset) -> torch.Tensor:
    """Pixel value 0 after normalisation, per channel: (C, 1, 1)."""
    return (-torch.tensor(dataset.mean) / torch.tensor(dataset.std)).view(-1, 1, 1).float()


def _pad(x: torch.Tensor, pad: int, fill: torch.Tensor) -> torch.Tensor:
    b, c, h, w = x.shape
    out = fill.to(x.dtype).to(x.device).expand(c, h + 2 * pad, w + 2 * pad).repeat(b, 1, 1, 1)
    out[:, :, pad:pad + h, pad:pad + w] = x
    return out  # (B, C, H + 2p, W + 2p)


class BatchAugment:
    """Per-image random crop (zero padding ``pad``) and horizontal flip for a batch (B, C, H, W)."""

    def __init__(self, dataset: Dataset, pad: int | None = None, hflip: bool = True):
        if dataset.kind != "image":
            raise ConfigError(f"dataset {dataset.name!r} is tabular; batch augmentation is for images")
        self.pad = default_padding(dataset) if pad is None else pad
        self.hflip = hflip
        self.fill = _black(dataset)

    def __call__(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        b, c, h, w = x.shape
        p = self.pad
        if p > 0:
            padded = _pad(x, p, self.fill)
            dy = torch.randint(0, 2 * p + 1, (b,), generator=generator)
            dx = torch.randint(0, 2 * p + 1, (b,), generator=generator)
            rows = (dy[:, None] + torch.arange(h)).to(x.device)  # (B, H)
            cols = (dx[:, None] + torch.arange(w)).to(x.device)  # (B, W)
            bi = torch.arange(b, device=x.device)[:, None, None]
            x = padded.permute(0, 2, 3, 1)[bi, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)  # (B, C, H, W)
        if self.hflip:
            flip = (torch.rand(b, generator=generator) < 0.5).to(x.device).view(b, 1, 1, 1)
            x = torch.where(flip, x.flip(-1), x)
        return x.contiguous()


class Shift:
    """Deterministic view: the image moved by (dy, dx) pixels, uncovered pixels black."""

    def __init__(self, dataset: Dataset, dy: int, dx: int):
        self.dy, self.dx, self.fill = dy, dx, _black(dataset)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        p = max(abs(self.dy), abs(self.dx))
        padded = _pad(x, p, self.fill)
        return padded[:, :, p - self.dy:p - self.dy + h, p - self.dx:p - self.dx + w]

    def __repr__(self) -> str:
        return f"Shift(dy={self.dy}, dx={self.dx})"


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


def _hflip(x: torch.Tensor) -> torch.Tensor:
    return x.flip(-1)


def tta_views(dataset: Dataset, n_views: int = 6, shift: int | None = None) -> dict[str, View]:
    """Named deterministic TTA views for batches: original, hflip, then the image shifted by
    ``shift`` px (default: the training crop padding) toward each corner; ``n_views`` in 1..6.
    Tabular data has only the original view."""
    if dataset.kind != "image":
        return {"original": _identity}
    if not 1 <= n_views <= len(TTA_VIEW_NAMES):
        raise ConfigError(f"n_views={n_views!r} is out of range; allowed: 1..{len(TTA_VIEW_NAMES)}")
    s = default_padding(dataset) if shift is None else shift
    views: dict[str, View] = {"original": _identity, "hflip": _hflip,
                              "shift_tl": Shift(dataset, -s, -s), "shift_br": Shift(dataset, s, s),
                              "shift_tr": Shift(dataset, -s, s), "shift_bl": Shift(dataset, s, -s)}
    return {name: views[name] for name in TTA_VIEW_NAMES[:n_views]}


def batches(n: int, batch_size: int, shuffle: bool = False, generator: torch.Generator | None = None
            ) -> Iterator[torch.Tensor]:
    """Index tensors covering 0..n-1 in chunks of ``batch_size`` (a seeded permutation if ``shuffle``)."""
    order = torch.randperm(n, generator=generator) if shuffle else torch.arange(n)
    for s in range(0, n, batch_size):
        yield order[s:s + batch_size]

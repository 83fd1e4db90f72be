"""Batch transforms: normalisation with training statistics, per-image random crops/flips, deterministic TTA."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.data.registry import Dataset, DataSplit
from attnknn_lib.data.transforms import BatchAugment, Shift, batches, to_tensor, tta_views


def _image_dataset(n: int = 8) -> Dataset:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(n, 28, 28, 1), dtype=np.uint8)
    split = DataSplit(x, np.arange(n) % 2, np.arange(n))
    return Dataset("toy", "image", 2, (1, 28, 28), ("a", "b"), split, split, split, (0.5,), (0.25,))


def test_to_tensor_scales_to_unit_range_then_normalises_channels_first():
    ds = _image_dataset()
    x = to_tensor(ds, ds.train)
    assert x.shape == (8, 1, 28, 28) and x.dtype == torch.float32
    expected = (torch.as_tensor(ds.train.x[3, :, :, 0], dtype=torch.float32) / 255 - 0.5) / 0.25
    torch.testing.assert_close(x[3, 0], expected)


def test_augmentation_crops_and_flips_each_image_independently_and_reproducibly():
    ds = _image_dataset()
    x = to_tensor(ds, ds.train)[:1].repeat(64, 1, 1, 1)  # 64 copies of one image
    aug = BatchAugment(ds)
    out = aug(x, torch.Generator().manual_seed(0))
    assert out.shape == x.shape
    assert len({tuple(o.flatten()[:200].tolist()) for o in out}) > 20  # different crops/flips per copy
    torch.testing.assert_close(out, aug(x, torch.Generator().manual_seed(0)))
    black = (0 - 0.5) / 0.25
    # every output is a shifted (maybe flipped) copy: each row of it appears in the padded original
    padded = torch.nn.functional.pad(x[0], (2, 2, 2, 2), value=black)
    for o in out[:8]:
        found = any(torch.equal(o, cand) for dy in range(5) for dx in range(5)
                    for cand in (padded[:, dy:dy + 28, dx:dx + 28], padded[:, dy:dy + 28, dx:dx + 28].flip(-1)))
        assert found


def test_tta_views_are_the_original_a_flip_and_four_shifts():
    ds = _image_dataset()
    views = tta_views(ds)
    assert list(views) == ["original", "hflip", "shift_tl", "shift_br", "shift_tr", "shift_bl"]
    x = to_tensor(ds, ds.train)
    torch.testing.assert_close(views["original"](x), x)
    torch.testing.assert_close(views["hflip"](x), x.flip(-1))
    s = 2
    br = views["shift_br"](x)  # content moves down-right: output (i, j) = input (i - s, j - s)
    torch.testing.assert_close(br[:, :, s:, s:], x[:, :, :-s, :-s])
    assert torch.all(br[:, :, :s, :] == (0 - 0.5) / 0.25)  # uncovered pixels are black
    torch.testing.assert_close(views["shift_tl"](x)[:, :, :-s, :-s], x[:, :, s:, s:])
    assert list(tta_views(ds, n_views=2)) == ["original", "hflip"]
    with pytest.raises(ConfigError, match="n_views=7 is out of range"):
        tta_views(ds, n_views=7)
    assert repr(Shift(ds, 1, -1)) == "Shift(dy=1, dx=-1)"


def test_tabular_data_has_one_tta_view_and_no_augmentation():
    split = DataSplit(np.ones((4, 3), np.float32), np.array([0, 1, 0, 1]), np.arange(4))
    ds = Dataset("tab", "tabular", 2, (3,), ("a", "b"), split, split, split)
    assert list(tta_views(ds)) == ["original"]
    torch.testing.assert_close(to_tensor(ds, split), torch.ones(4, 3))
    with pytest.raises(ConfigError, match="tabular"):
        BatchAugment(ds)


def test_batches_cover_every_row_once():
    idx = torch.cat(list(batches(10, 4, shuffle=True, generator=torch.Generator().manual_seed(0))))
    assert sorted(idx.tolist()) == list(range(10))
    assert [len(b) for b in batches(10, 4)] == [4, 4, 2]

"""Image transforms: shapes, normalisation with training statistics, deterministic TTA views."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnknn_lib.datasets import Dataset, DataSplit
from attnknn_lib.errors import ConfigError
from attnknn_lib.transforms import ArrayDataset, eval_transform, train_transform, tta_transforms


def _image_dataset(n: int = 8) -> Dataset:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(n, 28, 28, 1), dtype=np.uint8)
    split = DataSplit(x, np.arange(n) % 2, np.arange(n))
    return Dataset("toy", "image", 2, (1, 28, 28), ("a", "b"), split, split, split, (0.5,), (0.25,))


def test_eval_transform_scales_to_unit_range_then_normalises():
    ds = _image_dataset()
    out = eval_transform(ds)(ds.train.x[0])
    assert out.shape == (1, 28, 28) and out.dtype == torch.float32
    expected = (torch.as_tensor(ds.train.x[0][..., 0], dtype=torch.float32) / 255 - 0.5) / 0.25
    torch.testing.assert_close(out[0], expected)


def test_train_transform_is_random_but_keeps_shape():
    ds = _image_dataset()
    t = train_transform(ds)
    torch.manual_seed(0)
    views = torch.stack([t(ds.train.x[0]) for _ in range(8)])
    assert views.shape == (8, 1, 28, 28)
    assert not all(torch.equal(views[0], v) for v in views[1:])


def test_tta_views_are_deterministic_flip_and_shifts():
    ds = _image_dataset()
    views = tta_transforms(ds)
    assert list(views) == ["original", "hflip", "shift_tl", "shift_br", "shift_tr", "shift_bl"]
    img = ds.train.x[3]
    orig = views["original"](img)
    torch.testing.assert_close(views["hflip"](img), orig.flip(-1))
    s = 2  # 28 // 14
    # shift toward the bottom-right corner: output pixel (i, j) is input pixel (i + s, j + s)
    torch.testing.assert_close(views["shift_br"](img)[:, : 28 - s, : 28 - s], orig[:, s:, s:])
    torch.testing.assert_close(views["shift_tl"](img)[:, s:, s:], orig[:, : 28 - s, : 28 - s])
    torch.testing.assert_close(views["shift_tl"](img), views["shift_tl"](img))
    assert list(tta_transforms(ds, n_views=2)) == ["original", "hflip"]
    with pytest.raises(ConfigError, match="n_views=7 is out of range"):
        tta_transforms(ds, n_views=7)


def test_tabular_data_has_no_augmentation_and_one_tta_view():
    split = DataSplit(np.zeros((4, 3), np.float32), np.array([0, 1, 0, 1]), np.arange(4))
    ds = Dataset("tab", "tabular", 2, (3,), ("a", "b"), split, split, split)
    assert train_transform(ds) is None and eval_transform(ds) is None
    assert tta_transforms(ds) == {"original": None}


def test_array_dataset_returns_position_and_optional_override_labels():
    ds = _image_dataset()
    data = ArrayDataset(ds.train, eval_transform(ds), labels=np.array([1, 1, 1, 1, 0, 0, 0, 0]))
    x, y, i = data[5]
    assert x.shape == (1, 28, 28) and int(y) == 0 and i == 5 and len(data) == 8

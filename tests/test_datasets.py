"""Dataset registry: real on-disk formats, deterministic splits, one-line errors when data is missing."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from conftest import write_cifar10, write_mnist_like

from attnknn_lib.base.errors import ConfigError, DataNotFoundError
from attnknn_lib.data.registry import DATASET_NAMES, REGISTRY, load_dataset

SYSTEM_FASHION = Path("/usr/share/datasets/fashion-mnist")


def _check_partition(ds, n_pool: int) -> None:
    """train and val are disjoint and together are the whole training pool."""
    ids = np.concatenate([ds.train.ids, ds.val.ids])
    assert len(np.unique(ids)) == len(ids) == n_pool


def test_registry_lists_every_dataset_of_the_paper():
    assert set(DATASET_NAMES) == {"fashion_mnist", "cifar10", "mnist", "digits", "iris", "wine", "breast_cancer",
                                  "adult", "wine_quality"}
    assert {REGISTRY[n].kind for n in ("fashion_mnist", "cifar10", "mnist")} == {"image"}


def test_fashion_mnist_unpacks_gzipped_debian_files_into_torchvision_layout(tmp_path, data_root, monkeypatch):
    system = tmp_path / "debian"
    (xtr, ytr), (xte, yte) = write_mnist_like(system, n_train=100, n_test=30, gz=True)
    monkeypatch.setenv("ATTNKNN_FASHION_MNIST_DIR", str(system))
    ds = load_dataset("fashion_mnist", val_fraction=0.2, download=False)
    assert (data_root / "FashionMNIST" / "raw" / "train-images-idx3-ubyte").exists()
    assert ds.kind == "image" and ds.input_shape == (1, 28, 28) and ds.num_classes == 10
    assert (len(ds.train), len(ds.val), len(ds.test)) == (80, 20, 30)
    _check_partition(ds, 100)
    # every row is the pixel block the test wrote, traced back by its id
    np.testing.assert_array_equal(ds.train.x[..., 0], xtr[ds.train.ids])
    np.testing.assert_array_equal(ds.val.y, ytr[ds.val.ids])
    np.testing.assert_array_equal(ds.test.x[..., 0], xte)
    assert np.bincount(ds.val.y, minlength=10).tolist() == [2] * 10  # stratified
    assert ds.class_names[0] == "T-shirt/top"


def test_mnist_reads_idx_files_through_torchvision(data_root):
    (xtr, ytr), (xte, yte) = write_mnist_like(data_root / "MNIST" / "raw", n_train=50, n_test=10)
    ds = load_dataset("mnist", val_fraction=0.2, download=False)
    assert (len(ds.train), len(ds.val), len(ds.test)) == (40, 10, 10)
    np.testing.assert_array_equal(ds.test.y, yte)
    np.testing.assert_array_equal(ds.train.x[..., 0], xtr[ds.train.ids])


def test_cifar10_reads_python_pickle_batches(data_root):
    (xtr, ytr), (xte, yte) = write_cifar10(data_root / "cifar-10-batches-py", per_batch=20, n_test=20)
    ds = load_dataset("cifar10", val_fraction=0.1, download=False)
    assert ds.input_shape == (3, 32, 32) and ds.class_names[-1] == "truck"
    assert (len(ds.train), len(ds.val), len(ds.test)) == (90, 10, 20)
    np.testing.assert_array_equal(ds.train.x, xtr[ds.train.ids])  # HWC, same pixels as written
    np.testing.assert_array_equal(ds.test.y, yte)
    assert len(ds.mean) == 3 and all(0 < m < 1 for m in ds.mean)


@pytest.mark.parametrize("name,folder", [("cifar10", "cifar-10-batches-py"), ("mnist", "MNIST/raw"),
                                         ("fashion_mnist", "FashionMNIST/raw"), ("adult", "adult"),
                                         ("wine_quality", "wine_quality")])
def test_missing_data_offline_fails_with_one_line_naming_dataset_place_and_fix(name, folder, data_root):
    with pytest.raises(DataNotFoundError) as info:
        load_dataset(name, download=False)
    msg = str(info.value)
    assert "\n" not in msg
    assert repr(name) in msg and str(data_root / folder) in msg and "ATTNKNN_DATA_ROOT" in msg


def test_unknown_dataset_or_bad_fraction_is_one_line_config_error():
    with pytest.raises(ConfigError, match="dataset='cifar100' is not allowed; choose one of: fashion_mnist"):
        load_dataset("cifar100")
    with pytest.raises(ConfigError, match=r"val_fraction=1.5 is out of range; allowed: \(0.0, 1.0\)"):
        load_dataset("iris", val_fraction=1.5)


@pytest.mark.parametrize("name,features,classes,n", [("digits", 64, 10, 1797), ("iris", 4, 3, 150),
                                                     ("wine", 13, 3, 178), ("breast_cancer", 30, 2, 569)])
def test_sklearn_tabular_sets_split_stratified_and_standardised_on_train(name, features, classes, n):
    ds = load_dataset(name, val_fraction=0.2, test_fraction=0.2)
    assert ds.kind == "tabular" and ds.input_shape == (features,) and ds.num_classes == classes
    assert len(ds.train) + len(ds.val) + len(ds.test) == n
    assert len(ds.test) == round(0.2 * n)
    pool_ids = np.concatenate([ds.train.ids, ds.val.ids, ds.test.ids])
    assert len(np.unique(pool_ids)) == n  # three disjoint splits of the whole set
    np.testing.assert_allclose(ds.train.x.mean(0), 0, atol=1e-4)
    assert set(np.unique(ds.test.y)) == set(range(classes))


def test_splits_depend_only_on_split_seed():
    a, b = load_dataset("wine", split_seed=0), load_dataset("wine", split_seed=0)
    c = load_dataset("wine", split_seed=1)
    np.testing.assert_array_equal(a.val.ids, b.val.ids)
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()
    assert not np.array_equal(a.test.ids, c.test.ids)


def test_max_sizes_take_stratified_subsets():
    ds = load_dataset("digits", max_train=200, max_val=50, max_test=100)
    assert (len(ds.train), len(ds.val), len(ds.test)) == (200, 50, 100)
    assert np.bincount(ds.train.y).min() >= 19  # all 10 classes, about 20 each


def test_adult_reads_uci_files_with_separate_test_file(data_root):
    folder = data_root / "adult"
    folder.mkdir()
    rows = []
    for i in range(40):
        income = ">50K" if i % 3 == 0 else "<=50K"
        work = ["Private", "State-gov", "?"][i % 3 if i % 7 else 2]
        rows.append(f"{20 + i}, {work}, {1000 + i}, Bachelors, 13, Never-married, Sales, Husband, White, Male, "
                    f"{i * 10}, 0, 40, United-States, {income}")
    (folder / "adult.data").write_text("\n".join(rows[:30]) + "\n")
    test_rows = [r + "." for r in rows[30:]]  # the UCI test file marks labels with a trailing dot
    (folder / "adult.test").write_text("|1x3 Cross validator\n" + "\n".join(test_rows) + "\n")
    ds = load_dataset("adult", val_fraction=0.25, download=False)
    n_missing_train = sum("?" in r for r in rows[:30])
    n_missing_test = sum("?" in r for r in rows[30:])
    assert len(ds.train) + len(ds.val) == 30 - n_missing_train  # rows with '?' are dropped
    assert len(ds.test) == 10 - n_missing_test
    assert ds.num_classes == 2 and ds.class_names == ("<=50K", ">50K")
    # 6 numeric columns + one-hot workclass (2 values seen) and single-valued categoricals
    assert ds.input_shape[0] == 6 + 2 + 7
    expected_test = [int(">50K" in r) for r in test_rows if "?" not in r]
    assert ds.test.y.tolist() == expected_test


def test_wine_quality_maps_quality_scores_to_classes(data_root):
    folder = data_root / "wine_quality"
    folder.mkdir()
    header = '"fixed acidity";"volatile acidity";"alcohol";"quality"'
    red = [f"{7 + i % 3};{0.5 + i / 100};{9 + i % 4};{[5, 6, 7][i % 3]}" for i in range(30)]
    white = [f"{6 + i % 2};{0.3 + i / 100};{10 + i % 3};{[3, 6][i % 2]}" for i in range(20)]
    (folder / "winequality-red.csv").write_text("\n".join([header] + red) + "\n")
    (folder / "winequality-white.csv").write_text("\n".join([header] + white) + "\n")
    ds = load_dataset("wine_quality", download=False)
    assert ds.num_classes == 4 and ds.class_names == ("quality 3", "quality 5", "quality 6", "quality 7")
    assert ds.input_shape == (4,)  # three measurements + is_red
    assert len(ds.train) + len(ds.val) + len(ds.test) == 50


@pytest.mark.skipif(not SYSTEM_FASHION.exists(), reason="Debian's dataset-fashion-mnist is not installed "
                    "(./run_all.sh installs it when run as root)")
def test_real_fashion_mnist_from_the_debian_package(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNKNN_DATA_ROOT", str(tmp_path))
    monkeypatch.delenv("ATTNKNN_FASHION_MNIST_DIR", raising=False)
    ds = load_dataset("fashion_mnist", download=False)
    assert (len(ds.train), len(ds.val), len(ds.test)) == (54000, 6000, 10000)
    assert np.bincount(ds.val.y).tolist() == [600] * 10 and np.bincount(ds.test.y).tolist() == [1000] * 10
    assert 0.28 < ds.mean[0] < 0.29  # Fashion-MNIST's well-known pixel mean, 0.2860
    assert os.path.getsize(tmp_path / "FashionMNIST" / "raw" / "train-images-idx3-ubyte") == 16 + 60000 * 784

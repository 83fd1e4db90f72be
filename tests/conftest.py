"""Shared fixtures: tiny dataset files in the real on-disk formats, isolated data roots."""

from __future__ import annotations

import gzip
import os
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

# One thread per core and test process: with -n 2 on two cores, each worker's torch, OpenMP (scikit-learn,
# FAISS) and BLAS pools get one thread, and so do those of every process a test starts (the smoke
# workflow's jobs among them: workflow/Snakefile sets their torch threads, not their BLAS's). With two
# threads each, beside the other worker or another job, the pools spin against each other: the positive
# control's slow test took 3 s alone and 95 s in the suite; an attention-study part job of the smoke run
# 21 s beside one busy process with one BLAS and OpenMP thread, 69 s with two. ATTNKNN_THREADS is what
# the library's set_threads() (an experiment's start(), the bench) gives when asked for no number.
THREADS = max(1, (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
for _var in ("ATTNKNN_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)
torch.set_num_threads(THREADS)


def pytest_collection_finish(session):
    """The pools of every library the collected test modules loaded (FAISS's OpenMP and BLAS among
    them), limited once they are all loaded."""
    threadpool_limits(THREADS)


LONGEST_FILE = "test_workflow.py"  # the smoke workflow's runs: most of the full suite's time


def pytest_collection_modifyitems(config, items):
    """The longest file first, then the files without a slow test, then the rest. With ``-n 2 --dist
    loadfile --no-loadscope-reorder`` (pyproject.toml) the workers are sent the files in this order, a
    worker asking for more when it has two tests left: the smoke workflow's worker starts it at once,
    and the other worker runs every other file beside it. (xdist's default reorders the files by their
    number of tests, which sent the six of test_workflow.py last: the smoke run started when every
    other file was done, and the full suite took 1,122 s.)"""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (item.path.name != LONGEST_FILE, item.path in slow_files))  # stable otherwise


def write_idx(path: Path, array: np.ndarray, gz: bool = False) -> None:
    """IDX file: magic (0, 0, 0x08 = ubyte, ndim), big-endian int32 dims, raw bytes."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    payload = struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        with gzip.open(path, "wb") as f:
            f.write(payload)
    else:
        path.write_bytes(payload)


def make_images(n: int, h: int, w: int, num_classes: int, seed: int, channels: int | None = None):
    """Images whose brightness encodes the class, labels cycling through all classes."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % num_classes
    rng.shuffle(y)
    shape = (n, h, w) if channels is None else (n, h, w, channels)
    x = rng.integers(0, 40, size=shape) + (y * 20).reshape((-1,) + (1,) * (len(shape) - 1))
    return x.astype(np.uint8), y.astype(np.uint8)


def write_mnist_like(folder: Path, n_train: int = 60, n_test: int = 20, gz: bool = False, seed: int = 0):
    """The four MNIST/Fashion-MNIST IDX files (gzipped with a .gz suffix if ``gz``)."""
    xtr, ytr = make_images(n_train, 28, 28, 10, seed)
    xte, yte = make_images(n_test, 28, 28, 10, seed + 1)
    sfx = ".gz" if gz else ""
    write_idx(folder / f"train-images-idx3-ubyte{sfx}", xtr, gz)
    write_idx(folder / f"train-labels-idx1-ubyte{sfx}", ytr, gz)
    write_idx(folder / f"t10k-images-idx3-ubyte{sfx}", xte, gz)
    write_idx(folder / f"t10k-labels-idx1-ubyte{sfx}", yte, gz)
    return (xtr, ytr), (xte, yte)


def write_cifar10(folder: Path, per_batch: int = 20, n_test: int = 20, seed: int = 0):
    """CIFAR-10 python batches: dicts with 'data' (N, 3072) uint8 in CHW order and 'labels'."""
    folder.mkdir(parents=True, exist_ok=True)
    xs, ys = [], []
    for i, name in enumerate([f"data_batch_{j}" for j in range(1, 6)] + ["test_batch"]):
        n = n_test if name == "test_batch" else per_batch
        x, y = make_images(n, 32, 32, 10, seed + i, channels=3)  # (N, H, W, C)
        chw = x.transpose(0, 3, 1, 2).reshape(n, -1)
        with open(folder / name, "wb") as f:
            pickle.dump({"batch_label": name, "labels": y.tolist(), "data": chw,
                         "filenames": [f"{name}_{j}.png" for j in range(n)]}, f)
        xs.append(x), ys.append(y)
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({"label_names": ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                                     "ship", "truck"], "num_cases_per_batch": per_batch}, f)
    return (np.concatenate(xs[:5]), np.concatenate(ys[:5])), (xs[5], ys[5])


@pytest.fixture
def data_root(tmp_path, monkeypatch) -> Path:
    """An empty data root, and no system Fashion-MNIST, so only what the test writes exists."""
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("ATTNKNN_DATA_ROOT", str(root))
    monkeypatch.setenv("ATTNKNN_FASHION_MNIST_DIR", str(tmp_path / "no-system-copy"))
    return root

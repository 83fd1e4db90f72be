"""Dataset registry: every dataset by name, with train / validation / test splits.

Each loader returns plain arrays (uint8 images ``(N, H, W, C)`` or standardised float32
features ``(N, F)``) so that splits, noise and long-tail subsets are simple index operations.
Torch-facing pieces (``ArrayDataset`` and the transforms) live in :mod:`attnknn_lib.data.transforms`.

Where the files come from
-------------------------
* data root: ``$ATTNKNN_DATA_ROOT``, else ``<repository>/data``.
* ``fashion_mnist``: ``<root>/FashionMNIST/raw/`` (ungzipped IDX, torchvision's layout); if absent,
  the gzipped IDX files of Debian's ``dataset-fashion-mnist`` package
  (``$ATTNKNN_FASHION_MNIST_DIR``, default ``/usr/share/datasets/fashion-mnist``) are unpacked
  there; else torchvision downloads them when ``download=True`` and the network allows.
* ``mnist``: ``<root>/MNIST/raw/`` (IDX), or torchvision's download.
* ``cifar10``: ``<root>/cifar-10-batches-py/`` (the python pickle batches), or torchvision's download.
* ``digits``, ``iris``, ``wine``, ``breast_cancer``: bundled with scikit-learn.
* ``adult``: ``<root>/adult/adult.data`` (+ optional ``adult.test``) in UCI format, or OpenML.
* ``wine_quality``: ``<root>/wine_quality/winequality-red.csv`` and/or ``winequality-white.csv``
  (UCI, ``;``-separated).

Splits
------
The validation split is carved from the training pool with a stratified split seeded by
``split_seed`` (independent of the training seed, so every run of every method sees the same
split). Datasets without an official test set get a stratified test split first.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attnknn_lib.base.errors import ConfigError, DataNotFoundError, check_choice, check_range
from attnknn_lib.base.files import atomic_write
from attnknn_lib.base.paths import REPO_ROOT

DEFAULT_FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
               "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def fashion_mnist_system_dir() -> Path:
    """Where Debian's dataset-fashion-mnist puts the gzipped IDX files ($ATTNKNN_FASHION_MNIST_DIR wins)."""
    return Path(os.environ.get("ATTNKNN_FASHION_MNIST_DIR", DEFAULT_FASHION_MNIST_DIR))


def data_root() -> Path:
    """The directory datasets are read from and unpacked into (``$ATTNKNN_DATA_ROOT`` wins)."""
    env = os.environ.get("ATTNKNN_DATA_ROOT")
    return Path(env).expanduser() if env else REPO_ROOT / "data"


@dataclass(frozen=True)
class DataSplit:
    """One split. ``ids`` index the rows of the source file, so results can be traced back."""

    x: np.ndarray  # (N, H, W, C) uint8 images or (N, F) float32 features
    y: np.ndarray  # (N,) int64 labels in [0, num_classes)
    ids: np.ndarray  # (N,) int64 row in the source (official train pool or official test set)

    def __post_init__(self) -> None:
        if not (len(self.x) == len(self.y) == len(self.ids)):
            raise ValueError(f"split arrays disagree in length: x={len(self.x)}, y={len(self.y)}, ids={len(self.ids)}")

    def __len__(self) -> int:
        return len(self.y)

    def subset(self, index: np.ndarray) -> DataSplit:
        """Rows ``index`` (positions in this split), keeping their source ids."""
        return DataSplit(self.x[index], self.y[index], self.ids[index])

    def with_labels(self, y: np.ndarray) -> DataSplit:
        """The same samples with other labels (for label noise)."""
        return DataSplit(self.x, np.asarray(y, dtype=np.int64), self.ids)


@dataclass(frozen=True)
class Dataset:
    """A loaded dataset: three splits plus what a model needs to know about the inputs."""

    name: str
    kind: str  # "image" or "tabular"
    num_classes: int
    input_shape: tuple[int, ...]  # (C, H, W) for images, (F,) for tabular
    class_names: tuple[str, ...]
    train: DataSplit
    val: DataSplit
    test: DataSplit
    mean: tuple[float, ...] = ()  # per-channel pixel mean in [0, 1] (images only), from train
    std: tuple[float, ...] = ()
    source: str = ""  # where the files were read from

    def fingerprint(self) -> str:
        """SHA-256 (16 hex) over labels, ids and a sample of inputs of all splits."""
        h = hashlib.sha256(self.name.encode())
        for split in (self.train, self.val, self.test):
            h.update(np.ascontiguousarray(split.y).tobytes())
            h.update(np.ascontiguousarray(split.ids).tobytes())
            h.update(np.ascontiguousarray(split.x[:: max(1, len(split) // 512)]).tobytes())
        return h.hexdigest()[:16]

    def summary(self) -> dict:
        return {"name": self.name, "kind": self.kind, "num_classes": self.num_classes,
                "input_shape": list(self.input_shape), "n_train": len(self.train),
                "n_val": len(self.val), "n_test": len(self.test), "source": self.source,
                "fingerprint": self.fingerprint()}


@dataclass(frozen=True)
class _Raw:
    """What a loader returns: a training pool and, if the dataset has one, an official test set."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray | None
    y_test: np.ndarray | None
    class_names: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    kind: str
    loader: Callable[[Path, bool], _Raw] = field(repr=False)
    description: str = ""
    title: str = ""  # display name for tables and figures


# ----------------------------------------------------------------------------- images

def _torchvision_or_fail(name: str, where: Path, how: str, make: Callable[[bool], object], download: bool):
    """Build a torchvision dataset from local files; download only if allowed; fail in one line."""
    try:
        return make(False)
    except RuntimeError:
        pass  # torchvision says "Dataset not found"
    if download:
        try:
            return make(True)
        except Exception as err:  # network errors come in many types (URLError, OSError, HTTPError...)
            reason = f"download failed ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
    else:
        reason = "download is off"
    raise DataNotFoundError(f"dataset {name!r}: no files under {where} and {reason}; {how}")


def _ensure_fashion_raw(root: Path) -> str | None:
    """Unpack Debian's gzipped Fashion-MNIST IDX files into torchvision's raw folder if needed."""
    raw = root / "FashionMNIST" / "raw"
    if all((raw / f).exists() for f in MNIST_FILES):
        return str(raw)
    system = fashion_mnist_system_dir()
    if not all((system / f"{f}.gz").exists() for f in MNIST_FILES):
        return None
    raw.mkdir(parents=True, exist_ok=True)
    for f in MNIST_FILES:  # atomic: a half-written file never has the final name
        with gzip.open(system / f"{f}.gz", "rb") as src:
            atomic_write(raw / f, lambda dst, src=src: shutil.copyfileobj(src, dst))
    return f"{system} (unpacked to {raw})"


def _mnist_like(cls_name: str, folder: str, name: str, how: str):
    def load(root: Path, download: bool) -> _Raw:
        from torchvision import datasets as tvd

        source = None
        if cls_name == "FashionMNIST":
            source = _ensure_fashion_raw(root)
        cls = getattr(tvd, cls_name)
        where = root / folder / "raw"
        train = _torchvision_or_fail(name, where, how, lambda d: cls(str(root), train=True, download=d), download)
        test = _torchvision_or_fail(name, where, how, lambda d: cls(str(root), train=False, download=d), download)
        return _Raw(train.data.numpy()[..., None], train.targets.numpy().astype(np.int64),
                    test.data.numpy()[..., None], test.targets.numpy().astype(np.int64),
                    tuple(train.classes), source or str(where))

    return load


def _cifar10(root: Path, download: bool) -> _Raw:
    from torchvision.datasets import CIFAR10

    class _LocalCIFAR10(CIFAR10):
        # torchvision checks the official MD5 sums; a local copy (or a test's tiny batches in the
        # same pickle format) only has to be complete. The data fingerprint goes into provenance.
        def _check_integrity(self) -> bool:
            base = Path(self.root) / self.base_folder
            return all((base / f).exists() for f, _ in self.train_list + self.test_list)

        def _load_meta(self) -> None:
            import pickle

            path = Path(self.root) / self.base_folder / self.meta["filename"]
            if not path.exists():
                raise RuntimeError(f"Dataset metadata file {path} not found")
            with open(path, "rb") as f:
                self.classes = list(pickle.load(f, encoding="latin1")[self.meta["key"]])
            self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    where = root / "cifar-10-batches-py"
    how = ("put the extracted python batches (data_batch_1..5, test_batch, batches.meta) there, "
           "from https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz, or set ATTNKNN_DATA_ROOT")

    def make(d: bool):
        if d:  # download with torchvision's own checks, then read with the relaxed class
            CIFAR10(str(root), train=True, download=True)
        return _LocalCIFAR10(str(root), train=True, download=False), _LocalCIFAR10(str(root), train=False)

    train, test = _torchvision_or_fail("cifar10", where, how, make, download)
    return _Raw(np.asarray(train.data), np.asarray(train.targets, dtype=np.int64),
                np.asarray(test.data), np.asarray(test.targets, dtype=np.int64),
                tuple(train.classes), str(where))


# ----------------------------------------------------------------------------- tabular

def _sklearn(fn_name: str):
    def load(root: Path, download: bool) -> _Raw:
        import sklearn.datasets as skd

        bunch = getattr(skd, fn_name)()
        names = tuple(str(n) for n in getattr(bunch, "target_names", np.unique(bunch.target)))
        return _Raw(bunch.data.astype(np.float32), bunch.target.astype(np.int64), None, None,
                    names, f"scikit-learn {fn_name}")

    return load


ADULT_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
                 "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
                 "hours-per-week", "native-country", "income"]


def _encode_adult(frame) -> tuple[np.ndarray, np.ndarray]:
    """One-hot encode categoricals; label is income > 50K (UCI test rows end with a '.')."""
    import pandas as pd

    frame = frame.dropna()
    y = frame["income"].astype(str).str.strip().str.rstrip(".").eq(">50K").to_numpy(np.int64)
    x = pd.get_dummies(frame.drop(columns="income"), dtype=np.float32).to_numpy(np.float32)
    return x, y


def _adult(root: Path, download: bool) -> _Raw:
    import pandas as pd

    folder = root / "adult"
    if (folder / "adult.data").exists():
        read = dict(header=None, names=ADULT_COLUMNS, na_values="?", skipinitialspace=True, comment="|")
        train = pd.read_csv(folder / "adult.data", **read).dropna()
        test = pd.read_csv(folder / "adult.test", **read).dropna() if (folder / "adult.test").exists() else None
        both = train if test is None else pd.concat([train, test], ignore_index=True)
        x, y = _encode_adult(both)  # same dummy columns for train and test
        n = len(train)
        xt, yt = (None, None) if test is None else (x[n:], y[n:])
        return _Raw(x[:n], y[:n], xt, yt, ("<=50K", ">50K"), str(folder))
    how = "put the UCI files adult.data (and adult.test) there, or set ATTNKNN_DATA_ROOT"
    if not download:
        raise DataNotFoundError(f"dataset 'adult': no files under {folder} and download is off; {how}")
    try:
        from sklearn.datasets import fetch_openml

        bunch = fetch_openml("adult", version=2, as_frame=True)
    except Exception as err:
        raise DataNotFoundError(f"dataset 'adult': no files under {folder} and the OpenML download failed "
                                f"({type(err).__name__}); {how}") from None
    frame = bunch.frame.rename(columns={"class": "income"})
    x, y = _encode_adult(frame)
    return _Raw(x, y, None, None, ("<=50K", ">50K"), "OpenML adult v2")


def _wine_quality(root: Path, download: bool) -> _Raw:
    import pandas as pd

    folder = root / "wine_quality"
    parts = []
    for colour in ("red", "white"):
        path = folder / f"winequality-{colour}.csv"
        if path.exists():
            frame = pd.read_csv(path, sep=";")
            frame["is_red"] = float(colour == "red")
            parts.append(frame)
    if not parts:
        raise DataNotFoundError(
            f"dataset 'wine_quality': no winequality-red.csv or winequality-white.csv under {folder}; download them "
            "from https://archive.ics.uci.edu/dataset/186/wine+quality into that folder, or set ATTNKNN_DATA_ROOT")
    frame = pd.concat(parts, ignore_index=True)
    scores = np.sort(frame["quality"].unique())
    y = np.searchsorted(scores, frame["quality"].to_numpy()).astype(np.int64)  # quality -> 0..C-1
    x = frame.drop(columns="quality").to_numpy(np.float32)
    return _Raw(x, y, None, None, tuple(f"quality {s}" for s in scores), str(folder))


# ----------------------------------------------------------------------------- registry

_MNIST_HOW = ("install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or put the four "
              "ungzipped IDX files there, or set ATTNKNN_DATA_ROOT")
REGISTRY: dict[str, DatasetSpec] = {
    "fashion_mnist": DatasetSpec("fashion_mnist", "image",
                                 _mnist_like("FashionMNIST", "FashionMNIST", "fashion_mnist", _MNIST_HOW),
                                 "Fashion-MNIST, 28x28 grey, 10 classes", title="Fashion-MNIST"),
    "mnist": DatasetSpec("mnist", "image",
                         _mnist_like("MNIST", "MNIST", "mnist",
                                     "put the four ungzipped IDX files there (train-images-idx3-ubyte, ...), "
                                     "or set ATTNKNN_DATA_ROOT"),
                         "MNIST, 28x28 grey, 10 classes", title="MNIST"),
    "cifar10": DatasetSpec("cifar10", "image", _cifar10, "CIFAR-10, 32x32 colour, 10 classes", title="CIFAR-10"),
    "digits": DatasetSpec("digits", "tabular", _sklearn("load_digits"), "8x8 digits as 64 features, 10 classes", title="Digits"),
    "iris": DatasetSpec("iris", "tabular", _sklearn("load_iris"), "4 features, 3 classes", title="Iris"),
    "wine": DatasetSpec("wine", "tabular", _sklearn("load_wine"), "13 features, 3 classes", title="Wine"),
    "breast_cancer": DatasetSpec("breast_cancer", "tabular", _sklearn("load_breast_cancer"), "30 features, 2 classes", title="Breast cancer"),
    "adult": DatasetSpec("adult", "tabular", _adult, "UCI Adult income, 2 classes", title="Adult"),
    "wine_quality": DatasetSpec("wine_quality", "tabular", _wine_quality, "UCI Wine Quality, quality scores as classes", title="Wine Quality"),
}
DATASET_NAMES = tuple(REGISTRY)

# rows of the training pool and whether a test set comes with it, for the sets of fixed size
# (Adult and Wine Quality depend on the files provided): lets ./run_all.sh check k before any work
POOL_ROWS = {"fashion_mnist": (60000, True), "mnist": (60000, True), "cifar10": (50000, True),
             "digits": (1797, False), "iris": (150, False), "wine": (178, False), "breast_cancer": (569, False)}


def training_rows(name: str, val_fraction: float = 0.1, max_train: int = 0, test_fraction: float = 0.2) -> int | None:
    """Rows of the training split :func:`load_dataset` gives ``name`` (None when the size depends on
    local files); the same arithmetic as the splits: ``round(fraction * n)`` rows are held out."""
    if name not in POOL_ROWS:
        return None
    n, has_test = POOL_ROWS[name]
    pool = n if has_test else n - int(round(test_fraction * n))
    train = pool - int(round(val_fraction * pool))
    return min(train, max_train) if max_train else train


def _stratified_split(y: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions (keep, held_out) with ``round(fraction * n)`` held out, stratified by label when possible."""
    from sklearn.model_selection import train_test_split

    n = len(y)
    n_out = int(round(fraction * n))
    if n_out == 0:
        return np.arange(n), np.arange(0)
    counts = np.bincount(y)
    stratify = y if counts[counts > 0].min() >= 2 and n_out >= len(counts[counts > 0]) else None
    keep, out = train_test_split(np.arange(n), test_size=n_out, random_state=seed, stratify=stratify)
    return np.sort(keep), np.sort(out)


def _limit(split: DataSplit, n: int | None, seed: int) -> DataSplit:
    """A stratified subset of ``n`` rows (the whole split when ``n`` is None or too large)."""
    if n is None or n >= len(split):
        return split
    keep, _ = _stratified_split(split.y, 1 - n / len(split), seed)
    return split.subset(keep)


def load_dataset(name: str, *, val_fraction: float = 0.1, test_fraction: float = 0.2, split_seed: int = 0,
                 max_train: int | None = None, max_val: int | None = None, max_test: int | None = None,
                 download: bool = True, root: str | Path | None = None) -> Dataset:
    """Load ``name`` with deterministic train / validation / test splits.

    ``val_fraction`` of the training pool becomes validation; ``test_fraction`` of all data
    becomes test only for datasets without an official test set. ``max_*`` take stratified
    subsets (for quick profiles). Tabular features are standardised with training statistics.
    """
    check_choice("dataset", name, DATASET_NAMES)
    check_range("val_fraction", val_fraction, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    check_range("test_fraction", test_fraction, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    for key, value in (("max_train", max_train), ("max_val", max_val), ("max_test", max_test)):
        if value is not None and value < 1:
            raise ConfigError(f"{key}={value!r} is out of range; allowed: an integer >= 1 or None")
    spec = REGISTRY[name]
    root = Path(root) if root is not None else data_root()
    raw = spec.loader(root, download)

    if raw.x_test is None:  # no official test set: hold one out, stratified, before anything else
        pool, test_pos = _stratified_split(raw.y_train, test_fraction, split_seed)
        test = DataSplit(raw.x_train[test_pos], raw.y_train[test_pos], test_pos.astype(np.int64))
        x_pool, y_pool, pool_ids = raw.x_train[pool], raw.y_train[pool], pool.astype(np.int64)
    else:
        test = DataSplit(raw.x_test, raw.y_test, np.arange(len(raw.y_test), dtype=np.int64))
        x_pool, y_pool, pool_ids = raw.x_train, raw.y_train, np.arange(len(raw.y_train), dtype=np.int64)
    train_pos, val_pos = _stratified_split(y_pool, val_fraction, split_seed + 1)
    train = DataSplit(x_pool[train_pos], y_pool[train_pos], pool_ids[train_pos])
    val = DataSplit(x_pool[val_pos], y_pool[val_pos], pool_ids[val_pos])
    train = _limit(train, max_train, split_seed + 2)
    val = _limit(val, max_val, split_seed + 3)
    test = _limit(test, max_test, split_seed + 4)

    num_classes = int(max(raw.y_train.max(), -1 if raw.y_test is None else raw.y_test.max()) + 1)
    class_names = raw.class_names if len(raw.class_names) == num_classes else tuple(map(str, range(num_classes)))
    if spec.kind == "image":
        pixels = train.x.reshape(-1, train.x.shape[-1]).astype(np.float64) / 255.0
        mean, std = tuple(pixels.mean(0).tolist()), tuple(np.maximum(pixels.std(0), 1e-6).tolist())
        h, w, c = train.x.shape[1:]
        return Dataset(name, "image", num_classes, (c, h, w), class_names, train, val, test, mean, std, raw.source)
    mu = train.x.mean(0)
    sd = np.where(train.x.std(0) > 1e-8, train.x.std(0), 1.0)  # constant columns stay as they are

    def standardise(s: DataSplit) -> DataSplit:
        return DataSplit(((s.x - mu) / sd).astype(np.float32), s.y, s.ids)

    return Dataset(name, "tabular", num_classes, (train.x.shape[1],), class_names,
                   standardise(train), standardise(val), standardise(test), source=raw.source)


def local_sources(name: str, root: str | Path | None = None) -> list[Path]:
    """Files whose presence means dataset ``name`` can load without the network (any one
    suffices); empty for the scikit-learn bundled sets, which are always there."""
    root = Path(root) if root is not None else data_root()
    system = fashion_mnist_system_dir()
    return {
        "fashion_mnist": [root / "FashionMNIST" / "raw" / MNIST_FILES[0], system / f"{MNIST_FILES[0]}.gz"],
        "mnist": [root / "MNIST" / "raw" / MNIST_FILES[0]],
        "cifar10": [root / "cifar-10-batches-py" / "data_batch_1"],
        "adult": [root / "adult" / "adult.data"],
        "wine_quality": [root / "wine_quality" / "winequality-red.csv", root / "wine_quality" / "winequality-white.csv"],
    }.get(name, [])

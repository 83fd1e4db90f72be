"""The confirmatory experiment's three candidate embedders (``docs/confirmatory_declaration.md``): a random projection, an autoencoder's code and a CNN stopped after one epoch.

Why here, in ``training``: two of the three embedders train a network, and they do it with this
layer's pieces (the CNN with :func:`~attnknn_lib.training.loops.train_cnn`, the recipe's loop and
schedule; the autoencoder with the loops' seeded batch order); ``data`` sits below ``models`` and
``training`` and may not import them. An experiment (a layer above) imports these functions; nothing
here names an experiment, reads a config or writes a record.

Every function takes the memory, validation and test pixels, (N, 784) floats in [0, 1] (Fashion-MNIST's
28 x 28 images flattened row by row), their labels and the seed, and returns the three embedded splits
(``memory``, ``val``, ``test``: float32 unit vectors) and an ``info`` dict: what was fitted on which
split (``fitted_on``), the dimensions, the epochs run (``epochs_run``) and the chosen epoch
(``chosen_epoch``, None where nothing is chosen). Test rows are only embedded: no statistic, weight or
choice reads them (``tests/test_candidate_embeddings.py`` checks that changing them changes no memory or
validation row). Labels are read by ``early_cnn`` alone (every memory label; validation labels only for
the reported ``val_accuracy`` of its one epoch, which chooses nothing).

As declared, and where the declaration is silent, chosen here (each choice is in its function's
docstring too):

* ``random_projection``: R (128, 784) = ``default_rng([seed, 23]).normal(0, 1/sqrt(128), (128, 784))``,
  drawn row by row in that call (the declaration names the generator and the law, not the call);
  z = R (x - mean) in float64, then unit length and float32.
* ``autoencoder``: 784 -> 512 -> 64 -> 512 -> 784, GELU between every two linear layers, sigmoid
  output. Chosen: the 64-d code is the bottleneck layer's linear output (before the GELU that follows
  it), so the code keeps its sign; PyTorch's default initialisation; a constant learning rate (none
  declared); all ``epochs`` (30) run, no early stop ("at most 30 epochs" is read as the cap of the
  epoch choice); the validation error is the mean squared error per pixel in eval mode, its lowest
  epoch kept (ties: the earlier); batch order from the loops' seeded shuffle.
* ``early_cnn``: the recipe's :class:`~attnknn_lib.models.backbones.SmallCNN` (widths 16, 32, 64; 256
  features) with a linear classifier, trained by :func:`~attnknn_lib.training.loops.train_cnn` for one
  epoch of ceil(N / 256) steps (211 on 54,000 memory rows). Chosen: the recipe's augmentation stays on
  (random 2-px crop and horizontal flip, as in the exploratory CNN candidates; the declaration removes
  only mixup), and so does its precision (``amp``: bf16 autocast where the CPU has it); the input is
  normalised with the memory's pixel mean and s.d., as :func:`~attnknn_lib.data.registry.load_dataset`
  does for its training split.

Seed streams: the projection draws from ``default_rng([seed, 23])`` (declared). The networks draw
their initialisation from torch's generator after :func:`~attnknn_lib.base.runtime.seed_everything`
(``seed``) and their batch order (and the CNN's augmentation) from the loops' generator seeded by
(``seed``, epoch), as the exploratory CNN candidates did; the two networks are built in separate calls,
each re-seeding, so neither depends on whether the other ran.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import replace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.base.runtime import pick_device, seed_everything
from attnknn_lib.data.registry import Dataset, DataSplit
from attnknn_lib.data.transforms import batches, to_tensor
from attnknn_lib.evaluation.inference import embed
from attnknn_lib.models import build_cnn
from attnknn_lib.training.loops import _train_batches, train_cnn
from attnknn_lib.training.recipe import Recipe

SPLITS = ("memory", "val", "test")
CANDIDATES = ("random_projection", "autoencoder", "early_cnn")  # the declared identifiers, in the declared order
DIMS = {"random_projection": 128, "autoencoder": 64, "early_cnn": 256}

PROJECTION_STREAM = 23  # numpy.random.default_rng([seed, 23]) draws R

AUTOENCODER_HIDDEN = 512
AUTOENCODER_EPOCHS = 30
AUTOENCODER_LR = 1e-3
AUTOENCODER_BATCH = 256

EARLY_CNN_WIDTHS = (16, 32, 64)
EARLY_CNN_FEATURES = 256
EARLY_CNN_LR = 2e-3
EARLY_CNN_WEIGHT_DECAY = 5e-4
EARLY_CNN_BATCH = 256
EARLY_CNN_EPOCHS = 1
MEMORY_ROWS = 54_000  # Fashion-MNIST's 60,000 training images less the 6,000 of validation
EARLY_CNN_STEPS = math.ceil(MEMORY_ROWS / EARLY_CNN_BATCH)  # 211, the declared step count


def _unit(z: np.ndarray) -> np.ndarray:
    """Rows at unit Euclidean length, float32 (a zero row stays zero)."""
    z = np.asarray(z, dtype=np.float64)
    return (z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def _pixels(memory: np.ndarray, val: np.ndarray, test: np.ndarray) -> dict[str, np.ndarray]:
    """The three splits as float64 (N, D) arrays, checked: same width, finite, in [0, 1]."""
    out = {}
    for name, x in zip(SPLITS, (memory, val, test)):
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or len(x) == 0:
            raise ConfigError(f"{name} pixels have shape {x.shape}; need (N, 784) with N >= 1")
        if not np.isfinite(x).all() or x.min() < 0 or x.max() > 1:
            raise ConfigError(f"{name} pixels must be finite and in [0, 1]; got [{x.min()}, {x.max()}]")
        out[name] = x
    widths = {x.shape[1] for x in out.values()}
    if len(widths) != 1:
        raise ConfigError(f"the splits' widths differ: {[x.shape[1] for x in out.values()]}")
    return out


# ----------------------------------------------------------------------------- random projection


def random_projection(memory: np.ndarray, val: np.ndarray, test: np.ndarray, seed: int, dims: int = 128
                      ) -> tuple[dict[str, np.ndarray], dict]:
    """``random_projection``: z = R (x - m), m the memory's mean pixels, R (``dims``, 784) with
    independent N(0, 1/``dims``) entries, ``numpy.random.default_rng([seed, 23]).normal(0, 1/sqrt(dims),
    (dims, 784))`` (the call is this module's choice), then unit length. Fitted: the memory's pixel
    mean, nothing else; no label is read (the function takes none)."""
    x = _pixels(memory, val, test)
    mean = x["memory"].mean(0)
    rng = np.random.default_rng([seed, PROJECTION_STREAM])
    r = rng.normal(0.0, 1.0 / math.sqrt(dims), size=(dims, x["memory"].shape[1]))
    out = {s: _unit((v - mean) @ r.T) for s, v in x.items()}
    return out, {"candidate": "random_projection", "fitted_on": "the memory's mean pixels", "labels_read": "none",
                 "dims": dims, "rng": [seed, PROJECTION_STREAM], "epochs_run": 0, "chosen_epoch": None}


# ----------------------------------------------------------------------------- autoencoder


class Autoencoder(nn.Module):
    """784 -> 512 -> 64 -> 512 -> 784 with GELU between every two linear layers and a sigmoid output;
    :meth:`encode` gives the code, the bottleneck's linear output (before the GELU that follows it)."""

    def __init__(self, in_features: int = 784, hidden: int = AUTOENCODER_HIDDEN, code: int = 64):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(in_features, hidden), nn.GELU(), nn.Linear(hidden, code))
        self.decoder = nn.Sequential(nn.GELU(), nn.Linear(code, hidden), nn.GELU(), nn.Linear(hidden, in_features),
                                     nn.Sigmoid())

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)  # (B, code)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))  # (B, in_features) in (0, 1)


@torch.no_grad()
def _mse(model: Autoencoder, x: torch.Tensor, batch_size: int, device: torch.device) -> float:
    """Mean squared reconstruction error per pixel over every row of ``x``, in eval mode."""
    model.eval()
    total = 0.0
    for idx in batches(len(x), batch_size):
        xb = x[idx].to(device)
        total += float(F.mse_loss(model(xb), xb, reduction="sum"))
    return total / x.numel()


def autoencoder(memory: np.ndarray, val: np.ndarray, test: np.ndarray, seed: int, epochs: int = AUTOENCODER_EPOCHS,
                dims: int = 64, device: str = "cpu") -> tuple[dict[str, np.ndarray], dict]:
    """``autoencoder``: :class:`Autoencoder` trained on the memory's pixels (no label; the function takes
    none) with the mean squared error, AdamW (learning rate 0.001, no weight decay, constant), batches of
    256 in the loops' seeded order, for ``epochs`` epochs (declared: 30; every one runs, no early stop);
    the epoch of lowest validation reconstruction error is kept (ties: the earlier). Its 64-d code is
    centred by the memory's mean code, then put at unit length. Fitted: the weights on the memory's
    pixels, the epoch on the validation pixels, the centre on the memory's codes."""
    if epochs < 1:
        raise ConfigError(f"epochs={epochs!r} is out of range; allowed: >= 1")
    x = _pixels(memory, val, test)
    seed_everything(seed)
    dev = pick_device(device)
    t = {s: torch.as_tensor(v, dtype=torch.float32) for s, v in x.items()}
    model = Autoencoder(t["memory"].shape[1], AUTOENCODER_HIDDEN, dims).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=AUTOENCODER_LR, weight_decay=0.0)
    n = len(t["memory"])
    no_labels = torch.zeros(n, dtype=torch.long)  # the batch order's signature wants labels; none is read
    train_curve, val_curve = [], []
    best_state, best_epoch, best_val = None, 0, math.inf
    t0 = time.perf_counter()
    for epoch in range(1, epochs + 1):
        model.train()
        total = 0.0
        for xb, _, _ in _train_batches(t["memory"], no_labels, None, AUTOENCODER_BATCH, seed, epoch):
            xb = xb.to(dev)
            loss = F.mse_loss(model(xb), xb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item() * len(xb)
        train_curve.append(total / n)
        val_curve.append(_mse(model, t["val"], 1024, dev))
        if val_curve[-1] < best_val:
            best_val, best_epoch, best_state = val_curve[-1], epoch, copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    codes = {s: embed(model.encoder, v, 1024, dev, desc=f"autoencoder {s}").astype(np.float64) for s, v in t.items()}
    centre = codes["memory"].mean(0)
    out = {s: _unit(c - centre) for s, c in codes.items()}
    return out, {"candidate": "autoencoder", "fitted_on": "weights on the memory's pixels; epoch on the validation "
                                                         "pixels; centre on the memory's codes",
                 "labels_read": "none", "dims": dims, "epochs_run": epochs, "chosen_epoch": best_epoch,
                 "train_mse_curve": train_curve, "val_mse_curve": val_curve,
                 "seconds": round(time.perf_counter() - t0, 1)}


# ----------------------------------------------------------------------------- early CNN


def _image_split(x: np.ndarray, y: np.ndarray, side: int) -> DataSplit:
    """Flattened [0, 1] pixels as a split of (N, side, side, 1) images on the 0..255 scale the
    registry's splits use (:func:`~attnknn_lib.data.transforms.to_tensor` divides by 255)."""
    return DataSplit((x * 255.0).astype(np.float32).reshape(len(x), side, side, 1),
                     np.asarray(y, dtype=np.int64), np.arange(len(x), dtype=np.int64))


def early_cnn(memory: np.ndarray, val: np.ndarray, test: np.ndarray, memory_labels: np.ndarray,
              val_labels: np.ndarray, seed: int, num_classes: int = 10, recipe: Recipe | None = None,
              device: str = "cpu") -> tuple[dict[str, np.ndarray], dict]:
    """``early_cnn``: the recipe's small CNN (widths 16, 32, 64; 256 features) with a linear classifier,
    cross-entropy on every memory label for exactly one epoch of ceil(N / 256) steps (211 on the
    declared 54,000 rows) by :func:`~attnknn_lib.training.loops.train_cnn`: AdamW at 0.002, weight decay
    5e-4, the recipe's schedule over that epoch (warm-up, cosine, held tail), no mixup; no epoch is
    chosen (the one epoch is the model). The embedding is the backbone's 256 features (eval mode) at
    unit length.

    ``recipe`` (default: the ``cpu`` profile's) supplies only what the declaration leaves to the recipe:
    the schedule's shape, the augmentation (kept on) and ``amp``; the declared numbers above override
    its learning rate, weight decay, widths, batch and epochs. Validation labels are read for the
    reported ``val_accuracy`` of the one epoch; test rows only go through the trained backbone."""
    x = _pixels(memory, val, test)
    side = math.isqrt(x["memory"].shape[1])
    if side * side != x["memory"].shape[1]:
        raise ConfigError(f"early_cnn needs square images; {x['memory'].shape[1]} pixels per row is not a square")
    y_mem, y_val = np.asarray(memory_labels, dtype=np.int64), np.asarray(val_labels, dtype=np.int64)
    if len(y_mem) != len(x["memory"]) or len(y_val) != len(x["val"]):
        raise ConfigError(f"labels do not match the pixels: memory {len(y_mem)} vs {len(x['memory'])}, "
                          f"val {len(y_val)} vs {len(x['val'])}")
    recipe = recipe or Recipe()
    mem_split, val_split = _image_split(x["memory"], y_mem, side), _image_split(x["val"], y_val, side)
    empty = DataSplit(np.zeros((0, side, side, 1), np.float32), np.zeros(0, np.int64), np.zeros(0, np.int64))
    flat = x["memory"].reshape(-1)
    # train_cnn reads train and val; the test split it is given is empty, so it cannot read a test row
    ds = Dataset("candidate_pixels", "image", num_classes, (1, side, side), tuple(map(str, range(num_classes))),
                 mem_split, val_split, empty, (float(flat.mean()),), (max(float(flat.std()), 1e-6),))
    seed_everything(seed)
    model = build_cnn("small_cnn", ds.input_shape, num_classes, widths=list(EARLY_CNN_WIDTHS),
                      head_dim=EARLY_CNN_FEATURES)
    tc = replace(recipe.train_config("image", seed), epochs=EARLY_CNN_EPOCHS, batch_size=EARLY_CNN_BATCH,
                 lr=EARLY_CNN_LR, weight_decay=EARLY_CNN_WEIGHT_DECAY, mixup_alpha=0.0, device=device)
    steps = [0]  # training-mode forward passes, one per optimiser step (validation runs in eval mode)

    def count(module: nn.Module, _inputs) -> None:
        steps[0] += int(module.training)

    hook = model.register_forward_pre_hook(count)
    try:
        res = train_cnn(model, ds, tc, progress=False, name="early CNN")
    finally:
        hook.remove()
    expected = math.ceil(len(y_mem) / min(EARLY_CNN_BATCH, len(y_mem)))
    if steps[0] != expected:
        raise RuntimeError(f"early CNN ran {steps[0]} training steps; declared ceil(N / 256) = {expected}")
    backbone = res.model.backbone
    dev = pick_device(device)
    out = {s: _unit(embed(backbone, to_tensor(ds, _image_split(v, np.zeros(len(v), np.int64), side)),
                          tc.eval_batch_size, dev, desc=f"early CNN {s}"))
           for s, v in x.items()}
    row = res.history[-1]
    return out, {"candidate": "early_cnn", "fitted_on": "every memory label, one epoch (normalisation: the memory's "
                                                       "pixel mean and s.d.)",
                 "labels_read": "memory (training); validation (reported accuracy only)",
                 "dims": int(backbone.out_dim), "epochs_run": len(res.history), "chosen_epoch": None,
                 "steps": steps[0], "batch_size": tc.batch_size, "lr": tc.lr, "weight_decay": tc.weight_decay,
                 "val_accuracy": float(row["val_accuracy"]), "precision": row.get("precision"),
                 "seconds": round(res.seconds, 1)}


EMBEDDERS = {"random_projection": random_projection, "autoencoder": autoencoder, "early_cnn": early_cnn}
"""The declared identifier -> its embedder (``early_cnn`` alone also takes the memory's and validation's labels)."""

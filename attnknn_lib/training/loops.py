"""Training of Attn-KNN and of the CNN baseline, with the prototype's defects fixed.

* A training query never sees itself: its own row(s) in the memory (both rows of a MixUp pair)
  are masked out before the top-k (:func:`training_neighbours`; :meth:`MemoryBank.search_excluding`
  does the same with FAISS where the embedding is fixed, e.g. for ablations).
* The memory holds clean (eval-mode, un-augmented) embeddings of the training set, rebuilt
  every ``refresh_every`` epochs (the same FAISS bank scores validation for model selection).
  Between rebuilds each batch's fresh embeddings overwrite their rows (``online_update``), so
  the memory follows the model; without this, the first epoch searches a memory made by the random
  initial network and the kNN loss grows instead of falling (observed: 12.7 -> 19.7 over one
  epoch). The query's neighbours are searched with its fresh embedding at every step, as at
  test time. The step's search is an exact matmul + top-k in torch: on two cores it was 2.7x
  faster than FAISS Flat for a batch of 256 queries against 54k rows (66 vs 179 ms).
* The checkpoint is the epoch with the best validation accuracy (ties: lower validation NLL);
  the test set is not touched here.

Objective (design brief §2): NLL of the attention-weighted vote (MixUp-mixed targets)
+ ``contrastive_weight`` x supervised contrastive loss - ``entropy_weight`` x attention entropy;
AdamW with a separate learning rate for the backbone, cosine schedule with linear warm-up,
gradient clipping. The CNN baseline uses the same backbone, data, augmentation, MixUp,
optimiser, schedule and selection rule, with cross-entropy on its logits.

The loops' parts live beside them: the config and result (:mod:`.train_config`), the step's
neighbour search (:mod:`.neighbour_search`), its numerics (:mod:`.precision`), the checkpoint's
selection (:mod:`.selection`) and the attention's diagnostics (:mod:`.attention_diagnostics`);
what other modules read here (``TrainConfig``, ``TrainResult``, ``selection_key``, ``cpu_has_bf16``)
is imported here from there.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.base.progress import bar as progress_bar
from attnknn_lib.base.runtime import channels_last, pick_device, seed_everything, to_device
from attnknn_lib.data.registry import Dataset
from attnknn_lib.data.transforms import BatchAugment, batches, to_tensor
from attnknn_lib.evaluation.inference import attnknn_probs, cnn_probs, embed, head_norms
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.models import AttnKNN, CNNClassifier, MultiHeadNeighbourAttention, attend
from attnknn_lib.models.losses import attention_entropy, mixup, supervised_contrastive, vote_nll
from attnknn_lib.training.attention_diagnostics import _AttentionDiagnostics
from attnknn_lib.training.neighbour_search import training_neighbours
from attnknn_lib.training.precision import (
    _Precision,
    check_finite,
    cpu_has_bf16,  # noqa: F401 (re-exported: tooling.speed reads it here)
)
from attnknn_lib.training.selection import (
    _Selection,
    selection_key,  # noqa: F401 (re-exported: the learners read it here)
)
from attnknn_lib.training.train_config import TrainConfig, TrainResult

# ----------------------------------------------------------------------------- helpers


def _train_batches(x_all: torch.Tensor, y_all: torch.Tensor, augment: BatchAugment | None, batch_size: int,
                   seed: int, epoch: int):
    """Shuffled, augmented training batches (x, y, rows) of one epoch; seeded by (seed, epoch)."""
    gen = torch.Generator().manual_seed(seed * 100_003 + epoch)
    for idx in batches(len(y_all), batch_size, shuffle=True, generator=gen):
        x = x_all[idx]
        yield (augment(x, gen) if augment is not None else x), y_all[idx], idx


def _augment(dataset: Dataset) -> BatchAugment | None:
    return BatchAugment(dataset) if dataset.kind == "image" else None


def _optimizer(model: nn.Module, backbone: nn.Module, cfg: TrainConfig, steps: int):
    """AdamW: backbone at lr * backbone_lr_mult, the rest at lr. Biases, norms and 1-D
    parameters (temperatures, scales) get no weight decay: one rule, by tensor rank."""
    backbone_ids = {id(p) for p in backbone.parameters()}
    groups: dict[tuple[bool, bool], list] = {}
    for p in model.parameters():
        if p.requires_grad:
            groups.setdefault((id(p) in backbone_ids, p.ndim >= 2), []).append(p)
    param_groups = [{"params": ps, "lr": cfg.lr * (cfg.backbone_lr_mult if is_bb else 1.0),
                     "weight_decay": cfg.weight_decay if decay else 0.0}
                    for (is_bb, decay), ps in groups.items()]
    opt = torch.optim.AdamW(param_groups)
    return opt, torch.optim.lr_scheduler.LambdaLR(
        opt, lambda step: lr_factor(step, steps, cfg.warmup_frac, cfg.hold_frac, cfg.final_lr_frac))


def lr_factor(step: int, steps: int, warmup_frac: float, hold_frac: float = 0.0, final: float = 0.0) -> float:
    """The learning rate of ``step`` (0-based, of ``steps``) as a share of the peak.

    Linear warm-up over the first ``warmup_frac`` of the steps, then a cosine from 1 down to
    ``final`` that ends ``hold_frac`` of the steps before the end, then ``final`` held:
    f = final + (1 - final) (1 + cos(pi t)) / 2, t the share of the cosine phase done. The held
    tail is where a plateau can show: if validation accuracy still rises there, the run is short.
    """
    warm = max(1, int(warmup_frac * steps))
    if step < warm:
        return (step + 1) / warm
    decay = max(1, steps - warm - int(hold_frac * steps))
    t = min(1.0, (step - warm) / decay)
    return final + (1.0 - final) * 0.5 * (1.0 + math.cos(math.pi * t))


def _prepare(model: nn.Module, hot: nn.Module, cfg: TrainConfig) -> tuple[torch.device, Callable]:
    """Move ``model`` to the device; return it and ``hot`` (the image-to-vector part, where the
    compute is) compiled where that pays off (CUDA), else ``hot`` itself."""
    device = pick_device(cfg.device)
    channels_last(model.to(device))
    if cfg.compile and device.type == "cuda":
        return device, torch.compile(hot)
    if cfg.compile:
        warnings.warn("compile=True only takes effect on CUDA; running eagerly", stacklevel=3)
    return device, hot


# ----------------------------------------------------------------------------- Attn-KNN


def train_attnknn(model: AttnKNN, dataset: Dataset, cfg: TrainConfig, train_labels: np.ndarray | None = None,
                  progress: bool = True, name: str = "Attn-KNN") -> TrainResult:
    """Train ``model`` on ``dataset.train`` (labels ``train_labels`` if given, e.g. noisy ones);
    select the epoch by validation accuracy. Returns the selected model, in eval mode."""
    seed_everything(cfg.seed)
    labels = dataset.train.y if train_labels is None else np.asarray(train_labels, dtype=np.int64)
    n = len(labels)
    if cfg.k + 2 > n:
        raise ConfigError(f"k={cfg.k} is out of range; allowed: 1..{n - 2} for {n} training samples")
    device, embedder = _prepare(model, model.embedder, cfg)
    batch = min(cfg.batch_size, n)
    steps_per_epoch = math.ceil(n / batch)
    opt, sched = _optimizer(model, model.embedder.backbone, cfg, cfg.epochs * steps_per_epoch)
    x_train, x_val = to_tensor(dataset, dataset.train), to_tensor(dataset, dataset.val)
    y_train, augment = torch.as_tensor(labels, dtype=torch.long), _augment(dataset)

    def fresh_bank() -> MemoryBank:
        emb = embed(model.embedder, x_train, cfg.eval_batch_size, device, desc="embed train")
        return MemoryBank(cfg.index_type).build(emb, labels)

    bank = fresh_bank()
    mem = torch.from_numpy(bank.embeddings.copy()).to(device)  # (N, D) training-time copy, updated online
    low = cfg.search_precision == "bf16"
    mem_bf16 = mem.to(torch.bfloat16) if low else None  # the scan's copy (see training_neighbours)
    mem_labels = torch.as_tensor(labels, device=device)
    selection = _Selection(name, model, dataset.val.y, progress, cfg.keep_epochs)
    precision = _Precision(cfg, device)
    diagnostics = _AttentionDiagnostics(model.attention)
    for epoch in range(1, cfg.epochs + 1):
        t0 = time.perf_counter()
        model.train()
        sums = {"loss": 0.0, "knn_nll": 0.0, "contrastive": 0.0, "entropy": 0.0}
        bar = progress_bar(_train_batches(x_train, y_train, augment, batch, cfg.seed, epoch), total=steps_per_epoch,
                           desc=f"{name} epoch {epoch}/{cfg.epochs}", disable=not progress)
        for step, (x, y, idx) in enumerate(bar):
            x, y, idx = to_device(x, device), y.to(device), idx.to(device)
            x, perm, lam = mixup(x, cfg.mixup_alpha)
            perm = perm.to(device)
            own = torch.stack([idx, idx[perm]], 1) if lam < 1.0 else idx[:, None]  # rows the query is made of
            if not cfg.exclude_self:
                own = own[:, :0]  # the prototype's defect, for the replay: nothing is masked
            with precision.autocast():
                q = embedder(x).float()  # (B, D)
                rows = training_neighbours(q.detach(), mem, own, cfg.k, mem_bf16)  # (B, k), never the query itself
                out = model.attend(q, mem[rows], mem_labels[rows])  # neighbours (B, k, D) carry no gradient
                knn = lam * vote_nll(out.probs, y) + (1 - lam) * vote_nll(out.probs, y[perm])
                con = supervised_contrastive(q, y, cfg.contrastive_temperature)
                ent = attention_entropy(out.weights)
                loss = knn + cfg.contrastive_weight * con - cfg.entropy_weight * ent
            check_finite(loss, name, epoch, step)
            diagnostics.batch(out, mem_labels[rows], y, knn, ent, step)
            precision.step(loss, opt, model.parameters(), cfg.grad_clip)
            sched.step()
            if cfg.online_update:
                mem[idx] = q.detach()  # the memory follows the model between clean rebuilds
                if low:
                    mem_bf16[idx] = q.detach().to(torch.bfloat16)
            for key, val in zip(sums, (loss, knn, con, ent)):
                sums[key] += val.item() * len(y)
            bar.set_postfix(loss=f"{loss.item():.3f}")
        train_seconds = time.perf_counter() - t0
        new_bank = fresh_bank()  # clean embeddings of this epoch's model: validation now, training next
        refresh_seconds = time.perf_counter() - t0 - train_seconds
        with head_norms(model.embedder) as norms:
            val_emb = embed(model.embedder, x_val, cfg.eval_batch_size, device, desc="embed val")
        probs, _ = attnknn_probs(model.attention, new_bank, val_emb, cfg.k, device=device)
        if epoch % cfg.refresh_every == 0:
            mem = torch.from_numpy(new_bank.embeddings.copy()).to(device)
            mem_bf16 = mem.to(torch.bfloat16) if low else None
        selection.add({"epoch": epoch, **{f"train_{k}": v / n for k, v in sums.items()}, "lr": sched.get_last_lr()[0],
                       "temperatures": model.attention.temperatures().detach().cpu().tolist(),
                       "val_norm_mean": float(torch.cat(norms).mean()), "val_norm_std": float(torch.cat(norms).std()),
                       **diagnostics.epoch(), "train_seconds": train_seconds, "refresh_seconds": refresh_seconds,
                       "precision": precision.name}, probs, t0)
    return selection.result()


# ----------------------------------------------------------------------------- CNN baseline


def train_cnn(model: CNNClassifier, dataset: Dataset, cfg: TrainConfig, train_labels: np.ndarray | None = None,
              progress: bool = True, name: str = "CNN") -> TrainResult:
    """Cross-entropy training of the CNN baseline under the same recipe and selection rule."""
    seed_everything(cfg.seed)
    labels = dataset.train.y if train_labels is None else np.asarray(train_labels, dtype=np.int64)
    device, forward = _prepare(model, model, cfg)
    batch = min(cfg.batch_size, len(labels))
    steps_per_epoch = math.ceil(len(labels) / batch)
    opt, sched = _optimizer(model, model.backbone, cfg, cfg.epochs * steps_per_epoch)
    x_train, x_val = to_tensor(dataset, dataset.train), to_tensor(dataset, dataset.val)
    y_train, augment = torch.as_tensor(labels, dtype=torch.long), _augment(dataset)
    selection = _Selection(name, model, dataset.val.y, progress, cfg.keep_epochs)
    precision = _Precision(cfg, device)
    for epoch in range(1, cfg.epochs + 1):
        t0 = time.perf_counter()
        model.train()
        total = 0.0
        bar = progress_bar(_train_batches(x_train, y_train, augment, batch, cfg.seed, epoch), total=steps_per_epoch,
                           desc=f"{name} epoch {epoch}/{cfg.epochs}", disable=not progress)
        for step, (x, y, _) in enumerate(bar):
            x, y = to_device(x, device), y.to(device)
            x, perm, lam = mixup(x, cfg.mixup_alpha)
            with precision.autocast():
                logits = forward(x).float()
                loss = lam * F.cross_entropy(logits, y) + (1 - lam) * F.cross_entropy(logits, y[perm.to(device)])
            check_finite(loss, name, epoch, step)
            precision.step(loss, opt, model.parameters(), cfg.grad_clip)
            sched.step()
            total += loss.item() * len(y)
            bar.set_postfix(loss=f"{loss.item():.3f}")
        train_seconds = time.perf_counter() - t0
        probs = cnn_probs(model, x_val, cfg.eval_batch_size, device)
        selection.add({"epoch": epoch, "train_loss": total / len(labels), "lr": sched.get_last_lr()[0],
                       "train_seconds": train_seconds, "refresh_seconds": 0.0,  # a CNN has no bank
                       "precision": precision.name}, probs, t0)
    return selection.result()


# ----------------------------------------------------------------------------- attention on frozen embeddings

def train_attention_head(attention: MultiHeadNeighbourAttention, bank: MemoryBank, val_emb: np.ndarray,
                         val_labels: np.ndarray, k: int, epochs: int = 3, lr: float = 1e-3, batch_size: int = 512,
                         entropy_weight: float = 0.01, seed: int = 0, progress: bool = True,
                         train_neighbours: Neighbourhood | None = None, val_neighbours: Neighbourhood | None = None,
                         patience: int | None = None) -> TrainResult:
    """Train only ``attention`` over a fixed embedding (``bank``: training embeddings and labels).

    Used for ablations: every variant sees the same embedding, so differences come from the
    attention alone. A training query's neighbours exclude itself (searched once: the embedding
    does not change; pass ``train_neighbours``/``val_neighbours`` to share the searches between
    variants). Loss: vote NLL - ``entropy_weight`` x attention entropy. The epoch with the best
    validation accuracy (ties: NLL) is kept. With ``patience``, training stops once the best epoch
    lies that many epochs back (a plateau); ``epochs`` is then the most it may run.
    """
    seed_everything(seed)
    n = len(bank)
    nb = train_neighbours if train_neighbours is not None else bank.search_excluding(bank.embeddings, k, np.arange(n))
    emb = torch.from_numpy(bank.embeddings)
    rows = torch.from_numpy(nb.rows[:, :k])
    neigh_y = torch.from_numpy(nb.labels[:, :k])
    y_all = torch.from_numpy(bank.labels)
    params = [p for p in attention.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    val_nb = val_neighbours if val_neighbours is not None else bank.search(val_emb, k)
    gen = torch.Generator().manual_seed(seed)
    selection = _Selection("attention", attention, val_labels, progress)
    for epoch in range(1, epochs + 1):
        t0 = time.perf_counter()
        attention.train()
        total = 0.0
        for idx in progress_bar(list(batches(n, batch_size, shuffle=True, generator=gen)),
                                desc=f"attention epoch {epoch}", disable=not progress):
            out = attend(attention, emb[idx], emb[rows[idx]], neigh_y[idx])  # (b, D), (b, k, D), (b, k)
            loss = vote_nll(out.probs, y_all[idx]) - entropy_weight * attention_entropy(out.weights)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            total += loss.item() * len(idx)
        probs, _ = attnknn_probs(attention, bank, val_emb, k, neighbours=val_nb)
        selection.add({"epoch": epoch, "train_loss": total / n,
                       "temperatures": attention.temperatures().detach().tolist()}, probs, t0)
        if patience is not None and epoch - selection.best["epoch"] >= patience:
            break
    return selection.result()

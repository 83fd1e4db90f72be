"""Training of Attn-KNN and of the CNN baseline, with the prototype's defects fixed.

* A training query never sees itself: its own row(s) in the bank (both rows of a MixUp pair)
  are masked out before the top-k (:func:`training_neighbours`; :meth:`MemoryBank.search_excluding`
  does the same with FAISS where the embedding is fixed, e.g. for ablations).
* The memory bank holds clean (eval-mode, un-augmented) embeddings of the training set, rebuilt
  every ``refresh_every`` epochs (the same FAISS bank scores validation for model selection).
  Between rebuilds each batch's fresh embeddings overwrite their rows (``online_update``), so
  the bank follows the model; without this, the first epoch searches a bank made by the random
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
"""

from __future__ import annotations

import copy
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attnknn_lib.base.errors import AttnKNNError, ConfigError, check_choice, check_range
from attnknn_lib.base.progress import bar as progress_bar
from attnknn_lib.base.progress import write as progress_write
from attnknn_lib.base.runtime import channels_last, pick_device, seed_everything, to_device
from attnknn_lib.data.registry import Dataset
from attnknn_lib.data.transforms import BatchAugment, batches, to_tensor
from attnknn_lib.evaluation.inference import attnknn_probs, cnn_probs, embed, head_norms
from attnknn_lib.evaluation.metrics import accuracy, ece, nll
from attnknn_lib.knn.bank import INDEX_TYPES, MemoryBank
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.knn.votes import vote_has_gradient
from attnknn_lib.models import AttnKNN, CNNClassifier, MultiHeadNeighbourAttention, attend
from attnknn_lib.models.losses import attention_entropy, mixup, supervised_contrastive, vote_nll

SEARCH_PRECISIONS = ("fp32", "bf16")


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 6
    batch_size: int = 256
    lr: float = 2e-3  # AdamW learning rate of heads (and of a backbone trained from scratch)
    backbone_lr_mult: float = 1.0  # e.g. 0.1 for an ImageNet-pretrained backbone
    weight_decay: float = 5e-4
    warmup_frac: float = 0.05  # share of steps with a linear warm-up before the cosine decay
    hold_frac: float = 0.0  # share of steps at the end held at final_lr_frac (a flat tail that shows a plateau)
    final_lr_frac: float = 0.0  # where the cosine ends, as a share of lr
    k: int = 16  # neighbours per training query (prototype v0.5 setting)
    mixup_alpha: float = 0.2  # 0 turns MixUp off
    contrastive_weight: float = 0.5  # prototype setting
    contrastive_temperature: float = 0.07
    entropy_weight: float = 0.01  # prototype setting: a small bonus against attention collapse
    grad_clip: float = 1.0
    refresh_every: int = 1  # epochs between clean rebuilds of the memory bank (eval-mode embeddings)
    online_update: bool = True  # also write each batch's fresh embeddings into the bank (see module doc)
    exclude_self: bool = True  # False re-creates the prototype's defect: a training query finds itself
    index_type: str = "flat_l2"
    # rows per forward pass of every eval-mode embedding (the clean bank's refresh each epoch, validation):
    # on one thread 256 embeds Fashion-MNIST's 54,000 rows in 5.3 s against 6.2 s at 1024 (cache-sized
    # batches), with bit-identical embeddings (eval mode: each row's output is independent of its batch)
    eval_batch_size: int = 256
    seed: int = 0
    device: str = "auto"
    amp: bool = False  # mixed precision: bf16 autocast on CUDA and on CPUs with native bf16 (else fp32)
    search_precision: str = "bf16"  # training-time neighbour scan: fp32 exact, or bf16 candidates re-ranked in fp32
    keep_epochs: bool = False  # also keep every epoch's weights (the prototype replay's checkpoint chosen on test)
    compile: bool = False  # torch.compile: used on CUDA only

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "k", "refresh_every", "eval_batch_size"):
            check_range(name, getattr(self, name), 1, None)
        for name in ("lr", "backbone_lr_mult", "contrastive_temperature", "grad_clip"):
            check_range(name, getattr(self, name), 0.0, None, low_inclusive=False)
        for name in ("weight_decay", "mixup_alpha", "contrastive_weight", "entropy_weight"):
            check_range(name, getattr(self, name), 0.0, None)
        check_range("warmup_frac", self.warmup_frac, 0.0, 1.0, high_inclusive=False)
        check_range("hold_frac", self.hold_frac, 0.0, 1.0 - self.warmup_frac, high_inclusive=False)
        check_range("final_lr_frac", self.final_lr_frac, 0.0, 1.0)
        check_choice("index_type", self.index_type, INDEX_TYPES)
        check_choice("device", self.device, ("auto", "cpu", "cuda", "mps"))
        check_choice("search_precision", self.search_precision, SEARCH_PRECISIONS)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class TrainResult:
    model: nn.Module
    history: list[dict]  # one row per epoch
    best_epoch: int
    seconds: float
    epoch_states: list[dict] | None = None  # every epoch's weights (CPU), when the config keeps them


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


class TrainingDivergedError(AttnKNNError):
    """The training loss became NaN or infinite; nothing is cached."""


def cpu_has_bf16() -> bool:
    """Whether this CPU runs bf16 matmuls and convolutions natively (AVX-512 BF16 or AMX), where
    bf16 autocast pays off; elsewhere torch emulates them, slower than fp32."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


class _Precision:
    """Mixed precision decided once per run. On CUDA: bf16 autocast where supported, else fp16
    autocast with a GradScaler (fp16 gradients underflow without loss scaling). On a CPU with
    native bf16: bf16 autocast (measured here, one thread: an Attn-KNN step 83 -> 60 ms, a CNN step
    54 -> 33 ms). fp32 otherwise. Only the training step is autocast; the clean bank, validation
    and every evaluation embed in fp32."""

    def __init__(self, cfg: TrainConfig, device: torch.device):
        self.enabled = cfg.amp and (device.type == "cuda" or (device.type == "cpu" and cpu_has_bf16()))
        if cfg.amp and not self.enabled and device.type == "cpu":
            warnings.warn("amp=True: this CPU has no native bf16, so training runs in fp32", stacklevel=3)
        bf16 = device.type == "cpu" or (device.type == "cuda" and torch.cuda.is_bf16_supported())
        self.dtype = torch.bfloat16 if self.enabled and bf16 else torch.float16
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.enabled and self.dtype == torch.float16)
        self.device_type = device.type

    @property
    def name(self) -> str:
        """What the training step ran in, for the history: bf16, fp16 or fp32."""
        return {torch.bfloat16: "bf16", torch.float16: "fp16"}[self.dtype] if self.enabled else "fp32"

    def autocast(self):
        return torch.autocast(device_type=self.device_type, dtype=self.dtype, enabled=self.enabled)

    def step(self, loss: torch.Tensor, opt: torch.optim.Optimizer, params, clip: float) -> None:
        """Backward, unscale, clip, step (the scaler is a no-op without fp16)."""
        opt.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(params, clip)
        self.scaler.step(opt)
        self.scaler.update()


def check_finite(loss: torch.Tensor, name: str, epoch: int, step: int) -> None:
    """Stop a run whose loss is NaN / inf, in one line naming the run, epoch and step."""
    if not torch.isfinite(loss).all():
        raise TrainingDivergedError(f"{name}: the training loss is {loss.item()} at epoch {epoch}, step {step}; "
                                    "nothing was cached (lower lr, or turn amp off)")


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


# ----------------------------------------------------------------------------- Attn-KNN


def training_neighbours(q: torch.Tensor, mem: torch.Tensor, own: torch.Tensor, k: int,
                       mem_bf16: torch.Tensor | None = None) -> torch.Tensor:
    """Rows of the k most similar bank entries for each training query, never one of its own rows.

    q (B, D) and mem (N, D) are unit vectors, so the largest inner products are the nearest
    neighbours (exact search, as FAISS Flat). ``own`` (B, m) are the query's own rows: their
    similarity is set to -inf before the top-k, which removes self-matches exactly.

    With ``mem_bf16`` (a bf16 copy of ``mem``) the scan runs in bf16 and keeps 2k candidates, which
    are re-ranked with fp32 inner products: the exact top-k unless a true neighbour ranks below 2k
    in bf16 (bf16 keeps 8 bits of mantissa, so sims near 1 are rounded by up to 0.004). Measured on
    two cores (one thread, B = 256, N = 54k, D = 128): 75 ms exact, 25 ms with the bf16 scan, top-16
    recall 1.000 against the exact search; bf16 alone (no re-rank) had recall 0.979.
    """
    with torch.autocast(q.device.type, enabled=False):  # the fp32 parts stay fp32 under amp
        return _top_k_rows(q.float(), mem, own, k, mem_bf16)


def _mask_own(sims: torch.Tensor, own: torch.Tensor) -> None:
    """sims[b, own[b, j]] = -inf in place. An indexed assignment, not ``scatter_``: the same
    values, but ``scatter_`` passed over the whole (B, N) matrix (30 ms against 0.01 ms at B = 256,
    N = 54k, one thread; torch 2.14), a third of a training step's neighbour search."""
    if own.numel():
        sims[torch.arange(len(sims), device=sims.device)[:, None].expand_as(own), own] = float("-inf")


def _top_k_rows(q: torch.Tensor, mem: torch.Tensor, own: torch.Tensor, k: int,
                mem_bf16: torch.Tensor | None) -> torch.Tensor:
    if mem_bf16 is None:
        sims = q @ mem.T  # (B, N)
        _mask_own(sims, own)
        return sims.topk(k, dim=1).indices  # (B, k), nearest first
    sims = q.to(torch.bfloat16) @ mem_bf16.T
    _mask_own(sims, own)
    cand = sims.topk(min(2 * k, sims.shape[1]), dim=1).indices  # (B, 2k)
    exact = (mem[cand] @ q[:, :, None]).squeeze(-1)  # (B, 2k) fp32 sims of the candidates
    exact = exact.masked_fill(torch.isinf(sims.gather(1, cand)), float("-inf"))  # own rows stay out
    return cand.gather(1, exact.topk(k, dim=1).indices)


DIAGNOSE_EVERY = 25  # steps between two measurements of the entropy term's gradient against the NLL's


class _AttentionDiagnostics:
    """Per-epoch means of what tells whether the attention can learn (issue: the weights stayed at
    their initialisation): the share of training queries whose vote carries a gradient
    (:func:`~attnknn_lib.knn.votes.vote_has_gradient`), the mean per-head entropy against the entropy
    of the head-averaged weights, the spread (s.d. over the k) of the scores within a neighbourhood
    (log head weights: a softmax shifts scores, it does not scale them), and every ``DIAGNOSE_EVERY``
    steps ||grad H|| / ||grad NLL|| over the attention's parameters (the entropy term's pull is
    ``entropy_weight`` times that)."""

    def __init__(self, attention: nn.Module):
        self.params = [p for p in attention.parameters() if p.requires_grad]
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def _add(self, key: str, value: float, n: int) -> None:
        self.sums[key] = self.sums.get(key, 0.0) + value * n
        self.counts[key] = self.counts.get(key, 0) + n

    def batch(self, out, neigh_labels: torch.Tensor, y: torch.Tensor, knn: torch.Tensor, ent: torch.Tensor,
              step: int) -> None:
        n = len(y)
        with torch.no_grad():
            hw = out.head_weights.float().clamp_min(1e-12)  # (B, H, K)
            self._add("gradient_share", float(vote_has_gradient(neigh_labels.cpu().numpy(), y.cpu().numpy()).mean()), n)
            self._add("head_entropy", float(-(hw * hw.log()).sum(-1).mean()), n)
            self._add("score_spread", float(hw.log().std(-1).mean()), n)
        if self.params and step % DIAGNOSE_EVERY == 0:
            g_nll = torch.autograd.grad(knn, self.params, retain_graph=True, allow_unused=True)
            g_ent = torch.autograd.grad(ent, self.params, retain_graph=True, allow_unused=True)
            norm = lambda gs: float(torch.sqrt(sum((g.float() ** 2).sum() for g in gs if g is not None)))  # noqa: E731
            self._add("entropy_grad_ratio", norm(g_ent) / max(norm(g_nll), 1e-12), 1)

    def epoch(self) -> dict[str, float]:
        out = {f"diag_{k}": self.sums[k] / max(self.counts[k], 1) for k in self.sums}
        self.sums, self.counts = {}, {}
        return out


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
                mem[idx] = q.detach()  # the bank follows the model between clean rebuilds
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

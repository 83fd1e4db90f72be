"""What a training loop is given and what it returns: the training config and the trained result."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from torch import nn

from attnknn_lib.base.errors import check_choice, check_range
from attnknn_lib.knn.bank import INDEX_TYPES

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
    refresh_every: int = 1  # epochs between clean rebuilds of the memory (eval-mode embeddings)
    online_update: bool = True  # also write each batch's fresh embeddings into the memory (see module doc)
    exclude_self: bool = True  # False re-creates the prototype's defect: a training query finds itself
    index_type: str = "flat_l2"
    # rows per forward pass of every eval-mode embedding (the clean memory's refresh each epoch, validation):
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

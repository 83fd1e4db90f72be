"""The training recipe every experiment shares: backbone, attention and training configs from one set of knobs.

One source of truth: the dataclass defaults *are* the default (``cpu``) profile. ``configs/<profile>.yaml``
holds only what a profile changes (a ``recipe:`` block for every experiment, an ``experiments:``
block per experiment), and each notebook's parameters cell is generated from the config class
(:func:`parameters_cell`; a test checks the committed cells against it). Each field's ``help``
is its comment in that cell.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from attnknn_lib.base.errors import ConfigError, check_choice, check_range
from attnknn_lib.base.knobs import DEFINED, NOTEBOOK_ONLY, coerce, csv, knob
from attnknn_lib.models import AttentionConfig
from attnknn_lib.models.backbones import BACKBONES
from attnknn_lib.training.loops import TrainConfig


@dataclass(frozen=True)
class Recipe:
    """How models are trained and data is prepared, shared by every experiment."""

    image_backbone: str = knob("small_cnn", "small_cnn (CPU) or resnet18_cifar (GPU)")
    cnn_widths: str = knob("16,32,64", "channels per stage of the small CNN")
    pretrained: bool = knob(False, "ImageNet weights for resnet18_cifar")
    embed_dim: int = knob(128, "embedding dimensions")
    num_heads: int = knob(4, "attention heads")
    k: int = knob(16, "neighbours for training and evaluation")
    epochs: int = knob(12, "training epochs on image data")
    tabular_epochs: int = knob(30, "training epochs on tabular data")
    batch_size: int = knob(256, "image batch size")
    tabular_batch_size: int = knob(64, "tabular batch size")
    lr: float = knob(0.002, "AdamW learning rate")
    hold_frac: float = knob(0.3, "share of training steps held at the final learning rate (the plateau check)")
    final_lr_frac: float = knob(0.05, "final learning rate as a share of lr (the cosine ends there)")
    backbone_lr_mult: float = knob(1.0, "backbone learning rate factor (0.1 for a pretrained one)")
    weight_decay: float = knob(0.0005, "AdamW weight decay")
    mixup_alpha: float = knob(0.0, "MixUp Beta parameter (0, the default, turns MixUp off: it slowed convergence)")
    contrastive_weight: float = knob(0.5, "weight of the supervised contrastive loss")
    entropy_weight: float = knob(0.01, "weight of the attention-entropy bonus")
    max_train: int = knob(0, "training rows (0 keeps the whole split; else a stratified subset)")
    max_val: int = knob(0, "validation rows (0 keeps the whole split)")
    max_test: int = knob(0, "test rows (0 keeps the whole split)")
    val_fraction: float = knob(0.1, "share of the training pool held out for validation")
    device: str = knob("auto", "auto, cpu, cuda or mps")
    amp: bool = knob(True, "mixed precision for image models (bf16 autocast on CUDA and on CPUs with native bf16, "
                           "else fp32; fp16 with loss scaling on GPUs without bf16); tabular MLPs train in fp32")
    compile: bool = knob(False, "torch.compile the backbone (CUDA only)")
    threads: int = knob(0, "CPU threads (0 uses every core)")

    def __post_init__(self) -> None:
        check_choice("image_backbone", self.image_backbone,
                     tuple(n for n, (kind, _) in BACKBONES.items() if kind == "image"))
        for name in ("embed_dim", "num_heads", "k", "epochs", "tabular_epochs", "batch_size", "tabular_batch_size"):
            check_range(name, getattr(self, name), 1, None)
        for name in ("max_train", "max_val", "max_test", "threads"):
            check_range(name, getattr(self, name), 0, None)
        check_range("val_fraction", self.val_fraction, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
        self.widths()
        if self.embed_dim % self.num_heads:
            raise ConfigError(f"embed_dim={self.embed_dim} is not divisible by num_heads={self.num_heads}; "
                              "choose an embedding size that is a multiple of the heads")
        # the training-time configs validate the rest (learning rates, weights, device)
        self.attention_config(10)
        self.train_config("image", 0)

    # --- what the recipe builds -------------------------------------------------------------
    def widths(self) -> tuple[int, ...]:
        try:
            widths = tuple(int(w) for w in csv(self.cnn_widths, "positive integers, e.g. 16,32,64"))
        except ValueError:
            widths = ()
        if not widths or min(widths) < 1:
            raise ConfigError(f"cnn_widths={self.cnn_widths!r} is not allowed; give positive integers, e.g. 16,32,64")
        return widths

    def backbone(self, data_kind: str) -> tuple[str, dict]:
        """(backbone name, its keyword arguments) for image or tabular data."""
        if data_kind == "tabular":
            return "mlp", {}
        if self.image_backbone == "small_cnn":
            return "small_cnn", {"widths": list(self.widths())}
        return self.image_backbone, {"pretrained": self.pretrained}

    def attention_config(self, num_classes: int):
        return AttentionConfig(num_classes=num_classes, embed_dim=self.embed_dim, num_heads=self.num_heads)

    def train_config(self, data_kind: str, seed: int):
        image = data_kind == "image"
        return TrainConfig(epochs=self.epochs if image else self.tabular_epochs,
                           batch_size=self.batch_size if image else self.tabular_batch_size, lr=self.lr,
                           hold_frac=self.hold_frac, final_lr_frac=self.final_lr_frac,
                           backbone_lr_mult=self.backbone_lr_mult, weight_decay=self.weight_decay, k=self.k,
                           mixup_alpha=self.mixup_alpha, contrastive_weight=self.contrastive_weight,
                           entropy_weight=self.entropy_weight, seed=seed, device=self.device, amp=self.amp and image,
                           compile=self.compile)

    def recipe(self) -> Recipe:
        """The shared part of a (sub-class) config."""
        return Recipe(**{f.name: getattr(self, f.name) for f in fields(Recipe)})

    # --- (de)serialisation ------------------------------------------------------------------
    @classmethod
    def from_namespace(cls, namespace: dict):
        """Build from a notebook's globals (its parameters cell, papermill's injected values), every
        value checked before any work: a wrong type (:func:`~attnknn_lib.base.knobs.coerce`) or a
        plain value defined after the parameters cell that no field of ``cls`` names (a parameter
        the notebook does not have) stops with one :class:`ConfigError` line. The parameters cell
        ends by noting the names defined so far (:data:`~attnknn_lib.base.knobs.DEFINED`)."""
        names = {f.name for f in fields(cls)}
        before = namespace.get(DEFINED)
        if before is not None:
            unknown = sorted(n for n, v in namespace.items() if n not in before and n not in names
                             and not n.startswith("_") and isinstance(v, (bool, int, float, str)))
            if unknown:
                raise ConfigError(f"unknown parameter {unknown[0]!r}; allowed: {', '.join(sorted(names | set(NOTEBOOK_ONLY)))}")
        return cls(**coerce(cls, {n: namespace[n] for n in names if n in namespace}))

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}



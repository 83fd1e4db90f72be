"""Configuration: the training recipe every experiment shares, and the base of experiment configs.

One source of truth: the dataclass defaults *are* the default (``cpu``) profile. ``configs/<profile>.yaml``
holds only what a profile changes (a ``recipe:`` block for every experiment, an ``experiments:``
block per experiment), and each notebook's parameters cell is generated from the config class
(:func:`parameters_cell`; a test checks the committed cells against it). Each field's ``help``
is its comment in that cell.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from .errors import ConfigError, check_choice, check_range


def knob(default: Any, help: str) -> Any:  # noqa: A002 - "help" reads best in the field list
    """A config field with a default and a one-line explanation (no '=': papermill parses these lines)."""
    if "=" in help:
        raise ValueError(f"help of a parameter must not contain '=': {help!r}")
    return field(default=default, metadata={"help": help})


def csv(value: Any, what: str = "a comma-separated list, e.g. fashion_mnist,iris") -> tuple[str, ...]:
    """'a,b' or a list -> ('a', 'b'); anything else is refused in one line."""
    if not isinstance(value, (str, list, tuple)):
        raise ConfigError(f"{value!r} is not allowed here; give {what}")
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(str(s).strip() for s in items if str(s).strip())


def int_csv(name: str, value: Any) -> tuple[int, ...]:
    """'0,1,2' (or an int, or a list of ints) -> (0, 1, 2); non-negative integers only."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    try:
        out = tuple(int(s) for s in csv(value, "comma-separated integers, e.g. 0,1,2"))
    except ValueError:
        out = ()
    if not out or min(out) < 0:
        raise ConfigError(f"{name}={value!r} is not allowed; give non-negative integers, e.g. {name}=0,1,2")
    return out


def float_csv(name: str, value: Any, low: float, high: float) -> tuple[float, ...]:
    """'0,0.1' (or a number, or a list) -> (0.0, 0.1); each value in [low, high], one line otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    try:
        out = tuple(float(s) for s in csv(value, "comma-separated numbers, e.g. 0,0.1,0.2"))
    except ValueError:
        out = ()
    if not out or min(out) < low or max(out) > high:
        raise ConfigError(f"{name}={value!r} is not allowed; give comma-separated numbers in [{low:g}, {high:g}]")
    return out


@dataclass(frozen=True)
class Recipe:
    """How models are trained and data is prepared, shared by every experiment."""

    image_backbone: str = knob("small_cnn", "small_cnn (CPU) or resnet18_cifar (GPU)")
    cnn_widths: str = knob("16,32,64", "channels per stage of the small CNN")
    pretrained: bool = knob(False, "ImageNet weights for resnet18_cifar")
    embed_dim: int = knob(128, "embedding dimensions")
    num_heads: int = knob(4, "attention heads")
    k: int = knob(16, "neighbours for training and evaluation")
    epochs: int = knob(3, "training epochs on image data")
    tabular_epochs: int = knob(30, "training epochs on tabular data")
    batch_size: int = knob(256, "image batch size")
    tabular_batch_size: int = knob(64, "tabular batch size")
    lr: float = knob(0.002, "AdamW learning rate")
    backbone_lr_mult: float = knob(1.0, "backbone learning rate factor (0.1 for a pretrained one)")
    weight_decay: float = knob(0.0005, "AdamW weight decay")
    mixup_alpha: float = knob(0.2, "MixUp Beta parameter (0 turns MixUp off)")
    contrastive_weight: float = knob(0.5, "weight of the supervised contrastive loss")
    entropy_weight: float = knob(0.01, "weight of the attention-entropy bonus")
    max_train: int = knob(0, "training rows (0 keeps the whole split; else a stratified subset)")
    max_val: int = knob(0, "validation rows (0 keeps the whole split)")
    max_test: int = knob(0, "test rows (0 keeps the whole split)")
    val_fraction: float = knob(0.1, "share of the training pool held out for validation")
    device: str = knob("auto", "auto, cpu, cuda or mps")
    amp: bool = knob(False, "mixed precision (CUDA: bf16 where supported, else fp16 with loss scaling)")
    compile: bool = knob(False, "torch.compile the backbone (CUDA only)")
    threads: int = knob(0, "CPU threads (0 uses every core)")

    def __post_init__(self) -> None:
        from .models.backbones import BACKBONES

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
        from .models import AttentionConfig

        return AttentionConfig(num_classes=num_classes, embed_dim=self.embed_dim, num_heads=self.num_heads)

    def train_config(self, data_kind: str, seed: int):
        from .training import TrainConfig

        image = data_kind == "image"
        return TrainConfig(epochs=self.epochs if image else self.tabular_epochs,
                           batch_size=self.batch_size if image else self.tabular_batch_size, lr=self.lr,
                           backbone_lr_mult=self.backbone_lr_mult, weight_decay=self.weight_decay, k=self.k,
                           mixup_alpha=self.mixup_alpha, contrastive_weight=self.contrastive_weight,
                           entropy_weight=self.entropy_weight, seed=seed, device=self.device, amp=self.amp,
                           compile=self.compile)

    def recipe(self) -> "Recipe":
        """The shared part of a (sub-class) config."""
        return Recipe(**{f.name: getattr(self, f.name) for f in fields(Recipe)})

    # --- (de)serialisation ------------------------------------------------------------------
    @classmethod
    def from_namespace(cls, namespace: dict):
        """Build from a notebook's globals (its papermill parameters), ignoring other names."""
        return cls(**{f.name: namespace[f.name] for f in fields(cls) if f.name in namespace})

    def to_dict(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class ExperimentConfig(Recipe):
    """Base of every experiment's config: the recipe plus the profile name."""

    profile: str = knob("cpu", "configs/NAME.yaml these values come from (recorded in every result)")


def defaults(cls) -> dict:
    """{field: default} of a config class, tuples as comma-separated strings (as papermill passes them)."""
    out = {}
    for f in fields(cls):
        value = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
        out[f.name] = ",".join(map(str, value)) if isinstance(value, tuple) else value
    return out


def parameters_cell(cls) -> str:
    """The tagged parameters cell of a notebook whose config is ``cls`` (generated, never hand-edited)."""
    lines = ["# Parameters (defaults of the cpu profile, generated from the config class; papermill overrides them).",
             "# Change one from the command line: ./run_all.sh --only NAME -p key=value"]
    for f in fields(cls):
        value = defaults(cls)[f.name]
        help_ = f.metadata.get("help", "")
        lines.append(f"{f.name} = {value!r}" + (f"  # {help_}" if help_ else ""))
    lines.append('out_dir = ".."  # outputs go under OUT_DIR/results, OUT_DIR/figures and the artifacts folder')
    return "\n".join(lines)


def coerce(cls, params: dict) -> dict:
    """Values of the right type for ``cls``'s fields, or one ConfigError line.

    Command-line values arrive as YAML scalars: an int is accepted for a float, a string that
    reads as a number for a number (``1e-3`` is a string to YAML), ``yes/no/on/off`` for a bool.
    """
    kinds = {f.name: type(defaults(cls)[f.name]) for f in fields(cls)}
    out = {}
    for name, value in params.items():
        if name not in kinds:
            raise ConfigError(f"unknown parameter {name!r}; allowed: {', '.join(sorted(kinds))}")
        kind = kinds[name]
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if not ok and kind is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        if not ok and isinstance(value, str) and kind in (int, float):
            try:
                value, ok = kind(value), True
            except ValueError:
                pass
        if not ok and kind is bool and isinstance(value, str) and value.lower() in ("yes", "no", "on", "off", "true",
                                                                                     "false"):
            value, ok = value.lower() in ("yes", "on", "true"), True
        if not ok and kind is str and isinstance(value, (int, float)) and not isinstance(value, bool):
            value, ok = str(value), True  # e.g. seeds=0 or cnn_widths=32
        if not ok:
            raise ConfigError(f"{name}={value!r} has the wrong type; allowed: {kind.__name__} "
                              f"(e.g. {name}={defaults(cls)[name]!r})")
        out[name] = value
    return out

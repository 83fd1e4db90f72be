"""Feature extractors, chosen by name: ``small_cnn`` (CPU images), ``resnet18_cifar`` (GPU images,
optionally ImageNet-pretrained), ``mlp`` (tabular). Each returns ``(B, feature_dim)``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from attnknn_lib.base.errors import ConfigError, WeightsUnavailableError, check_choice


class SmallCNN(nn.Module):
    """Stages of (3x3 conv, BatchNorm, ReLU) with 2x2 max-pool between stages, then either a
    flatten + Linear + BatchNorm + ReLU head (``head_dim`` > 0; keeps where a feature is, which
    matters on 28x28 clothing images) or global average pooling (``head_dim`` = 0).

    Measured on two cores with a 256-d head on Fashion-MNIST (CNN classifier, 4 epochs):
    (16, 32, 64) trains at about 2,700 images/s and reaches 92.0 % validation accuracy,
    (32, 64, 128) at about 1,100 images/s and 92.9 %.
    """

    def __init__(self, in_channels: int = 1, widths: tuple[int, ...] = (16, 32, 64), convs_per_stage: int = 1,
                 head_dim: int = 256, input_size: int = 28):
        super().__init__()
        if not widths or min(widths) < 1 or convs_per_stage < 1 or head_dim < 0:
            raise ConfigError(f"widths={widths!r}, convs_per_stage={convs_per_stage!r}, head_dim={head_dim!r}: "
                              "need positive values")
        layers: list[nn.Module] = []
        c, size = in_channels, input_size
        for i, w in enumerate(widths):
            for _ in range(convs_per_stage):
                layers += [nn.Conv2d(c, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True)]
                c = w
            if i < len(widths) - 1:
                layers.append(nn.MaxPool2d(2))
                size //= 2
        if head_dim:
            layers += [nn.Flatten(), nn.Linear(c * size * size, head_dim, bias=False), nn.BatchNorm1d(head_dim),
                       nn.ReLU(inplace=True)]
            self.out_dim = head_dim
        else:
            layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
            self.out_dim = c
        self.features = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features(x)  # (B, out_dim)


def imagenet_weights_path() -> tuple[Path, str]:
    """(where torch's hub cache keeps the ImageNet ResNet18 weights, the URL they come from)."""
    from torchvision.models import ResNet18_Weights

    url = ResNet18_Weights.IMAGENET1K_V1.url
    return Path(torch.hub.get_dir()) / "checkpoints" / Path(url).name, url


def _imagenet_resnet18_state(download: bool) -> dict[str, torch.Tensor]:
    """ImageNet ResNet18 weights from torch's hub cache, else downloaded (if allowed and online)."""
    from torchvision.models import ResNet18_Weights

    weights = ResNet18_Weights.IMAGENET1K_V1
    cached, _ = imagenet_weights_path()
    if cached.exists():
        return torch.load(cached, map_location="cpu", weights_only=True)
    how = f"copy {Path(weights.url).name} (from {weights.url}) to {cached.parent}, or use pretrained=False"
    if not download:
        raise WeightsUnavailableError(f"ImageNet ResNet18 weights: {cached} does not exist and download is off; {how}")
    try:
        return weights.get_state_dict(progress=False)
    except Exception as err:  # URLError, OSError, HTTPError...: all mean "not available here"
        raise WeightsUnavailableError(f"ImageNet ResNet18 weights: {cached} does not exist and the download "
                                      f"failed ({type(err).__name__}); {how}") from None


class ResNet18CIFAR(nn.Module):
    """torchvision ResNet18 with the CIFAR stem: 3x3 stride-1 first conv, no max-pool, no fc.

    With ``pretrained`` the ImageNet weights are loaded before the stem is replaced, so every
    layer but the first conv starts pretrained (as in the prototype).
    """

    def __init__(self, in_channels: int = 3, pretrained: bool = False, download: bool = True):
        super().__init__()
        from torchvision.models import resnet18

        net = resnet18(weights=None)
        if pretrained:
            state = _imagenet_resnet18_state(download)
            missing, unexpected = net.load_state_dict(state, strict=False)
            if missing or unexpected:
                raise WeightsUnavailableError(f"ImageNet ResNet18 weights do not fit: {len(missing)} missing keys "
                                              f"(e.g. {missing[:2]}), {len(unexpected)} unexpected (e.g. {unexpected[:2]})")
        net.conv1 = nn.Conv2d(in_channels, 64, 3, stride=1, padding=1, bias=False)
        net.maxpool = nn.Identity()
        net.fc = nn.Identity()
        self.net = net
        self.out_dim = 512

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # (B, 512)


class MLP(nn.Module):
    """Two hidden layers (Linear, BatchNorm, GELU, Dropout) for standardised tabular features."""

    def __init__(self, in_features: int, hidden: int = 256, dropout: float = 0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden), nn.BatchNorm1d(hidden), nn.GELU(), nn.Dropout(dropout),
            nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.GELU(),
        )
        self.out_dim = hidden

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # (B, hidden)


def _small_cnn(input_shape: tuple[int, ...], pretrained: bool, **kw) -> nn.Module:
    if pretrained:
        raise ConfigError("backbone='small_cnn' has no pretrained weights; use pretrained=False")
    return SmallCNN(input_shape[0], input_size=input_shape[-1], **kw)


def _resnet18(input_shape: tuple[int, ...], pretrained: bool, **kw) -> nn.Module:
    return ResNet18CIFAR(input_shape[0], pretrained=pretrained, **kw)


def _mlp(input_shape: tuple[int, ...], pretrained: bool, **kw) -> nn.Module:
    if pretrained:
        raise ConfigError("backbone='mlp' has no pretrained weights; use pretrained=False")
    return MLP(input_shape[0], **kw)


BACKBONES: dict[str, tuple[str, Callable[..., nn.Module]]] = {
    # name: (input kind, constructor)
    "small_cnn": ("image", _small_cnn),
    "resnet18_cifar": ("image", _resnet18),
    "mlp": ("tabular", _mlp),
}


def build_backbone(name: str, input_shape: tuple[int, ...], pretrained: bool = False, **kwargs) -> nn.Module:
    """Construct backbone ``name`` for inputs of ``input_shape`` ((C, H, W) or (F,)); it has ``out_dim``."""
    check_choice("backbone", name, tuple(BACKBONES))
    kind, make = BACKBONES[name]
    if (kind == "image") != (len(input_shape) == 3):
        raise ConfigError(f"backbone={name!r} takes {kind} inputs but the input shape is {tuple(input_shape)}")
    return make(tuple(input_shape), pretrained, **kwargs)

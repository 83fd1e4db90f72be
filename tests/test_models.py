"""Models: shapes, normalisation, attention properties, switchable components, training steps."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from attnknn_lib.base.errors import ConfigError, WeightsUnavailableError
from attnknn_lib.models import (
    AttentionConfig,
    MultiHeadNeighbourAttention,
    ResNet18CIFAR,
    build_attnknn,
    build_backbone,
    build_cnn,
    weighted_vote,
)

B, K, D, C = 5, 7, 16, 4


def _neighbours(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.randn(B, D, generator=g), dim=-1)
    n = F.normalize(torch.randn(B, K, D, generator=g), dim=-1)
    y = torch.randint(0, C, (B, K), generator=g)
    d = (2 - 2 * (n @ q.unsqueeze(-1)).squeeze(-1)).clamp_min(0)
    return q, n, d, y


ALL_ON = dict(distance_bias=True, label_bias=True, prototypes=True, neighbour_self_attention=True)


@pytest.mark.parametrize("options", [{}, ALL_ON, dict(distance_bias=False, learn_temperature=False)])
def test_attention_weights_are_distributions_and_permutation_equivariant(options):
    torch.manual_seed(0)
    att = MultiHeadNeighbourAttention(AttentionConfig(num_classes=C, embed_dim=D, num_heads=4, **options)).eval()
    q, n, d, y = _neighbours()
    w, hw = att(q, n, d, y)
    assert w.shape == (B, K) and hw.shape == (B, 4, K)
    torch.testing.assert_close(w.sum(-1), torch.ones(B))
    torch.testing.assert_close(hw.mean(1), w)
    perm = torch.randperm(K)
    w_perm, _ = att(q, n[:, perm], d[:, perm], y[:, perm])
    torch.testing.assert_close(w_perm, w[:, perm], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("component,param", [("label_bias", "label_bias.0.weight"), ("prototypes", "prototypes"),
                                             ("neighbour_self_attention", "self_attn.in_proj_weight"),
                                             ("distance_bias", "dist_bias.0.weight")])
def test_each_component_switch_adds_its_parameters_and_changes_the_weights(component, param):
    base = dict(distance_bias=False, label_bias=False, prototypes=False, neighbour_self_attention=False)
    torch.manual_seed(0)
    off = MultiHeadNeighbourAttention(AttentionConfig(num_classes=C, embed_dim=D, **base))
    torch.manual_seed(0)
    on = MultiHeadNeighbourAttention(AttentionConfig(num_classes=C, embed_dim=D, **{**base, component: True}))
    names = dict(on.named_parameters())
    assert param in names and param not in dict(off.named_parameters())
    q, n, d, y = _neighbours()
    with torch.no_grad():
        if component == "prototypes":
            on.proto_scale.fill_(3.0)
        w_off, _ = off(q, n, d, y)
        w_on, _ = on(q, n, d, y)
    assert not torch.allclose(w_off, w_on, atol=1e-4)


def test_label_bias_differs_between_neighbours_of_one_query():
    """The prototype's label bias was constant per query and cancelled in the softmax; ours must not."""
    torch.manual_seed(0)
    att = MultiHeadNeighbourAttention(AttentionConfig(num_classes=C, embed_dim=D, distance_bias=False, label_bias=True))
    q = F.normalize(torch.ones(1, D), dim=-1)
    n = q.unsqueeze(1).repeat(1, 4, 1)  # identical neighbours: only labels differ
    y = torch.tensor([[0, 0, 0, 1]])
    w, _ = att(q, n, torch.zeros(1, 4), y)
    torch.testing.assert_close(w[0, 0], w[0, 1])
    assert not torch.isclose(w[0, 0], w[0, 3])


def test_temperatures_stay_inside_bounds_and_can_be_frozen():
    cfg = AttentionConfig(num_classes=C, embed_dim=D, tau_min=0.05, tau_max=2.0, tau_init=0.5)
    att = MultiHeadNeighbourAttention(cfg)
    torch.testing.assert_close(att.temperatures(), torch.full((4,), 0.5))
    with torch.no_grad():
        att.tau_raw.copy_(torch.tensor([-1e4, 1e4, 0.0, 3.0]))
    t = att.temperatures()
    assert t.min() >= 0.05 and t.max() <= 2.0 and torch.isclose(t[0], torch.tensor(0.05))
    frozen = MultiHeadNeighbourAttention(AttentionConfig(num_classes=C, embed_dim=D, learn_temperature=False))
    assert "tau_raw" not in dict(frozen.named_parameters()) and "tau_raw" in dict(frozen.named_buffers())


def test_attention_config_rejects_bad_values_with_the_value_named():
    with pytest.raises(ConfigError, match="embed_dim=10 must be a positive multiple of num_heads=4"):
        AttentionConfig(num_classes=3, embed_dim=10)
    with pytest.raises(ConfigError, match=r"tau_init=3.0 is out of range; allowed: \(0.05, 2.0\)"):
        AttentionConfig(num_classes=3, tau_init=3.0)


def test_weighted_vote_puts_each_weight_on_its_neighbours_label():
    w = torch.tensor([[0.5, 0.3, 0.2]])
    y = torch.tensor([[2, 0, 2]])
    torch.testing.assert_close(weighted_vote(w, y, 3), torch.tensor([[0.3, 0.0, 0.7]]))


@pytest.mark.parametrize("backbone,shape,feat", [("small_cnn", (1, 28, 28), 256), ("small_cnn", (3, 32, 32), 256),
                                                 ("mlp", (13,), 256), ("resnet18_cifar", (3, 32, 32), 512)])
def test_backbones_map_inputs_to_their_feature_size(backbone, shape, feat):
    net = build_backbone(backbone, shape).eval()
    assert net.out_dim == feat
    assert net(torch.randn(2, *shape)).shape == (2, feat)


def test_backbone_for_the_wrong_input_kind_is_rejected():
    with pytest.raises(ConfigError, match="backbone='mlp' takes tabular inputs but the input shape is"):
        build_backbone("mlp", (1, 28, 28))
    with pytest.raises(ConfigError, match="backbone='vit' is not allowed"):
        build_backbone("vit", (3, 32, 32))


def test_attnknn_returns_unit_embeddings_and_a_vote_that_trains_the_embedder():
    torch.manual_seed(0)
    cfg = AttentionConfig(num_classes=C, embed_dim=32, **ALL_ON)
    model = build_attnknn("small_cnn", (1, 28, 28), cfg, widths=(8, 16))
    x = torch.randn(B, 1, 28, 28)
    nb = F.normalize(torch.randn(B, K, 32), dim=-1)
    y = torch.randint(0, C, (B, K))
    out = model(x, nb, y)
    assert out.probs.shape == (B, C) and out.weights.shape == (B, K) and out.embedding.shape == (B, 32)
    torch.testing.assert_close(out.embedding.norm(dim=-1), torch.ones(B))
    torch.testing.assert_close(out.probs, weighted_vote(out.weights, y, C))
    target = y[:, 0]
    loss = F.nll_loss(out.probs.clamp_min(1e-8).log(), target)
    loss.backward()
    assert model.embedder.backbone.features[0].weight.grad.abs().sum() > 0  # through the distances and q


def test_resnet18_cifar_model_takes_two_training_steps_on_synthetic_images():
    torch.manual_seed(0)
    cfg = AttentionConfig(num_classes=10, embed_dim=64)
    model = build_attnknn("resnet18_cifar", (3, 32, 32), cfg)
    assert model.embedder.backbone.net.conv1.kernel_size == (3, 3) and model.embedder.backbone.net.conv1.stride == (1, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(6, 3, 32, 32), torch.arange(6) % 3
    bank_y = torch.arange(6).repeat(6, 1) % 3  # every query sees the six images' labels
    before = model.embedder.backbone.net.layer1[0].conv1.weight.detach().clone()
    losses = []
    for _ in range(2):
        with torch.no_grad():
            bank = model.embedder(x).detach()
        out = model(x, bank.unsqueeze(0).repeat(6, 1, 1), bank_y)
        loss = F.nll_loss(out.probs.clamp_min(1e-8).log(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
    assert not torch.equal(before, model.embedder.backbone.net.layer1[0].conv1.weight)


def test_cnn_baseline_shares_the_backbone_and_returns_logits():
    model = build_cnn("small_cnn", (1, 28, 28), 10)
    assert model(torch.randn(3, 1, 28, 28)).shape == (3, 10)


def test_pretrained_resnet18_offline_without_cache_fails_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    with pytest.raises(WeightsUnavailableError) as info:
        ResNet18CIFAR(pretrained=True, download=False)
    msg = str(info.value)
    assert "\n" not in msg and "resnet18-f37072fd.pth" in msg and "pretrained=False" in msg


def test_pretrained_resnet18_loads_a_cached_checkpoint(tmp_path, monkeypatch):
    from torchvision.models import resnet18

    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    torch.manual_seed(123)
    reference = resnet18(weights=None)
    ckpt = Path(tmp_path) / "hub" / "checkpoints"
    ckpt.mkdir(parents=True)
    torch.save(reference.state_dict(), ckpt / "resnet18-f37072fd.pth")
    model = ResNet18CIFAR(pretrained=True, download=False)
    torch.testing.assert_close(model.net.layer4[1].conv2.weight, reference.layer4[1].conv2.weight)
    assert model.net.conv1.weight.shape == (64, 3, 3, 3)  # CIFAR stem replaces the 7x7 conv


def test_fixed_vote_weights_are_a_softmax_of_negative_distance_over_one_learned_temperature():
    import torch

    from attnknn_lib.models import AttentionConfig, MultiHeadNeighbourAttention

    att = MultiHeadNeighbourAttention(AttentionConfig(num_classes=3, embed_dim=8, num_heads=4, fixed_vote=True))
    q, nb = torch.randn(5, 8), torch.randn(5, 6, 8)
    d = torch.rand(5, 6) * 2
    w, per_head = att(q, nb, d, torch.zeros(5, 6, dtype=torch.long))
    tau = att.temperatures()
    assert tau.shape == (1,)
    assert torch.allclose(w, torch.softmax(-d / tau, dim=-1), atol=1e-6)
    assert torch.allclose(per_head, w.unsqueeze(1).expand_as(per_head))
    (w[:, 0].sum()).backward()  # the temperature learns; the unused projections get no gradient
    assert att.tau_raw.grad is not None and att.q_proj.weight.grad is None


def test_fixed_vote_refuses_label_reading_components():
    import pytest

    from attnknn_lib.base.errors import ConfigError
    from attnknn_lib.models import AttentionConfig

    with pytest.raises(ConfigError, match="fixed_vote"):
        AttentionConfig(num_classes=3, embed_dim=8, num_heads=4, fixed_vote=True, label_bias=True)

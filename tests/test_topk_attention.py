"""Top-k softmax attention: equal to dense attention at k = n, bounded by the dropped mass below."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.knn.topk import (
    prefix_outputs,
    sampled_tail_attention,
    tail_mass,
    tail_masses,
    topk_attention,
    topk_weights,
)


def _data(b=6, n=50, d=8, c=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.randn(b, d, generator=g, dtype=torch.float64), dim=-1)
    keys = F.normalize(torch.randn(n, d, generator=g, dtype=torch.float64), dim=-1)
    values = F.one_hot(torch.randint(0, c, (n,), generator=g), c).double()
    return q, keys, values


def test_top_k_equals_dense_attention_when_k_is_n():
    q, keys, values = _data()
    dense = torch.softmax(5.0 * q @ keys.T, -1) @ values
    assert torch.allclose(topk_attention(q, keys, values, k=len(keys), scale=5.0), dense, atol=1e-12)
    assert torch.allclose(topk_attention(q, keys, values, k=None, scale=5.0), dense, atol=1e-12)
    assert torch.allclose(prefix_outputs(5.0 * q @ keys.T, values, [len(keys)])[len(keys)], dense, atol=1e-12)


def test_top_k_keeps_only_the_k_largest_scores_renormalised():
    scores = torch.tensor([[3.0, 1.0, 2.0, 0.0]])
    w = topk_weights(scores, 2)
    expected = torch.tensor([[torch.e ** 3, 0, torch.e ** 2, 0]]) / (torch.e ** 3 + torch.e ** 2)
    assert torch.allclose(w, expected)
    assert torch.allclose(topk_weights(scores, 1), torch.tensor([[1.0, 0, 0, 0]]))


def test_truncation_error_is_bounded_by_twice_the_dropped_mass_and_shrinks_with_k():
    q, keys, values = _data(n=200)
    scores = 4.0 * q @ keys.T
    dense = scores.softmax(-1) @ values
    errors = []
    outs = prefix_outputs(scores, values, [1, 5, 20, 80, 200])
    for k, out in outs.items():
        assert torch.allclose(out, topk_attention(q, keys, values, k=k, scale=4.0), atol=1e-12)
        err = (out - dense).abs().sum(-1)
        assert (err <= 2 * tail_mass(scores, k) + 1e-12).all()
        assert torch.allclose(tail_masses(scores, [k])[k], tail_mass(scores, k), atol=1e-12)
        errors.append(err.mean().item())
    assert errors == sorted(errors, reverse=True) and errors[-1] < 1e-12


def test_prefix_outputs_follow_a_given_order():
    q, keys, values = _data()
    scores = q @ keys.T
    order = torch.arange(50).repeat(6, 1)  # the first k keys, whatever their scores
    out = prefix_outputs(scores, values, [3], order=order)[3]
    assert torch.allclose(out, scores[:, :3].softmax(-1) @ values[:3], atol=1e-12)


def test_sampled_tail_is_exact_without_a_tail_and_closer_than_top_k_on_average():
    q, keys, values = _data(b=200, n=400)
    scores = 1.0 * q @ keys.T  # flat softmax: top-k alone misses most of the mass
    dense = scores.softmax(-1) @ values
    g = torch.Generator().manual_seed(0)
    assert torch.allclose(sampled_tail_attention(scores, values, 400, 5, g), dense, atol=1e-12)
    top = prefix_outputs(scores, values, [10])[10]
    sampled = sampled_tail_attention(scores, values, 10, 100, g)
    assert (sampled - dense).abs().sum(-1).mean() < 0.5 * (top - dense).abs().sum(-1).mean()
    assert torch.allclose(sampled.sum(-1), torch.ones(200, dtype=torch.float64))


@pytest.mark.parametrize("call", [lambda: topk_weights(torch.zeros(2, 5), 0),
                                  lambda: topk_weights(torch.zeros(2, 5), 6),
                                  lambda: sampled_tail_attention(torch.zeros(2, 5), torch.eye(5), 2, 0),
                                  lambda: topk_attention(torch.zeros(2, 3), torch.zeros(4, 3), torch.eye(4), 0)])
def test_bad_arguments_are_refused_in_one_line(call):
    with pytest.raises(ConfigError):
        call()


def test_class_labels_as_values_give_the_one_hot_outputs():
    q, keys, values = _data(n=120)
    labels = values.argmax(1)
    scores = 3.0 * q @ keys.T
    a = prefix_outputs(scores, values, [1, 7, 120])
    b = prefix_outputs(scores, labels, [1, 7, 120], num_classes=4)
    assert all(torch.allclose(a[k], b[k], atol=1e-12) for k in a)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.allclose(sampled_tail_attention(scores, values, 5, 20, g1),
                          sampled_tail_attention(scores, labels, 5, 20, g2, num_classes=4), atol=1e-12)

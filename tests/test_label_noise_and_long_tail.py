"""Label noise and long-tail subsets: exact counts, seeded, documented profiles."""

from __future__ import annotations

import numpy as np
import pytest

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.data.imbalance import long_tail_counts, long_tail_indices, tail_order
from attnknn_lib.data.label_noise import inject_label_noise

LABELS = np.repeat(np.arange(10), 100)


@pytest.mark.parametrize("rate", [0.0, 0.1, 0.2, 0.3, 0.333])
@pytest.mark.parametrize("kind", ["symmetric", "asymmetric"])
def test_noise_flips_exactly_the_requested_number_and_reports_them(rate, kind):
    noisy, mask = inject_label_noise(LABELS, rate, 10, kind, seed=3)
    assert mask.sum() == round(rate * len(LABELS))
    np.testing.assert_array_equal(noisy != LABELS, mask)  # every flip changes the label, nothing else does
    np.testing.assert_array_equal(noisy[~mask], LABELS[~mask])
    if kind == "asymmetric":
        np.testing.assert_array_equal(noisy[mask], (LABELS[mask] + 1) % 10)


def test_symmetric_noise_spreads_over_all_other_classes():
    labels = np.zeros(90000, dtype=np.int64)
    noisy, mask = inject_label_noise(labels, 1.0, 10, "symmetric", seed=0)
    counts = np.bincount(noisy, minlength=10)
    assert counts[0] == 0
    assert np.all(np.abs(counts[1:] - 10000) < 400)  # about 4 standard deviations


def test_noise_is_seeded_and_leaves_input_untouched():
    labels = LABELS.copy()
    a, ma = inject_label_noise(labels, 0.2, 10, seed=1)
    b, mb = inject_label_noise(labels, 0.2, 10, seed=1)
    c, _ = inject_label_noise(labels, 0.2, 10, seed=2)
    np.testing.assert_array_equal(a, b), np.testing.assert_array_equal(ma, mb)
    assert not np.array_equal(a, c)
    np.testing.assert_array_equal(labels, LABELS)


def test_bad_noise_arguments_are_named():
    with pytest.raises(ConfigError, match="noise kind='pair' is not allowed"):
        inject_label_noise(LABELS, 0.1, 10, "pair")
    with pytest.raises(ConfigError, match=r"noise rate=1.5 is out of range; allowed: \[0.0, 1.0\]"):
        inject_label_noise(LABELS, 1.5, 10)


@pytest.mark.parametrize("ratio,expected", [
    (1.0, [500] * 10),
    # floor(500 * 0.1 ** (c / 9)), worked out by hand
    (0.1, [500, 387, 299, 232, 179, 139, 107, 83, 64, 50]),
    (0.01, [500, 299, 179, 107, 64, 38, 23, 13, 8, 5]),
])
def test_long_tail_counts_follow_the_exponential_profile(ratio, expected):
    labels = np.concatenate([np.repeat(np.arange(10), 500), np.full(300, 4)])  # smallest class has 500
    idx = long_tail_indices(labels, ratio, 10, seed=0)
    counts = np.bincount(labels[idx], minlength=10)
    assert counts[tail_order(10, 0)].tolist() == expected  # the profile, in the drawn class order
    assert len(np.unique(idx)) == len(idx)
    np.testing.assert_array_equal(idx, long_tail_indices(labels, ratio, 10, seed=0))


def test_the_tail_classes_are_drawn_per_seed():
    labels = np.repeat(np.arange(10), 100)
    tails = {tuple(sorted(tail_order(10, s)[-3:])) for s in range(5)}
    assert len(tails) > 1  # not always the same three classes
    counts = [np.bincount(labels[long_tail_indices(labels, 0.1, 10, seed=s)], minlength=10) for s in range(3)]
    assert sorted(counts[0].tolist()) == sorted(counts[1].tolist())  # the same profile
    assert counts[0].tolist() != counts[1].tolist()  # given to other classes


def test_long_tail_keeps_at_least_one_sample_and_rejects_bad_ratio():
    assert long_tail_counts(np.array([10, 10, 10]), 0.001).tolist() == [10, 1, 1]
    with pytest.raises(ConfigError, match="imbalance ratio=0 is out of range"):
        long_tail_counts(np.array([10, 10]), 0)


def test_the_strongest_rule_of_a_robustness_cell_reads_the_memorys_own_labels_and_searches_once():
    from attnknn_lib.data.spec import DataSpec, prepare
    from attnknn_lib.evaluation.metrics import accuracy
    from attnknn_lib.evaluation.reference import REFERENCE_K
    from attnknn_lib.experiments.common import shared as core

    prepared = prepare(DataSpec("digits"))
    ds = prepared.dataset
    rng = np.random.default_rng(0)

    def embed(y):  # the class in the first coordinates, plus noise
        return (4 * np.eye(10)[y] + rng.normal(size=(len(y), 10))).astype(np.float32)

    frozen = core.Frozen(embed(ds.train.y), embed(ds.val.y), embed(ds.test.y), ds.train.ids)
    emb = core.bank_of(frozen, ds.train.y, 16, reference=True)
    assert emb.neighbours[core.MEMORY].rows.shape == (len(ds.train.y), core.LOO_K)
    assert emb.neighbours[("val", "original")].rows.shape[1] == min(REFERENCE_K, len(ds.train.y))
    ref = core.reference_of(emb, prepared)
    assert accuracy(ref.test, ds.test.y) > 0.9 and ref.info["configs"] > 100
    shifted = core.relabel(emb, (ds.train.y + 1) % 10)  # the memory's labels, not the data, decide the vote
    assert core.MEMORY in shifted.neighbours
    assert accuracy(core.reference_of(shifted, prepared).test, ds.test.y) < 0.2

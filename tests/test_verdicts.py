"""Seed-level verdicts: identical predictions, ECE described only, and Holm's correction over a family."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.evaluation.verdicts import (
    IDENTICAL,
    VERDICTS,
    holm,
    holm_adjust,
    p_values,
    seed_level,
    split_level,
)


def test_identical_predictions_are_not_equivalence_and_leave_the_counted_words():
    assert seed_level([0.0, 0.0, 0.0], 0.0, "accuracy")["verdict"] == IDENTICAL
    assert split_level([0.0] * 5, 30, 120, "nll")["verdict"] == IDENTICAL
    assert IDENTICAL not in VERDICTS
    # the same zero mean with test-point error left over is an interval, judged as before
    assert seed_level([0.0, 0.0, 0.0], 0.0001, "accuracy")["verdict"] == "equivalent"
    assert seed_level([0.001, -0.001, 0.0], 0.0, "accuracy")["verdict"] == "equivalent"
    assert seed_level([0.0], 0.0, "accuracy")["verdict"] == "inconclusive"  # one seed: no interval at all


def test_ece_keeps_its_interval_but_gets_no_margin_and_no_verdict():
    d = seed_level([-0.01, -0.012, -0.011], 0.0, "ece")
    assert d["low"] < d["value"] < d["high"] < 0
    assert "verdict" not in d and "margin" not in d
    assert "verdict" not in split_level([0.01, 0.02, 0.03], 30, 120, "ece")
    with pytest.raises(ConfigError, match="ece"):
        holm({"a": d}, "ece")


def test_holm_adjusts_known_p_values_step_down():
    # p = (0.01, 0.04, 0.03, 0.005), m = 4: sorted 0.005, 0.01, 0.03, 0.04 -> 0.02, 0.03, 0.06, 0.06
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_adjust([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1, monotone
    assert holm_adjust([]) == []
    with pytest.raises(ConfigError, match="out of range"):
        holm_adjust([0.2, 1.5])


def test_p_values_agree_with_the_interval_they_come_from():
    d = seed_level([0.004, 0.006, 0.005], 0.0005, "accuracy")
    se = np.sqrt(np.var([0.004, 0.006, 0.005], ddof=1) / 3 + 0.0005 ** 2)
    p_diff, p_tost = p_values(d)
    assert p_diff == pytest.approx(2 * stats.t.sf(0.005 / se, 2))
    assert p_tost == pytest.approx(stats.t.cdf((0.005 - 0.0025) / se, 2))  # the upper one-sided test binds
    assert (p_diff <= 0.05) == (d["low"] > 0)  # the same decision as the interval
    assert p_values(seed_level([0.01], 0.0, "accuracy")) == (1.0, 1.0)


def test_a_family_of_one_leaves_every_verdict_unchanged():
    for diffs, se, metric in (([0.004, 0.006, 0.005], 0.0005, "accuracy"), ([0.0005, -0.0005, 0.0], 0.0001, "nll"),
                              ([-0.01, 0.02, 0.0], 0.001, "accuracy"), ([0.02, 0.03, 0.025], 0.0, "nll")):
        d = seed_level(diffs, se, metric)
        out = holm({"only": d}, metric)["only"]
        assert out["verdict"] == out["verdict_unadjusted"] == d["verdict"]
        assert out["family_size"] == 1 and out["p_difference_holm"] == pytest.approx(out["p_difference"])


def test_holm_turns_a_borderline_better_into_inconclusive_in_a_larger_family():
    # a borderline seed-level "better" (p just under 0.05), then the same result among two null ones
    borderline = seed_level([0.0020, 0.0060, 0.0100, 0.0030, 0.0080], 0.0012, "accuracy")
    p = p_values(borderline)[0]
    assert borderline["verdict"] == "better" and 0.01 < p < 0.05
    nulls = {f"null{i}": seed_level([-0.01, 0.012, 0.001 * i], 0.001, "accuracy") for i in range(2)}
    out = holm({"borderline": borderline, **nulls}, "accuracy")
    assert out["borderline"]["verdict_unadjusted"] == "better" and out["borderline"]["verdict"] == "inconclusive"
    assert out["borderline"]["p_difference_holm"] == pytest.approx(3 * p)
    # a strong result survives the same family
    strong = seed_level([0.02, 0.021, 0.019, 0.02, 0.022], 0.0005, "accuracy")
    assert holm({"strong": strong, **nulls}, "accuracy")["strong"]["verdict"] == "better"


def test_holm_leaves_identical_results_out_of_the_family():
    same = seed_level([0.0, 0.0], 0.0, "accuracy")
    borderline = seed_level([0.0020, 0.0060, 0.0100, 0.0030, 0.0080], 0.0012, "accuracy")
    out = holm({"k1": same, "k5": borderline}, "accuracy")
    assert out["k1"]["verdict"] == IDENTICAL and out["k5"]["verdict"] == "better"
    assert out["k5"]["family_size"] == 1


def test_holm_keeps_an_equivalence_only_where_the_adjusted_tost_holds():
    tight = seed_level([0.0002, -0.0001, 0.0001, 0.0], 0.0001, "accuracy")
    assert holm({"tight": tight, "other": seed_level([0.01, -0.02, 0.0], 0.001, "accuracy")},
                "accuracy")["tight"]["verdict"] == "equivalent"
    loose = seed_level([0.001, -0.0008, 0.0006, -0.0004, 0.0003], 0.0005, "accuracy")  # p_tost about 0.008
    assert loose["verdict"] == "equivalent"
    wide = holm({"loose": loose, **{f"o{i}": seed_level([0.01, -0.02, 0.0], 0.001, "accuracy") for i in range(5)}},
                "accuracy")
    assert wide["loose"]["verdict"] == "inconclusive"

"""The confirmatory experiment's candidate embedders and verdict words (docs/confirmatory_declaration.md):
unit vectors of the declared dimensions, one output per seed, nothing fitted on test rows, the early CNN
stopped at its declared step count; each declared word of the new verdict table."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.evaluation.verdicts import (
    CONFIRMATORY_VERDICTS,
    IDENTICAL,
    WITHIN_MARGIN,
    confirmatory_verdict,
    confirmatory_word,
    holm,
    holm_confirmatory,
    seed_level,
    verdict,
)
from attnknn_lib.training.candidate_embeddings import (
    CANDIDATES,
    DIMS,
    EARLY_CNN_STEPS,
    EMBEDDERS,
    autoencoder,
    early_cnn,
    random_projection,
)

N_MEM, N_VAL, N_TEST = 300, 60, 50


def images(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, 784) pixels in [0, 1] whose brightness pattern depends on the class, and the labels."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 10
    x = rng.uniform(0, 0.5, size=(n, 784))
    x[np.arange(n)[:, None], (y[:, None] * 78 + np.arange(78))] += 0.5  # a class-specific band of pixels
    return x.clip(0, 1), y


@pytest.fixture(scope="module")
def data():
    (mem, y_mem), (val, y_val), (test, _) = images(N_MEM, 0), images(N_VAL, 1), images(N_TEST, 2)
    return mem, val, test, y_mem, y_val


def run(name: str, data, seed: int = 0, test: np.ndarray | None = None):
    mem, val, test0, y_mem, y_val = data
    test = test0 if test is None else test
    if name == "random_projection":
        return random_projection(mem, val, test, seed)
    if name == "autoencoder":
        return autoencoder(mem, val, test, seed, epochs=2)
    return early_cnn(mem, val, test, y_mem, y_val, seed)


def check_unit(out: dict, dims: int) -> None:
    assert set(out) == {"memory", "val", "test"}
    for split, n in (("memory", N_MEM), ("val", N_VAL), ("test", N_TEST)):
        z = out[split]
        assert z.dtype == np.float32 and z.shape == (n, dims)
        np.testing.assert_allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("name", CANDIDATES)
def test_each_embedder_is_unit_length_at_its_dims_deterministic_and_fits_nothing_on_test(name, data):
    assert set(EMBEDDERS) == set(CANDIDATES) and DIMS == {"random_projection": 128, "autoencoder": 64,
                                                          "early_cnn": 256}
    out, info = run(name, data)
    check_unit(out, DIMS[name])
    assert info["dims"] == DIMS[name] and info["candidate"] == name
    again, _ = run(name, data)
    for split in out:
        np.testing.assert_array_equal(out[split], again[split])
    other_test = np.random.default_rng(9).uniform(0, 1, size=(N_TEST, 784))
    changed, _ = run(name, data, test=other_test)
    np.testing.assert_array_equal(out["memory"], changed["memory"])  # no statistic, weight or epoch reads test rows
    np.testing.assert_array_equal(out["val"], changed["val"])
    assert not np.allclose(out["test"], changed["test"])  # the test rows are embedded, not ignored


@pytest.mark.parametrize("name", CANDIDATES)
def test_another_seed_gives_another_embedding(name, data):
    a, _ = run(name, data, seed=0)
    b, _ = run(name, data, seed=1)
    assert not np.allclose(a["memory"], b["memory"])


def test_the_projection_is_the_declared_gaussian_of_the_centred_pixels(data):
    mem, val, test, _, _ = data
    out, info = random_projection(mem, val, test, seed=3)
    r = np.random.default_rng([3, 23]).normal(0.0, 1 / math.sqrt(128), size=(128, 784))
    z = (test - mem.mean(0)) @ r.T
    np.testing.assert_allclose(out["test"], z / np.linalg.norm(z, axis=1, keepdims=True), atol=1e-6)
    assert info["rng"] == [3, 23] and info["chosen_epoch"] is None


def test_the_autoencoder_runs_every_epoch_and_keeps_its_lowest_validation_error_epoch(data):
    mem, val, test, _, _ = data
    out, info = autoencoder(mem, val, test, seed=0, epochs=3)
    assert info["epochs_run"] == 3 and len(info["val_mse_curve"]) == 3
    assert info["chosen_epoch"] == 1 + int(np.argmin(info["val_mse_curve"]))
    assert info["labels_read"] == "none"
    with pytest.raises(ConfigError, match="epochs"):
        autoencoder(mem, val, test, seed=0, epochs=0)


def test_the_early_cnn_runs_one_epoch_of_its_declared_steps_and_chooses_no_epoch(data):
    assert EARLY_CNN_STEPS == 211  # ceil(54,000 / 256), as declared
    _, info = run("early_cnn", data)
    assert info["epochs_run"] == 1 and info["chosen_epoch"] is None
    assert info["steps"] == math.ceil(N_MEM / 256) == 2  # counted training-mode forward passes
    assert (info["batch_size"], info["lr"], info["weight_decay"]) == (256, 0.002, 0.0005)


def test_bad_pixels_stop_with_one_line(data):
    mem, val, test, y_mem, y_val = data
    with pytest.raises(ConfigError, match=r"\[0, 1\]"):
        random_projection(mem * 255, val, test, 0)
    with pytest.raises(ConfigError, match="widths"):
        random_projection(mem, val[:, :100], test, 0)
    with pytest.raises(ConfigError, match="labels"):
        early_cnn(mem, val, test, y_mem[:10], y_val, 0)


# ----------------------------------------------------------------------------- the declared verdict words


@pytest.mark.parametrize("low, high, higher, word", [
    (0.001, 0.002, True, "better, within the margin"),     # excludes 0, inside (-0.0025, 0.0025)
    (-0.002, -0.001, True, "worse, within the margin"),
    (-0.002, -0.001, False, "better, within the margin"),  # lower is better (NLL, Brier)
    (0.001, 0.004, True, "better"),                        # excludes 0, reaches past the margin
    (-0.004, -0.001, True, "worse"),
    (0.001, 0.004, False, "worse"),
    (-0.001, 0.002, True, "equivalent"),                   # inside, straddles 0
    (-0.001, 0.004, True, "inconclusive"),                 # neither
    (0.0, 0.0, True, IDENTICAL),                           # zero width at zero
])
def test_each_declared_word_of_an_interval(low, high, higher, word):
    assert confirmatory_verdict(low, high, 0.0025, higher) == word


def test_the_interval_words_edge_cases_and_agreement_with_the_library_verdict():
    assert confirmatory_verdict(0.001, 0.002, 0.0025, True, n_seeds=1) == "inconclusive"
    assert confirmatory_verdict(float("nan"), 0.002, 0.0025, True) == "inconclusive"
    assert confirmatory_verdict(0.0, 0.002, 0.0025, True) == "equivalent"  # an end at 0 does not exclude it (strict)
    assert confirmatory_verdict(0.001, 0.0025, 0.0025, True) == "better"  # an end at the margin is not inside
    with pytest.raises(ConfigError, match="margin"):
        confirmatory_verdict(0.0, 1.0, -0.1, True)
    rng = np.random.default_rng(0)
    for _ in range(2000):  # the old word everywhere, but "equivalent" where the new row applies
        low = rng.normal(0, 0.004)
        high = low + rng.exponential(0.003)
        higher = bool(rng.integers(2))
        new, old = confirmatory_verdict(low, high, 0.0025, higher), verdict(low, high, 0.0025, higher)
        assert new in CONFIRMATORY_VERDICTS
        assert old == ("equivalent" if new in WITHIN_MARGIN.values() else new)


@pytest.mark.parametrize("p_diff, p_eq, value, higher, word", [
    (0.01, 0.01, 0.002, True, "better, within the margin"),
    (0.05, 0.025, -0.002, True, "worse, within the margin"),  # both at their thresholds (p <= alpha)
    (0.01, 0.30, 0.004, True, "better"),
    (0.01, 0.30, 0.004, False, "worse"),
    (0.40, 0.02, 0.001, True, "equivalent"),
    (0.40, 0.03, 0.001, True, "inconclusive"),
    (0.051, 0.026, 0.001, True, "inconclusive"),
])
def test_each_declared_word_of_the_p_values(p_diff, p_eq, value, higher, word):
    assert confirmatory_word(p_diff, p_eq, value, higher) == word


def test_holm_confirmatory_renames_only_the_new_case_and_keeps_holms_numbers():
    family = {"tight": seed_level([0.0010, 0.0011, 0.0012, 0.0010, 0.0011], 0.0, "accuracy"),  # within the margin
              "wide": seed_level([0.01, 0.02, 0.015, 0.012, 0.018], 0.0, "accuracy"),         # better
              "zero": seed_level([0.0] * 5, 0.0, "accuracy")}                                   # identical
    old, new = holm(family, "accuracy"), holm_confirmatory(family, "accuracy")
    assert old["tight"]["verdict"] == "equivalent" and new["tight"]["verdict"] == "better, within the margin"
    assert new["tight"]["verdict_unadjusted"] == "better, within the margin"
    assert old["wide"]["verdict"] == new["wide"]["verdict"] == "better"
    assert new["zero"]["verdict"] == IDENTICAL and new["zero"]["family_size"] == 2
    for key in family:
        for k in ("p_difference_holm", "p_equivalence_holm", "low", "high", "family_size"):
            assert old[key].get(k) == new[key].get(k)
    assert family["tight"]["verdict"] == "equivalent"  # the input is not modified

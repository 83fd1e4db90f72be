"""The robustness experiments' pieces: the prior correction of votes, per-class accuracy, the flipped /
clean weight ratio, class groups, the beta search, the k grid, banks built from frozen
embeddings, and the configs' validation."""

from __future__ import annotations

import numpy as np
import pytest
from experiment_api import api

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.base.knobs import float_csv
from attnknn_lib.data.spec import DataSpec
from attnknn_lib.evaluation.methods import MethodProbs
from attnknn_lib.evaluation.metrics import per_class_accuracy
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.knn.votes import knn_probs, prior_correction

k_sweep = api("k_sweep")
long_tail = api("long_tail")
noise = api("noise")


def test_class_balanced_voting_divides_each_vote_by_its_memory_share():
    p = np.array([[0.8, 0.2], [0.5, 0.5]])
    prior = np.array([0.9, 0.1])
    np.testing.assert_allclose(prior_correction(p, prior, 0.0), p)
    full = prior_correction(p, prior, 1.0)
    expect = p / prior
    np.testing.assert_allclose(full, expect / expect.sum(1, keepdims=True))
    assert full[0].argmax() == 1  # 0.8 / 0.9 < 0.2 / 0.1: the minority class wins
    np.testing.assert_allclose(prior_correction(p, prior, 0.5).sum(1), 1.0)
    # a class absent from the memory keeps probability 0
    np.testing.assert_allclose(prior_correction(np.array([[1.0, 0.0]]), np.array([1.0, 0.0]), 1.0), [[1.0, 0.0]])


@pytest.mark.parametrize("prior,beta,message", [
    (np.array([0.5, 0.5, 0.0]), 0.5, "prior must be (2,)"),
    (np.array([0.5, 0.5]), 11.0, "beta=11.0 is out of range"),
])
def test_class_balanced_voting_refuses_bad_input(prior, beta, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        prior_correction(np.full((1, 2), 0.5), prior, beta)


def test_per_class_accuracy_is_the_recall_of_each_class():
    labels = np.array([0, 0, 1, 1, 1, 2])
    pred = np.array([0, 1, 1, 1, 0, 0])
    probs = np.eye(3)[pred]
    np.testing.assert_allclose(per_class_accuracy(probs, labels, 4)[:3], [0.5, 2 / 3, 0.0])
    assert np.isnan(per_class_accuracy(probs, labels, 4)[3])  # no test sample of class 3


def test_flipped_weight_ratio_is_one_for_uniform_and_zero_when_flipped_get_no_weight():
    flipped = np.array([[True, False, False, False], [False, False, True, True]])
    uniform = noise.flipped_weight_ratio(np.full((2, 4), 0.25), flipped)
    assert uniform["ratio"] == pytest.approx(1.0) and uniform["flipped_share_of_neighbours"] == pytest.approx(3 / 8)
    assert uniform["effective_neighbours"] == pytest.approx(4.0)
    w = np.where(flipped, 0.0, 1.0)
    w /= w.sum(1, keepdims=True)
    none = noise.flipped_weight_ratio(w, flipped)
    assert none["ratio"] == 0.0 and none["weight_share_on_flipped"] == 0.0
    assert np.isnan(noise.flipped_weight_ratio(np.full((1, 2), 0.5), np.zeros((1, 2), bool))["ratio"])


def test_class_groups_split_the_classes_by_memory_size_into_thirds():
    groups = long_tail.class_groups(np.array([5, 100, 50, 1, 20, 10]))
    assert groups == {"head": [1, 2], "middle": [4, 5], "tail": [0, 3]}


def test_the_beta_search_on_validation_picks_balancing_when_the_prior_misleads():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 200)  # balanced validation and test
    prior = np.array([0.95, 0.05])
    # a vote biased toward the majority class by its share of the memory
    likelihood = np.where(np.eye(2)[y] == 1, 0.6, 0.4) + rng.uniform(0, 0.05, (400, 2))
    biased = likelihood * prior / (likelihood * prior).sum(1, keepdims=True)
    tuned = long_tail.tune_beta(MethodProbs(biased, biased), prior, y)
    assert tuned.info["beta"] == 1.0
    assert (tuned.test.argmax(1) == y).mean() > (biased.argmax(1) == y).mean() + 0.3


def test_k_grid_adds_sqrt_n_and_refuses_a_k_larger_than_the_bank():
    cfg = k_sweep.Config(k_values=(1, 5, 20))
    assert k_sweep.k_grid(cfg, 10_000) == ([1, 5, 20, 100], 100)
    assert k_sweep.k_grid(k_sweep.Config(k_values=(3,), sqrt_k=False), 50) == ([3], None)
    with pytest.raises(ConfigError, match="k=50 is out of range; allowed: 1..38 for 40 training rows"):
        k_sweep.k_grid(k_sweep.Config(k_values=(50,), sqrt_k=False), 40)


def _frozen(n=30, d=8, seed=0) -> core.Frozen:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n + 10, d)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return core.Frozen(x[:n], x[n:n + 5], x[n + 5:], np.arange(100, 100 + n))


def test_a_relabelled_bank_keeps_its_neighbours_and_votes_with_the_new_labels():
    fr = _frozen()
    labels = np.arange(30) % 3
    emb = core.bank_of(fr, labels, 4)
    noisy = (labels + 1) % 3
    re = core.relabel(emb, noisy)
    for key, nb in emb.neighbours.items():
        np.testing.assert_array_equal(re.neighbours[key].rows, nb.rows)
        np.testing.assert_array_equal(re.neighbours[key].labels, noisy[nb.rows])
    np.testing.assert_array_equal(emb.bank.labels, labels)  # the original bank is untouched
    nb = re.neighbours[("test", "original")]
    np.testing.assert_allclose(knn_probs("uniform", nb.sq_dist, nb.labels, 3),
                               knn_probs("uniform", nb.sq_dist, (emb.neighbours[("test", "original")].labels + 1) % 3, 3))


def test_a_subset_bank_maps_source_ids_to_rows_and_searches_only_those_rows():
    fr = _frozen()
    ids = np.array([103, 110, 111, 125])
    rows = core.rows_of(fr, ids)
    np.testing.assert_array_equal(rows, [3, 10, 11, 25])
    emb = core.bank_of(fr, np.array([0, 1, 0, 1]), 10, rows=rows)
    assert len(emb.bank) == 4 and emb.neighbours[("val", "original")].rows.shape == (5, 4)  # k capped at the bank
    np.testing.assert_allclose(emb.bank.embeddings, fr.train[rows])
    with pytest.raises(ValueError, match="not in the embedded training split"):
        core.rows_of(fr, np.array([99]))


def test_float_lists_are_parsed_and_bounded():
    assert float_csv("rates", "0,0.1", 0, 0.95) == (0.0, 0.1)
    assert float_csv("rates", 0.2, 0, 0.95) == (0.2,)
    for bad in ("0.1,x", "", "1.5"):
        with pytest.raises(ConfigError, match="is not allowed; give comma-separated numbers in"):
            float_csv("rates", bad, 0, 0.95)


def test_robustness_configs_plan_main_models_and_the_retrained_grid():
    cfg = noise.Config(seeds=(0, 1), rates=(0, 0.2), retrain_rates=(0, 0.3), retrain_seeds=(0,))
    runs = noise.runs(cfg)
    main_like = [r for r in runs if r.data == DataSpec("fashion_mnist")]
    assert {(r.kind, r.seed) for r in main_like} == {("attnknn", 0), ("cnn", 0), ("attnknn", 1), ("cnn", 1)}
    retrained = [r for r in runs if r not in main_like]
    # noise retrains with main's recipe: rate 0 is main's seed-0 pair, so only (symmetric, asymmetric)
    # x 0.3 are new, each an Attn-KNN and a CNN on the whole training set for the recipe's epochs
    assert sorted((r.data.noise, r.data.noise_rate) for r in retrained if r.kind == "cnn") == [
        ("asymmetric", 0.3), ("symmetric", 0.3)]
    assert all(r.data.max_train == 0 and r.train["epochs"] == cfg.epochs for r in retrained)
    short = noise.Config(seeds=(0,), retrain_rates=(0, 0.3), retrain_seeds=(0,), retrain_max_train=10_000,
                         retrain_epochs=2)
    assert all(r.data.max_train == 10_000 and r.train["epochs"] == 2 for r in noise.runs(short)
               if r.data != DataSpec("fashion_mnist"))
    assert all(r.data.noisy_val for r in retrained if r.data.noise != "none")
    lt = long_tail.Config(ratios=(1, 0.1), retrain_seeds=(0,))
    clean_retrained = [r for r in long_tail.runs(lt) if r.data.max_train == 10_000 and r.data.imbalance == 1]
    # same knobs, same runs: trained once whichever experiment asks
    assert {r.id for r in clean_retrained} <= {r.id for r in noise.runs(short)}
    assert noise.Config(retrain=False).runs_for(lambda seed: {}) == core.model_runs(noise.Config(), DataSpec("fashion_mnist"),
                                                                       (0, 1, 2, 3, 4))


@pytest.mark.parametrize("cls,kwargs,message", [
    (noise.Config, {"kinds": "gaussian"}, "kinds='gaussian' is not allowed"),
    (noise.Config, {"rates": "0,1.2"}, "rates='0,1.2' is not allowed"),
    (long_tail.Config, {"ratios": "0"}, "ratios='0' is not allowed"),
    (k_sweep.Config, {"k_values": "0,5"}, "k_values=0,5 is not allowed"),
    (k_sweep.Config, {"retrain_seeds": 6}, "retrain_seeds=6 is out of range"),
    (long_tail.Config, {"retrain_seeds": "x"}, "retrain_seeds='x' is not allowed"),
])
def test_bad_experiment_knobs_are_refused_in_one_line(cls, kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        cls(**kwargs)


def test_a_noisy_validation_set_keeps_its_clean_labels_for_the_calibrators():
    from attnknn_lib.data.spec import prepare

    spec = DataSpec("iris", noise="symmetric", noise_rate=0.4, noisy_val=True, prep_seed=1)
    p = prepare(spec)
    assert (p.clean_val_y != p.dataset.val.y).any()  # validation is noisy, its clean labels kept
    assert (prepare(DataSpec("iris")).clean_val_y == p.clean_val_y).all()
    cfg = noise.Config()
    rows, labels = cfg.calibration_slice(p.clean_val_y, seed=0)
    assert len(rows) == max(1, round(cfg.calibration_share * len(p.clean_val_y)))
    assert (labels == p.clean_val_y[rows]).all() and (rows == cfg.calibration_slice(p.clean_val_y, 0)[0]).all()
    with pytest.raises(ConfigError, match="calibration_share"):
        noise.Config(calibration_share=0.0)


def test_score_fits_the_calibrators_on_the_clean_slice_when_given_one():
    from attnknn_lib.data.spec import prepare
    from attnknn_lib.evaluation.methods import score

    p = prepare(DataSpec("iris", noise="symmetric", noise_rate=0.4, noisy_val=True, prep_seed=1))
    ds = p.dataset
    rng = np.random.default_rng(0)
    onehot = lambda y: np.eye(ds.num_classes)[y] * 0.9 + 0.1 / ds.num_classes  # noqa: E731
    m = {"m": MethodProbs(onehot(p.clean_val_y), onehot(ds.test.y[rng.permutation(len(ds.test))]))}
    rows = np.arange(len(ds.val))
    noisy = score(m, ds, n_boot=1)["m"]["calibrator"]
    clean = score(m, ds, n_boot=1, calibration=(rows, p.clean_val_y))["m"]["calibrator"]
    assert noisy != clean  # fitted on noisy labels, the calibrator softens predictions the clean labels confirm


def test_the_k_sweep_counts_leave_k_1_and_identical_predictions_out():
    from attnknn_lib.experiments.k_sweep.measure import counted_words
    from attnknn_lib.experiments.k_sweep.views import count_text

    verdicts = {"1": {"verdict": "identical"}, "5": {"verdict": "equivalent"}, "20": {"verdict": "worse"},
                "50": {"verdict": "identical"}, "100": {"verdict": "equivalent"}}
    assert counted_words(verdicts) == ["equivalent", "worse", "equivalent"]
    assert counted_words({"1": {"verdict": "equivalent"}}) == []  # k = 1 never counts, whatever its verdict
    assert count_text(["equivalent", "worse", "equivalent"]).startswith("1 worse, 2 equivalent over 3 k")


def test_five_seeds_where_a_verdict_counts():
    assert len(long_tail.Config().seeds) == len(long_tail.Config().retrain_seeds) == 5
    assert len(k_sweep.Config().seeds) == k_sweep.Config().retrain_seeds == 5

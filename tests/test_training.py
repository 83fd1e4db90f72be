"""Training: no self-match, selection on validation only, reproducible, cached by key."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import attnknn_lib.training.loops as training
from attnknn_lib.base.errors import ConfigError
from attnknn_lib.data.registry import Dataset, DataSplit
from attnknn_lib.models import AttentionConfig, build_attnknn, build_cnn
from attnknn_lib.training.cache import load_or_train, model_dir
from attnknn_lib.training.loops import TrainConfig, train_attnknn, train_cnn, training_neighbours
from attnknn_lib.training.precision import TrainingDivergedError


class Tripwire:
    """Stands in for the test split: any use of it fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"the test split was used during training (attribute {name!r})")

    def __len__(self):
        raise AssertionError("the test split was used during training (len)")


def toy_images(n_train: int = 240, n_val: int = 80, seed: int = 0) -> Dataset:
    """Four classes of 28x28 texture images (horizontal / vertical stripes, checkerboard, flat);
    the test split is a tripwire."""
    rng = np.random.default_rng(seed)
    r, c = np.indices((28, 28))
    patterns = np.stack([(r // 2) % 2, (c // 2) % 2, ((r // 2) + (c // 2)) % 2, np.full((28, 28), 0.5)]) * 160

    def make(n):
        y = np.arange(n) % 4
        x = patterns[y] + rng.integers(0, 80, size=(n, 28, 28))
        return DataSplit(x[..., None].astype(np.uint8), y, np.arange(n))

    train, val = make(n_train), make(n_val)
    ds = Dataset("toy", "image", 4, (1, 28, 28), ("a", "b", "c", "d"), train, val, val, (0.4,), (0.3,))
    object.__setattr__(ds, "test", Tripwire())
    return ds


FAST = TrainConfig(epochs=2, batch_size=32, k=5, lr=3e-3, seed=0)
ATT = AttentionConfig(num_classes=4, embed_dim=16, num_heads=2)


def _attnknn():
    torch.manual_seed(0)
    return build_attnknn("small_cnn", (1, 28, 28), ATT, widths=(8, 16))


def test_own_rows_are_masked_as_scatter_did_also_when_a_query_is_mixed_with_itself():
    from attnknn_lib.training.neighbour_search import _mask_own

    g = torch.Generator().manual_seed(0)
    sims = torch.randn(6, 40, generator=g)
    own = torch.stack([torch.arange(6), torch.tensor([3, 1, 2, 0, 5, 9])], 1)  # rows 1, 2, 5: the same row twice
    for dtype in (torch.float32, torch.bfloat16):
        masked = sims.to(dtype)
        _mask_own(masked, own)
        assert torch.equal(masked, sims.to(dtype).scatter_(1, own, float("-inf")))
    untouched = sims.clone()
    _mask_own(untouched, own[:, :0])  # the replay's defect: nothing masked
    assert torch.equal(untouched, sims)


@pytest.mark.parametrize("scan", ["fp32", "bf16"])
def test_training_neighbours_are_the_exact_top_k_without_own_rows(scan):
    g = torch.Generator().manual_seed(0)
    mem = torch.nn.functional.normalize(torch.randn(200, 8, generator=g), dim=-1)
    q = mem[:10] + 0.01 * torch.randn(10, 8, generator=g)
    own = torch.stack([torch.arange(10), torch.arange(10) + 50], 1)
    rows = training_neighbours(q, mem, own, 4, mem.to(torch.bfloat16) if scan == "bf16" else None)
    for i in range(10):
        sims = (mem @ q[i]).clone()
        sims[own[i]] = -np.inf
        assert rows[i].tolist() == sims.topk(4).indices.tolist()
        assert i not in rows[i] and i + 50 not in rows[i]


def test_attnknn_training_never_retrieves_the_query_itself(monkeypatch):
    seen = []

    def spy(q, mem, own, k, mem_bf16=None):
        rows = training_neighbours(q, mem, own, k, mem_bf16)
        seen.append((rows.clone(), own.clone()))
        return rows

    monkeypatch.setattr(training, "training_neighbours", spy)
    train_attnknn(_attnknn(), toy_images(), FAST, progress=False)
    assert len(seen) == 2 * 8  # every step of both epochs (240 / 32 -> 8 batches)
    for rows, own in seen:
        assert not (rows[:, :, None] == own[:, None, :]).any()


def test_attnknn_learns_selects_on_validation_and_never_reads_test():
    result = train_attnknn(_attnknn(), toy_images(), FAST, progress=False)
    hist = result.history
    assert [h["epoch"] for h in hist] == [1, 2]
    best = max(hist, key=lambda h: (h["val_accuracy"], -h["val_nll"]))
    assert result.best_epoch == best["epoch"]
    assert best["val_accuracy"] > 0.5  # four classes: chance is 0.25
    assert all(0.05 <= t <= 2.0 for t in hist[-1]["temperatures"])
    assert not result.model.training
    # the attention diagnostics of every epoch, in their ranges (k = 5, 4 heads)
    for h in hist:
        assert 0.0 <= h["diag_gradient_share"] <= 1.0
        assert 0.0 < h["diag_head_entropy"] <= np.log(5) + 1e-6
        assert h["diag_score_spread"] >= 0.0 and h["diag_entropy_grad_ratio"] > 0.0


def test_history_records_the_embedding_norms_before_normalisation():
    model = _attnknn()
    result = train_attnknn(model, toy_images(), FAST, progress=False)
    x = torch.from_numpy(toy_images().val.x).permute(0, 3, 1, 2).float() / 255.0
    with training.head_norms(result.model.embedder) as norms:
        out = result.model.embedder.eval()(x[:16])
    assert torch.allclose(out.norm(dim=-1), torch.ones(16), atol=1e-5)  # the output is normalised ...
    pre = result.model.embedder.head(result.model.embedder.backbone(x[:16])).norm(dim=-1)
    assert torch.allclose(torch.cat(norms), pre.detach())  # ... the recorded norms are the head's
    for row in result.history:
        assert row["val_norm_mean"] > 0 and row["val_norm_std"] >= 0
    assert result.history[0]["val_norm_mean"] != result.history[1]["val_norm_mean"]


def test_cnn_baseline_trains_under_the_same_recipe():
    torch.manual_seed(0)
    result = train_cnn(build_cnn("small_cnn", (1, 28, 28), 4, widths=(8, 16)), toy_images(), FAST, progress=False)
    assert max(h["val_accuracy"] for h in result.history) > 0.5
    assert set(result.history[0]) >= {"train_loss", "val_accuracy", "val_nll", "val_ece", "seconds"}


def test_same_seed_gives_the_same_numbers():
    a = train_attnknn(_attnknn(), toy_images(), FAST, progress=False).history
    b = train_attnknn(_attnknn(), toy_images(), FAST, progress=False).history
    assert [h["val_nll"] for h in a] == [h["val_nll"] for h in b]
    assert [h["train_loss"] for h in a] == [h["train_loss"] for h in b]


def test_training_on_noisy_labels_uses_them_for_loss_and_bank():
    ds = toy_images()
    noisy = (ds.train.y + 1) % 4  # every label shifted: validation accuracy must collapse
    result = train_attnknn(_attnknn(), ds, FAST, train_labels=noisy, progress=False)
    assert max(h["val_accuracy"] for h in result.history) < 0.3


def test_train_config_rejects_bad_values():
    with pytest.raises(ConfigError, match="epochs=0 is out of range"):
        TrainConfig(epochs=0)
    with pytest.raises(ConfigError, match="index_type='kd' is not allowed"):
        TrainConfig(index_type="kd")
    with pytest.raises(ConfigError, match="k=300 is out of range; allowed: 1..238"):
        train_attnknn(_attnknn(), toy_images(), TrainConfig(k=300), progress=False)


def _iris_runs(seed: int = 0, epochs: int = 2):
    from attnknn_lib.experiments.common import shared as core
    from attnknn_lib.training.recipe import Recipe

    recipe = Recipe(tabular_epochs=epochs, k=5)
    return core.model_runs(recipe, core.data_spec(recipe, "iris"), (seed,))


def test_cache_loads_the_same_model_and_retrains_when_the_run_changes(tmp_path):
    from attnknn_lib.data.spec import prepare

    attn, cnn = _iris_runs()
    prepared = prepare(attn.data)
    first, cached1 = load_or_train(cnn, tmp_path, prepared, progress=False)
    second, cached2 = load_or_train(cnn, tmp_path, prepared, progress=False)
    assert (cached1, cached2) == (False, True)
    x = torch.randn(3, 4)
    torch.testing.assert_close(first.model(x), second.model(x))
    assert second.history == first.history and second.best_epoch == first.best_epoch
    other = _iris_runs(seed=1)[1]
    assert other.id != cnn.id and load_or_train(other, tmp_path, prepared, progress=False)[1] is False
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == sorted([cnn.id, other.id])  # no temp folders


def test_a_corrupt_cached_model_is_retrained_not_loaded(tmp_path):
    cnn = _iris_runs()[1]
    load_or_train(cnn, tmp_path, progress=False)
    weights = model_dir(tmp_path, cnn) / "model.pt"
    weights.write_bytes(weights.read_bytes()[:100])  # truncated
    with pytest.warns(UserWarning, match="cannot be used"):
        _, cached = load_or_train(cnn, tmp_path, progress=False)
    assert cached is False and torch.load(weights, weights_only=True)


def test_a_non_finite_loss_stops_the_run_in_one_line_and_caches_nothing(tmp_path, monkeypatch):
    attn = _iris_runs()[0]
    monkeypatch.setattr(training, "vote_nll", lambda probs, y: torch.tensor(float("nan")))
    with pytest.raises(TrainingDivergedError, match=r"iris Attn-KNN seed 0: the training loss is nan at "
                                                             r"epoch 1, step 0"):
        load_or_train(attn, tmp_path, progress=False)
    assert not model_dir(tmp_path, attn).exists()


def test_run_ids_are_stable_and_name_the_data_kind_and_seed():
    a, b = _iris_runs(), _iris_runs()
    assert [r.id for r in a] == [r.id for r in b]
    assert a[0].id.startswith("iris-attnknn-s0-") and a[1].id.startswith("iris-cnn-s0-")
    assert _iris_runs(epochs=3)[0].id != a[0].id


def test_main_experiment_models_depend_only_on_the_seed(tmp_path):
    """Initial weights too: torch's default generator starts from a random seed in every process."""
    results = []
    for i in range(2):
        torch.manual_seed(1000 + i)  # whatever ran before must not matter
        trained = {}
        for run in _iris_runs():
            trained[run.kind], cached = load_or_train(run, tmp_path / str(i), progress=False)
            assert cached is False
        results.append(trained)
    for kind in ("attnknn", "cnn"):
        assert [h["val_nll"] for h in results[0][kind].history] == [h["val_nll"] for h in results[1][kind].history]
        for p, q in zip(results[0][kind].model.parameters(), results[1][kind].model.parameters()):
            assert torch.equal(p, q)


def test_progress_bars_are_off_inside_workflow_notebooks(monkeypatch, capsys):
    from attnknn_lib.base import progress

    monkeypatch.setenv("ATTNKNN_PROGRESS", "off")
    assert not progress.enabled()
    list(progress.bar(range(3), desc="quiet"))
    progress.write("hidden")
    captured = capsys.readouterr()
    assert "quiet" not in captured.err + captured.out and "hidden" not in captured.out


def test_mixed_precision_on_the_cpu_is_bf16_where_native_and_the_scaler_only_serves_fp16(monkeypatch):
    from attnknn_lib.training import precision
    from attnknn_lib.training.precision import _Precision

    assert not _Precision(TrainConfig(amp=False), torch.device("cpu")).enabled
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    p = _Precision(TrainConfig(amp=True), torch.device("cpu"))
    assert p.enabled and p.dtype == torch.bfloat16 and not p.scaler.is_enabled()
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)
    with pytest.warns(UserWarning, match="no native bf16"):
        p = _Precision(TrainConfig(amp=True), torch.device("cpu"))
    assert not p.enabled and not p.scaler.is_enabled()


def test_the_bf16_scan_under_autocast_still_ranks_in_fp32():
    # 12 near-duplicates that bf16 cannot tell apart (fewer than the 2k candidates) among 52 far rows:
    # the fp32 re-rank must order them as the exact search, autocast or not
    g = torch.Generator().manual_seed(1)
    base = torch.nn.functional.normalize(torch.randn(1, 32, generator=g), dim=-1)
    near = base + 1e-2 * torch.randn(12, 32, generator=g)
    mem = torch.nn.functional.normalize(torch.cat([torch.randn(52, 32, generator=g), near]), dim=-1)
    q = base.clone()
    own = torch.zeros(1, 0, dtype=torch.long)
    exact = training_neighbours(q, mem, own, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert training_neighbours(q, mem, own, 8, mem.to(torch.bfloat16)).tolist() == exact.tolist()


def test_a_run_that_keeps_its_epochs_caches_them_and_is_retrained_without_them(tmp_path):
    from attnknn_lib.data.spec import DataSpec, prepare
    from attnknn_lib.training.cache import load_cached
    from attnknn_lib.training.runs import TrainingRun

    spec = DataSpec("iris")
    run = TrainingRun(spec, "cnn", "mlp", train={"epochs": 3, "batch_size": 32, "k": 5, "keep_epochs": True})
    prepared = prepare(spec)
    result, cached = load_or_train(run, tmp_path, prepared, progress=False)
    assert not cached and len(result.epoch_states) == 3
    again = load_cached(run, prepared, tmp_path)
    assert len(again.epoch_states) == 3
    best = again.epoch_states[again.best_epoch - 1]
    assert all(torch.equal(best[k], v) for k, v in again.model.state_dict().items())
    first, last = again.epoch_states[0], again.epoch_states[-1]  # copies, not views of the live weights
    assert any(not torch.equal(first[k], last[k]) for k in first)
    (model_dir(tmp_path, run) / "epochs.pt").unlink()
    assert load_cached(run, prepared, tmp_path) is None  # it cannot serve the replay: retrain


def test_the_schedule_warms_up_decays_to_its_floor_and_holds_it():
    steps = 100
    f = [training.lr_factor(s, steps, 0.05, hold_frac=0.3, final=0.05) for s in range(steps)]
    assert f[0] == pytest.approx(0.2) and f[4] == pytest.approx(1.0)  # 5 warm-up steps
    assert all(a >= b for a, b in zip(f[4:], f[5:]))  # never rises after the warm-up
    assert f[70:] == [pytest.approx(0.05)] * 30  # the last 30 % held at the floor
    assert f[69] > 0.05
    # without a hold or floor it is the plain cosine to zero
    plain = [training.lr_factor(s, steps, 0.05) for s in range(steps)]
    assert plain[-1] == pytest.approx(0.5 * (1 + np.cos(np.pi * 94 / 95)))


def test_the_plateau_rule_reads_the_last_third_of_validation_accuracy():
    from attnknn_lib.training.convergence import plateau

    rising = [{"val_accuracy": a} for a in (0.80, 0.85, 0.88, 0.90, 0.91, 0.92, 0.925)]
    out = plateau(rising, best_epoch=7)
    assert out["tail_epochs"] == 3 and out["tail_range"] == pytest.approx(0.015) and not out["plateau"]
    assert plateau(rising, best_epoch=6)["plateau"]  # the selected epoch is not the last
    flat = rising[:4] + [{"val_accuracy": a} for a in (0.930, 0.931, 0.932)]
    assert plateau(flat, best_epoch=7)["plateau"]  # 0.2 pp over the last third
    with pytest.raises(ValueError):
        plateau([], best_epoch=1)

"""The nonlinear learned metric (ModernNCA-style): it starts at the plain geometry, keeps NCA's
budget rules, and learns a geometry the plain vote lacks."""

from __future__ import annotations

import numpy as np
import pytest

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.training.metric_learning import fit_nca
from attnknn_lib.training.nonlinear_metric import ResidualMetric, fit_mlp_metric


def _rings(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two classes on two circles (radius 1 and 2) in the first two dimensions, and six dimensions of
    noise at the same scale: no linear map can make the radius the distance, an MLP can."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    angle = rng.uniform(0, 2 * np.pi, n)
    radius = 1.0 + y + 0.1 * rng.standard_normal(n)
    x = np.concatenate([np.stack([radius * np.cos(angle), radius * np.sin(angle)], 1),
                        1.5 * rng.standard_normal((n, 6))], 1)
    return x.astype(np.float32), y


def test_the_map_starts_at_the_plain_geometry():
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    assert np.allclose(ResidualMetric(4, 8, 0.1).embed(x), x)


def test_it_keeps_ncas_budget_rules_and_fields():
    x, y = _rings(200, 0)
    vx, vy = _rings(100, 1)
    fit = fit_mlp_metric(x, y, vx, vy, num_classes=2, k=5, lrs=(0.01,), epochs=2, patience=1, batch_size=100,
                         candidates=200, seed=0, hidden=16)
    nca = fit_nca(x, y, vx, vy, num_classes=2, k=5, lrs=(0.01,), epochs=2, patience=1, batch_size=100,
                  candidates=200, seed=0)
    assert set(nca.info) <= set(fit.info) and fit.info["hidden"] == 16 and fit.info["lrs"] == [0.01]
    assert 1 <= fit.info["best_epoch"] <= fit.info["epochs_run"] <= 2


@pytest.mark.slow
def test_it_learns_a_metric_the_plain_geometry_lacks():
    """Two classes whose label is read off the second coordinate on one side of the first and off the
    third on the other: no single linear map suits both sides, a gated (nonlinear) one does."""
    from attnknn_lib.knn.bank import MemoryBank
    from attnknn_lib.knn.votes import knn_probs

    def gated(n: int, seed: int):
        x = np.random.default_rng(seed).standard_normal((n, 3)).astype(np.float32)
        return x, np.where(x[:, 0] > 0, x[:, 1] > 0, x[:, 2] > 0).astype(int)

    x, y = gated(500, 0)
    vx, vy = gated(300, 1)
    nb = MemoryBank().build(x, y).search(vx, 5)
    plain = (knn_probs("uniform", nb.sq_dist, nb.labels, 2).argmax(1) == vy).mean()
    fit = fit_mlp_metric(x, y, vx, vy, 2, 5, (0.03,), 10, 4, 128, 500, 0, hidden=32, dropout=0.0)
    assert fit.info["scores"][f"{fit.info['lr']:g}"]["val_accuracy"] > plain


def test_bad_budget_gets_one_line():
    x, y = _rings(50, 0)
    with pytest.raises(ConfigError, match="dropout"):
        fit_mlp_metric(x, y, x, y, 2, 5, (0.01,), 1, 1, 16, 50, 0, dropout=1.0)


def test_every_learner_searches_its_learning_rate_by_one_rule():
    """The heads' grid (when a config gives one) is extended past an end while the best sits there,
    with NCA's step and number of extensions, and chosen by the one selection rule."""
    from types import SimpleNamespace

    from attnknn_lib.experiments.common.fixed_embedding import lr_search
    from attnknn_lib.training.metric_learning import LR_EXTENSIONS, LR_STEP

    def fit(lr):  # validation accuracy grows with the rate: the grid must grow at its top
        return SimpleNamespace(history=[{"val_accuracy": lr, "val_nll": 1.0}], best_epoch=1)

    best, info = lr_search(fit, (0.001, 0.01))
    assert info["lrs"][-1] == pytest.approx(0.01 * LR_STEP ** LR_EXTENSIONS) and info["edge"]
    assert best.history[0]["val_accuracy"] == info["lr"] == info["lrs"][-1] and info["configs"] == 2 + LR_EXTENSIONS
    _, inside = lr_search(lambda lr: SimpleNamespace(history=[{"val_accuracy": -abs(lr - 0.01), "val_nll": 0}],
                                                     best_epoch=1), (0.003, 0.01, 0.03))
    assert inside == {"lr": 0.01, "lrs": [0.003, 0.01, 0.03], "edge": False, "configs": 3}


def test_the_nonlinear_metric_votes_in_its_own_space_like_nca():
    from types import SimpleNamespace

    from attnknn_lib.experiments.common.learned_metric import NONLINEAR, mlp_metric_methods

    x, y = _rings(300, 0)
    vx, vy = _rings(120, 1)
    tx, ty = _rings(120, 2)
    rows = [SimpleNamespace(x=a / np.linalg.norm(a, axis=1, keepdims=True), y=b) for a, b in ((x, y), (vx, vy), (tx, ty))]
    out = mlp_metric_methods(*rows, 2, 0, k=5, loo_k=5, reference_k=32, lrs=(0.01,), epochs=2, patience=1,
                             batch_size=150, candidates=300, hidden=16)
    assert set(out) == set(NONLINEAR)
    pv, pt, info = out["mlp_metric"]
    assert pv.shape == (120, 2) and pt.shape == (120, 2) and np.allclose(pt.sum(1), 1)
    assert info["mlp_metric"]["hidden"] == 16 and info["scale"] > 0 and "headroom_at_k" in info

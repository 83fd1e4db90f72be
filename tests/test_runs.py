"""Data preparation and training-run specs: what an experiment changes before training."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.data.spec import DataSpec, prepare
from attnknn_lib.training.runs import TrainingRun


def test_noise_changes_training_labels_and_optionally_validation_never_test():
    clean = prepare(DataSpec("digits"))
    noisy = prepare(DataSpec("digits", noise="symmetric", noise_rate=0.2, noisy_val=True, prep_seed=3))
    ds, base = noisy.dataset, clean.dataset
    assert np.array_equal(noisy.clean_train_y, base.train.y)
    flipped = ds.train.y != base.train.y
    assert np.array_equal(flipped, noisy.flipped) and flipped.sum() == round(0.2 * len(flipped))
    assert (ds.val.y != base.val.y).sum() == round(0.2 * len(base.val.y))
    assert np.array_equal(ds.test.y, base.test.y) and np.array_equal(ds.test.x, base.test.x)
    assert noisy.fingerprint() != clean.fingerprint()
    quiet_val = prepare(DataSpec("digits", noise="asymmetric", noise_rate=0.2))
    assert np.array_equal(quiet_val.dataset.val.y, base.val.y)
    moved = quiet_val.flipped
    assert np.array_equal(quiet_val.dataset.train.y[moved], (base.train.y[moved] + 1) % 10)


def test_imbalance_keeps_an_exponential_subset_of_the_training_rows_only():
    base = prepare(DataSpec("digits")).dataset
    tail = prepare(DataSpec("digits", imbalance=0.1)).dataset
    counts = np.bincount(tail.train.y, minlength=10)
    assert counts[0] > counts[-1] and counts[-1] == int(np.floor(np.bincount(base.train.y).min() * 0.1))
    assert len(tail.val) == len(base.val) and len(tail.test) == len(base.test)
    assert set(tail.train.ids) <= set(base.train.ids)


@pytest.mark.parametrize("kwargs,message", [
    ({"noise": "pairwise"}, "noise='pairwise' is not allowed"),
    ({"noise": "symmetric", "noise_rate": 1.0}, "noise_rate=1.0 is out of range"),
    ({"noise_rate": 0.1}, "needs noise=symmetric or asymmetric"),
    ({"imbalance": 0.0}, "imbalance=0.0 is out of range"),
])
def test_bad_data_specs_are_refused_in_one_line(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        DataSpec("digits", **kwargs)


def test_a_run_spec_round_trips_through_its_file_and_keeps_its_id(tmp_path):
    from attnknn_lib.experiments.common import shared as core
    from attnknn_lib.training.recipe import Recipe

    run = core.model_runs(Recipe(), core.data_spec(Recipe(), "iris", noise="symmetric", noise_rate=0.1), (2,))[0]
    path = run.write_spec(tmp_path)
    mtime = path.stat().st_mtime_ns
    assert run.write_spec(tmp_path).stat().st_mtime_ns == mtime  # unchanged content: not rewritten
    again = TrainingRun.from_dict(json.loads(path.read_text()))
    assert again.id == run.id == path.stem and again.seed == 2
    assert "symmetric noise 0.1" in run.label


def test_every_module_training_imports_is_in_the_training_fingerprint():
    """A module the training code imports either changes the run id when its source changes, or is
    declared unable to change a model; a new import has to choose."""
    import ast
    from pathlib import Path

    from attnknn_lib.base.provenance import PACKAGE_DIR
    from attnknn_lib.training.runs import TRAINING_EXEMPT, TRAINING_SOURCES

    def imports(rel: str) -> set[str]:
        tree = ast.parse((PACKAGE_DIR / rel).read_text())
        out = set()
        for node in ast.walk(tree):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                if name.startswith("attnknn_lib."):
                    parts = name.split(".")[1:]
                    path = Path(*parts)
                    rel_path = f"{path}.py" if (PACKAGE_DIR / f"{path}.py").exists() else f"{path}/__init__.py"
                    out.add(rel_path)
        return out

    seen, todo = set(), ["training/loops.py", "training/cache.py", "training/runs.py"]
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        todo += [m for m in imports(rel) if (PACKAGE_DIR / m).exists()]
    packages = {m for m in seen if m.endswith("__init__.py") and m != "models/__init__.py"}
    missing = sorted(seen - set(TRAINING_SOURCES) - set(TRAINING_EXEMPT) - packages)
    assert not missing, f"add to TRAINING_SOURCES or TRAINING_EXEMPT: {missing}"


def test_keeping_epochs_is_the_same_model_trained_once_and_the_plan_keeps_them(tmp_path):
    from attnknn_lib.base.paths import Paths
    from attnknn_lib.experiments.common import shared as core
    from attnknn_lib.experiments.main.config import Config as MainConfig
    from attnknn_lib.training.runs import merge_runs
    from attnknn_lib.workflow.plan import make_plan
    from attnknn_lib.workflow.profiles import resolve

    cfg = MainConfig()
    plain = TrainingRun(DataSpec("digits"), "cnn", "mlp", train={"epochs": 3, "keep_epochs": False})
    keeps = TrainingRun(DataSpec("digits"), "cnn", "mlp", train={"epochs": 3, "keep_epochs": True})
    other = TrainingRun(DataSpec("digits"), "cnn", "mlp", train={"epochs": 4, "keep_epochs": True})
    assert plain.id == keeps.id != other.id
    assert merge_runs([plain, keeps, other])[plain.id] is keeps and merge_runs([keeps, plain])[plain.id] is keeps
    self_run, epochs_run = cfg.replay_runs()
    recipe_run = core.model_runs(cfg, core.data_spec(cfg, cfg.primary), cfg.seeds[:1], kinds=("attnknn",))[0]
    assert epochs_run.id == recipe_run.id != self_run.id
    plan = make_plan({"main": resolve("cpu", None, [])["main"]}, Paths.at(tmp_path), pdf=False, paper=False)
    assert epochs_run.id in plan["runs"] and self_run.id in plan["runs"]
    spec = json.loads((tmp_path / "artifacts" / "runs" / f"{epochs_run.id}.json").read_text())
    assert spec["train"]["keep_epochs"] is True
    assert plan["experiments"]["main"]["runs"] == list(plan["runs"])  # the replay's copy is no second job
    # --only an experiment that needs the model without its epochs leaves the spec (and its time)
    # alone: a rewritten spec is newer than the model, and Snakemake would retrain it
    path = tmp_path / "artifacts" / "runs" / f"{epochs_run.id}.json"
    before = path.stat().st_mtime_ns
    only = make_plan({"attention_study": resolve("cpu", None, [])["attention_study"]}, Paths.at(tmp_path), pdf=False,
                     paper=False)
    assert epochs_run.id in only["runs"] and path.stat().st_mtime_ns == before
    assert json.loads(path.read_text())["train"]["keep_epochs"] is True
    path.write_text(path.read_text()[:50])  # a spec cut short is written again
    make_plan({"attention_study": resolve("cpu", None, [])["attention_study"]}, Paths.at(tmp_path), pdf=False, paper=False)
    assert json.loads(path.read_text())["train"]["keep_epochs"] is False

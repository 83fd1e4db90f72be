"""A long measurement cut into parts the workflow runs as jobs (attnknn_lib.experiments.framework.parts)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attnknn_lib.base.paths import Paths
from attnknn_lib.experiments.framework import catalog
from attnknn_lib.experiments.framework.parts import part_file, part_result, part_seconds, stored


def test_a_part_is_computed_once_and_read_back_exactly_under_the_same_config_and_code(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNKNN_ARTIFACTS", str(tmp_path / "artifacts"))
    exp = catalog.get("headroom_regimes")
    cfg, paths = exp.Config(), Paths(tmp_path)
    calls = []

    def compute():
        calls.append(1)
        return {"x": float("nan"), (1, 2): np.arange(3)}  # what JSON would not keep: NaN, tuple keys, arrays

    first = part_result(paths, cfg, exp.name, "seed0", compute)
    again = part_result(paths, cfg, exp.name, "seed0", compute)
    assert len(calls) == 1 and part_file(paths, cfg, exp.name, "seed0").exists()
    assert part_seconds(paths, cfg, exp.name, ["seed0"]) >= 0 and part_seconds(paths, cfg, exp.name, ["seed1"]) is None
    assert np.isnan(again["x"]) and (again[(1, 2)] == first[(1, 2)]).all()
    other = exp.Config(seeds=(0,))  # another config: its own folder, the stored part is not read
    assert stored(paths, other, exp.name, "seed0") is None
    assert part_file(paths, other, exp.name, "seed0").parent != part_file(paths, cfg, exp.name, "seed0").parent
    part_result(paths, other, exp.name, "seed0", compute)
    assert len(calls) == 2
    part_file(paths, other, exp.name, "seed0").write_bytes(b"cut sh")  # truncated: computed again, not an error
    part_result(paths, other, exp.name, "seed0", compute)
    assert len(calls) == 3


def test_the_plan_gives_the_long_experiments_their_part_jobs_and_a_bad_part_gets_one_line(tmp_path, capsys):
    from attnknn_lib.workflow import jobs
    from attnknn_lib.workflow.plan import make_plan
    from attnknn_lib.workflow.profiles import resolve

    resolved = resolve("cpu", None, [])
    plan = make_plan({n: resolved[n] for n in ("attention_study", "headroom_regimes", "k_sweep", "main", "theory",
                                               "positive_control")}, Paths(tmp_path), pdf=False, paper=False)
    study, regimes = plan["experiments"]["attention_study"], plan["experiments"]["headroom_regimes"]
    # the collapse sweep, the long-tailed memory and the end-to-end control of every seed (five: their
    # verdicts are counted) are parts of their own (a seed with all of them took 18-20 min)
    # and a seed's four memory settings are two parts of two (one part of four took up to 893 s)
    assert study["parts"] == [p for s in range(5) for p in (f"seed{s}", f"seed{s}b")] + [
        f"{p}{s}" for p in ("collapse", "longtail", "e2e") for s in range(5)] + ["second_digits"]
    # main: one part per Fashion-MNIST seed, one per tabular dataset (its ten splits)
    assert plan["experiments"]["main"]["parts"] == [f"fashion_mnist_seed{s}" for s in range(5)] + [
        d for d in resolved["main"]["datasets"].split(",") if d != "fashion_mnist"]
    # the regimes: one part per candidate and seed (a seed's three candidates took 3 to 4.5 h in one job)
    assert regimes["parts"] == [f"{c}_seed{s}" for c in ("pixels_pca", "few_labels", "other_classes")
                                for s in range(5)] and plan["experiments"]["theory"]["parts"] == []
    assert plan["experiments"]["k_sweep"]["parts"] == [f"seed{s}" for s in range(5)]
    control = plan["experiments"]["positive_control"]
    assert control["parts"][:2] == ["scale0_seed0", "scale0_seed1"] and len(control["parts"]) == 6 * 5
    # job order: parts that wait on models first, then the longest models, the regimes' long parts
    # beside them, and the positive control's short cells fill the cores at the end
    assert study["part_priority"] > max(plan["priorities"].values()) > 0
    assert regimes["part_priority"] > control["part_priority"] == 0
    # models: those part jobs wait on first, then the longest by their kind's seconds
    fashion = [r for r in plan["runs"] if "fashion" in r]
    tabular = [r for r in plan["runs"] if "iris" in r]
    assert min(plan["priorities"][r] for r in fashion) > max(plan["priorities"][r] for r in tabular)
    only = make_plan({"noise": resolved["noise"], "main": resolved["main"]}, Paths(tmp_path), pdf=False, paper=False)
    retrained = [r for r in only["runs"] if r not in plan["runs"]]  # noise's own models: no part waits on them
    mains = [r for r in fashion if r in only["runs"]]
    assert retrained and mains and max(only["priorities"][r] for r in retrained) < min(only["priorities"][r] for r in mains)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert jobs.main(["part", "headroom_regimes", "--part", "seed9", "--plan", str(path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "part='seed9' is not a part of headroom_regimes" in err[0] and "pixels_pca_seed0" in err[0]


@pytest.mark.parametrize("name", ["attention_study", "headroom_regimes", "k_sweep", "main", "positive_control"])
def test_a_parted_experiment_declares_both_halves(name):
    exp = catalog.get(name)
    assert exp.parts is not None and exp.run_part is not None and exp.parts(exp.Config())

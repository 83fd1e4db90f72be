"""The schedule of a run at another width: critical path and list scheduling."""

import json

import pytest

from attnknn_lib.tooling.schedule import Job, critical_path_seconds, makespan, run_jobs, widths, with_device_training


def _jobs(*rows):
    return {n: Job(n, s, tuple(after)) for n, s, after in rows}


def test_the_critical_path_is_the_longest_chain_of_waiting_jobs():
    jobs = _jobs(("a", 10, []), ("b", 5, ["a"]), ("c", 1, []), ("d", 2, ["b", "c"]))
    assert critical_path_seconds(jobs) == 17


def test_one_core_sums_the_jobs_and_enough_cores_reach_the_critical_path():
    jobs = _jobs(("a", 10, []), ("b", 5, ["a"]), ("c", 4, []), ("d", 3, []), ("e", 1, ["b", "c"]))
    assert makespan(jobs, 1) == 23
    assert makespan(jobs, 16) == critical_path_seconds(jobs) == 16
    assert critical_path_seconds(jobs) <= makespan(jobs, 2) <= makespan(jobs, 1)


def test_the_longest_chain_starts_first():
    # two cores: a long chain (a then b) and four short jobs; starting a first ends at 10 + 10
    jobs = _jobs(("a", 10, []), ("b", 10, ["a"]), *[(f"s{i}", 5, []) for i in range(4)])
    assert makespan(jobs, 2) == 20


def test_a_bad_width_gets_one_line():
    with pytest.raises(ValueError, match="width=0"):
        makespan({}, 0)


def test_the_run_jobs_follow_the_plan_and_device_training_replaces_their_seconds(tmp_path):
    plan = {"runs": {"m1": "model one", "m2": "model two"},
            "experiments": {"main": {"runs": ["m1", "m2"], "parts": ["seed0"], "notebook": "01_main.ipynb"}}}
    for stage, name, s in (("train", "m1", 100), ("train", "m2", 50), ("part", "main-seed0", 30),
                           ("measure", "main", 5), ("notebook", "main", 2), ("pdf", "01_main", 1),
                           ("report", "report", 1), ("paper", "paper", 3)):
        (tmp_path / f"{stage}-{name}.json").write_text(json.dumps({"seconds": s}))
    jobs = run_jobs(tmp_path, plan)
    assert jobs["part-main-seed0"].after == ("train-m1", "train-m2")
    out = widths(jobs, (1, 2))
    assert out["job_seconds"] == 192 and out["wall_seconds"]["1"] == 192
    assert out["critical_path_seconds"] == 100 + 30 + 5 + 2 + 3  # model, part, measure, notebook, paper
    fast = with_device_training(jobs, plan, [{"label": "model one", "seconds": 4}])
    assert fast["train-m1"].seconds == 4 and fast["train-m2"].seconds == 50


def test_idle_cores_are_charged_to_the_stages_running_then_and_pauses_are_not():
    from attnknn_lib.tooling.schedule import idle_by_stage

    spans = [("train", 0, 10), ("train", 0, 4), ("part", 4, 6), ("measure", 20, 22)]
    # 0-4: two jobs; 4-6: train and part, two; 6-10: train alone (4 s idle); 10-20 nothing (a pause);
    # 20-22: measure alone (2 s idle)
    assert idle_by_stage(spans, 2) == {"train": 4.0, "measure": 2.0}

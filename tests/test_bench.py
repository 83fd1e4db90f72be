"""./run_all.sh bench: the ratios it reports, the stage times it reads, the files it writes."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from experiment_api import api

from attnknn_lib.base.timing import record_time
from attnknn_lib.experiments.framework import catalog
from attnknn_lib.knn.votes import vote
from attnknn_lib.tooling import bench, bench_block, speed, stage_times
from attnknn_lib.workflow.plan import TIMES
from attnknn_lib.workflow.profiles import resolve


def test_the_naive_loop_is_the_vote_written_out():
    rng = np.random.default_rng(0)
    w, y = rng.random((7, 5)), rng.integers(0, 4, size=(7, 5))
    np.testing.assert_allclose(speed.naive_vote(w, y, 4), vote(w, y, 4))


def test_vote_timings_are_per_query_and_their_ratios_follow():
    out = speed.votes(speed.BenchConfig(queries=64, single_queries=4, repeats=1, k=8))
    us = out["us_per_query"]
    assert set(us) == {"attention_batched", "attention_single", "distance_batched", "distance_single",
                       "vote_vectorised", "vote_naive_loop"} and min(us.values()) > 0
    assert out["attention_over_distance_batched"] == pytest.approx(us["attention_batched"] / us["distance_batched"])
    assert out["naive_over_vectorised"] > 1  # a Python loop is slower than one bincount


def test_stage_times_come_from_the_job_records_and_fall_back_to_provenance(tmp_path):
    times = tmp_path / TIMES
    record_time(times, "notebook", "main", 100.0)
    record_time(times, "pdf", "01_main", 8.0)
    record_time(times, "report", "report", 2.0)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "noise_fashion_mnist.json").write_text(json.dumps(
        {"experiment": "noise", "profile": "cpu", "provenance": {"wall_seconds": 50.0}}))
    out = stage_times.cpu_stage_times(tmp_path)
    st = out["stages"]
    assert {k: st["notebook main"][k] for k in ("seconds", "source")} == {"seconds": 100.0, "source": "job"}
    assert {k: st["notebook noise"][k] for k in ("seconds", "source")} == {"seconds": 50.0, "source": "provenance"}
    # the attention study's own training jobs (its end-to-end control) are not recorded here
    assert st["notebook attention_study"]["own_training_jobs"] > 0
    assert st["notebook attention_study"]["own_training_seconds"] is None
    assert st["notebook main"]["own_training_jobs"] > 0  # main's models are shared, its controls are not
    assert st["notebook theory"]["seconds"] is None and st["paper"]["seconds"] is None
    assert st["pdf"]["seconds"] == 8.0 and st["pdf"]["missing"] == len(resolve("cpu", None, [])) - 1
    assert st["training"]["seconds"] is None and st["training"]["missing"] == st["training"]["jobs"] > 0
    assert out["total_seconds"] == pytest.approx(160.0) and out["complete"] is False


def _committed_training() -> dict:
    """The training block of the committed bench record (results/benchmarks.json)."""
    from attnknn_lib.base.files import read_json
    from attnknn_lib.base.paths import REPO_ROOT

    return read_json(REPO_ROOT / "results" / "benchmarks.json")["training"]


def test_bench_without_the_smoke_run_prints_a_table_and_writes_its_json(tmp_path, capsys, monkeypatch):
    # the command as typed, on a tenth of the cpu profile's memory and of its queries (the sizes are
    # BenchConfig's defaults, not options), and the training steps' block as the committed record has it
    # (measuring them is half a minute: test_training_throughput_times_a_step_of_each_model_as_committed)
    @dataclasses.dataclass(frozen=True)
    class Small(speed.BenchConfig):
        bank: int = 5_400
        queries: int = 200
        single_queries: int = 10
        gemm_size: int = 512

    monkeypatch.setattr(bench, "BenchConfig", Small)
    monkeypatch.setattr(bench, "training_throughput", lambda cfg, gemm_gflops: _committed_training())
    assert bench.main(["--no-smoke", "--repeats", "1", "--out", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "benchmarks.json").read_text())
    assert 0 < record["search_vs_gemm"]["flat_search_over_gemm"] < 5 and "smoke" not in record
    assert record["machine"]["torch_cpu_capability"] and "floor_seconds" in record["cpu_run"]
    printed = capsys.readouterr().out
    assert "exact search (Flat L2) vs GEMM" in printed and "vectorised vote vs per-row loop" in printed
    block = bench_block.markdown(record)
    assert block.startswith("| measurement | measured | ratio |") and "results/benchmarks.json" in block


@pytest.mark.slow
def test_training_throughput_times_a_step_of_each_model_as_committed():
    """One step of each model, the augmentation and the bank's embedding, timed (repeats=1): every
    entry the committed record has (the bf16 autocast steps where this CPU has native bf16), so the
    committed block the test above stands in with has the shape a measurement gives."""
    out = speed.training_throughput(speed.BenchConfig(bank=5_400, repeats=1), gemm_gflops=100.0)
    amp = {"cnn_step_amp", "attnknn_step_amp"}
    assert set(out) - amp == set(_committed_training()) - amp and (amp <= set(out)) == out["native_bf16"]
    for step in ("cnn_step", "attnknn_step", "attnknn_step_bf16_scan", *(amp & set(out))):
        assert out[step]["ms"] > 0 and out[step]["gflop_per_step"] > 0 and out[step]["images_per_s"] > 0, step
        assert out[step]["over_gemm"] == pytest.approx(out[step]["gflops"] / 100.0)
    assert out["augment"]["images_per_s"] > 0 and out["bank_embedding"]["images_per_s"] > 0


def test_the_committed_bench_block_is_generated_from_the_committed_benchmarks_json():
    from attnknn_lib.base.files import read_json
    from attnknn_lib.base.paths import REPO_ROOT

    text = (REPO_ROOT / bench.BENCH_DOC).read_text()
    block = text.split(bench.BENCH_START, 1)[1].split(bench.BENCH_END, 1)[0].strip()
    assert block == bench_block.markdown(read_json(REPO_ROOT / "results" / "benchmarks.json")), \
        "docs/benchmarks.md's block is stale: ./run_all.sh bench rewrites it"


def test_bench_refuses_bad_options_in_one_line(capsys):
    assert bench.main(["--repeats", "0", "--no-smoke"]) == 2
    assert capsys.readouterr().err.strip() == "error: repeats=0 is out of range; allowed: [1, inf]"


def test_an_experiments_own_training_jobs_count_towards_its_budget(tmp_path):
    attention_study = api("attention_study")

    times = tmp_path / TIMES
    record_time(times, "notebook", "attention_study", 300.0)
    cfg = attention_study.Config(**resolve("cpu", None, [])["attention_study"])
    own = attention_study.end_to_end_runs(cfg)
    for run in own:
        record_time(times, "train", run.id, 100.0)
    st = stage_times.cpu_stage_times(tmp_path)["stages"]["notebook attention_study"]
    assert st["own_training_jobs"] == len(own) == cfg.end_to_end_seeds
    assert st["own_training_seconds"] == pytest.approx(100.0 * len(own))


def test_the_runs_wall_time_spans_its_jobs_which_ran_side_by_side_less_the_pauses(tmp_path):
    times = tmp_path / TIMES
    # two notebooks of 100 s that ended together (side by side), then a report of 5 s; then, after
    # a pause of an hour (the run resumed in a later session), a paper job of 10 s
    jobs = (("notebook", "main", 100.0, "00:01:40"), ("notebook", "noise", 100.0, "00:01:40"),
            ("report", "report", 5.0, "00:01:45"), ("paper", "paper", 10.0, "01:01:55"))
    for stage, name, seconds, end in jobs:
        path = record_time(times, stage, name, seconds)
        path.write_text(json.dumps({**json.loads(path.read_text()), "finished": f"2026-01-01T{end}+00:00"}))
    out = stage_times.cpu_stage_times(tmp_path)
    assert out["total_seconds"] == pytest.approx(215.0)  # the sum of the job times
    assert out["wall_seconds"] == pytest.approx(115.0)  # while some job ran: the hour's pause left out
    assert out["busy_share"] == pytest.approx(215.0 / (115.0 * out["cores"]))


@pytest.mark.parametrize("spans, covered", [([], 0.0), ([(0, 10)], 10.0), ([(0, 10), (5, 12)], 12.0),
                                            ([(0, 10), (2, 3)], 10.0), ([(20, 30), (0, 10)], 20.0)])
def test_the_covered_time_counts_overlaps_once_and_gaps_not_at_all(spans, covered):
    assert stage_times.covered_seconds(spans) == pytest.approx(covered)


def test_the_training_steps_alone_are_summed_over_every_run_and_set_against_the_core_budget(tmp_path, monkeypatch):
    monkeypatch.delenv("ATTNKNN_ARTIFACTS", raising=False)
    monkeypatch.setattr(stage_times.os, "cpu_count", lambda: 2)
    declared = catalog.experiments()
    ids = sorted({r.id for n, p in resolve("cpu", None, []).items() for r in declared[n].runs(declared[n].Config(**p))})
    assert stage_times.cpu_stage_times(tmp_path)["stages"]["training"]["step_seconds"] is None  # no model records
    for rid in ids:
        record_time(tmp_path / TIMES, "train", rid, 40.0)
        model = tmp_path / "artifacts" / "models" / rid
        model.mkdir(parents=True)
        (model / "train.json").write_text(json.dumps({"history": [{"train_seconds": 10.0}, {"train_seconds": 20.0}]}))
    out = stage_times.cpu_stage_times(tmp_path)
    assert out["cores"] == 2 and out["stages"]["training"]["step_seconds"] == pytest.approx(30.0 * len(ids))
    assert out["floor_seconds"] == pytest.approx(30.0 * len(ids) / 2)  # the steps spread over both cores
    bench_record = {"cpu_run": out}
    rows = {r.measurement: r for r in bench_block.table({**_micro(), **bench_record}).itertuples(index=False)}
    steps = rows["cpu run: training steps alone (forward, backward, optimiser)"]
    assert steps.ratio == pytest.approx(30.0 / 40.0) and steps[3] == "share of training time"
    said = " ".join(bench_block.floor_lines(out))
    assert f"{30.0 * len(ids):,.0f} s" in said and f"{30.0 * len(ids) / 2 / 60:,.0f} min, the floor" in said
    # the largest items left: the steps lead (every training job's time is steps, refresh or rest)
    assert bench_block.largest_items(out)[0][0] == "training steps"
    first = json.loads((tmp_path / "artifacts" / "models" / ids[0] / "train.json").read_text())
    first["history"][1].pop("train_seconds")  # an epoch without its step time: no floor is claimed
    (tmp_path / "artifacts" / "models" / ids[0] / "train.json").write_text(json.dumps(first))
    assert stage_times.cpu_stage_times(tmp_path)["stages"]["training"]["step_seconds"] is None


def test_training_time_splits_into_steps_the_banks_refresh_and_the_rest(tmp_path, monkeypatch):
    monkeypatch.delenv("ATTNKNN_ARTIFACTS", raising=False)
    declared = catalog.experiments()
    ids = sorted({r.id for n, p in resolve("cpu", None, []).items() for r in declared[n].runs(declared[n].Config(**p))})
    for rid in ids:
        record_time(tmp_path / TIMES, "train", rid, 40.0)
        model = tmp_path / "artifacts" / "models" / rid
        model.mkdir(parents=True)
        epochs = [{"train_seconds": 10.0, "refresh_seconds": 3.0, "seconds": 13.5},
                  {"train_seconds": 20.0, "refresh_seconds": 5.0, "seconds": 25.5}]
        (model / "train.json").write_text(json.dumps({"history": epochs}))
    t = stage_times.cpu_stage_times(tmp_path)["stages"]["training"]
    assert t["refresh_seconds"] == pytest.approx(8.0 * len(ids))
    assert t["rest_seconds"] == pytest.approx(2.0 * len(ids))  # 40 s a job, less 30 s of steps and 8 of refresh
    # where the rest is paid: 1 s inside the epochs (39 s of epochs), 1 s outside them (a 40-s job)
    assert t["rest_in_epochs_seconds"] == pytest.approx(1.0 * len(ids))
    assert t["rest_outside_epochs_seconds"] == pytest.approx(1.0 * len(ids))
    said = bench_block.rest_split_sentence(t)
    assert "(2.5 %) is paid inside the epochs" in said and "(2.5 %) once per job" in said and "goal" not in said
    over = {**t, "rest_in_epochs_seconds": 0.06 * t["seconds"]}  # inside the epochs alone over the 5 % goal
    assert "would still be above the 5 % goal" in bench_block.rest_split_sentence(over)
    rows = {r.measurement: r for r in bench_block.table({**_micro(), "cpu_run": stage_times.cpu_stage_times(tmp_path)})
            .itertuples(index=False)}
    rest = rows["cpu run: training, the rest (start-up, loading, validation, bookkeeping)"]
    assert rest.ratio == pytest.approx(2.0 / 40.0) and rest[3] == "share of training time"
    first = json.loads((tmp_path / "artifacts" / "models" / ids[0] / "train.json").read_text())
    first["history"][0].pop("refresh_seconds")  # a model from before the split: no split is claimed
    (tmp_path / "artifacts" / "models" / ids[0] / "train.json").write_text(json.dumps(first))
    assert "rest_seconds" not in stage_times.cpu_stage_times(tmp_path)["stages"]["training"]


def _micro() -> dict:
    """The micro-benchmark part of a bench record, with made-up numbers (table needs them)."""
    us = dict.fromkeys(("attention_batched", "attention_single", "distance_batched", "distance_single",
                        "vote_vectorised", "vote_naive_loop"), 1.0)
    return {"search_vs_gemm": {"flat_search_gflops": 1.0, "gemm_gflops": 1.0, "flat_search_over_gemm": 1.0,
                               "flat_ip_search_gflops": 1.0, "flat_ip_search_over_gemm": 1.0},
            "votes": {"us_per_query": us, "attention_over_distance_batched": 1.0,
                      "attention_over_distance_single": 1.0, "naive_over_vectorised": 1.0}}


def test_the_gpu_training_stage_plans_each_run_once_and_sums_per_group():
    from attnknn_lib.tooling import training_stage

    runs = training_stage.plan_runs("smoke")
    assert runs and len({r.id for r in runs}) == len(runs)
    rows = [{"label": "a", "kind": "cnn", "data": "iris", "max_train": 0, "seconds": 2.0, "best_epoch": 1,
             "val_accuracy": 0.5},
            {"label": "b", "kind": "cnn", "data": "iris", "max_train": 0, "seconds": 3.0, "best_epoch": 1,
             "val_accuracy": 1.0},
            {"label": "c", "kind": "attnknn", "data": "fashion_mnist", "max_train": 100, "seconds": 1.0,
             "best_epoch": 1, "val_accuracy": 0.25}]
    s = training_stage.summarise(rows, 4.0, "cpu", 2)
    assert s["job_seconds"] == 6.0 and s["jobs"] == 3
    assert list(s["groups"]) == ["iris cnn", "fashion_mnist attnknn (100 rows)"]
    assert s["groups"]["iris cnn"] == {"jobs": 2, "seconds": 5.0, "val_accuracy": 0.75}
    assert training_stage.main(["--workers", "0", "--out", "x.json"]) == 2


def test_a_profile_keeps_library_functions_and_the_bench_block_lists_them():
    import cProfile
    import pstats

    from attnknn_lib.tooling.profiling import OWNERS, time_by_owner, top_functions

    prof = cProfile.Profile()
    rng = np.random.default_rng(0)
    prof.enable()
    vote(rng.random((50, 5)), rng.integers(0, 3, size=(50, 5)), 3)
    sorted(range(1000))  # not the library's: left out
    prof.disable()
    stats = pstats.Stats(prof)
    top = top_functions(stats, 3)
    names = [r["function"] for r in top["by_cumulative_time"]]
    assert names and all(n.startswith("attnknn_lib/") for n in names) and any("votes.py" in n for n in names)
    assert len(top["by_own_time"]) <= 3
    owners = time_by_owner(stats)
    assert list(owners) == list(OWNERS) and owners["library"] > 0 and owners["numpy"] > 0
    assert sum(owners.values()) == pytest.approx(sum(v[2] for v in stats.stats.values()))
    profile = {"experiment": "toy", "overrides": [], "wall_seconds": 12.0, "threads": 1, "by_owner": owners, **top}
    reduced = {**profile, "overrides": ["seeds=0"]}
    lines = bench_block.profile_lines({"toy": profile, "toy_reduced": reduced}, n=2,
                                run_stages={"notebook toy": {"seconds": 30.0}, "notebook toy_reduced": {"seconds": 30.0}})
    row = next(line for line in lines if line.startswith("| `toy`"))
    assert "12 s (1 thr.)" in row and "| 30 s |" in row and "`knn/votes.py:" in row and "(vote)`" in row
    assert row.count("%") == len(OWNERS) + 1
    # a profile with other parameters than the run's is not set beside the run's job time
    row = next(line for line in lines if line.startswith("| `toy_reduced`"))
    assert "12 s (1 thr., seeds=0)" in row and "30 s" not in row
    assert any(line.startswith("- `toy`: `") for line in lines)
    assert bench_block.profile_lines({}) == []


@pytest.mark.parametrize("file, function, expected", [
    ("~", "<built-in method torch._C._nn.linear>", "torch"),
    ("~", "<method 'run_backward' of 'torch._C._EngineBase' objects>", "torch"),
    ("~", "<built-in method faiss._swigfaiss.IndexFlat_search>", "faiss"),
    ("~", "<method 'reduce' of 'numpy.ufunc' objects>", "numpy"),
    ("/x/site-packages/scipy/optimize/_optimize.py", "_minimize_scalar_bounded", "numpy"),
    ("~", "<method 'compress' of 'zlib.Compress' objects>", "other"),
    ("/x/site-packages/torchvision/transforms/functional.py", "pad", "torch"),
    ("/home/torch/project/tool.py", "helper", "other"),  # "torch" in a folder name is not the package
    ("~", "<method 'numpy' of 'torch._C.TensorBase' objects>", "torch"),  # the owner's type, not the method name
    ("/x/lib/python3.11/json/decoder.py", "decode", "other"),
])
def test_profile_time_is_split_by_owner(file, function, expected):
    from attnknn_lib.tooling.profiling import owner

    assert owner(file, function) == expected


def test_a_profile_reads_the_trained_models_and_rewrites_none_of_the_workflows_files(tmp_path, monkeypatch):
    from attnknn_lib.tooling import profiling

    monkeypatch.chdir(tmp_path)
    (tmp_path / "art" / "models" / "run-1").mkdir(parents=True)
    monkeypatch.setenv("ATTNKNN_ARTIFACTS", "art")  # relative: the link must still reach it
    monkeypatch.setenv("ATTNKNN_OUT_DIR", str(tmp_path / "staging"))  # a notebook job's staging folder
    monkeypatch.setenv("ATTNKNN_RETRAIN", "1")
    scratch_root = tmp_path / "scratch"
    scratch_root.mkdir()
    with profiling._scratch(scratch_root) as paths:
        assert paths.root == scratch_root and paths.artifacts == scratch_root / "artifacts"
        assert (paths.artifacts / "models" / "run-1").is_dir()  # the trained models, linked
        assert not (paths.artifacts / "embeddings").exists()  # no cache there: none linked, none made
        assert "ATTNKNN_RETRAIN" not in profiling.os.environ
        (paths.artifacts / "main_x_probs.npz").write_text("written by the profiled run")
    assert not (tmp_path / "art" / "main_x_probs.npz").exists()  # it landed in the scratch folder only
    assert profiling.os.environ["ATTNKNN_ARTIFACTS"] == "art"  # every variable restored
    assert profiling.os.environ["ATTNKNN_OUT_DIR"] == str(tmp_path / "staging")
    assert profiling.os.environ["ATTNKNN_RETRAIN"] == "1"


def test_a_profile_restores_the_thread_setting_even_when_the_job_fails(monkeypatch):
    from attnknn_lib.tooling import profiling

    monkeypatch.setenv("ATTNKNN_THREADS", "2")
    stats, wall = profiling._profiled(lambda: sorted(range(100)), 1)
    assert wall >= 0 and stats.stats and profiling.os.environ["ATTNKNN_THREADS"] == "2"

    def fails():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        profiling._profiled(fails, 1)
    assert profiling.os.environ["ATTNKNN_THREADS"] == "2"


@pytest.mark.parametrize("argv, message", [
    (["train_mlp", "--out", "x.json"], "name='train_mlp'"),  # not an experiment either
    (["train_cnn", "--epochs", "0", "--out", "x.json"], "epochs=0"),
    (["train_cnn", "-p", "seeds=1", "--out", "x.json"], "-p seeds=1 is not allowed with train_cnn"),
    (["main", "--epochs", "3", "--out", "x.json"], "--epochs is not allowed with main"),
    (["main", "-p", "datasets=iris", "-p", "primary=iris", "--out", "x.json"], "models main reads are not trained"),
])
def test_a_bad_profiling_command_is_refused_in_one_line(argv, message, tmp_path, monkeypatch, capsys):
    from attnknn_lib.tooling import profiling

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ATTNKNN_ARTIFACTS", str(tmp_path / "no-models"))
    assert profiling.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert not (tmp_path / "x.json").exists()


def test_the_device_check_sets_each_verdict_beside_the_committed_records_and_counts_the_equal_ones():
    from attnknn_lib.tooling import device_check

    def record(verdict: str) -> dict:
        v = {"value": 0.001, "low": -0.001, "high": 0.003, "verdict": verdict, "se": 0.001}
        return {"results": {"paired": {"attnknn_vs_reference": {"seed_level": {"raw": {"accuracy": v},
                                                                                "calibrated": {"nll": v}}}}}}

    ours, committed = device_check.verdicts(record("equivalent")), device_check.verdicts(record("inconclusive"))
    assert set(ours) == {"attnknn_vs_reference raw accuracy", "attnknn_vs_reference calibrated nll"}
    assert "se" not in ours["attnknn_vs_reference raw accuracy"]
    assert device_check.compare(ours, ours)["equal"] == 2
    out = device_check.compare(ours, committed)
    assert out["equal"] == 0 and out["of"] == 2
    check = {**out, "device": "GPU", "cpu_count": 16, "measured": "2026-11-27, at abc", "wall_seconds": 160.0,
             "part_seconds": {"fashion_mnist_seed0": 141.0, "fashion_mnist_seed1": 145.0}}
    text = bench_block.device_check_lines(check)[1]
    assert "0 of its 2 seed-level verdicts" in text and "equivalent [-0.0010, +0.0030] there, inconclusive" in text
    # a repeat on another GPU: equal values everywhere say the differences are the GPU's kernels
    again = {**check, "device": "GPU2", "wall_seconds": 170.0}
    text = bench_block.device_check_lines(check, [again])[1]
    assert "Repeated on another GPU (GPU2, 170 s" in text and \
        "2 of 2 equal the GPU's, with the same values and intervals in 2 of 2" in text and "run-to-run" in text
    moved = {**again, "verdicts": {k: {**v, "device": {**v["device"], "value": 0.002}} for k, v in check["verdicts"].items()}}
    text = bench_block.device_check_lines(check, [moved])[1]
    assert "in 0 of 2." in text and "run-to-run" not in text
    # the check runs main without what no verdict reads
    cfg = device_check.check_config("cpu", "cuda")
    assert cfg.datasets == ("fashion_mnist",) or cfg.datasets == "fashion_mnist"
    assert not cfg.ablation and not cfg.replay and not cfg.control_runs() and cfg.device == "cuda"


def test_the_device_check_refuses_a_bad_device_in_one_line(tmp_path, capsys):
    from attnknn_lib.tooling import device_check

    assert device_check.main(["--device", "tpu", "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "device='tpu' is not allowed" in err[0]
    assert not (tmp_path / "x.json").exists()


def test_the_status_estimate_counts_an_experiments_part_jobs(tmp_path, monkeypatch):
    from attnknn_lib.base.paths import Paths
    from attnknn_lib.workflow import overview

    stages = {"training": {"seconds": 100.0, "jobs": 10},
              "notebook k_sweep": {"seconds": 300.0, "parts": {"seed0": 700.0, "seed1": 250.0, "seed2": None}}}
    monkeypatch.setattr(overview, "_bench", lambda: stages)
    monkeypatch.setattr(overview, "model_seconds", lambda run: 60.0)  # each model costed by its kind
    states, total = overview._rows({"k_sweep": resolve("cpu", ["k_sweep"], [])["k_sweep"]}, Paths(tmp_path))
    # nothing under tmp_path: the notebook, its parts and its five models (seeds 0-4) are all to be run
    assert states[0]["parts_seconds"] == 950.0 and total == 300.0 + 950.0 + 5 * 60.0


def test_without_a_bench_the_estimate_reads_what_the_records_say_their_parts_took(tmp_path, monkeypatch):
    from attnknn_lib.base.files import write_json
    from attnknn_lib.base.paths import Paths
    from attnknn_lib.workflow import overview

    monkeypatch.setattr(overview, "_bench", lambda: {})
    params = resolve("cpu", ["positive_control"], [])["positive_control"]
    write_json(tmp_path / "results" / "positive_control_clusters.json",
               {"experiment": "positive_control", "profile": "cpu", "config": {},
                "provenance": {"wall_seconds": 20.0}, "results": {"timings": {"parts_seconds": 7200.0}}})
    states, total = overview._rows({"positive_control": params}, Paths(tmp_path))
    assert states[0]["parts_seconds"] == 7200.0 and total == 7220.0  # the cells, not the 20 s that read them


def test_an_unreadable_cached_model_is_removed_so_the_workflow_retrains_it(tmp_path, capsys):
    import torch

    from attnknn_lib.base.paths import Paths
    from attnknn_lib.workflow.cli import drop_unreadable_models

    paths = Paths(tmp_path)
    for rid in ("whole", "cut"):
        folder = paths.artifacts / "models" / rid
        folder.mkdir(parents=True)
        torch.save({"w": torch.arange(1000.0)}, folder / "model.pt")
        (folder / "train.json").write_text("{}")
    cut = paths.artifacts / "models" / "cut" / "model.pt"
    cut.write_bytes(cut.read_bytes()[:200])  # a training killed mid-write
    said = drop_unreadable_models({"runs": {"whole": "", "cut": "", "never trained": ""}}, paths)
    assert len(said) == 1 and "cut" in said[0]
    assert not cut.exists() and not (cut.parent / "train.json").exists()
    assert (paths.artifacts / "models" / "whole" / "model.pt").exists()


def test_a_missing_model_is_costed_by_its_own_kind_from_mains_committed_epochs(tmp_path):
    from types import SimpleNamespace

    from attnknn_lib.experiments.framework.costs import epoch_seconds, model_seconds, training_text

    def run(name, kind, epochs, rid):
        return SimpleNamespace(data=SimpleNamespace(name=name), kind=kind, train={"epochs": epochs}, id=rid)

    image, tabular = run("fashion_mnist", "cnn", 12, "a"), run("iris", "cnn", 30, "b")
    assert model_seconds(image) == 12 * epoch_seconds()[("fashion_mnist", "cnn")]
    assert model_seconds(image) > 50 * model_seconds(tabular)  # why a mean over every job misleads
    assert model_seconds(run("cifar10", "cnn", 12, "c")) is None  # no committed run of that kind
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "train.json").write_text("{}")  # b is in the cache: only a is trained
    assert training_text([image, tabular], tmp_path).startswith("1 model to train, about ")


@pytest.mark.slow
def test_a_fresh_clones_estimate_is_within_a_factor_of_one_and_a_half_of_the_recorded_run(tmp_path):
    """``status`` on a fresh clone (no record, no model) costs every job of the default profile: each
    model by its kind from main's committed epochs, each notebook and part from the bench's record of the
    last run. Checked against the job time that run recorded, when the bench's run is of today's plan."""
    import json as _json

    from attnknn_lib.base.paths import REPO_ROOT, Paths
    from attnknn_lib.workflow import overview
    from attnknn_lib.workflow.plan import make_plan

    run = _json.loads((REPO_ROOT / "results" / "benchmarks.json").read_text()).get("cpu_run") or {}
    resolved = resolve("cpu", None, [])
    jobs = len(make_plan(resolved, Paths(tmp_path / "plan"), pdf=False, paper=False)["runs"])
    if not run.get("complete") or run["stages"]["training"]["jobs"] != jobs:
        pytest.skip(f"the bench's recorded run is not of today's plan ({jobs} models)")
    _, total = overview._rows(resolved, Paths(tmp_path / "fresh"))
    assert 1 / 1.5 <= total / run["total_seconds"] <= 1.5, (total, run["total_seconds"])

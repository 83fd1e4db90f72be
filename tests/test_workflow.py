"""The workflow under ./run_all.sh: Snakemake jobs, skipping, status, DAG, the cluster path, and
recovery after the process group is killed in the middle of a training job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from attnknn_lib.experiments import k_sweep

REPO = Path(__file__).resolve().parent.parent
TIMING_KEYS = {"started", "wall_seconds", "seconds", "train_seconds", "timings", "loaded_from_cache"}
TINY = ["--profile", "smoke", "--only", "main", "-p", "datasets=iris", "-p", "primary=iris", "--no-pdf", "--no-paper"]


def run_all(*args: str, timeout: int = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(REPO / "run_all.sh"), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=env)


def without_timings(obj):
    """A result record with every timing and timestamp field removed (they differ between runs)."""
    if isinstance(obj, dict):
        return {k: without_timings(v) for k, v in obj.items() if k not in TIMING_KEYS}
    if isinstance(obj, list):
        return [without_timings(v) for v in obj]
    return obj


def jobs_started(log: str) -> list[str]:
    return [ln.split()[-1].rstrip(":") for ln in log.splitlines() if ln.startswith(("rule ", "localrule "))]


@pytest.mark.slow
def test_smoke_profile_through_snakemake_writes_every_output_and_a_rerun_starts_no_job(tmp_path):
    out = tmp_path / "smoke"
    start = time.perf_counter()
    proc = run_all("--profile", "smoke", "--out", str(out))
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    assert elapsed < 360, f"smoke profile with PDF export and paper took {elapsed:.0f} s (budget 6 min)"
    started = jobs_started(proc.stdout + proc.stderr)
    # main: 2 datasets x 2 seeds x (Attn-KNN, CNN); k-sweep reuses main's; noise retrains at 0.3
    # (symmetric, asymmetric) and long tail at 0.1 and 0.01 (seed 0, both kinds); rate 0 / ratio 1
    # are main's seed-0 runs (same data and recipe in this profile): each run is trained once
    assert started.count("train") == 8 + 4 + 4
    notebooks = {f"notebook_{n}" for n in ("main", "k_sweep", "noise", "long_tail", "efficiency", "theory")}
    assert notebooks | {"pdf", "report", "paper"} <= set(started)
    assert started.count("pdf") == len(notebooks)

    for ds in ("fashion_mnist", "iris"):
        record = json.loads((out / "results" / f"main_{ds}.json").read_text())
        assert set(record) == {"experiment", "dataset", "profile", "config", "provenance", "results"}
        assert record["profile"] == "smoke" and record["config"]["epochs"] == 1 and record["config"]["seeds"] == [0, 1]
        prov = record["provenance"]
        assert len(prov["commit"]) == 40 and prov["wall_seconds"] > 0 and prov["data_fingerprints"][ds]
        res = record["results"]
        assert set(res["per_seed"]) == {"0", "1"}
        assert all(r["training"]["attnknn"]["loaded_from_cache"] for r in res["per_seed"].values())  # trained by jobs
        acc = res["summary"]["attnknn"]["test_raw"]["accuracy"]
        assert acc["mean"] == pytest.approx(sum(acc["values"]) / 2) and acc["std"] >= 0
        pooled = res["paired"]["attnknn_vs_best_baseline"]["pooled"]["raw"]["accuracy"]
        assert pooled["low"] <= pooled["value"] <= pooled["high"]
        for seed in (0, 1):
            import numpy as np

            arrays = np.load(out / "artifacts" / f"main_{ds}_s{seed}_probs.npz")
            for m, entry in res["per_seed"][str(seed)]["methods"].items():
                recomputed = float((arrays[f"test_{m}"].argmax(1) == arrays["test_labels"]).mean())
                assert recomputed == pytest.approx(entry["test_raw"]["accuracy"]["value"], abs=1e-6), m
    for nb in ("01_main", "02_k_sweep", "03_noise", "04_long_tail", "05_efficiency", "06_theory"):
        executed = (out / "results" / "notebooks" / f"{nb}.ipynb").read_text()
        assert "it/s]" not in executed and "IProgress" not in executed and str(tmp_path) not in executed.split(
            '"papermill"')[0], nb
        assert (out / "results" / "notebooks" / f"{nb}.pdf").stat().st_size > 10_000, nb
    sweep = json.loads((out / "results" / "k_sweep_fashion_mnist.json").read_text())["results"]
    assert sweep["k_values"] == [1, 5, 20, sweep["k_sqrt"]] and sweep["k_sqrt"] == round(3000 ** 0.5)
    for k in sweep["k_values"]:  # every rule at every k; the retrained attention on the first seed
        assert set(sweep["summary"][str(k)]) == set(k_sweep.LABELS)
        assert sweep["summary"][str(k)]["attnknn_retrained"]["seeds"] == ["0"]
    noisy = json.loads((out / "results" / "noise_fashion_mnist.json").read_text())["results"]["settings"]
    assert set(noisy) == {"bank", "trained"} and set(noisy["trained"]["curves"]) == {
        "none/0", "symmetric/0.3", "asymmetric/0.3"}
    assert 0 <= noisy["trained"]["curves"]["symmetric/0.3"]["weight_ratio"]["attnknn"]["mean"] < 5
    tail = json.loads((out / "results" / "long_tail_fashion_mnist.json").read_text())["results"]["settings"]
    cell = tail["trained"]["curves"]["0.01"]
    assert cell["class_sizes"][0] == 100 * cell["class_sizes"][-1] and "cnn_balanced" in cell["summary"]
    eff = json.loads((out / "results" / "efficiency_fashion_mnist.json").read_text())["results"]
    assert 0 < eff["gemm"]["flat_search_over_gemm"] and eff["default_hnsw"]["recall"] > 0.5
    assert {r["setting"]["kind"] for r in eff["indexes"]} == {"flat_l2", "flat_ip", "hnsw", "ivf_flat"}
    assert eff["synthetic"]["sizes"] == [1000, 3000, 10000] and eff["training"]["attnknn"]["runs"] == 2
    theo = json.loads((out / "results" / "theory_fashion_mnist.json").read_text())["results"]
    assert theo["truncation"]["ks"][-1] == 3000 and theo["truncation"]["attnknn"]["error"][-1] < 1e-9
    assert all(len(g["norm_mean"]) == 1 for g in theo["geometry"]["per_seed"].values())  # one epoch per run
    assert (out / "paper" / "main.pdf").stat().st_size > 10_000
    macros = (out / "results" / "macros.tex").read_text()
    assert "\\newcommand{\\PrimaryDiffBaseAcc}" in macros and "\\newcommand{\\MainIrisAttnknnAccSd}" in macros
    for name in ("KSweepFashionMnistAttnknnLargestDiffK", "NoiseFashionMnistTrainedSymmetricThreeZeroAttnknnAcc",
                 "NoiseFashionMnistBankSymmetricTwoZeroAttnknnWeightRatio",
                 "LongTailFashionMnistTrainedZeroZeroOneBestBaselineBalancedTailAcc",
                 "EfficiencyFashionMnistFlatSearchOverGemm", "TheoryFashionMnistAttnknnTruncSlope"):
        assert f"\\newcommand{{\\{name}}}" in macros, name
    assert not (out / ".attnknn" / "staging").exists() or not any((out / ".attnknn" / "staging").iterdir())

    start = time.perf_counter()
    again = run_all("--profile", "smoke", "--out", str(out))
    assert again.returncode == 0 and time.perf_counter() - start < 60
    assert jobs_started(again.stdout + again.stderr) == [] and "Nothing to be done" in again.stdout + again.stderr

    status = run_all("status", "--profile", "smoke", "--out", str(out))
    assert status.returncode == 0 and "up to date" in status.stdout and "missing" not in status.stdout
    (out / "results" / "tables" / "main_iris.tex").unlink()
    status = run_all("status", "--profile", "smoke", "--out", str(out))
    assert "missing     results/tables/main_iris.tex" in status.stdout

    dag = run_all("dag", "--profile", "smoke", "--out", str(out))
    assert dag.returncode == 0, dag.stderr[-2000:]
    assert (out / "figures" / "workflow_dag.pdf").stat().st_size > 1000


@pytest.mark.slow
def test_cluster_generic_executor_runs_the_workflow_through_a_submit_script(tmp_path):
    profile = tmp_path / "fake_cluster"
    profile.mkdir()
    (profile / "config.yaml").write_text(
        "executor: cluster-generic\n"
        f"cluster-generic-submit-cmd: \"bash {REPO / 'tests' / 'fixtures' / 'fake_cluster' / 'submit.sh'}\"\n"
        "jobs: 4\nlatency-wait: 10\n")
    out = tmp_path / "out"
    proc = run_all(*TINY, "-p", "seeds=0", "--out", str(out), "--workflow-profile", str(profile))
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "cluster-generic" in log or "Submitted job" in log
    assert list((out / ".snakemake").rglob("snakejob.*.log")) or "Submitted job" in log
    assert json.loads((out / "results" / "main_iris.json").read_text())["results"]["seeds"] == [0]


@pytest.mark.slow
def test_killing_the_run_during_a_training_job_and_rerunning_gives_the_same_results(tmp_path):
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    assert run_all(*TINY, "--out", str(clean)).returncode == 0
    proc = subprocess.Popen(["bash", str(REPO / "run_all.sh"), *TINY, "--out", str(killed)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})  # see each line as it is written
    seen = ""
    for line in proc.stdout:  # kill the whole process group as soon as a training job has started
        seen += line
        if "rule train:" in line:  # "localrule train:" when run locally
            time.sleep(1.0)
            os.killpg(proc.pid, signal.SIGKILL)
            break
    proc.stdout.close()
    proc.wait(timeout=60)
    assert "rule train" in seen, seen[-2000:]
    assert not (killed / "results" / "main_iris.json").exists()
    again = run_all(*TINY, "--out", str(killed))
    assert again.returncode == 0, again.stderr[-3000:]
    a = json.loads((clean / "results" / "main_iris.json").read_text())
    b = json.loads((killed / "results" / "main_iris.json").read_text())
    assert without_timings(a["results"]) == without_timings(b["results"])
    leftovers = [p for p in (killed / "artifacts" / "models").iterdir() if p.name.startswith(".")]
    assert leftovers == [] or all(p.suffix == ".tmp" for p in leftovers)

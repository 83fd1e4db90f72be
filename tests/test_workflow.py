"""The workflow under ./run_all.sh: Snakemake jobs, skipping, status, DAG, the cluster path;
determinism (two smoke runs agree apart from timings) and recovery after Ctrl-C or SIGKILL of the
whole process group in the middle of a training job and of a notebook job."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from experiment_api import api

from attnknn_lib.experiments.framework import catalog
from attnknn_lib.report.compose import compose
from attnknn_lib.report.records import read_records
from attnknn_lib.tooling.reproducibility import record_view

k_sweep = api("k_sweep")

REPO = Path(__file__).resolve().parent.parent


def run_all(*args: str, timeout: int = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(REPO / "run_all.sh"), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=env)


def jobs_started(log: str) -> list[str]:
    return [ln.split()[-1].rstrip(":") for ln in log.splitlines() if ln.startswith(("rule ", "localrule "))]


# The smoke profile on less data: every job of the smoke run, with a third of its training rows, half
# of its validation and test rows, one NCA epoch and, for the studies' heads, fewer training queries and
# one epoch, given on the command line as a user would (configs/smoke.yaml stays the profile that
# ./run_all.sh bench times). A run compared with the smoke run passes the same parameters, those of them
# its experiments have (-p with a parameter none of them has is refused). Its Python start-ups, one per
# job, are now most of its time.
SMOKE_ROWS = 1000  # 100 Fashion-MNIST images per class: a 0.01 long tail keeps one image of its last class
ROWS = ("-p", f"max_train={SMOKE_ROWS}", "-p", "max_val=500", "-p", "max_test=1000")  # the recipe's: every experiment
MAIN_DATA = (*ROWS, "-p", "nca_epochs=1")  # every one main has
SMOKE = ("--profile", "smoke", *MAIN_DATA, "-p", "train_queries=500", "-p", "head_epochs=1")


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """One uninterrupted run of the whole smoke profile (PDFs and paper): (folder, process, seconds)."""
    out = tmp_path_factory.mktemp("smoke") / "out"
    start = time.perf_counter()
    proc = run_all(*SMOKE, "--out", str(out), timeout=1200)  # 9 notebooks; a busy machine
    return out, proc, time.perf_counter() - start


@pytest.mark.slow
def test_smoke_profile_through_snakemake_writes_every_output_and_a_rerun_starts_no_job(smoke_run):
    out, proc, elapsed = smoke_run
    tmp_path = out.parent
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    # no clock here: the 6-minute budget is measured by ./run_all.sh bench (a busy machine must not fail CI)
    log = proc.stdout + proc.stderr
    assert "epoch 1: loss" in log and "\r" not in log  # not a terminal: one line per epoch, no bar refreshes
    started = jobs_started(proc.stdout + proc.stderr)
    # main: 2 datasets x 2 seeds x (Attn-KNN, CNN); k-sweep reuses main's; noise retrains at 0.3
    # (symmetric, asymmetric) and long tail at 0.01 (seed 0, both kinds); rate 0 / ratio 1
    # are main's seed-0 runs (same data and recipe in this profile): each run is trained once
    # main, noise, long tail, the MixUp control CNN, the replay's Attn-KNN with self-matches (its run that
    # keeps every epoch's weights is main's seed-0 run, trained once), the attention study's Attn-KNN
    # without the entropy bonus (2 seeds; its long-tailed memory reuses the long tail's seed-0 model), and
    # the study's second dataset: main's digits Attn-KNN of 2 splits (digits is not among main's smoke datasets),
    # and main's end-to-end control (the fixed softmax vote trained like Attn-KNN, 2 seeds of the primary dataset)
    assert started.count("train") == 8 + 4 + 2 + 1 + 1 + 2 + 2 + 2
    notebooks = {f"notebook_{n}" for n in ("main", "k_sweep", "noise", "long_tail", "efficiency", "theory",
                                           "attention_study", "positive_control", "headroom_regimes")}
    assert notebooks | {"pdf", "report", "paper"} <= set(started)
    assert started.count("pdf") == len(notebooks)
    # the long measurements as part jobs: the study's 2 seeds, its first seed's collapse sweep and
    # long-tailed memory, both seeds' end-to-end controls and its second dataset, the regimes' 3 candidates of 2 seeds,
    # the k-sweep's 2 seeds, main's 2 Fashion-MNIST seeds and iris
    assert started.count("part_attention_study") == 7 and started.count("part_headroom_regimes") == 6
    assert started.count("part_k_sweep") == 2 and started.count("part_main") == 3

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
        paired = res["paired"]["attnknn_vs_best_baseline"]
        assert "attnknn_vs_reference" in res["paired"] and "reference" in res["summary"]  # the strongest rule
        # Attn-KNN with the rule's knobs, and the calibration endpoint against the rule tuned for it
        assert {"attnknn_tuned_vs_reference", "attnknn_tuned_vs_reference_nll", "attnknn_vs_reference_nll"} <= set(
            res["paired"]) and {"attnknn_tuned", "reference_nll"} <= set(res["summary"])
        knobs = res["per_seed"]["0"]["knobs"]
        assert knobs["attnknn_tuned"]["k_trained"] == record["config"]["k"] and "val_test_gap" in knobs["reference"]
        if ds == "fashion_mnist":  # one split, seeds replicate
            pooled = paired["pooled"]["raw"]["accuracy"]
            assert pooled["low"] <= pooled["value"] <= pooled["high"] and paired["replication"] == "seeds"
        else:  # a small set replicates over stratified splits: its own test points per seed
            assert paired["replication"] == "splits" and "pooled" not in paired
            assert prov["data_fingerprints"][f"{ds} split 0"] != prov["data_fingerprints"][f"{ds} split 1"]
        for seed in (0, 1):
            arrays = np.load(out / "artifacts" / f"main_{ds}_s{seed}_probs.npz")
            for m, entry in res["per_seed"][str(seed)]["methods"].items():
                recomputed = float((arrays[f"test_{m}"].argmax(1) == arrays["test_labels"]).mean())
                assert recomputed == pytest.approx(entry["test_raw"]["accuracy"]["value"], abs=1e-6), m
    for nb in ("01_main", "02_k_sweep", "03_noise", "04_long_tail", "05_efficiency", "06_theory", "07_attention_study",
               "08_positive_control", "09_headroom_regimes"):
        executed = (out / "results" / "notebooks" / f"{nb}.ipynb").read_text()
        assert "it/s]" not in executed and "IProgress" not in executed and str(tmp_path) not in executed.split(
            '"papermill"')[0], nb
        assert (out / "results" / "notebooks" / f"{nb}.pdf").stat().st_size > 10_000, nb
        last = json.loads(executed)["cells"][-1]  # the generated findings, displayed as Markdown
        assert "findings(" in "".join(last["source"]) and any("text/markdown" in o.get("data", {})
                                                              for o in last["outputs"]), nb
    sweep = json.loads((out / "results" / "k_sweep_fashion_mnist.json").read_text())["results"]
    assert sweep["k_values"] == [1, 5, 20, sweep["k_sqrt"]] and sweep["k_sqrt"] == round(SMOKE_ROWS ** 0.5)
    for k in sweep["k_values"]:  # every rule at every k; the retrained attention on the first seed
        assert set(sweep["summary"][str(k)]) == set(k_sweep.LABELS)
        assert sweep["summary"][str(k)]["attnknn_retrained"]["seeds"] == ["0"]
    noisy = json.loads((out / "results" / "noise_fashion_mnist.json").read_text())["results"]["settings"]
    assert set(noisy) == {"bank", "trained"} and set(noisy["trained"]["curves"]) == {
        "none/0", "symmetric/0.3", "asymmetric/0.3"}
    assert 0 <= noisy["trained"]["curves"]["symmetric/0.3"]["weight_ratio"]["attnknn"]["mean"] < 5
    assert all("reference" in c["summary"] for s in noisy.values() for c in s["curves"].values())
    study = json.loads((out / "results" / "attention_study_fashion_mnist.json").read_text())["results"]
    assert study["second"]["digits"]["splits"] == 2 and set(study["second"]["digits"]["summary"]) == {
        "clean", "asymmetric/0.4"}
    assert all("learnable_vs_reference" in s for s in study["second"]["digits"]["summary"].values())
    for setting, s in study["summary"]["settings"].items():  # Attn-KNN itself in every memory, proper scores too
        assert set(s["attnknn"]["verdicts_reference"]) == {"accuracy", "ece", "nll", "brier"}, setting
        assert set(s["attnknn"]["verdicts_reference_nll"]) == {"nll", "brier"} and "reference_nll" in s, setting
        tuned = s["attnknn"]["tuned"]  # and with the rule's knobs chosen on validation, against both references
        assert set(tuned["verdicts_reference_nll"]) == {"nll", "brier"} and len(tuned["k"]) == len(s["seeds"]), setting
    pc_record = json.loads((out / "results" / "positive_control_clusters.json").read_text())
    pc = pc_record["results"]
    assert set(pc["levels"]) == {"0", "1.5"} and pc["seeds"] == [0, 1]

    def both(rec: dict) -> set[str]:
        """each head against both references and each learned metric (NCA; the nonlinear one under the one
        budget), accuracy- and NLL-tuned"""
        metrics = ("nca", "mlp_metric") if rec["config"].get("nonlinear_metric") else ("nca",)
        return {"reference", "reference_nll", *metrics, *(f"{m}_nll" for m in metrics)}
    assert all(set(lv["summary"]["diff"]["attnknn"]) == both(pc_record) for lv in pc["levels"].values())
    regimes_record = json.loads((out / "results" / "headroom_regimes_fashion_mnist.json").read_text())
    regimes = regimes_record["results"]
    assert set(regimes["candidates"]) == {"pixels_pca", "few_labels", "other_classes"} and regimes["seeds"] == [0, 1]
    assert all(set(c["summary"]["diff"]["attnknn"]) == both(regimes_record) and "gate" in c
               for c in regimes["candidates"].values())
    assert regimes["multiplicity"]["method"] == "holm"
    tail = json.loads((out / "results" / "long_tail_fashion_mnist.json").read_text())["results"]["settings"]
    cell = tail["trained"]["curves"]["0.01"]
    sizes = cell["size_ranked_sizes"]  # the class order is drawn per seed; the profile is the same
    assert sizes[0] == 100 * sizes[-1] and sizes == sorted(sizes, reverse=True) and "cnn_balanced" in cell["summary"]
    eff = json.loads((out / "results" / "efficiency_fashion_mnist.json").read_text())["results"]
    assert 0 < eff["gemm"]["flat_search_over_gemm"] and eff["default_hnsw"]["recall"] > 0.5
    assert {r["setting"]["kind"] for r in eff["indexes"]} == {"flat_l2", "flat_ip", "hnsw", "ivf_flat"}
    assert eff["synthetic"]["sizes"] == [1000, 3000, 10000] and eff["training"]["attnknn"]["runs"] == 2
    theo = json.loads((out / "results" / "theory_fashion_mnist.json").read_text())["results"]
    assert theo["truncation"]["ks"][-1] == SMOKE_ROWS and theo["truncation"]["attnknn"]["error"][-1] < 1e-9
    assert all(len(g["norm_mean"]) == 1 for g in theo["geometry"]["per_seed"].values())  # one epoch per run
    assert (out / "paper" / "main.pdf").stat().st_size > 10_000
    # iris replicates over the profile's stratified splits, each split with its own model seed
    iris = json.loads((out / "results" / "main_iris.json").read_text())["results"]
    assert iris["seeds"] == list(range(len(iris["per_seed"]))) and iris["paired"]["attnknn_vs_best_baseline"][
        "replication"] == "splits"
    macros = (out / "results" / "macros.tex").read_text()
    defined = set(re.findall(r"\\newcommand\{\\([A-Za-z]+)\}", macros))
    paper_uses = set(re.findall(r"\\([A-Za-z]+)", (REPO / "paper" / "main.tex").read_text()))
    assert "PrimaryDiffBaseAccMargin" in defined and defined <= paper_uses  # only what the paper uses
    # every experiment's own numbers reach the report (macros.tex keeps the paper's share of them)
    everything = compose(read_records(sorted((out / "results").glob("*_*.json"))), catalog.experiments().values()).macros
    for name in ("KSweepFashionMnistAttnknnLargestDiffK", "NoiseFashionMnistTrainedSymmetricThreeZeroAttnknnAcc",
                 "NoiseFashionMnistBankSymmetricFourZeroAttnknnWeightRatio",
                 "LongTailFashionMnistTrainedZeroZeroOneBestBaselineBalancedTailAcc",
                 "EfficiencyFashionMnistFlatSearchOverGemm", "TheoryFashionMnistAttnknnTruncSlope"):
        assert name in everything, name
    assert not (out / ".attnknn" / "staging").exists() or not any((out / ".attnknn" / "staging").iterdir())

    # a rerun starts no job: records this checkout measures the same are read, not measured, so even a
    # model missing from the cache (a fresh clone has none) is not trained again, and nothing else runs
    # (one rerun, with the model gone, proves both; its time: ./run_all.sh bench)
    gone = next(p for p in (out / "artifacts" / "models").iterdir() if p.name.startswith("fashion_mnist-attnknn"))
    shutil.move(gone, tmp_path / gone.name)
    without = run_all(*SMOKE, "--out", str(out))
    log = without.stdout + without.stderr
    assert without.returncode == 0 and jobs_started(log) == [] and "Nothing to be done" in log, log[-2000:]
    shutil.move(tmp_path / gone.name, gone)

    def tree() -> dict[str, float]:
        return {str(p): p.stat().st_mtime for p in out.rglob("*") if p.is_file()}

    files = tree()
    status = run_all("status", *SMOKE, "--out", str(out))
    assert status.returncode == 0 and "Everything is up to date" in status.stdout, status.stdout
    assert len(status.stdout.splitlines()) <= 25 and tree() == files  # one screen; it only reads
    assert all(len(line) <= 100 or " " not in line.strip() for line in status.stdout.splitlines())  # a terminal's width
    (out / "results" / "tables" / "main_iris.tex").unlink()
    status = run_all("status", "-v", *SMOKE, "--out", str(out))
    assert "missing     results/tables/main_iris.tex" in status.stdout
    # a drawn output is missing, the records are the same: drawn again, nothing measured, with the
    # run's parameters that main has (not the heads')
    assert f"./run_all.sh render --profile smoke --out {out} --only main {' '.join(MAIN_DATA)} (minutes, no model)" in (
        " ".join(status.stdout.split()))
    assert "To measure" not in status.stdout

    dag = run_all("dag", *SMOKE, "--out", str(out))
    assert dag.returncode == 0, dag.stderr[-2000:]
    assert (out / "figures" / "workflow_dag.pdf").stat().st_size > 1000
    assert {p.stem.split("-")[0] for p in (out / ".attnknn" / "times").glob("*.json")} == {
        "train", "part", "measure", "notebook", "pdf", "report", "paper"}  # every job's wall time (./run_all.sh bench)


def fake_cluster(folder: Path) -> Path:
    """A workflow profile whose executor is cluster-generic with a submit script that runs each job
    script in the background (tests/fixtures/fake_cluster/submit.sh): the path a cluster takes."""
    folder.mkdir()
    (folder / "config.yaml").write_text(
        "executor: cluster-generic\n"
        f"cluster-generic-submit-cmd: \"bash {REPO / 'tests' / 'fixtures' / 'fake_cluster' / 'submit.sh'}\"\n"
        "jobs: 2\nlatency-wait: 10\nseconds-between-status-checks: 1\n")
    return folder


def result_views(out: Path, names: str = "*") -> dict[str, dict]:
    """Every results JSON under ``out`` without its timing fields (reproducibility.record_view)."""
    return {f.name: record_view(json.loads(f.read_text())) for f in sorted((out / "results").glob(f"{names}.json"))
            if f.name != "benchmarks.json"}


def probability_arrays(out: Path, names: str = "*") -> dict[str, dict]:
    return {f.name: dict(np.load(f)) for f in sorted((out / "artifacts").glob(f"{names}_probs.npz"))}


def assert_nothing_truncated(out: Path) -> None:
    """Every file in place is whole: JSON parses, arrays and models load, no temporary file is
    left under a final name, notebooks and PDFs are complete."""
    import torch

    for f in out.rglob("*"):
        if not f.is_file() or any(part.startswith(".") for part in f.relative_to(out).parts):
            continue  # bookkeeping (.attnknn, .snakemake) and temporary files live in hidden folders/names
        if f.suffix in (".json", ".ipynb"):
            json.loads(f.read_text())
        elif f.suffix == ".npz":
            dict(np.load(f))
        elif f.suffix == ".pt":
            torch.load(f, weights_only=True)
        elif f.suffix == ".pdf":
            assert f.read_bytes().rstrip().endswith(b"%%EOF"), f
        assert not f.name.endswith(".tmp"), f
    for folder in (out / "artifacts" / "models").glob("*"):
        if not folder.name.startswith("."):  # complete, or empty (Snakemake makes the output folder first)
            files = {p.name for p in folder.iterdir()} - {"epochs.pt"}  # the replay's run also keeps its epochs
            assert files in ({"model.pt", "train.json"}, set()), folder


def interrupt(args: list[str], when: str, sig: int, wait: float) -> str:
    """Start ./run_all.sh ARGS in its own process group; ``wait`` seconds after a log line contains
    ``when``, send ``sig`` to the whole group (SIGINT: Ctrl-C at a terminal; SIGKILL: a lost node).
    Returns the log."""
    # SIGINT back to its default in the child: a test session started in the background (``cmd &`` in a
    # script, nohup) ignores SIGINT, children inherit that, and Python then installs no Ctrl-C handler
    proc = subprocess.Popen(["bash", str(REPO / "run_all.sh"), *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})  # see each line as it is written
    seen = ""
    for line in proc.stdout:
        seen += line
        if when in line:
            time.sleep(wait)
            os.killpg(proc.pid, sig)
            break
    proc.wait(timeout=120)  # after Ctrl-C Snakemake stops its jobs and exits by itself
    proc.stdout.close()
    assert when in seen, seen[-2000:]
    return seen


SMOKE_MAIN = ["--profile", "smoke", *MAIN_DATA, "--only", "main", "--no-pdf", "--no-paper"]


@pytest.mark.slow
def test_an_interrupted_smoke_run_resumes_to_the_uninterrupted_results_bit_for_bit(smoke_run, tmp_path):
    """Ctrl-C in a training job, then a corrupt model in the cache and a lost node in a measure job;
    resumed, main and theory give the uninterrupted run's results, every test-set probability bit for
    bit. The uninterrupted run's models are copied in but for two of main's (its first Attn-KNN and a
    CNN), which these runs train again, one of them interrupted; the corrupt one is retrained too
    (three of main's ten: the training's determinism, here and in test_training; retraining all ten
    only repeated it). The resumed run redoes only what the lost node left undone: main's records and
    notebook, theory's (the second run that shows the same profile and seed give the same numbers).
    (Two experiments, not seven: the other five notebooks' second run cost this suite about two minutes
    of its ten, and their code paths are main's: the same record writer, the same seeded evaluation.)
    Then one job redone through the cluster-generic executor, as a cluster would run it."""
    out = tmp_path / "interrupted"
    args = [*SMOKE_MAIN, "--out", str(out)]
    mains = json.loads((smoke_run[0] / ".attnknn" / "plan.json").read_text())["experiments"]["main"]["runs"]
    again_trained = {next(r for r in mains if r.startswith("fashion_mnist-attnknn-s0")),
                     next(r for r in mains if r.startswith("fashion_mnist-cnn-s1"))}
    models = out / "artifacts" / "models"
    for folder in (smoke_run[0] / "artifacts" / "models").iterdir():
        if folder.name not in again_trained and not folder.name.startswith("."):
            shutil.copytree(folder, models / folder.name)
    # the run specs too, with their times: a spec newer than its model would have Snakemake retrain it
    shutil.copytree(smoke_run[0] / "artifacts" / "runs", out / "artifacts" / "runs")
    # Ctrl-C in a training job (Snakemake's own clean-up)
    interrupt(args, "rule train:", signal.SIGINT, 2.0)
    assert not list((out / "results").glob("main_*.json"))  # the job never finished
    assert_nothing_truncated(out)
    # a corrupt model in the cache (a training killed mid-write) is detected and retrained, not loaded,
    # by the next run, which a lost node stops in the measure job that writes the records (nothing
    # cleans up: the atomic outputs must hold; it takes about 5 s, so 2 s is mid-job). Every model of
    # main is trained by then, and its part jobs have run (a model retrained after them would have the
    # resumed run compute every part again)
    victim = models / next(r for r in mains if r.startswith("iris-attnknn-s0"))
    (victim / "model.pt").write_bytes((victim / "model.pt").read_bytes()[:200])
    corrupted = (victim / "model.pt").stat().st_mtime
    interrupt(args, "rule measure_main:", signal.SIGKILL, 2.0)
    assert not list((out / "results").glob("main_*.json"))  # the job never finished
    assert_nothing_truncated(out)  # the truncated model.pt was replaced by a retrained, loadable one
    assert (victim / "model.pt").stat().st_mtime > corrupted
    assert all((models / r / "model.pt").exists() for r in again_trained)  # trained again, the Ctrl-C survived
    resumed = ["--profile", "smoke", *MAIN_DATA, "--only", "main,theory", "--no-pdf", "--no-paper", "--out", str(out)]
    again = run_all(*resumed)
    assert again.returncode == 0, again.stderr[-3000:]
    started = jobs_started(again.stdout + again.stderr)
    assert "measure_main" in started and "train" not in started and "part_main" not in started, started
    assert_nothing_truncated(out)
    a = {**result_views(smoke_run[0], "main_*"), **result_views(smoke_run[0], "theory_*")}
    b = result_views(out)
    assert set(a) == set(b) and len(a) == 3  # main (2 datasets) and theory
    for name in a:
        assert a[name] == b[name], name
    pa, pb = probability_arrays(smoke_run[0]), probability_arrays(out)
    assert set(pa) == set(pb) and pa
    for name in pa:  # bit for bit: every test-set probability of every method and seed
        for key in pa[name]:
            np.testing.assert_array_equal(pa[name][key], pb[name][key], err_msg=f"{name}:{key}")
    # a cluster: the same workflow through the cluster-generic executor (a submit script, jobs run
    # detached) redoes the one job whose output went missing
    table = out / "results" / "tables" / "theory_fashion_mnist.tex"
    table.unlink()
    remote = run_all(*resumed, "--workflow-profile", str(fake_cluster(tmp_path / "fake_cluster")))
    log = remote.stdout + remote.stderr
    assert remote.returncode == 0, log[-3000:]
    started = jobs_started(log)
    assert "Submitted job" in log and "notebook_theory" in started and "train" not in started, started
    assert table.exists()


CLUSTER = REPO / "tests" / "cluster"


def cluster_unavailable() -> str | None:
    """Why the SLURM test cannot run here (None: it can)."""
    how = ("it runs as its own timed step of .ci/run; to run it: as root, apt-get install slurm-wlm slurmdbd munge "
           "mariadb-server, then ATTNKNN_CLUSTER_TEST=1 ./run_all.sh test -m cluster")
    if os.environ.get("ATTNKNN_CLUSTER_TEST") != "1":
        return f"the one-node SLURM cluster test is off ({how})"
    check = subprocess.run(["bash", str(CLUSTER / "slurm.sh"), "check"], capture_output=True, text=True)
    return None if check.returncode == 0 else f"no SLURM test cluster here: {check.stdout.strip()} ({how})"


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    """A one-node SLURM cluster with accounting (tests/cluster/slurm.sh), stopped by process id
    whatever the test does: the environment that points sbatch, sacct and scancel at it."""
    reason = cluster_unavailable()
    if reason:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("slurm")
    started = subprocess.run(["bash", str(CLUSTER / "slurm.sh"), "start", str(folder)], capture_output=True,
                             text=True, timeout=300)
    try:
        assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-3000:]
        yield {**os.environ, "SLURM_CONF": str(folder / "slurm.conf"), "PATH": os.environ["PATH"] + ":/usr/sbin"}
    finally:
        subprocess.run(["bash", str(CLUSTER / "slurm.sh"), "stop", str(folder)], capture_output=True, timeout=120)


def site_profile(folder: Path) -> Path:
    """The repository's SLURM workflow profile with the test cluster's overlay (tests/cluster/overlay.yaml):
    its partition, CPUs and memory in every rule, no GPU request."""
    import yaml

    config = yaml.safe_load((REPO / "workflow" / "profiles" / "slurm" / "config.yaml").read_text())
    overlay = yaml.safe_load((CLUSTER / "overlay.yaml").read_text())
    for block in (config["default-resources"], *config.get("set-resources", {}).values()):
        block.update(slurm_partition=overlay["partition"], cpus_per_task=overlay["cpus_per_task"],
                     mem_mb=overlay["mem_mb"])
        for key in overlay["drop"]:
            block.pop(key, None)
    for key in ("seconds-between-status-checks", "slurm-init-seconds-before-status-checks"):
        if key in overlay:
            config[key] = overlay[key]
    folder.mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return folder


def sacct_jobs(env: dict) -> list[dict]:
    """Every job the cluster's accounting knows: id, name, comment (Snakemake's rule) and state."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-a", "-S", "now-1days", "-o", "JobID,JobName,Comment,State"],
                         capture_output=True, text=True, env=env, check=True).stdout
    return [dict(zip(("id", "name", "comment", "state"), ln.split("|"))) for ln in out.splitlines() if ln]


@pytest.mark.slow
@pytest.mark.cluster
def test_the_smoke_profile_through_a_slurm_cluster_equals_a_local_run(smoke_run, slurm_cluster, tmp_path):
    """Every job of the smoke profile submitted by the SLURM executor plugin with the repository's
    profile to a one-node cluster (sbatch, sacct): the results equal the local run's apart from
    provenance and timings. Then one job cancelled midway (scancel) stops the run with a clear line,
    and a rerun completes it."""
    env = slurm_cluster
    profile = site_profile(tmp_path / "profile")
    out = tmp_path / "slurm"
    where = ["--out", str(out), "--workflow-profile", str(profile)]
    args = [*SMOKE, *where]
    theory = ["--profile", "smoke", *ROWS, *where, "--only", "theory", "--no-pdf", "--no-paper"]
    proc = run_all(*args, timeout=1800, env=env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    started = jobs_started(log)
    jobs = sacct_jobs(env)
    local_rules = {"report", "paper", "all"}  # Snakemake runs these on the submitting host
    remote = [r for r in started if r not in local_rules]
    assert remote.count("train") == started.count("train") > 0 and any(r.startswith("notebook_") for r in remote)
    assert len(jobs) >= len(remote) and all(j["state"] == "COMPLETED" for j in jobs), jobs
    for rule in set(remote):
        assert any(rule in j["comment"] for j in jobs), (rule, jobs)
    a, b = result_views(smoke_run[0]), result_views(out)
    assert set(a) == set(b) and len(a) >= 10
    for name in a:
        a[name].pop("provenance"), b[name].pop("provenance")
        assert a[name] == b[name], name

    # a job cancelled by the scheduler midway: the run stops with a clear line, a rerun completes it
    victim = out / "results" / "theory_fashion_mnist.json"
    victim.unlink()
    run = subprocess.Popen(["bash", str(REPO / "run_all.sh"), *theory],
                           cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 600
    cancelled: list[str] = []  # the first running job, then its retry (the profile allows one): same comment
    victim_job = None
    while time.time() < deadline and run.poll() is None:
        queue = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i|%k"], capture_output=True, text=True,
                               env=env).stdout.split()
        for job, comment in (line.split("|", 1) for line in queue):
            if job not in cancelled and victim_job in (None, comment):
                time.sleep(2)
                subprocess.run(["scancel", job], env=env, check=True)
                cancelled.append(job)
                victim_job = comment
        time.sleep(0.5)
    failed_log = run.communicate(timeout=600)[0]
    assert cancelled and run.returncode != 0, failed_log[-3000:]
    assert len(cancelled) == 2, cancelled  # the first attempt and its retry
    assert "failed, SLURM status is: 'CANCELLED'" in failed_log, failed_log[-3000:]
    assert "error: the workflow stopped" in failed_log and not victim.exists(), failed_log[-3000:]
    states = {j["id"]: j["state"] for j in sacct_jobs(env)}
    assert all(states[job].startswith("CANCELLED") for job in cancelled), states
    again = run_all(*theory, timeout=900, env=env)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert record_view(json.loads(victim.read_text()))["results"] == result_views(smoke_run[0], "theory_*")[
        "theory_fashion_mnist.json"]["results"]


def test_pdf_builds_are_dated_by_the_latest_record_they_show(tmp_path):
    import json

    from attnknn_lib.workflow.jobs import source_date_env

    paths = []
    for i, started in enumerate(("2026-01-02T00:00:00+00:00", "2026-03-04T05:06:07+00:00")):
        paths.append(tmp_path / f"r{i}.json")
        paths[-1].write_text(json.dumps({"provenance": {"started": started}}))
    env = source_date_env([*paths, tmp_path / "missing.json"])
    assert env["SOURCE_DATE_EPOCH"] == "1772600767" and env["FORCE_SOURCE_DATE"] == "1"
    assert "SOURCE_DATE_EPOCH" not in source_date_env([]) or source_date_env([])["SOURCE_DATE_EPOCH"] == __import__(
        "os").environ.get("SOURCE_DATE_EPOCH")


def test_every_notebook_has_a_title_of_its_own():
    import json

    from attnknn_lib.base.paths import REPO_ROOT

    titles = [json.loads(p.read_text())["metadata"].get("title") for p in sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))]
    assert all(titles) and len(set(titles)) == len(titles), titles


@pytest.mark.slow
def test_the_smoke_records_answer_in_at_most_six_bullets_of_at_most_300_characters(smoke_run):
    """The README's answer stays short on records with the newest comparisons (the committed
    records are checked in tests/test_report.py)."""
    from attnknn_lib.report.compose import split_terms
    from attnknn_lib.report.readme import ANSWER_BULLET_CHARS, ANSWER_BULLETS

    out = smoke_run[0]
    report = compose(read_records(sorted((out / "results").glob("*_*.json"))), catalog.experiments().values())
    bullets, terms = split_terms(report.answer.splitlines())
    assert 1 <= len(bullets) <= ANSWER_BULLETS and len(terms) <= 6
    assert all(len(b) <= ANSWER_BULLET_CHARS for b in bullets), [len(b) for b in bullets]
    assert report.provenance.startswith("The committed records come from the `smoke` profile")

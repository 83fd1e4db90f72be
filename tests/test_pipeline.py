"""Pipeline and notebooks: bad input stops before any work; the smoke run produces every output."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from attnknn_lib.pipeline import EXPERIMENTS, main as pipeline_main

REPO = Path(__file__).resolve().parent.parent


def _run_cli(*args: str, out: Path) -> tuple[int, str]:
    proc = subprocess.run(["bash", str(REPO / "run_all.sh"), *args, "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("args,message", [
    (["--profile", "gpu"], "profile='gpu' is not allowed; choose one of: cpu, paper, smoke"),
    (["--only", "mian"], "experiment 'mian' is not allowed; choose one of: main"),
    (["-p", "epoch=3"], "unknown parameter 'epoch'; allowed:"),
    (["-p", "epochs=three"], "epochs='three' has the wrong type; allowed: int"),
    (["-p", "k=0"], "k=0 is out of range"),
    (["-p", "datasets=fashion_mnist,cifar100"], "dataset='cifar100' is not allowed"),
    (["-p", "main.tta_views=9"], "tta_views=9 is out of range"),
    (["-p", "datasets=5"], "5 is not allowed here; give a comma-separated list"),
    (["-p", "datasets=cifar10", "-p", "primary=cifar10"], "dataset 'cifar10': none of"),
])
def test_bad_input_stops_with_one_line_before_any_work(args, message, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNKNN_DATA_ROOT", str(tmp_path / "empty"))
    out = tmp_path / "out"
    code, err = _run_cli(*args, out=out)
    assert code == 2
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("[run_all]")]
    assert len(lines) == 1 and message in lines[0], err
    assert not out.exists()  # nothing was written


def test_list_prints_the_resolved_parameters(capsys):
    assert pipeline_main(["--profile", "smoke", "--list", "-p", "k=8"]) == 0
    plan = yaml.safe_load(capsys.readouterr().out)
    assert plan["main"]["k"] == 8 and plan["main"]["epochs"] == 1 and plan["main"]["profile"] == "smoke"


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_committed_notebooks_are_clean_and_default_to_the_cpu_profile(name):
    nb = json.loads((REPO / "notebooks" / EXPERIMENTS[name].notebook).read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and not c.get("execution_count") for c in code), "committed with outputs"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    tagged = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1 and code[0] is tagged[0]
    namespace: dict = {}
    exec("".join(tagged[0]["source"]), namespace)
    cpu = yaml.safe_load((REPO / "configs" / "cpu.yaml").read_text())["experiments"][name]
    assert {k: namespace[k] for k in cpu} == cpu
    assert namespace["profile"] == "cpu" and namespace["out_dir"] == ".."


def test_smoke_run_of_the_main_experiment_writes_every_output_within_budget(tmp_path):
    out = tmp_path / "smoke"
    start = time.perf_counter()
    code, err = _run_cli("--profile", "smoke", "--only", "main", out=out)
    elapsed = time.perf_counter() - start
    assert code == 0, err[-3000:]
    assert elapsed < 360, f"smoke main with PDF export and paper took {elapsed:.0f} s (budget 6 min)"

    for ds in ("fashion_mnist", "iris"):
        record = json.loads((out / "results" / f"main_{ds}.json").read_text())
        assert set(record) == {"experiment", "dataset", "profile", "config", "provenance", "results"}
        assert record["profile"] == "smoke" and record["config"]["epochs"] == 1
        prov = record["provenance"]
        assert len(prov["commit"]) == 40 and prov["wall_seconds"] > 0 and prov["data_fingerprints"][ds]
        assert {"torch", "faiss-cpu"} <= set(prov["packages"])
        methods = record["results"]["methods"]
        assert {"uniform", "distance", "cosine", "attnknn", "attnknn_kens", "attnknn_adaptive", "cnn"} <= set(methods)
        # every number can be recomputed from the saved probabilities
        arrays = np.load(out / "artifacts" / f"main_{ds}_probs.npz")
        for m, entry in methods.items():
            acc = float((arrays[f"test_{m}"].argmax(1) == arrays["test_labels"]).mean())
            assert acc == pytest.approx(entry["test_raw"]["accuracy"]["value"], abs=1e-6), m
        emb = np.load(out / "artifacts" / f"main_{ds}_embeddings.npz")
        assert emb["memory"].shape[0] == record["results"]["dataset"]["n_train"]
        assert (out / "results" / "tables" / f"main_{ds}.tex").read_text().count("\\toprule") == 1
        assert (out / "figures" / f"main_{ds}_reliability.pdf").exists()
    fm = json.loads((out / "results" / "main_fashion_mnist.json").read_text())["results"]
    assert {"attnknn_tta", "best_baseline_tta", "cnn_tta"} <= set(fm["methods"])
    assert set(fm["ablation"]) >= {"default", "no_distance_bias", "fixed_temperature", "label_bias", "prototypes",
                                   "neighbor_self_attention"}
    for fig in ("curves", "confusion", "reliability"):
        assert (out / "figures" / f"main_fashion_mnist_{fig}.png").stat().st_size > 1000
    assert "\\newcommand{\\MainFashionMnistAttnknnAcc}" in (out / "results" / "macros.tex").read_text()
    executed = json.loads((out / "results" / "notebooks" / "01_main.ipynb").read_text())
    assert any(c.get("outputs") for c in executed["cells"] if c["cell_type"] == "code")
    assert (out / "results" / "notebooks" / "01_main.pdf").stat().st_size > 10_000
    assert (out / "paper" / "main.pdf").stat().st_size > 10_000

    # unchanged inputs: the stage is skipped
    start = time.perf_counter()
    code, err = _run_cli("--profile", "smoke", "--only", "main", "--no-paper", out=out)
    assert code == 0 and time.perf_counter() - start < 60

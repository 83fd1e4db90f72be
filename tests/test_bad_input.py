"""Bad input to the library, the profiles, the notebooks' papermill parameters and the job
commands: each gives one line that names the value and what to do, never a deep traceback, and
damages nothing written before. (The command-line cases are in test_pipeline.py.)

``CASES`` is the library matrix: (case, call, exception type, start of the message).
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from experiment_api import api

from attnknn_lib.base import runtime
from attnknn_lib.base.errors import AttnKNNError, ConfigError, CorruptFileError
from attnknn_lib.base.files import read_json, write_json
from attnknn_lib.data.spec import DataSpec
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.topk import topk_attention
from attnknn_lib.knn.votes import knn_probs, vote
from attnknn_lib.report import records as report
from attnknn_lib.tooling.speed import BenchConfig
from attnknn_lib.training.recipe import Recipe
from attnknn_lib.workflow import cli as pipeline
from attnknn_lib.workflow import profiles

REPO = Path(__file__).resolve().parent.parent


def _bank(n: int = 5) -> MemoryBank:
    x = np.eye(n, 4, dtype=np.float32) + 0.1
    return MemoryBank("flat_l2").build(x, np.arange(n) % 2)


def _nan_rows() -> np.ndarray:
    x = np.ones((5, 4), dtype=np.float32)
    x[2, 1] = np.nan
    return x


CASES = [
    ("NaN embeddings in the memory bank", lambda: MemoryBank().build(_nan_rows(), np.zeros(5)), ConfigError,
     "embeddings hold NaN or inf in 1 of 5 rows; the memory bank needs finite vectors"),
    ("empty memory bank", lambda: MemoryBank().build(np.zeros((0, 4)), np.zeros(0)), ConfigError,
     "memory bank needs embeddings (N, D) and labels (N,) with N >= 1"),
    ("labels and embeddings of different lengths", lambda: MemoryBank().build(np.ones((5, 4)), np.zeros(4)),
     ConfigError, "memory bank needs embeddings (N, D) and labels (N,) with N >= 1; got (5, 4) and (4,)"),
    ("search before build", lambda: MemoryBank().search(np.ones((1, 4), np.float32), 1), ConfigError,
     "the memory bank is empty; call build(embeddings, labels) first"),
    ("k larger than the memory", lambda: _bank().search(np.ones((1, 4), np.float32), 9), ConfigError,
     "k=9 is out of range; allowed: 1..5 for a bank of 5"),
    ("k = 0", lambda: _bank().search(np.ones((1, 4), np.float32), 0), ConfigError, "k=0 is out of range"),
    ("k larger than the memory less the query's own row",
     lambda: _bank().search_excluding(np.ones((1, 4), np.float32), 5, np.array([0])), ConfigError,
     "k=5 is out of range; allowed: 1..4"),
    ("NaN query", lambda: _bank().search(np.full((2, 4), np.nan, np.float32), 1), ConfigError,
     "queries hold NaN or inf in 2 of 2 rows"),
    ("query of the wrong width", lambda: _bank().search(np.ones((1, 3), np.float32), 1), ConfigError,
     "queries must be (B, 4); got (1, 3)"),
    ("noise rate 1", lambda: DataSpec("iris", noise="symmetric", noise_rate=1.0), ConfigError,
     "noise_rate=1.0 is out of range; allowed: [0.0, 1.0)"),
    ("noise rate below 0", lambda: DataSpec("iris", noise="symmetric", noise_rate=-0.1), ConfigError,
     "noise_rate=-0.1 is out of range"),
    ("imbalance ratio 0", lambda: DataSpec("iris", imbalance=0.0), ConfigError,
     "imbalance=0.0 is out of range; allowed: (0.0, 1.0]"),
    ("imbalance ratio above 1", lambda: DataSpec("iris", imbalance=1.5), ConfigError, "imbalance=1.5 is out of range"),
    ("embedding size not divisible by the heads", lambda: Recipe(embed_dim=130, num_heads=4), ConfigError,
     "embed_dim=130 is not divisible by num_heads=4"),
    ("unknown device", lambda: Recipe(device="tpu"), ConfigError, "device='tpu' is not allowed; choose one of"),
    ("vote over labels outside the classes", lambda: vote(np.ones((1, 2)), np.array([[0, 7]]), 3), ConfigError,
     "neighbour labels must lie in 0..2; got 0..7"),
    ("vote with more k than neighbours", lambda: knn_probs("uniform", np.ones((1, 3)), np.zeros((1, 3), int), 2, k=4),
     ConfigError, "k=4 is out of range; allowed: 1..3"),
    ("top-k attention with k larger than the keys",
     lambda: topk_attention(torch.ones(1, 2), torch.ones(3, 2), torch.ones(3, 1), 5), ConfigError,
     "k=5 is out of range; allowed: 1..3 keys"),
    ("benchmark with 0 repeats", lambda: BenchConfig(repeats=0), ConfigError, "repeats=0 is out of range"),
]


@pytest.mark.parametrize("case,call,error,message", CASES, ids=[c[0] for c in CASES])
def test_library_refuses_bad_input_with_one_specific_line(case, call, error, message):
    with pytest.raises(error) as info:
        call()
    text = str(info.value)
    assert text.startswith(message) and "\n" not in text, text


def test_a_truncated_json_file_is_named_in_one_line_with_what_to_do(tmp_path):
    path = write_json(tmp_path / "main_iris.json", {"experiment": "main", "results": list(range(50))})
    path.write_text(path.read_text()[:40])
    with pytest.raises(CorruptFileError, match=r"main_iris.json is not valid JSON \(.* at line \d+\); it is truncated"
                                               r" or was edited: delete it and rerun ./run_all.sh"):
        read_json(path)


def test_a_results_file_that_is_not_a_record_is_refused_by_the_report(tmp_path):
    path = write_json(tmp_path / "main_iris.json", {"experiment": "main"})
    with pytest.raises(CorruptFileError, match="is not a result record"):
        report.read_records([path])


def test_the_report_job_stops_in_one_line_on_a_corrupt_results_file_and_keeps_the_macros(tmp_path):
    plan = {"root": str(tmp_path), "repo": str(REPO), "readme": False,
            "experiments": {"main": {"params": {"profile": "smoke"}, "outputs": ["results/main_iris.json"]}}}
    plan_path = write_json(tmp_path / ".attnknn" / "plan.json", plan)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "main_iris.json").write_text('{"experiment": "main", "resu')
    macros = tmp_path / "results" / "macros.tex"
    macros.write_text("% from an earlier run\n")
    proc = subprocess.run([sys.executable, "-m", "attnknn_lib.workflow.report_job", "--plan", str(plan_path)],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'results' / 'main_iris.json'} is not valid JSON (Unterminated string starting at at "
        "line 1); it is truncated or was edited: delete it and rerun ./run_all.sh to regenerate it"]
    assert macros.read_text() == "% from an earlier run\n"


@pytest.mark.parametrize("text,message", [
    ("recipe:\n  k: [1\n", "configs/broken.yaml is not valid YAML at line 3"),
    ("- a list\n", "configs/broken.yaml must hold a mapping (description, recipe, experiments); got list"),
    ("recipes:\n  k: 3\n", "configs/broken.yaml: unknown section(s) ['recipes']; allowed: description, recipe"),
    ("recipe:\n  epochs: many\n", "configs/broken.yaml: epochs='many' has the wrong type; allowed: int"),
    ("recipe:\n  epochz: 3\n", "configs/broken.yaml: unknown recipe parameter(s) ['epochz']"),
    ("experiments:\n  mian: {}\n", "configs/broken.yaml: unknown experiment(s) ['mian']"),
])
def test_a_broken_profile_file_is_refused_in_one_line(text, message, tmp_path, monkeypatch, capsys):
    for f in (REPO / "configs").glob("*.yaml"):
        (tmp_path / f.name).write_text(f.read_text())
    (tmp_path / "broken.yaml").write_text(text)
    monkeypatch.setattr(profiles, "CONFIG_DIR", tmp_path)
    assert pipeline.main(["--profile", "broken", "--only", "main", "--validate"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {message}"), err


def test_missing_latex_tools_stop_the_run_before_any_work_and_name_the_packages(tmp_path, monkeypatch, capsys):
    real = pipeline.shutil.which
    monkeypatch.setattr(pipeline.shutil, "which", lambda t: None if t in ("xelatex", "latexmk") else real(t))
    out = tmp_path / "out"
    assert pipeline.main(["--profile", "smoke", "--only", "main", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: xelatex, latexmk not found: needed for the PDF export and the "
                                               "paper (Debian: texlive-xetex"), err
    assert "or pass --no-pdf --no-paper" in err[0] and not out.exists()


def test_cuda_without_a_gpu_falls_back_to_cpu_with_one_warning(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(runtime, "_FELL_BACK", set())
    with pytest.warns(UserWarning, match="device='cuda' is not available here; using cpu"):
        assert runtime.pick_device("cuda").type == "cpu"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the second request in the same process is silent
        assert runtime.pick_device("cuda").type == "cpu"
    # the command line says so once before any work, and goes on (the documented choice)
    assert pipeline.main(["--profile", "smoke", "--only", "main", "--list", "-p", "device=cuda"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["warning: device='cuda' is not available on this machine; the jobs fall back to cpu (each says so "
                   "once). Run on a machine with one, or pass -p device=auto"]


def test_a_training_spec_edited_by_hand_is_refused_in_one_line(tmp_path):
    main_exp = api("main")

    run = main_exp.runs(main_exp.Config(datasets="iris", primary="iris", seeds="0"))[0]
    spec = run.write_spec(tmp_path / "runs")
    record = read_json(spec)
    record["train"]["epochs"] = 2
    spec.write_text(json.dumps(record))
    proc = subprocess.run([sys.executable, "-m", "attnknn_lib.training.train_one", str(spec), "--artifacts", str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {spec.name}: its content gives run id "), lines


@pytest.mark.slow
def test_a_bad_papermill_parameter_fails_the_notebook_in_one_line(tmp_path):
    """papermill -p k 0 (what ./run_all.sh passes, or a user on the papermill command line): the
    notebook stops in its config cell and records one line, not a traceback."""
    import papermill as pm

    with pytest.raises(pm.PapermillExecutionError) as info:
        pm.execute_notebook(str(REPO / "notebooks" / "01_main.ipynb"), str(tmp_path / "out.ipynb"),
                            parameters={"k": 0, "out_dir": str(tmp_path)}, cwd=str(REPO / "notebooks"),
                            kernel_name="python3", progress_bar=False)
    err = info.value
    assert err.ename == "ConfigError" and err.evalue.startswith("k=0 is out of range; allowed: [1, inf]")
    assert err.traceback == ["ConfigError: k=0 is out of range; allowed: [1, inf]"]
    assert not (tmp_path / "results").exists()  # nothing written


def test_attnknn_errors_render_as_one_line_in_jupyter():
    assert ConfigError("k=0 is out of range")._render_traceback_() == ["ConfigError: k=0 is out of range"]
    assert issubclass(CorruptFileError, AttnKNNError)


def test_a_notebooks_parameters_are_checked_when_its_config_is_built():
    from attnknn_lib.base.errors import ConfigError
    from attnknn_lib.base.knobs import DEFINED
    from attnknn_lib.experiments.efficiency import EXPERIMENT

    cell: dict = {"recompute": False, "out_dir": "x", "hnsw_m": 32, "Image": object()}
    cell[DEFINED] = set(cell)
    assert EXPERIMENT.Config.from_namespace({**cell, "hnsw_m": "48"}).hnsw_m == 48  # papermill's string of a number
    for bad, match in (({"hnsw_m": "bad"}, "hnsw_m='bad' has the wrong type"), ({"recall_k": 2.5}, "recall_k=2.5"),
                       ({"epochs": 1.5}, "epochs=1.5"), ({"no_such": 3}, "unknown parameter 'no_such'")):
        with pytest.raises(ConfigError, match=match):
            EXPERIMENT.Config.from_namespace({**cell, **bad})
    # names defined by the notebook's own cells before the parameters cell ran again are not parameters
    assert EXPERIMENT.Config.from_namespace({**cell, "shown": 3, DEFINED: set(cell) | {"shown"}}).hnsw_m == 32

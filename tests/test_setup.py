"""Set-up contract: pinned packages, CI calls the documented command, a second run is quick."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _pins(text: str) -> dict[str, str]:
    return {m.group(1).lower(): m.group(2) for m in re.finditer(r'"?([A-Za-z0-9_.-]+)==([0-9][^"\s,]*)"?', text)}


def test_every_dependency_is_pinned_and_conda_gets_the_same_set():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] + project["optional-dependencies"]["dev"]
    assert all("==" in d for d in deps), [d for d in deps if "==" not in d]
    for name in ("torch", "torchvision", "faiss-cpu", "jupyterlab", "papermill", "nbconvert", "matplotlib",
                 "pandas", "scikit-learn", "tqdm", "pytest"):
        assert any(d.lower().startswith(name + "==") for d in deps), name
    assert _pins((REPO / "environment.yml").read_text()) == _pins("\n".join(deps))


def test_installed_torch_pair_is_the_pinned_one_and_runs_on_this_machine():
    import torch
    import torchvision

    pins = _pins((REPO / "pyproject.toml").read_text())
    assert torch.__version__.split("+")[0] == pins["torch"]
    assert torchvision.__version__.split("+")[0] == pins["torchvision"]
    from torchvision.ops import box_iou  # a compiled torchvision op: fails if the pair does not match

    assert box_iou(torch.tensor([[0.0, 0, 1, 1]]), torch.tensor([[0.0, 0, 1, 1]])).item() == 1.0


def test_ci_runs_the_readme_test_command():
    assert "./run_all.sh test" in (REPO / ".ci" / "run").read_text()
    readme = (REPO / "README.md").read_text()
    commands = [line.split("#")[0].strip() for line in readme.splitlines()]
    assert "./run_all.sh test" in commands and "./run_all.sh" in commands


def _set_up_by_run_all() -> bool:
    stamp = Path(sys.prefix) / ".attnknn-installed"
    want = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()[:16]
    return stamp.exists() and stamp.read_text().strip() == want


@pytest.mark.skipif(not _set_up_by_run_all(), reason="this environment was not set up by ./run_all.sh")
def test_second_run_reuses_the_environment_and_reaches_the_tests_within_seconds():
    env = dict(os.environ)
    if Path(sys.prefix).resolve() != (REPO / ".venv").resolve():
        env["VIRTUAL_ENV"] = sys.prefix  # the environment run_all.sh would pick for the caller
    proc = subprocess.run(["bash", str(REPO / "run_all.sh"), "test", "--collect-only", "-q", "tests/test_voting.py"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "installing" not in proc.stderr
    assert "test_voting.py" in proc.stdout
    # no clock: "installs nothing the second time" is the behaviour; its speed is ./run_all.sh bench's business


def test_provenance_is_clean_when_only_outputs_changed(tmp_path):
    from attnknn_lib.base.provenance import git_commit

    repo = tmp_path / "repo"
    for d in ("attnknn_lib", "results"):
        (repo / d).mkdir(parents=True)
    (repo / "attnknn_lib" / "a.py").write_text("x = 1\n")
    (repo / "results" / "r.json").write_text("{}\n")
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    run("-c", "user.email=a@b", "-c", "user.name=a", "add", "-A")
    run("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "init")
    (repo / "results" / "r.json").write_text('{"new": 1}\n')
    assert git_commit(repo)["dirty"] is False
    (repo / "attnknn_lib" / "a.py").write_text("x = 2\n")
    assert git_commit(repo)["dirty"] is True

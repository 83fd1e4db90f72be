"""The run is honest when stopped or advised (issue 66, item 9): every command status or an error
suggests is the one that does what it says (same --only, -p, --profile, --out); files written by
the workflow are as readable as a plain write makes them; SIGTERM, Ctrl-C or the run's death end
every process it started; ``./run_all.sh lab --help`` says what the lab is.

The experiments are imported at collection (below), once per test process as every other test file
does, so that the tests themselves take well under a second each."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.base.files import atomic_write, write_json, write_text
from attnknn_lib.base.paths import Paths
from attnknn_lib.experiments.framework import catalog
from attnknn_lib.workflow import cli, lab
from attnknn_lib.workflow.overview import Invocation, command
from attnknn_lib.workflow.process_group import run_in_group, tree
from attnknn_lib.workflow.profiles import resolve

catalog.get("efficiency"), catalog.get("main")  # their imports (torch) at collection, not in a test


def test_status_suggests_the_same_only_parameters_profile_and_folder(tmp_path, capsys):
    """After ``status --only efficiency -p hnsw_m=16 --out DIR`` the suggested command measures
    efficiency with hnsw_m=16 into DIR, not all nine experiments with their defaults."""
    out = tmp_path / "a folder"  # a space: the path is shell-quoted
    assert cli.main(["status", "--only", "efficiency", "-p", "hnsw_m=16", "--out", str(out)]) == 0
    text = " ".join(capsys.readouterr().out.split())  # lines folded at 100 columns, joined
    assert f"To measure efficiency again: ./run_all.sh --out '{out}' --only efficiency -p hnsw_m=16 (about" in text
    assert f"Every output file with its state and reason: ./run_all.sh status -v --out '{out}' --only efficiency -p hnsw_m=16" in text


def test_a_suggested_command_keeps_every_choice_that_applies_to_what_it_names(tmp_path):
    inv = Invocation(("main", "efficiency"), ("main", "efficiency"), ("efficiency.hnsw_m=16", "seeds=0", "note=a b"),
                     "smoke", tmp_path / "x y")
    # -p of an experiment not named, or a parameter none of them has, would stop the command: left out
    assert command(inv, "render", only=["main"]) == (
        f"./run_all.sh render --profile smoke --out '{tmp_path / 'x y'}' --only main -p seeds=0")
    both = command(inv)
    assert both.endswith("--only main,efficiency -p efficiency.hnsw_m=16 -p seeds=0") and "--profile smoke" in both
    # without --only, one that names every selected experiment needs none; the default profile is not spelled
    everything = Invocation(("main", "efficiency"), overrides=("seeds=0",))
    assert command(everything) == "./run_all.sh -p seeds=0"
    assert command(everything, only=["main"]) == "./run_all.sh --only main -p seeds=0"


def test_render_without_a_record_names_the_command_that_measures_it(tmp_path):
    resolved = resolve("cpu", ["efficiency"], ["hnsw_m=16"])
    inv = Invocation(tuple(resolved), ("efficiency",), ("hnsw_m=16",), "cpu", tmp_path)
    with pytest.raises(ConfigError, match="measure it first: ") as err:
        cli.check_records(resolved, Paths(tmp_path), inv)
    assert str(err.value).endswith(f"./run_all.sh --out {tmp_path} --only efficiency -p hnsw_m=16")


def test_the_command_to_run_again_is_the_one_typed():
    typed = ["--only", "main", "-p", "note=a b", "--out", "/tmp/o"]
    assert cli.typed_command(typed) == "./run_all.sh --only main -p 'note=a b' --out /tmp/o"
    assert cli.typed_command([*typed, "--no-pdf"], "--no-pdf", "--no-paper").endswith("--no-pdf --no-paper")
    assert "without --force" in cli._again(["--force"], True) and cli._again([], False).endswith("./run_all.sh")


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)], ids=["umask 022", "umask 027"])
def test_atomic_writes_are_as_readable_as_a_plain_write(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        plain = tmp_path / "plain.txt"
        plain.write_text("x")
        written = [write_text(tmp_path / "a.txt", "text\n"), write_json(tmp_path / "b.json", {"k": 1}),
                   atomic_write(tmp_path / "deep" / "c.bin", lambda f: f.write(b"\x00\x01"))]
        write_text(tmp_path / "a.txt", "again\n")  # a rewrite too
    finally:
        os.umask(old)
    assert plain.stat().st_mode & 0o777 == mode
    assert all(p.stat().st_mode & 0o777 == mode for p in written), [oct(p.stat().st_mode) for p in written]
    assert (tmp_path / "a.txt").read_bytes() == b"again\n" and (tmp_path / "deep" / "c.bin").read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.json", "deep", "plain.txt"]  # no temporary left


def _alive(snapshot: dict[int, str]) -> list[int]:
    """The processes of ``snapshot`` (pid -> start time) still running (zombies count as gone)."""
    left = []
    for pid, start in snapshot.items():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[19] == start and fields[0] != "Z":
            left.append(pid)
    return left


STAND_IN = "setsid sleep 60 & sleep 60 & wait"  # a job tree: one child in a session of its own (a kernel)


@pytest.mark.skipif(not Path("/proc/self/stat").exists() or not subprocess.run(["sh", "-c", "command -v setsid"],
                    capture_output=True).returncode == 0, reason="needs Linux's /proc and setsid")
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, 128 + signal.SIGINT),
                                       (signal.SIGKILL, -signal.SIGKILL)], ids=["SIGTERM", "Ctrl-C", "run killed"])
def test_stopping_the_run_ends_every_process_it_started(sig, code):
    """SIGTERM, Ctrl-C (SIGINT: the shell's background sleeps ignore it, so SIGKILL after the grace
    ends them) or the run killed outright (the guard sees it gone): nothing of the tree is left."""
    script = (f"import sys; from attnknn_lib.workflow.process_group import run_in_group; "
              f"sys.exit(run_in_group(['sh', '-c', {STAND_IN!r}], grace=1.0))")
    run = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while len(tree(run.pid)) < 4 and time.monotonic() < deadline:  # guard, sh and the two sleeps
            time.sleep(0.02)
        started = tree(run.pid)
        assert len(started) == 4, started
        os.kill(run.pid, sig)
        assert run.wait(timeout=10) == code
        deadline = time.monotonic() + 5
        while _alive(started) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(started)
    finally:
        for pid in _alive(tree(run.pid)):
            os.kill(pid, signal.SIGKILL)
        run.kill()
        run.wait()


def test_a_finished_run_returns_its_own_exit_status():
    assert run_in_group(["sh", "-c", "exit 3"]) == 3 and run_in_group(["true"]) == 0


def test_lab_help_says_what_the_lab_is_and_starts_nothing(monkeypatch, capsys):
    def must_not_run(*args, **kwargs):
        raise AssertionError("--help copied notebooks or started JupyterLab")

    monkeypatch.setattr(lab, "prepare", must_not_run)
    monkeypatch.setattr(lab.os, "execv", must_not_run)
    for flag in ("--help", "-h"):
        with pytest.raises(SystemExit) as done:
            lab.main(["--allow-root", flag])  # ./run_all.sh adds --allow-root as root
        assert done.value.code == 0
        text = capsys.readouterr().out
        assert text.startswith("usage: ./run_all.sh lab")
        for said in ("lab/notebooks/", "lab/executed/", "results/notebooks/", "changes a tracked file", "--no-browser"):
            assert said in text, said
    assert lab.jupyter_args(["--no-browser", "--port", "9000", "--ServerApp.token=x"]) == [
        "--no-browser", "--port", "9000", "--ServerApp.token=x"]  # everything else goes to JupyterLab as given


def test_status_names_a_record_measured_under_other_installed_package_versions(tmp_path, capsys):
    import json

    from attnknn_lib.base.paths import REPO_ROOT

    record = json.loads((REPO_ROOT / "results" / "theory_fashion_mnist.json").read_text())
    record["provenance"]["packages"]["numpy"] = "0.0.1"
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "theory_fashion_mnist.json").write_text(json.dumps(record))
    assert cli.main(["status", "--only", "theory", "--out", str(tmp_path)]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Records of theory were measured under other package versions than those installed here: numpy 0.0.1" in text


def test_status_names_the_commit_that_measured_a_record_not_the_one_that_re_keyed_it():
    """A committed record's commit is the last that wrote it, unless that commit only re-keyed it
    (tooling.rekey): then it is the clean commit its provenance names."""
    from attnknn_lib.base.paths import REPO_ROOT
    from attnknn_lib.workflow.overview import code_commit

    record_file = REPO_ROOT / "results" / "theory_fashion_mnist.json"
    prov = {"commit": "a" * 40, "dirty": False}
    assert code_commit(record_file, {"provenance": {**prov, "rekeyed": [{"from_commit": "b" * 40}]}}) == "a" * 40
    last = subprocess.run(["git", "log", "-1", "--format=%H", "--", str(record_file)], cwd=REPO_ROOT,
                          capture_output=True, text=True).stdout.strip()
    if last and not subprocess.run(["git", "status", "--porcelain", "--", str(record_file)], cwd=REPO_ROOT,
                                   capture_output=True, text=True).stdout.strip():
        assert code_commit(record_file, {"provenance": prov}) == last  # never re-keyed: the commit that wrote it
    dirty = {"commit": "a" * 40, "dirty": True, "rekeyed": [{}]}
    assert code_commit(REPO_ROOT.parent / "elsewhere.json", {"provenance": dirty}) is None

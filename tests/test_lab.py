"""./run_all.sh lab: JupyterLab in the project's environment on copies of the notebooks (lab/),
checked through Jupyter's REST API (the notebooks are listed; a kernel starts and imports
attnknn_lib; whatever is saved there leaves git status empty)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from attnknn_lib.experiments.framework import catalog

REPO = Path(__file__).resolve().parent.parent
TOKEN = "attnknn-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(port: int, path: str, method: str = "GET", body: dict | None = None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"null")


def run_in_kernel(port: int, kernel_id: str, code: str, timeout: float = 120) -> str:
    """Execute ``code`` in the kernel over its websocket channel (Jupyter's messaging protocol);
    returns what it printed."""
    from tornado.ioloop import IOLoop
    from tornado.websocket import websocket_connect

    async def go() -> str:
        url = f"ws://127.0.0.1:{port}/api/kernels/{kernel_id}/channels?token={TOKEN}"
        ws = await websocket_connect(url)
        msg_id = uuid.uuid4().hex
        await ws.write_message(json.dumps({
            "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test", "session": uuid.uuid4().hex,
                       "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        out, deadline = "", time.monotonic() + timeout
        while time.monotonic() < deadline:
            raw = await ws.read_message()
            if raw is None:
                break
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["header"]["msg_type"]
            if kind == "stream":
                out += msg["content"]["text"]
            elif kind == "error":
                out += f"{msg['content']['ename']}: {msg['content']['evalue']}"
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                break
        ws.close()
        return out

    return IOLoop.current().run_sync(go, timeout=timeout + 10)


def _start_lab(tmp_path):
    port = free_port()
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg")}
    env.pop("ATTNKNN_OUT_DIR", None)  # a person's lab, not a workflow job
    proc = subprocess.Popen(["bash", str(REPO / "run_all.sh"), "lab", "--no-browser", f"--port={port}",
                             f"--IdentityProvider.token={TOKEN}", "--ServerApp.ip=127.0.0.1"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=env)
    for _ in range(120):  # the server is up when the API answers
        try:
            api(port, "status")
            return port, proc
        except OSError:
            if proc.poll() is not None:
                pytest.fail(proc.stdout.read()[-3000:])
            time.sleep(0.5)
    pytest.fail("JupyterLab did not start in 60 s")


def _stop(proc) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # JupyterLab shuts its kernels down on SIGTERM
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One JupyterLab (./run_all.sh lab) for the tests below, in the order they are written: each start
    is a run_all.sh, a Python and a server start. Its port; stopped when they are done."""
    port, proc = _start_lab(tmp_path_factory.mktemp("lab"))
    try:
        yield port
    finally:
        _stop(proc)


def _git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout


EXPERIMENT_NOTEBOOKS = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
AWAITING = sorted(e.notebook for e in catalog.experiments().values() if e.awaiting)  # declared, no record yet
MEASURED_NOTEBOOKS = [n for n in EXPERIMENT_NOTEBOOKS if n not in AWAITING]  # each with its executed copy


@pytest.mark.slow
def test_lab_serves_the_runnable_and_the_executed_notebooks_in_the_project_environment(lab):
    port = lab
    root = {item["name"] for item in api(port, "contents")["content"]}  # the lab's copies, not the repository
    assert {"notebooks", "executed"} <= root and "README.md" not in root
    runnable = sorted(item["name"] for item in api(port, "contents/notebooks")["content"]
                      if item["type"] == "notebook")
    executed = sorted(item["name"] for item in api(port, "contents/executed")["content"]
                      if item["type"] == "notebook")
    assert runnable == EXPERIMENT_NOTEBOOKS and executed == MEASURED_NOTEBOOKS
    spec = api(port, "kernelspecs")["kernelspecs"]["python3"]["spec"]
    sess = api(port, "sessions", "POST", {"path": "notebooks/01_main.ipynb", "type": "notebook",
                                          "kernel": {"name": "python3"}})
    out = run_in_kernel(port, sess["kernel"]["id"],
                        "import sys, attnknn_lib, os; print(sys.executable); print(os.getcwd())")
    lines = out.strip().splitlines()
    assert len(lines) == 2, out
    assert Path(lines[0]).resolve() == Path(sys.executable).resolve()  # the project's environment
    assert Path(lines[1]).resolve() == (REPO / "lab" / "notebooks").resolve()  # a kernel runs in its folder
    assert spec["language"] == "python"
    api(port, f"sessions/{sess['id']}", "DELETE")


@pytest.mark.slow
def test_every_notebook_run_top_to_bottom_in_the_lab_reads_the_committed_record_and_changes_nothing(lab):
    """As a person would: open each notebook in JupyterLab (no trained model in the checkout is needed)
    and run every cell with the default parameters. Each shows the committed record, trains and
    measures nothing (nothing appears under artifacts/ or scratch/) and leaves every tracked file as it was."""
    def written() -> set[str]:
        return {str(p) for d in ("artifacts", "scratch") for p in (REPO / d).rglob("*") if p.is_file()}

    before, files, port = _git_status(), written(), lab
    for name in AWAITING:  # no record yet: the notebook stops at its reading cell with one line saying how to run it
        nb = json.loads((REPO / "notebooks" / name).read_text())
        sess = api(port, "sessions", "POST", {"path": f"notebooks/{name}", "type": "notebook",
                                              "kernel": {"name": "python3"}})
        outs = [run_in_kernel(port, sess["kernel"]["id"], "".join(c["source"]), timeout=300)
                for c in nb["cells"] if c["cell_type"] == "code" and "nb.run(" in "".join(c["source"])
                or c["cell_type"] == "code" and "session(" in "".join(c["source"])
                or "parameters" in c.get("metadata", {}).get("tags", [])]
        assert "no record results/" in outs[-1] and "--only" in outs[-1], outs[-1][-2000:]
        api(port, f"sessions/{sess['id']}", "DELETE")
    for name in MEASURED_NOTEBOOKS:
        nb = json.loads((REPO / "notebooks" / name).read_text())
        sess = api(port, "sessions", "POST", {"path": f"notebooks/{name}", "type": "notebook",
                                              "kernel": {"name": "python3"}})
        kid = sess["kernel"]["id"]
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                out = run_in_kernel(port, kid, "".join(cell["source"]), timeout=300)
                assert "Error" not in out, f"{name}: {out[-2000:]}"
        shown = run_in_kernel(port, kid, "r = globals().get('record') or globals()['records'][cfg.primary]\n"
                                         "print(r['experiment'], r['dataset'], r['provenance']['commit'])")
        experiment, dataset, commit = shown.split()
        committed = json.loads((REPO / "results" / f"{experiment}_{dataset}.json").read_text())
        assert commit == committed["provenance"]["commit"], name
        api(port, f"sessions/{sess['id']}", "DELETE")  # its kernel shut down, as stopping the lab would
    assert _git_status() == before and written() == files


@pytest.mark.slow
def test_saving_in_the_lab_changes_no_tracked_file(lab):
    """As JupyterLab's autosave would: a notebook with outputs and an edited parameters cell, and an
    executed copy, saved through the contents API; git status stays as it was."""
    before, port = _git_status(), lab
    for path in ("notebooks/05_efficiency.ipynb", "executed/07_attention_study.ipynb"):
        model = api(port, f"contents/{path}")
        nb = model["content"]
        nb["metadata"]["language_info"] = {"name": "python", "version": "3.99"}  # what a kernel reports
        code = next(c for c in nb["cells"] if c["cell_type"] == "code")
        code["source"] += "\nrecompute = True"
        code["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "±\n"}]
        api(port, f"contents/{path}", "PUT", {"type": "notebook", "format": "json", "content": nb})
        assert "recompute = True" in (REPO / "lab" / path).read_text()  # saved, in the lab's copy
    assert _git_status() == before


def test_the_labs_copies_follow_the_repository_unless_a_reader_edited_them(tmp_path):
    from attnknn_lib.workflow import lab

    for d in ("notebooks", "results/notebooks"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "a.ipynb").write_text("v1")
    root, kept = lab.prepare(tmp_path)
    assert (root / "notebooks" / "a.ipynb").read_text() == "v1" and (root / "executed" / "a.ipynb").exists()
    (tmp_path / "notebooks" / "a.ipynb").write_text("v2")  # the repository moved on, the copy is untouched
    (root / "executed" / "a.ipynb").write_text("mine")  # a reader's edit
    (tmp_path / "results" / "notebooks" / "a.ipynb").write_text("v2")
    root, kept = lab.prepare(tmp_path)
    assert (root / "notebooks" / "a.ipynb").read_text() == "v2"
    assert (root / "executed" / "a.ipynb").read_text() == "mine" and kept == [
        "kept your edited copy lab/executed/a.ipynb (delete it to get the repository's again)"]

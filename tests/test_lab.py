"""./run_all.sh lab: JupyterLab in the project's environment, in notebooks/, checked through
Jupyter's REST API (the notebooks are listed; a kernel starts and imports attnknn_lib)."""

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


@pytest.mark.slow
def test_lab_serves_the_seven_notebooks_and_a_kernel_of_the_project_environment_imports_the_library(tmp_path):
    port = free_port()
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg")}
    proc = subprocess.Popen(["bash", str(REPO / "run_all.sh"), "lab", "--no-browser", f"--port={port}",
                             f"--IdentityProvider.token={TOKEN}", "--ServerApp.ip=127.0.0.1"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env=env)
    try:
        for _ in range(120):  # the server is up when the API answers
            try:
                api(port, "status")
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(proc.stdout.read()[-3000:])
                time.sleep(0.5)
        listing = api(port, "contents")  # the server's root is notebooks/
        names = sorted(item["name"] for item in listing["content"] if item["type"] == "notebook")
        assert names == ["01_main.ipynb", "02_k_sweep.ipynb", "03_noise.ipynb", "04_long_tail.ipynb",
                         "05_efficiency.ipynb", "06_theory.ipynb", "07_attention_study.ipynb"]
        spec = api(port, "kernelspecs")["kernelspecs"]["python3"]["spec"]
        kernel = api(port, "kernels", "POST", {"name": "python3"})
        out = run_in_kernel(port, kernel["id"], "import sys, attnknn_lib, os; print(sys.executable); print(os.getcwd())")
        lines = out.strip().splitlines()
        assert len(lines) == 2, out
        assert Path(lines[0]).resolve() == Path(sys.executable).resolve()  # the project's environment
        assert Path(lines[1]).resolve() == (REPO / "notebooks").resolve()
        assert spec["language"] == "python"
        api(port, f"kernels/{kernel['id']}", "DELETE")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # JupyterLab shuts its kernels down on SIGTERM
        proc.wait(timeout=30)

"""Executed notebooks are byte-stable: the notebook job strips papermill's times and the kernel's
timestamps before it writes one (jobs.strip_timings), and the committed ones carry none."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from attnknn_lib.workflow.jobs import strip_timings

REPO = Path(__file__).resolve().parent.parent


def _executed(t: str) -> dict:
    """A small executed notebook as papermill leaves it, its times all ``t``."""
    pm_cell = {"duration": 0.5, "end_time": t, "exception": False, "start_time": t, "status": "completed"}
    execution = {"iopub.execute_input": t, "iopub.status.busy": t, "iopub.status.idle": t,
                 "shell.execute_reply": t}
    return {"metadata": {"kernelspec": {"name": "python3"}, "title": "T",
                         "papermill": {"duration": 9.1, "start_time": t, "end_time": t, "exception": None,
                                       "input_path": "notebooks/x.ipynb", "parameters": {"k": 16},
                                       "version": "2.7.0"},
                         "attnknn": {"render_code": "abc", "records": {"results/x.json": "d1"}}},
            "cells": [{"cell_type": "markdown", "id": "a", "metadata": {"papermill": dict(pm_cell), "tags": []},
                       "source": ["# T"]},
                      {"cell_type": "code", "id": "b", "execution_count": 1, "outputs": [],
                       "metadata": {"execution": dict(execution), "papermill": dict(pm_cell),
                                    "tags": ["parameters"]}, "source": ["k = 16"]}],
            "nbformat": 4, "nbformat_minor": 5}


def test_strip_timings_drops_every_time_and_keeps_the_rest():
    nb = strip_timings(_executed("2026-11-28T18:05:13.170884+00:00"))
    text = json.dumps(nb)
    assert "2026" not in text and "duration" not in text and "execution\"" not in text
    assert nb["metadata"]["papermill"] == {"exception": None, "input_path": "notebooks/x.ipynb",
                                           "parameters": {"k": 16}, "version": "2.7.0"}
    assert nb["metadata"]["attnknn"] == {"render_code": "abc", "records": {"results/x.json": "d1"}}
    assert [c["metadata"] for c in nb["cells"]] == [
        {"papermill": {"exception": False, "status": "completed"}, "tags": []},
        {"papermill": {"exception": False, "status": "completed"}, "tags": ["parameters"]}]
    assert nb["cells"][1]["execution_count"] == 1 and nb["cells"][1]["source"] == ["k = 16"]
    assert strip_timings(copy.deepcopy(nb)) == nb  # idempotent


def test_two_renders_at_different_times_are_the_same_bytes():
    one, two = (json.dumps(strip_timings(_executed(t)), indent=1) for t in ("2026-01-01T00:00:00Z",
                                                                            "2027-06-30T12:34:56Z"))
    assert one == two


def test_committed_executed_notebooks_carry_no_times():
    for path in sorted((REPO / "results" / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        assert strip_timings(copy.deepcopy(nb)) == nb, path.name

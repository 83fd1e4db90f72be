"""Progress bars: on the terminal for training jobs, widgets in JupyterLab, nothing in executed notebooks.

The workflow runs notebooks with ``ATTNKNN_PROGRESS=off`` (set by :mod:`attnknn_lib.workflow.jobs` for
papermill's kernels), so an executed notebook holds narrative, tables and figures, never a
progress bar per step; its live progress is papermill's cell counter on the terminal, and the
training itself runs in the workflow's training jobs, whose bars go to the terminal.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")


def enabled() -> bool:
    """False when ``$ATTNKNN_PROGRESS`` is off / 0 / false."""
    return os.environ.get("ATTNKNN_PROGRESS", "on").lower() not in ("off", "0", "false", "no")


def interactive() -> bool:
    """Whether someone watches the bars: stderr is a terminal, or this is a Jupyter kernel. In a log
    file or a cluster job's output every refresh of a bar would land as a line of its own, so there
    the training loops print one line per epoch (:func:`write`) and no bars."""
    return sys.stderr.isatty() or "ipykernel" in sys.modules


def bar(iterable: Iterable[T], *, desc: str, total: int | None = None, leave: bool = False,
        disable: bool = False) -> tqdm[T]:
    """A tqdm bar (a widget in Jupyter, text on a terminal); silent when progress is off or when
    nobody watches (:func:`interactive`)."""
    return tqdm(iterable, desc=desc, total=total, leave=leave, disable=disable or not enabled() or not interactive(), dynamic_ncols=True)


def write(message: str) -> None:
    """A line that does not break a running bar (silent when progress is off); in a log file, the
    one line per epoch that replaces the bars."""
    if enabled():
        tqdm.write(message, file=sys.stderr)

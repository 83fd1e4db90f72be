"""A run that stops as one: Snakemake and every job it starts end with ``./run_all.sh``.

Snakemake's local jobs (training, measure, notebook, PDF, paper) share its process group, and its own
SIGTERM handler only stops scheduling: it waits for the running jobs, which can take hours. So the
workflow runs Snakemake through :func:`run_in_group`: a small guard process leads a session of its
own, starts Snakemake in it, and on SIGTERM or Ctrl-C (SIGINT) passed on by the run, or when the run
itself is gone (killed, even with SIGKILL: the guard reads EOF on a pipe only the run holds), sends
the signal to every process of the tree, waits :data:`GRACE_SECONDS` for them to end, then kills what
is left (at once on a second signal). A rerun then resumes from the cache: every output is written
atomically and Snakemake reruns the jobs it marked incomplete.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
GRACE_SECONDS = 10.0  # what a job gets to end after the signal before SIGKILL
POLL_SECONDS = 0.2  # how often the guard looks at its child, the run and (when stopping) the tree
MODULE = "attnknn_lib.workflow.process_group"


def run_in_group(cmd: list[str], grace: float = GRACE_SECONDS) -> int:
    """Run ``cmd`` under a guard in a session of its own and return its exit status, or 128 + the
    signal when SIGTERM or SIGINT to this process stopped it (each is passed on to the guard; a
    second one kills at once). Why a session: a signal sent to this process alone (``kill PID``, a CI
    timeout, Ctrl-C, which a terminal sends to this process's group only) must still reach every
    job, and one sent to the caller's whole group must reach them only through the guard, which
    then stops the whole tree."""
    read_end, write_end = os.pipe()  # the guard sees EOF when this process is gone, however it ended
    caught: list[int] = []
    told: list[int] = []
    guard: list[subprocess.Popen] = []

    def pass_on(signum: int | None = None, _frame: object = None) -> None:
        caught.extend([signum] if signum else [])
        for s in caught[len(told):] if guard else []:
            told.append(s)
            _signal(guard[0].pid, s)

    previous = {s: signal.signal(s, pass_on) for s in STOP_SIGNALS}
    try:
        guard.append(subprocess.Popen([sys.executable, "-m", MODULE, str(read_end), str(grace), "--", *cmd],
                                      start_new_session=True, pass_fds=(read_end,)))
        os.close(read_end)
        pass_on()  # what arrived while the guard was starting
        code = guard[0].wait()
    finally:
        for fd in (read_end, write_end) if not guard else (write_end,):
            os.close(fd)
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 128 + caught[0] if caught else 128 - code if code < 0 else code


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _processes() -> dict[int, tuple[int, int, str, str]]:
    """Every process: pid -> (parent pid, process group, state, start time), from /proc (Linux)."""
    table = {}
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:  # ended meanwhile
                continue
            f = stat[stat.rindex(")") + 2:].split()  # after "pid (command) "
            table[int(name)] = (int(f[1]), int(f[2]), f[0], f[19])
    return table


def tree(leader: int) -> dict[int, str]:
    """The live processes of ``leader``'s tree, ``leader`` excluded: its process group, and every
    descendant of them (a Jupyter kernel leads a session of its own under its notebook job); pid ->
    start time, which tells a process from a later one given the same pid. Zombies count as gone."""
    table = _processes()
    found = {pid for pid, (_, group, _, _) in table.items() if group == leader} | {leader}
    grew = True
    while grew:
        more = {pid for pid, (parent, _, _, _) in table.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return {pid: table[pid][3] for pid in found - {leader} if table[pid][2] != "Z"}


def _stop_tree(stops: list[int], grace: float, child: subprocess.Popen) -> None:
    """Send ``stops[0]`` to every process of this guard's tree (one taken before the signal, then any
    that appears), wait up to ``grace`` s for them to end, then SIGKILL the rest; a later stop
    signal kills at once. ``child`` (Snakemake) gets SIGINT: on SIGTERM it would only stop
    scheduling and wait for its running jobs, a cluster's included, where SIGINT cancels them."""
    me, asked, deadline = os.getpid(), len(stops), time.monotonic() + grace
    if not os.path.isdir("/proc"):  # no process table (not Linux): the group alone, this guard spared
        signal.signal(stops[0], signal.SIG_IGN)
        os.killpg(me, stops[0])
        try:
            child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(me, signal.SIGKILL)
        return
    sent: dict[int, str] = {}
    while True:
        now = tree(me)
        alive = {**{p: s for p, s in sent.items() if _alive(p, s)}, **now}
        child.poll()  # reaps Snakemake once it has ended
        if not alive:
            return
        final = time.monotonic() > deadline or len(stops) > asked
        for pid, start in alive.items():
            if final or pid not in sent:  # Snakemake itself: SIGINT, on which it cancels its (cluster) jobs
                _signal(pid, signal.SIGKILL if final else signal.SIGINT if pid == child.pid else stops[0])
                sent[pid] = start
        time.sleep(0.05)


def _alive(pid: int, start: str) -> bool:
    """Whether the process ``pid`` that started at ``start`` still runs (not a zombie)."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    f = f[f.rindex(")") + 2:].split()
    return f[19] == start and f[0] != "Z"


def guard(fd: int, grace: float, cmd: list[str]) -> int:
    """The guard (see the module docstring): run ``cmd`` in this session; stop its whole tree on
    SIGTERM, SIGINT or EOF on ``fd`` (the run is gone), and after it ends whatever it left behind."""
    stops: list[int] = []
    for s in STOP_SIGNALS:
        signal.signal(s, lambda signum, _frame: stops.append(signum))
    child = subprocess.Popen(cmd)
    while child.poll() is None and not stops:
        if select.select([fd], [], [], POLL_SECONDS)[0] and not os.read(fd, 1):
            stops.append(signal.SIGTERM)  # the run ended without telling: stop as on SIGTERM
    _stop_tree(stops or [signal.SIGTERM], grace, child)
    code = child.returncode
    return 128 + stops[0] if stops else 128 - code if code < 0 else code  # a shell's code for a signalled child


if __name__ == "__main__":  # python -m attnknn_lib.workflow.process_group FD GRACE -- CMD...: the guard
    raise SystemExit(guard(int(sys.argv[1]), float(sys.argv[2]), sys.argv[4:]))

"""The workflow's report job: ``python -m attnknn_lib.workflow.report_job --plan PLAN``.

``results/macros.tex`` from the plan's result files only (all of one profile; only the macros the
paper uses, and none it uses missing), and the README's
results block when writing into the repository. A module of its own because it reads every
experiment's views, which import torch: the other jobs (:mod:`attnknn_lib.workflow.jobs`) then
start without it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attnknn_lib.base.errors import AttnKNNError
from attnknn_lib.base.files import read_json
from attnknn_lib.experiments.framework import catalog
from attnknn_lib.report.compose import compose, write_report
from attnknn_lib.report.records import read_records
from attnknn_lib.workflow.jobs import run_job
from attnknn_lib.workflow.plan import result_files


def report(plan: dict) -> Path:
    """Macros and the README blocks from the plan's result files (and the same profile's other
    experiments' results already on disk: see :func:`~attnknn_lib.workflow.plan.result_files`)."""
    bench = Path(plan["repo"]) / "results" / "benchmarks.json"  # the last full run's times, for the README
    report_ = compose(read_records(result_files(plan)), catalog.experiments().values(),
                      read_json(bench) if bench.exists() else None)
    return write_report(report_, Path(plan["root"]) / "results" / "macros.tex",
                        Path(plan["repo"]) / "README.md" if plan["readme"] else None,
                        paper_path=Path(plan["repo"]) / "paper" / "main.tex", strict=plan["paper"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m attnknn_lib.workflow.report_job", description=__doc__.split("\n\n")[0])
    ap.add_argument("--plan", required=True, help="plan.json written by ./run_all.sh")
    args = ap.parse_args(argv)
    try:
        plan = read_json(args.plan)
    except AttnKNNError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return run_job(plan, "report", "report", lambda: report(plan))


if __name__ == "__main__":
    raise SystemExit(main())

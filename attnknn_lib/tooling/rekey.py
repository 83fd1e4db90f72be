"""Re-key committed records after the measurement key changed form, without measuring them again.

A record may take today's key without being measured again only if it was current before the
change: its stored key must equal the key that the code of an earlier commit (``--before``, the
last commit whose keys the records were checked against) computes, in the key's form of that
commit. The tool computes those keys in a temporary worktree of that commit with this interpreter,
refuses every record whose stored key differs, and stamps the others with today's key, noting in
``provenance.rekeyed`` what it was, from which commit and why. A record of an experiment whose
measurement now also stores what it used to leave to its views (verdicts) gets them from its
measure module's ``with_verdicts``: a pure function of the stored results and the config's margins.

That the code of ``--before`` and today's code measure the same numbers is a separate proof: a
smoke run of each, compared with :func:`attnknn_lib.tooling.reproducibility.comparable` (the note of
the change that re-keys says so).

    python -m attnknn_lib.tooling.rekey --before COMMIT [--reason TEXT] [--dry-run]
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from attnknn_lib.base.errors import AttnKNNError
from attnknn_lib.base.files import read_json, write_json
from attnknn_lib.base.paths import REPO_ROOT
from attnknn_lib.base.provenance import measure_code
from attnknn_lib.experiments.framework import catalog

_OLD_KEYS = ("import json, sys; sys.path.insert(0, '.'); from attnknn_lib.base import provenance as p; "
             "from attnknn_lib.experiments.framework import catalog; "
             "print(json.dumps({n: p.measure_code(n) for n in catalog.names()}))")


def keys_at(commit: str, repo: Path = REPO_ROOT) -> dict[str, str]:
    """{experiment: measurement key} as the code of ``commit`` computes it (in a temporary worktree)."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(tree), commit], cwd=repo, check=True)
        try:
            out = subprocess.run([sys.executable, "-c", _OLD_KEYS], cwd=tree, capture_output=True, text=True,
                                 env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, timeout=600)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=repo, check=False)
    if out.returncode != 0:
        raise AttnKNNError(f"the code of {commit} could not compute its keys: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout)


def rekeyed(record: dict, old_key: str, new_key: str, commit: str, reason: str) -> dict:
    """``record`` with today's key, its stored verdicts where its measurement stores them now, and a
    note of the re-keying (a list once it has been re-keyed more than once); unchanged when its stored
    key is today's already; refused when it is neither today's nor ``old_key`` (it was not current)."""
    prov = record.get("provenance", {})
    if prov.get("measure_code") == new_key:
        return record  # current under today's code already (another experiment's key changed): nothing to do
    if prov.get("measure_code") != old_key:
        raise AttnKNNError(f"{record.get('experiment')}/{record.get('dataset')}: stored key "
                           f"{prov.get('measure_code')} is not {old_key}, the key of {commit}'s code: it was not "
                           f"current, so it must be measured again")
    measure = importlib.import_module(f"attnknn_lib.experiments.{record['experiment']}.measure")
    if hasattr(measure, "with_verdicts") and "verdicts" not in record.get("results", {}):
        record = measure.with_verdicts(record)
    earlier = prov.get("rekeyed") or []
    note = {"from_key": old_key, "from_commit": commit, "reason": reason}
    notes = [*(earlier if isinstance(earlier, list) else [earlier]), note]  # every re-keying, oldest first
    return {**record, "provenance": {**prov, "measure_code": new_key, "rekeyed": notes if len(notes) > 1 else note}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m attnknn_lib.tooling.rekey", description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", required=True, help="the commit whose code the records were current with")
    ap.add_argument("--reason", default="the measurement key changed form; the measuring code measures the same")
    ap.add_argument("--dry-run", action="store_true", help="say what would change, write nothing")
    args = ap.parse_args(argv)
    try:
        old = keys_at(args.before)
        commit = subprocess.run(["git", "rev-parse", args.before], cwd=REPO_ROOT, capture_output=True,
                                text=True, check=True).stdout.strip()
        out = {}
        for name in catalog.names():
            exp = catalog.get(name)
            for rel in exp.artifacts.files(exp.Config(), "record"):
                path = REPO_ROOT / rel
                if path.exists():
                    out[path] = rekeyed(read_json(path), old[name], measure_code(name), commit, args.reason)
    except AttnKNNError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for path, record in out.items():  # every record checked before any is written
        if record["provenance"].get("measure_code") == read_json(path)["provenance"].get("measure_code"):
            continue
        print(f"{path.relative_to(REPO_ROOT)}: re-keyed to {record['provenance']['measure_code']}")
        if not args.dry_run:
            write_json(path, record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

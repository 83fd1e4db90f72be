"""``./run_all.sh lab``: JupyterLab as a reading room that changes no tracked file.

The lab opens copies: ``lab/notebooks/`` holds the nine notebooks and ``lab/executed/`` the executed
notebooks of the committed run (``results/notebooks/``), in a folder git ignores. Whatever a reader
does there (open, run all, edit a parameter, leave a tab open and let it autosave) stays in the
copies: the repository's notebooks, which the workflow and papermill read, and the executed
copies, which the workflow writes, are never saved by the lab. A notebook run in the lab reads the
committed records as the repository's own would (its paths come from the library, not from where
it runs), and a recompute writes under ``scratch/``, as before.

Copies are refreshed at each start: a copy the reader has not changed follows the repository's
file; an edited copy is kept, and the start says so in one line (delete it to get the repository's
again). To change a notebook for everyone, edit ``notebooks/`` itself, outside the lab.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import sys
from pathlib import Path

from attnknn_lib.base.files import write_text
from attnknn_lib.base.paths import REPO_ROOT

LAB = "lab"  # the lab's folder under the repository (git ignores it)
COPIES = {"notebooks": "notebooks", "results/notebooks": "executed"}  # repository folder -> lab folder
MANIFEST = ".copied.json"  # {copy: digest of the file as copied}: tells a reader's edit from a stale copy


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def prepare(repo: Path = REPO_ROOT) -> tuple[Path, list[str]]:
    """Copy the notebooks into the lab (see the module docstring); returns the lab's folder and one
    line per edited copy that was kept."""
    lab = repo / LAB
    manifest_path = lab / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    kept = []
    for source_dir, copy_dir in COPIES.items():
        (lab / copy_dir).mkdir(parents=True, exist_ok=True)
        for source in sorted((repo / source_dir).glob("*.ipynb")):
            rel = f"{copy_dir}/{source.name}"
            copy = lab / rel
            if copy.exists():
                now = _digest(copy)
                if now == _digest(source):
                    manifest[rel] = now
                    continue
                if manifest.get(rel) != now:  # changed since it was copied: the reader's
                    kept.append(f"kept your edited copy {LAB}/{rel} (delete it to get the repository's again)")
                    continue
            shutil.copyfile(source, copy)
            manifest[rel] = _digest(copy)
    write_text(manifest_path, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return lab, kept


HELP = """\
JupyterLab on copies of the notebooks, so that nothing done there changes a tracked file:

  lab/notebooks/  copies of notebooks/ (runnable: they read the committed records; a
                  recompute writes under scratch/)
  lab/executed/   copies of results/notebooks/, the executed notebooks of the committed run

lab/ is ignored by git. Each start refreshes the copies you have not changed and keeps the ones
you edited (it names them; delete one to get the repository's again). The repository's notebooks,
which the workflow and papermill read, are never saved by the lab: to change a notebook for
everyone, edit notebooks/ itself, outside the lab."""


def _parser() -> argparse.ArgumentParser:
    """``./run_all.sh lab``'s own help (``-h``): what the lab is in this project, not JupyterLab's
    generic help, which says nothing of the copies; every other option goes to JupyterLab."""
    return argparse.ArgumentParser(
        prog="./run_all.sh lab", usage="./run_all.sh lab [-h] [JUPYTERLAB OPTION ...]", allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter, description=HELP,
        epilog="Every other option goes to JupyterLab as given, e.g. --no-browser, --port=8899 or\n"
               "--ip=0.0.0.0 (as root, ./run_all.sh adds --allow-root). JupyterLab lists them all:\n"
               f"  {shlex.quote(sys.executable)} -m jupyter lab --help")


def jupyter_args(argv: list[str]) -> list[str]:
    """The options for JupyterLab: ``argv`` less this command's own (``-h``/``--help`` prints the
    help above and exits 0 here, before any copy is made)."""
    return _parser().parse_known_args(argv)[1]


def main(argv: list[str] | None = None) -> int:
    """Prepare the copies, then replace this process by JupyterLab opened at ``lab/notebooks``."""
    extra = jupyter_args(sys.argv[1:] if argv is None else list(argv))
    lab, kept = prepare()
    for line in kept:
        print(line, file=sys.stderr)
    args = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={lab}",
            "--ServerApp.default_url=/lab/tree/notebooks", *extra]
    os.execv(sys.executable, args)
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env bash
# Attn-KNN: one entry point.
#   ./run_all.sh              set up what is missing, then run every experiment of the default profile
#   ./run_all.sh test [ARGS]  set up what is missing, then run the test suite (ARGS go to pytest)
#   ./run_all.sh status       per experiment: re-measure (with an estimate), re-render or same (reads only; -v: every file)
#   ./run_all.sh keep         copy the finished parts of a measurement under way into results/parts, to commit
#   ./run_all.sh render       every table, figure, notebook PDF, macro, README block and the paper, from the records
#   ./run_all.sh dag          the job graph as figures/workflow_dag.pdf
#   ./run_all.sh lab          JupyterLab on copies of the notebooks and the executed ones (lab/; nothing tracked changes)
#   ./run_all.sh bench        this machine's speed as ratios (search vs GEMM, votes, smoke run, stage times)
#   ./run_all.sh --help       all options
# Set-up: uses the active virtual/conda environment, else creates .venv here; installs the pinned
# packages of pyproject.toml once (again only when pyproject.toml changes); installs the Debian
# packages the project needs when run as root, and names them otherwise.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

DEBIAN_DATA=(dataset-fashion-mnist)
DEBIAN_PDF=(texlive-xetex texlive-fonts-recommended texlive-plain-generic texlive-latex-extra pandoc latexmk)

log() { echo "[run_all] $*" >&2; }

debian_missing() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

ensure_debian() {
  command -v dpkg-query >/dev/null || { log "not a Debian system: make sure these are installed: $*"; return 0; }
  local missing
  missing=$(debian_missing "$@" | tr '\n' ' ')
  [ -z "${missing// /}" ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    log "missing Debian packages (run as root to install them): sudo apt-get install -y $missing"
    return 0
  fi
  log "installing Debian packages: $missing"
  export DEBIAN_FRONTEND=noninteractive
  # shellcheck disable=SC2086
  apt-get install -y -q --no-install-recommends $missing >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $missing >/dev/null; }
}

ensure_python() {
  if [ -n "${VIRTUAL_ENV:-}" ]; then
    PY="$VIRTUAL_ENV/bin/python"
  elif [ -n "${CONDA_PREFIX:-}" ]; then
    PY="$CONDA_PREFIX/bin/python"
  else
    if [ ! -x .venv/bin/python ]; then
      local base
      base=$(command -v python3 || true)
      [ -n "$base" ] || { log "python3 not found; install Python >= 3.10"; exit 1; }
      "$base" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
        || { log "python3 is $("$base" -V 2>&1); Python >= 3.10 is required"; exit 1; }
      log "creating .venv with $("$base" -V 2>&1)"
      "$base" -m venv .venv
    fi
    PY="$PWD/.venv/bin/python"
  fi
  local stamp want
  stamp="$("$PY" -c 'import sys; print(sys.prefix)')/.attnknn-installed"
  want=$(sha256sum pyproject.toml | cut -c1-16)
  if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    log "installing the pinned Python packages into $("$PY" -c 'import sys; print(sys.prefix)') (a few minutes the first time)"
    # (the grep drops pip warnings about this machine's unused local index folders)
    "$PY" -m pip install -q --disable-pip-version-check -e ".[dev]" 2> >(grep -v "is ignored: it is neither" >&2)
    echo "$want" > "$stamp"
  fi
}

mode=run
case "${1:-}" in
  test|lab|bench) mode=$1; shift ;;
esac

ensure_debian "${DEBIAN_DATA[@]}"
ensure_python

if [ "$mode" = test ]; then
  ensure_debian "${DEBIAN_PDF[@]}"  # the smoke-run test exports a notebook to PDF and builds the paper
  exec "$PY" -m pytest -q "$@"
fi
if [ "$mode" = bench ]; then
  case " $* " in *" --no-smoke "*|*" -h "*|*" --help "*) ;; *) ensure_debian "${DEBIAN_PDF[@]}" ;; esac
  exec "$PY" -m attnknn_lib.tooling.bench "$@"
fi
if [ "$mode" = lab ]; then
  # a reading room: JupyterLab on copies of notebooks/ and results/notebooks/ under lab/ (git ignores
  # it), so nothing a reader does there changes a tracked file or what the workflow reads
  extra=()
  [ "$(id -u)" -eq 0 ] && extra+=(--allow-root)  # containers and CI machines often run as root
  exec "$PY" -m attnknn_lib.workflow.lab "${extra[@]}" "$@"
fi
case " $* " in
  *" -h "*|*" --help "*|*" --list "*) exec "$PY" -m attnknn_lib.workflow.cli "$@" ;;
esac
needs=()
case " $* " in
  " status "*|" keep "*) ;;
  " dag "*) needs=(graphviz) ;;
  *" --no-pdf "*" --no-paper "*|*" --no-paper "*" --no-pdf "*) ;;
  *) needs=("${DEBIAN_PDF[@]}") ;;
esac
# Check every argument (profile, experiments, parameters, data) before installing anything. With
# nothing to install, the workflow's own first step is the same check, and a second Python start
# (about 5 s) is saved.
if [ ${#needs[@]} -gt 0 ] && [ -n "$(debian_missing "${needs[@]}" | tr -d '[:space:]')" ]; then
  "$PY" -m attnknn_lib.workflow.cli --validate "$@" || exit $?
  ensure_debian "${needs[@]}"
fi
exec "$PY" -m attnknn_lib.workflow.cli "$@"

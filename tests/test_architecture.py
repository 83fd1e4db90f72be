"""The library's architecture is checked, not just described: layers, cycles, lint, layout docs."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import attnknn_lib
from attnknn_lib.base.files import read_json, write_json
from attnknn_lib.report.readme import LAYOUT_END, LAYOUT_FILE, LAYOUT_START, layout_markdown

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "attnknn_lib"
BIN = Path(sys.executable).parent


def test_import_linter_contracts_hold():
    """Layers (no import from a higher layer), no cycles between siblings, independent experiments."""
    proc = subprocess.run([str(BIN / "lint-imports"), "--no-cache"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_every_subpackage_is_a_declared_layer_in_the_docstring_and_the_contract():
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert folders == set(attnknn_lib.LAYERS)
    doc = attnknn_lib.__doc__
    assert [layer for layer in attnknn_lib.LAYERS] == sorted(attnknn_lib.LAYERS, key=lambda x: doc.index(f"``{x}``"))
    contract = (REPO / "pyproject.toml").read_text()
    assert f"layers = {json.dumps(list(attnknn_lib.LAYERS))}" in contract.replace("', '", '", "')


def test_no_library_or_test_file_is_ignored_by_git():
    """A pattern such as ``data/`` once hid ``attnknn_lib/data/spec.py`` from every clone."""
    if not (REPO / ".git").exists():
        return  # an exported tree: nothing to check against
    files = [str(p.relative_to(REPO)) for folder in ("attnknn_lib", "tests") for p in (REPO / folder).rglob("*.py")
             if "__pycache__" not in p.parts]
    proc = subprocess.run(["git", "check-ignore", "--no-index", *files], cwd=REPO, capture_output=True, text=True)
    assert proc.stdout.split() == [], proc.stdout


def test_no_measured_output_is_ignored_by_git_and_each_is_committed():
    """Every record and data file the cpu profile measures is one git keeps: a measured file that is
    ignored, or never committed, leaves a clone with outputs its records cannot draw again (the study's
    gallery images were declared beside its record and never committed)."""
    if not (REPO / ".git").exists():
        return  # an exported tree: nothing to check against
    from attnknn_lib.experiments.framework import catalog
    from attnknn_lib.workflow.profiles import resolve

    measured = sorted({f for name, params in resolve("cpu", None, []).items()
                       for f in catalog.get(name).artifacts.measured(catalog.get(name).Config(**params))})
    assert measured and all(f.startswith("results/") for f in measured), measured
    proc = subprocess.run(["git", "check-ignore", "--no-index", *measured], cwd=REPO, capture_output=True, text=True)
    assert proc.stdout.split() == [], f"ignored by git: {proc.stdout.split()}"
    tracked = set(subprocess.run(["git", "ls-files", "--", *measured], cwd=REPO, capture_output=True, text=True,
                                 check=True).stdout.split())
    assert sorted(set(measured) - tracked) == [], "measured outputs never committed"


def test_ruff_finds_nothing():
    proc = subprocess.run([str(BIN / "ruff"), "check", "."], cwd=REPO, capture_output=True, text=True)  # notebooks too
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_first_party_imports_sit_at_module_level():
    """An import inside a function hides which way the dependencies run."""
    inner = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.ImportFrom) and (sub.module or "").startswith("attnknn_lib") or \
                            isinstance(sub, ast.ImportFrom) and sub.level > 0:
                        inner.append(f"{path.relative_to(REPO)}:{sub.lineno}")
    assert not inner, inner


def test_no_two_modules_share_a_name_across_layers():
    names: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            names.setdefault(path.stem, []).append(str(path.relative_to(PACKAGE)))
    assert {n: p for n, p in names.items() if len(p) > 1 and n not in ("config", "measure", "views")} == {}


def test_the_layout_in_docs_is_generated_from_the_docstrings():
    assert LAYOUT_FILE == REPO / "docs" / "layout.md"
    text = LAYOUT_FILE.read_text()
    block = text.split(LAYOUT_START, 1)[1].split(LAYOUT_END, 1)[0].strip()
    assert block == layout_markdown(), "docs/layout.md is stale: run python -m attnknn_lib.report.readme"
    assert LAYOUT_START not in (REPO / "README.md").read_text()  # the README is for users


def test_results_json_is_strict_json_with_null_for_non_finite_numbers(tmp_path):
    path = write_json(tmp_path / "r.json", {"a": float("nan"), "b": [np.float64("inf"), 1.5], "c": np.array([np.nan])})
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))  # a strict parser reads it
    assert read_json(path) == {"a": None, "b": [None, 1.5], "c": [None]}


def test_every_experiment_package_declares_itself_once_in_one_shape():
    from attnknn_lib.experiments.framework import catalog
    from attnknn_lib.experiments.framework.declaration import Experiment

    names = catalog.names()
    assert len(names) >= 7 and set(catalog.experiments()) == set(names)
    for name in names:
        exp = catalog.get(name)
        assert isinstance(exp, Experiment) and exp.name == name
        folder = PACKAGE / "experiments" / name
        # its declaration, then config, measure and views, each a module or a package of modules
        parts = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir()
                                                       if p.is_dir() and (p / "__init__.py").exists()}
        assert parts == {"__init__", "config", "measure", "views"}, (name, sorted(parts))
        assert (REPO / "notebooks" / exp.notebook).exists(), exp.notebook
        record_keys = [o.key for o in exp.artifacts.outputs if o.kind == "record"]
        assert len(record_keys) == 1, name
    notebooks = sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb"))
    assert notebooks == sorted(e.notebook for e in catalog.experiments().values())


def test_output_file_names_are_spelled_only_in_the_declarations():
    """No experiment module, notebook, workflow or tooling file builds an output path by hand."""
    pattern = re.compile(r"""(paths\.(tables|figures|results) /|["'](results/tables|figures)/)""")
    places = [*(PACKAGE / "experiments").rglob("*.py"), *(PACKAGE / "workflow").rglob("*.py"),
              *(PACKAGE / "tooling").rglob("*.py"),
              *(REPO / "notebooks").glob("*.ipynb")]
    hits = [f"{p.relative_to(REPO)}: {m.group(0)}" for p in places if p.name != "declaration.py"
            for m in pattern.finditer(p.read_text())]
    assert not hits, hits


def test_the_shared_experiment_modules_import_no_experiment():
    """The independence contract ignores imports of these modules; they in turn import no experiment."""
    from attnknn_lib.experiments.framework import catalog

    shared = [p for p in (PACKAGE / "experiments").glob("*.py") if p.name != "__init__.py"]
    for path in shared:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not any(node.module.startswith(f"attnknn_lib.experiments.{n}") for n in catalog.names()), \
                    f"{path.name} imports {node.module}"
    contract = (REPO / "pyproject.toml").read_text()
    assert 'modules = ["attnknn_lib.experiments.*"]' in contract  # every package, present and future
    ignored = set(re.findall(r'"attnknn_lib\.experiments\.\*\* -> attnknn_lib\.experiments\.(\w+)"', contract))
    # the catalog imports experiments by name only; reading is imported by the notebooks, by no experiment
    assert ignored == {p.stem for p in shared} - {"catalog", "reading"}


def test_a_notebook_job_depends_on_the_code_it_imports_not_on_the_whole_library():
    from attnknn_lib.base.provenance import imported_files

    files = {str(p.relative_to(PACKAGE)) for p in imported_files(["attnknn_lib.experiments.k_sweep"])}
    assert {"experiments/k_sweep/views.py", "experiments/k_sweep/measure.py", "report/macros.py",
            "experiments/common/shared.py", "__init__.py", "experiments/__init__.py"} <= files
    assert not any(f.startswith(("experiments/noise", "experiments/main/", "workflow/")) for f in files)
    cell = "from attnknn_lib.report.tables import written_frame"
    assert "report/tables.py" in {str(p.relative_to(PACKAGE)) for p in imported_files([], [cell])}


def test_the_notebook_pdf_and_paper_jobs_start_without_torch_or_the_report():
    """Each job is a process of its own: importing torch and every experiment's views (3.6 s here) in
    the process that only starts a kernel, nbconvert or latexmk cost the smoke workflow a minute."""
    probe = ("import sys, attnknn_lib.workflow.jobs; "
             "print(sorted(m for m in ('torch', 'papermill', 'sklearn', 'attnknn_lib.report.compose') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]", out.stdout  # papermill: imported by the notebook job when it runs


def test_a_job_that_writes_one_file_more_or_less_than_declared_fails(tmp_path):
    from attnknn_lib.base.errors import AttnKNNError
    from attnknn_lib.workflow.jobs import check_outputs

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "a.json").write_text("{}")
    check_outputs(tmp_path, ["results/a.json"], "job", "toy")
    with pytest.raises(AttnKNNError, match="did not write results/b.json"):
        check_outputs(tmp_path, ["results/a.json", "results/b.json"], "job", "toy")
    (tmp_path / "results" / "c.tex").write_text("")
    with pytest.raises(AttnKNNError, match="wrote results/c.tex, which it does not declare"):
        check_outputs(tmp_path, ["results/a.json"], "job", "toy")


@pytest.mark.slow
def test_a_new_experiment_is_one_package_and_one_notebook(tmp_path):
    """A copy of the repository plus tests/fixtures/toy_experiment (a package and a notebook), no other
    edit: the catalog, the profiles, the plan, the workflow, the report, the README's table of
    experiments and the import contracts all take it in."""
    copy = tmp_path / "repo"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.split("\n")
    for rel in filter(None, listed):
        if (REPO / rel).is_file() and not rel.startswith(("results/", "figures/", "paper/main.pdf")):
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, copy / rel)
    toy = REPO / "tests" / "fixtures" / "toy_experiment"
    shutil.copytree(toy / "toy", copy / "attnknn_lib" / "experiments" / "toy")
    shutil.copy2(toy / "10_toy.ipynb", copy / "notebooks" / "10_toy.ipynb")
    env = {**os.environ, "PYTHONPATH": str(copy), "ATTNKNN_ARTIFACTS": str(tmp_path / "artifacts")}

    def py(*args: str) -> str:
        proc = subprocess.run([sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return proc.stdout

    # one Python start for the catalog, the README's table and the notebooks' parameters cells
    listing = py("-c", "from attnknn_lib.experiments.framework import catalog; from attnknn_lib.report.compose import "
                       "experiments_table as t; print(list(catalog.experiments())); "
                       "print(t(catalog.experiments().values())); from attnknn_lib.workflow import jobs; "
                       "jobs.main(['parameters'])")
    assert "'toy']" in listing and "| `10_toy` | does a new experiment" in listing
    assert "10_toy.ipynb" in listing  # its parameters cell, written from its Config
    out = tmp_path / "out"
    py("-m", "attnknn_lib.workflow.cli", "--profile", "smoke", "--only", "toy", "--no-pdf", "--no-paper",
       "--out", str(out), "-p", "values=1,2,3,4")
    record = read_json(out / "results" / "toy_iris.json")
    assert record["results"]["mean"] == 2.5  # its own parameter, given on the command line
    for rel in ("results/tables/toy_iris.tex", "figures/toy_iris.pdf", "figures/toy_iris.png",
                "results/notebooks/10_toy.ipynb"):
        assert (out / rel).exists(), rel
    # the report takes its macros in (macros.tex then keeps those the paper uses, and it uses none of the toy's)
    macros = py("-c", "from attnknn_lib.experiments.framework import catalog; from attnknn_lib.report.compose import "
                      "compose; from attnknn_lib.report.records import read_records; "
                      f"print(compose(read_records(['{out / 'results' / 'toy_iris.json'}']), "
                      "catalog.experiments().values()).macros['ToyIrisMean'])")
    assert macros.strip() == "2.50"
    lint = subprocess.run([str(BIN / "lint-imports"), "--no-cache"], cwd=copy, env=env, capture_output=True, text=True)
    assert lint.returncode == 0 and "0 broken" in lint.stdout, lint.stdout[-2000:]


def test_readme_table_of_experiments_is_generated_from_the_declarations():
    from attnknn_lib.experiments.framework import catalog
    from attnknn_lib.report.compose import experiments_table
    from attnknn_lib.report.readme import EXPERIMENTS_END, EXPERIMENTS_START
    from attnknn_lib.report.records import read_records

    text = (REPO / "README.md").read_text()
    block = text.split(EXPERIMENTS_START, 1)[1].split(EXPERIMENTS_END, 1)[0].strip()
    records = read_records([f for f in sorted((REPO / "results").glob("*.json"))
                            if any(f.name.startswith(f"{n}_") for n in catalog.names())])
    assert block == experiments_table(catalog.experiments().values(), records), "stale: ./run_all.sh rewrites it"


def test_no_library_module_is_longer_than_a_reader_can_hold():
    """A module past about 500 lines holds two concepts: split it where a reader would look."""
    long = {str(p.relative_to(REPO)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 500}
    assert not long, long

"""The library's architecture is checked, not just described: layers, cycles, lint, layout docs."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import attnknn_lib
from attnknn_lib.base.files import read_json, write_json
from attnknn_lib.report.readme import LAYOUT_END, LAYOUT_START, layout_markdown

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


def test_ruff_finds_nothing():
    proc = subprocess.run([str(BIN / "ruff"), "check", "attnknn_lib", "tests"], cwd=REPO, capture_output=True,
                          text=True)
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
    assert {n: p for n, p in names.items() if len(p) > 1 and n not in ("measure", "views")} == {}


def test_readme_layout_is_generated_from_the_docstrings():
    text = (REPO / "README.md").read_text()
    block = text.split(LAYOUT_START, 1)[1].split(LAYOUT_END, 1)[0].strip()
    assert block == layout_markdown(), "README layout is stale: run python -m attnknn_lib.report.readme"


def test_results_json_is_strict_json_with_null_for_non_finite_numbers(tmp_path):
    path = write_json(tmp_path / "r.json", {"a": float("nan"), "b": [np.float64("inf"), 1.5], "c": np.array([np.nan])})
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))  # a strict parser reads it
    assert read_json(path) == {"a": None, "b": [None, 1.5], "c": [None]}


def test_every_experiment_has_the_whole_interface():
    from attnknn_lib.experiments import REGISTRY

    for name, mod in REGISTRY.items():
        for attr in ("NAME", "NOTEBOOK", "Config", "runs", "outputs", "macros",
                     "README_SECTION", "readme_lines"):
            assert hasattr(mod, attr), f"experiment {name} has no {attr}"

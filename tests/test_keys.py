"""The keys that tie a record, a part and a model to the code and packages that computed them: taken
before the work, refused when the code changed during it, equal on every Python, blind to wording."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attnknn_lib.base import provenance
from attnknn_lib.base.errors import SourcesChangedError
from attnknn_lib.base.paths import Paths
from attnknn_lib.experiments.framework import catalog

REPO = provenance.PACKAGE_DIR.parent

GOLDEN_SOURCE = '''"""A module docstring."""

import numpy as np  # a comment


def vote(w, y, num_classes: int = 10):
    """A docstring."""
    scores = np.zeros(num_classes)
    np.add.at(scores, y, w)
    return scores / scores.sum(), f"{num_classes} classes"


class Config:
    k: int = knob(16, "neighbours; a reason")
'''


def _key_of(text: str, tmp_path: Path, name: str = "m.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return provenance.file_digests([path])[str(path.resolve())]


def test_a_files_key_is_a_fixed_literal(tmp_path):
    """Golden: the normalisation (tokens, docstrings and knob help dropped, strings by value) is part
    of every stored key; changing it re-keys every record, so it changes only on purpose."""
    assert _key_of(GOLDEN_SOURCE, tmp_path) == "ee99207fcbf335cbebed9ae12feb30089aafd3ee03e3c77acf7e51a199a1ab6d"


def test_wording_layout_and_quotes_never_change_a_key_but_code_does(tmp_path):
    base = _key_of(GOLDEN_SOURCE, tmp_path)
    reworded = (GOLDEN_SOURCE.replace("A docstring.", "Another docstring, longer.")
                .replace("# a comment", "# another comment").replace('"neighbours; a reason"', "'neighbours searched'")
                .replace("    scores = np.zeros(num_classes)\n", "    scores = np.zeros(\n        num_classes\n    )\n\n"))
    assert _key_of(reworded, tmp_path, "reworded.py") == base
    assert _key_of(GOLDEN_SOURCE.replace("knob(16", "knob(32"), tmp_path, "default.py") != base
    assert _key_of(GOLDEN_SOURCE.replace('f"{num_classes} classes"', 'f"{num_classes} labels"'), tmp_path,
                   "caption.py") != base  # a string that is not presentation still counts


def test_a_knobs_help_text_re_renders_and_never_re_measures(tmp_path, monkeypatch):
    config = provenance.PACKAGE_DIR / "experiments" / "noise" / "config.py"
    text = config.read_text()
    assert 'knob(' in text
    edited = tmp_path / "config.py"
    start = text.index('knob(') + len('knob(')
    comma = text.index(', "', start)  # the help text of the first knob
    edited.write_text(text[:comma] + ', "help text written differently' + text[comma + 3:])
    assert edited.read_text() != text
    assert provenance.normalised_source(edited) == provenance.normalised_source(config)


@pytest.mark.slow
def test_every_experiments_key_is_the_same_on_every_python_on_this_machine():
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    pythons = sorted(glob.glob(str(root / "versions" / "3.1[0-3].*" / "bin" / "python")))
    if len({Path(p).parts[-3].rsplit(".", 1)[0] for p in pythons}) < 2:
        pytest.skip("fewer than two Python minor versions under pyenv")
    code = ("import json, sys; sys.path.insert(0, '.'); from attnknn_lib.base import provenance as p; "
            "from attnknn_lib.experiments.framework import catalog; "
            "print(json.dumps({n: p.measure_code(n) for n in catalog.names()}))")
    here = {n: provenance.measure_code(n) for n in catalog.names()}
    for python in pythons:
        out = subprocess.run([python, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
        if "ModuleNotFoundError" in out.stderr:  # catalog imports torch: compare the keys it can compute
            code_min = code.replace("from attnknn_lib.experiments.framework import catalog; ", "").replace(
                "catalog.names()", repr(sorted(here)))
            out = subprocess.run([python, "-c", code_min], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr[-2000:]
        assert json.loads(out.stdout) == here, python


def test_a_pin_change_of_a_computing_package_changes_every_key(tmp_path, monkeypatch):
    before = {n: provenance.measure_code(n) for n in ("main", "noise")}
    pyproject = tmp_path / "pyproject.toml"
    text = provenance.PYPROJECT.read_text()
    pin = f'"numpy=={provenance.pinned_versions()["numpy"]}"'
    assert pin in text
    pyproject.write_text(text.replace(pin, '"numpy==0.0.1"'))
    monkeypatch.setattr(provenance, "PYPROJECT", pyproject)
    monkeypatch.setattr(provenance.pinned_versions, "__defaults__", (pyproject,))
    assert provenance.pinned_versions()["numpy"] == "0.0.1"
    after = {n: provenance.measure_code(n) for n in ("main", "noise")}
    assert all(after[n] != before[n] for n in before)
    # a package that only draws is not in the key
    assert "matplotlib" not in provenance.COMPUTING


def test_status_names_a_record_measured_under_other_installed_versions():
    installed = provenance.installed_version("numpy")
    assert provenance.version_differences({"numpy": installed}) == []
    assert provenance.version_differences({"numpy": "0.0.1"}) == [f"numpy 0.0.1 (installed: {installed})"]


# ----------------------------------------------------------------------------- keys bound at the start


@pytest.fixture
def bound_file(tmp_path, monkeypatch):
    """A stand-in measurement file of a stand-in experiment ``keys_probe``."""
    source = tmp_path / "probe_measure.py"
    source.write_text("def measure():\n    return 1\n")
    real = provenance.measurement_files
    monkeypatch.setattr(provenance, "measurement_files",
                        lambda name: [source] if name == "keys_probe" else real(name))
    monkeypatch.delitem(provenance._BOUND, "keys_probe", raising=False)
    yield source
    provenance._BOUND.pop("keys_probe", None)


def test_a_source_edit_during_a_part_job_makes_it_refuse_to_stamp(bound_file, tmp_path):
    from attnknn_lib.experiments.framework import parts

    class Cfg:
        def to_dict(self):
            return {"k": 1}

    paths = Paths(tmp_path / "out")
    provenance.bind_measure_key("keys_probe")  # the job starts: its key is taken

    def compute():  # meanwhile a measurement file is edited (or a branch checked out)
        bound_file.write_text("def measure():\n    return 2\n")
        return {"value": 1}

    with pytest.raises(SourcesChangedError, match="probe_measure.py"):
        parts.part_result(paths, Cfg(), "keys_probe", "seed0", compute)
    assert not parts.part_file(paths, Cfg(), "keys_probe", "seed0").exists()


def test_a_source_edit_during_a_measure_job_makes_it_refuse_to_write_the_record(bound_file, tmp_path):
    from attnknn_lib.base.provenance import Provenance
    from attnknn_lib.experiments.common.shared import write_record
    from attnknn_lib.experiments.framework.declaration import Artifacts, record

    class Cfg:
        profile = "smoke"

        def to_dict(self):
            return {"profile": "smoke"}

    artifacts = Artifacts("keys_probe", (record(),))
    paths = Paths(tmp_path / "out")
    key = provenance.bind_measure_key("keys_probe").key
    prov = Provenance(Cfg().to_dict())
    _, written = write_record(paths, artifacts, "toy", Cfg(), prov, {}, {"n": 1})  # unchanged: stamped
    assert written["provenance"]["measure_code"] == key
    artifacts.record_path(paths, "toy").unlink()
    bound_file.write_text("def measure():\n    return 2\n")
    with pytest.raises(SourcesChangedError, match="changed while it ran"):
        write_record(paths, artifacts, "toy", Cfg(), prov, {}, {"n": 1})
    assert not artifacts.record_path(paths, "toy").exists()


def test_a_model_trained_by_code_edited_during_training_is_not_stored(tmp_path, monkeypatch):
    from attnknn_lib.training import cache

    source = tmp_path / "loops.py"
    source.write_text("STEPS = 1\n")
    key = provenance.BoundKey.take("the training code", lambda: [source])
    monkeypatch.setattr(cache, "training_key", lambda: key)
    source.write_text("STEPS = 2\n")
    with pytest.raises(SourcesChangedError, match="loops.py"):
        cache.save(None, None, None, tmp_path / "artifacts")  # refused before anything is read or written
    assert not (tmp_path / "artifacts").exists()


# ----------------------------------------------------------------------------- the boundary


def test_measurement_code_that_reaches_rendering_code_is_an_error_not_a_skip():
    for name in catalog.names():  # today's code: no measurement file reaches a rendering one
        files = provenance.measurement_files(name)
        assert not [f for f in files if provenance.rendering_file(f)], name
    with pytest.raises(provenance.BoundaryError, match="imports knn/votes.py"):
        provenance.imported_files(["attnknn_lib.experiments.noise.measure"], refuse=lambda p: p.name == "votes.py"
                                  and p.parent.name == "knn")


def test_the_wiring_of_a_measurement_is_keyed_with_it():
    """What the measure job runs (runs, run, parts, timed) is declared in the measure module."""
    for name in catalog.names():
        exp = catalog.get(name)
        module = sys.modules[exp.measurement.run.__module__]
        assert getattr(module, "MEASUREMENT", None) is exp.measurement or \
            exp.measurement.run.__module__.startswith(f"attnknn_lib.experiments.{name}.measure"), name
        files = {str(f.relative_to(provenance.PACKAGE_DIR)) for f in provenance.measurement_files(name)}
        assert f"experiments/{name}/__init__.py" not in files


def test_a_heads_label_lives_in_the_views_so_renaming_it_measures_nothing():
    from attnknn_lib.experiments.common.fixed_embedding import HEADS
    from attnknn_lib.report.findings import HEAD_NAMES, head_names
    from attnknn_lib.workflow.plan import render_files

    for name in ("positive_control", "headroom_regimes"):
        measured = {str(f.relative_to(provenance.PACKAGE_DIR)) for f in provenance.measurement_files(name)}
        drawn = {str(f.relative_to(provenance.PACKAGE_DIR)) for f in render_files(catalog.get(name))}
        assert "report/findings.py" not in measured and "report/findings.py" in drawn
    assert set(HEADS) <= set(HEAD_NAMES)  # every head has its reader's name there, and only there
    assert head_names(["readout", "attnknn"]) == {"readout": HEAD_NAMES["readout"], "attnknn": HEAD_NAMES["attnknn"]}
    # a record measured when labels were stored ({name: label}) is drawn with the views' names
    assert head_names({"attnknn": "Attn-KNN"}) == {"attnknn": HEAD_NAMES["attnknn"]}


def test_a_record_takes_a_new_key_without_measuring_only_if_it_was_current_before():
    from attnknn_lib.base.errors import AttnKNNError
    from attnknn_lib.tooling.rekey import rekeyed

    record = {"experiment": "theory", "dataset": "fashion_mnist", "config": {}, "results": {"x": 1.0},
              "provenance": {"measure_code": "old"}}
    out = rekeyed(record, "old", "new", "abc", "the key changed form")
    assert out["provenance"]["measure_code"] == "new" and out["results"] == record["results"]
    assert out["provenance"]["rekeyed"] == {"from_key": "old", "from_commit": "abc", "reason": "the key changed form"}
    with pytest.raises(AttnKNNError, match="was not current"):
        rekeyed(record, "another", "new", "abc", "the key changed form")
    assert rekeyed(out, "new", "new", "def", "nothing changed") is out  # same key: its notes stay as they are
    # a record current under today's code is left as it is, whatever the earlier commit's key was
    assert rekeyed(out, "another", "new", "def", "another experiment's key changed") is out
    again = rekeyed(out, "new", "newer", "def", "a refactor")["provenance"]["rekeyed"]
    assert [n["from_commit"] for n in again] == ["abc", "def"]  # every re-keying kept, oldest first


def test_a_docstring_under_an_assignment_is_wording_too(tmp_path):
    code = "LIMIT = 3\n"
    documented = 'LIMIT = 3\n"""Why three: the text a reader sees."""\n'
    assert _key_of(code, tmp_path, "a.py") == _key_of(documented, tmp_path, "b.py")
    assert _key_of(code, tmp_path, "a.py") != _key_of("LIMIT = 4\n", tmp_path, "c.py")

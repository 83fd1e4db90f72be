"""A notebook opened to read: it shows the committed record and writes nothing; recomputing is one
explicit switch (or the workflow's job), and a parameter that changes the measurement says so."""

from __future__ import annotations

import json

import pytest

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.base.paths import REPO_ROOT
from attnknn_lib.experiments.framework import catalog, reading


def _never(*_):
    pytest.fail("a reading notebook measures and writes nothing")


def test_by_default_a_notebook_reads_the_committed_record_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv(reading.OUT_ENV, raising=False)
    exp = catalog.get("theory")
    nb = reading.session(exp, exp.Config(), tmp_path, recompute=False)
    assert nb.paths.root.resolve() == REPO_ROOT.resolve() and not nb.recompute
    committed = json.loads((REPO_ROOT / exp.artifacts.record_file("fashion_mnist")).read_text())
    assert nb.run(_never) == committed
    assert not any(tmp_path.iterdir())


def test_a_changed_measurement_parameter_names_itself_and_how_to_recompute(tmp_path, monkeypatch):
    monkeypatch.delenv(reading.OUT_ENV, raising=False)
    exp = catalog.get("theory")
    nb = reading.session(exp, exp.Config(k_values="1,5"), tmp_path, recompute=False)
    with pytest.raises(ConfigError, match=r"k_values=\[1, 5\] \(committed .*recompute = True.*--only theory"):
        nb.run(_never)


def test_a_record_from_older_defaults_is_shown_with_a_note_and_a_parameter_set_in_the_notebook_still_stops(
        tmp_path, monkeypatch, capsys):
    """Defaults that changed since the committed run (the user set nothing) leave the committed record
    readable, with one note naming the old values and the command that updates it."""
    monkeypatch.delenv(reading.OUT_ENV, raising=False)
    exp = catalog.get("theory")
    record = json.loads((REPO_ROOT / exp.artifacts.record_file("fashion_mnist")).read_text())
    record["config"]["truncation_queries"] = 7  # as if the default had been 7 when it ran
    monkeypatch.setattr(reading, "read_json", lambda _path: record)
    nb = reading.session(exp, exp.Config(), tmp_path, recompute=False)
    assert nb.run(_never) is record
    note = capsys.readouterr().err
    assert "truncation_queries=7 (default now" in note and "--only theory" in note
    nb = reading.session(exp, exp.Config(truncation_queries=9), tmp_path, recompute=False)
    with pytest.raises(ConfigError, match=r"truncation_queries=9 \(committed 7\)"):
        nb.run(_never)


def test_recompute_writes_under_out_dir_and_the_workflow_renders(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(reading.OUT_ENV, raising=False)
    exp = catalog.get("theory")
    nb = reading.session(exp, exp.Config(), tmp_path / "scratch", recompute=True)
    assert nb.recompute and nb.paths.root.resolve() == (tmp_path / "scratch").resolve()
    assert "recomputing theory" in capsys.readouterr().err  # it says what it will run before it starts
    assert nb.record(lambda paths: {"written under": str(paths.root)}) == {"written under": str(nb.paths.root)}
    monkeypatch.setenv(reading.OUT_ENV, str(tmp_path / "staging"))
    job = reading.session(exp, exp.Config(), "..", recompute=True)
    # the workflow's notebook job renders: it reads the record in its staging folder, never measures
    assert job.render and not job.recompute and job.paths.root.resolve() == (tmp_path / "staging").resolve()
    record = REPO_ROOT / exp.artifacts.record_file("fashion_mnist")
    (tmp_path / "staging" / "results").mkdir(parents=True)
    (tmp_path / "staging" / record.relative_to(REPO_ROOT)).write_bytes(record.read_bytes())
    drawn = []
    got = job.record(lambda paths: pytest.fail("a rendering notebook measured"), "fashion_mnist",
                     write=lambda rec, paths: drawn.append(paths.root))
    assert got["experiment"] == "theory" and drawn == [job.paths.root]


def test_the_estimate_reads_the_committed_run_and_counts_the_models_to_train_first():
    text = reading.estimate(catalog.get("theory"))
    assert "min of analysis at the committed run" in text
    if "to train" in text:  # an empty model cache (a fresh clone): the training comes first, by its kind
        assert text.startswith("6 models to train, about ") and ", then " in text


def test_the_measurement_key_ignores_views_comments_and_docstrings(tmp_path, monkeypatch):
    """A record's key covers the normalised source of the code that measures it, nothing else."""
    from attnknn_lib.base import provenance

    files = provenance.measurement_files("theory")
    names = [str(f.relative_to(provenance.PACKAGE_DIR)) for f in files]
    assert "experiments/theory/measure.py" in names and "knn/votes.py" in names
    assert not [n for n in names if "views" in n or n.startswith("report/")], names
    measure = provenance.PACKAGE_DIR / "experiments" / "theory" / "measure.py"
    source = measure.read_text()
    edited = tmp_path / "measure.py"
    edited.write_text('"""Another docstring."""\n# a comment\n' + source.split('"""', 2)[2].replace("\n\n", "\n\n\n"))
    assert provenance.normalised_source(edited) == provenance.normalised_source(measure)
    edited.write_text(source.replace("def ", "def _renamed_", 1))  # code that computes differently
    assert provenance.normalised_source(edited) != provenance.normalised_source(measure)

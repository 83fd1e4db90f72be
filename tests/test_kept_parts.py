"""Parts kept in the repository (``./run_all.sh keep``): a fresh clone resumes a measurement from them,
and only from those computed under today's config and code."""

from __future__ import annotations

import pickle
from pathlib import Path

from attnknn_lib.experiments.framework import catalog
from attnknn_lib.experiments.framework.parts import part_key
from attnknn_lib.workflow import kept_parts
from attnknn_lib.workflow.kept_parts import PartSet


def _write(path: Path, key: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps({"key": key, "part": path.stem, "result": {"x": 1}, "seconds": 1.0}))


def test_only_parts_under_todays_key_are_copied_and_nothing_is_overwritten(tmp_path):
    ps = PartSet("exp", "parts/exp/abc", "code1", ("a", "b", "c", "d"))
    kept, artifacts = tmp_path / "kept", tmp_path / "artifacts"
    _write(kept / ps.folder / "a.pkl", {"config": "abc", "code": "code1"})  # today's: copied
    _write(kept / ps.folder / "b.pkl", {"config": "abc", "code": "old"})  # other code: left
    (kept / ps.folder / "c.pkl").write_bytes(b"not a pickle")  # unreadable: left
    _write(kept / ps.folder / "d.pkl", {"config": "abc", "code": "code1"})
    _write(artifacts / ps.folder / "d.pkl", {"config": "abc", "code": "other"})  # already there: kept as it is
    assert kept_parts._copy([ps], kept, artifacts) == ["exp/a"]
    assert sorted(p.name for p in (artifacts / ps.folder).iterdir()) == ["a.pkl", "d.pkl"]
    assert kept_parts.key_of(artifacts / ps.folder / "d.pkl") == {"config": "abc", "code": "other"}
    assert (artifacts / ps.folder / "a.pkl").read_bytes() == (kept / ps.folder / "a.pkl").read_bytes()
    assert kept_parts._copy([ps], kept, artifacts) == []  # a second call copies nothing


def test_the_key_kept_parts_need_is_the_key_part_jobs_stamp():
    exp = catalog.get("confirmatory")
    cfg = exp.Config()
    (ps,) = kept_parts.part_sets({"confirmatory": cfg.to_dict()})
    assert ps.key == part_key(cfg, "confirmatory")
    assert ps.parts == tuple(exp.parts(cfg)) and ps.folder.startswith("parts/confirmatory/")


def test_keep_then_restore_round_trips_through_the_results_folder(tmp_path):
    exp = catalog.get("confirmatory")
    params = exp.Config().to_dict()
    (ps,) = kept_parts.part_sets({"confirmatory": params})
    stored, kept, fresh = tmp_path / "artifacts", tmp_path / "repo" / "results", tmp_path / "clone_artifacts"
    _write(stored / ps.folder / f"{ps.parts[0]}.pkl", ps.key)
    assert kept_parts.keep({"confirmatory": params}, stored, kept) == [f"confirmatory/{ps.parts[0]}"]
    assert kept_parts.restore({"confirmatory": params}, fresh, kept) == [f"confirmatory/{ps.parts[0]}"]
    line, = kept_parts.summary({"confirmatory": params}, fresh, kept)
    assert line.startswith(f"confirmatory: 1 of {len(ps.parts)} parts kept") and line.endswith("1 stored in the artifacts folder")


def test_keep_without_only_counts_the_experiments_awaiting_a_first_run_too(tmp_path, monkeypatch, capsys):
    from attnknn_lib.workflow import cli

    monkeypatch.setenv("ATTNKNN_ARTIFACTS", str(tmp_path / "artifacts"))  # nothing stored: nothing copied
    assert cli.main(["keep"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("kept 0 part(s): none new") and "\nconfirmatory: " in out and "\nheadroom_regimes: " in out

"""Result records (``results/<experiment>_<dataset>.json``) read back for reports, one profile at a time."""

from __future__ import annotations

from pathlib import Path

from attnknn_lib.base.errors import AttnKNNError, CorruptFileError
from attnknn_lib.base.files import read_json

RECORD_KEYS = {"experiment", "dataset", "profile", "config", "provenance", "results"}


def read_records(files: list[str | Path]) -> list[dict]:
    """The result records of ``files``; they must all come from one profile (never mix runs)."""
    records = [read_json(f) for f in files]
    for f, r in zip(files, records):
        if not isinstance(r, dict) or not RECORD_KEYS <= set(r):
            raise CorruptFileError(f"{f} is not a result record (needs the keys {', '.join(sorted(RECORD_KEYS))}); "
                                   "delete it and rerun ./run_all.sh to regenerate it")
    profiles = sorted({r["profile"] for r in records})
    if len(profiles) > 1:
        raise AttnKNNError(f"result files of different profiles ({', '.join(profiles)}) cannot share one report; "
                           "rerun them under one profile")
    return records

"""Where outputs go: everything under one root (the repository, or ``--out DIR``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # attnknn_lib/base/paths.py -> the repository


@dataclass(frozen=True)
class Paths:
    root: Path

    @classmethod
    def at(cls, out_dir: str | Path | None = None) -> Paths:
        """``$ATTNKNN_OUT_DIR`` (the workflow's staging folder of a notebook job), else ``out_dir``
        (relative paths are taken from the current directory), else the repository."""
        out_dir = os.environ.get("ATTNKNN_OUT_DIR") or out_dir
        return cls(Path(out_dir).resolve() if out_dir else REPO_ROOT)

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def tables(self) -> Path:
        return self.root / "results" / "tables"

    @property
    def notebooks(self) -> Path:
        return self.root / "results" / "notebooks"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    @property
    def artifacts(self) -> Path:
        """Heavy, regenerable files (checkpoints, embeddings, probabilities); ``$ATTNKNN_ARTIFACTS`` wins."""
        env = os.environ.get("ATTNKNN_ARTIFACTS")
        return Path(env) if env else self.root / "artifacts"

    @property
    def paper(self) -> Path:
        return self.root / "paper"

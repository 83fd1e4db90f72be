"""Atomic writes: a file appears under its final name complete or not at all."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from attnknn_lib.base.errors import CorruptFileError


def current_umask() -> int:
    """This process's umask, read without changing it where Linux shows it (``/proc/self/status``):
    setting and restoring it, the only other way, would race with a thread creating a file."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: str | Path, write) -> Path:
    """Call ``write(f)`` on a temporary file beside ``path`` (binary), then rename it into place; on
    any failure the temporary file is removed and ``path`` is untouched. The one atomic writer. The
    file gets the mode a plain write of a new file would give, 0o666 less the umask (0o644 under
    umask 022), not mkstemp's private 0o600, which would hide the outputs from the group and other
    users (a shared cluster folder, a second account) and keep them hidden at every rewrite."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o666 & ~current_umask())
            write(f)
        os.replace(tmp, path)  # atomic on POSIX within one file system
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"cannot write {type(o).__name__} to JSON")


def strict(obj: Any) -> Any:
    """``obj`` with every non-finite float (NaN, inf) as None, so the file is strict JSON (``null``)
    that jq, browsers and every JSON parser read; numpy scalars and arrays become Python values."""
    if isinstance(obj, dict):
        return {k: strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return strict(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def write_json(path: str | Path, obj: Any) -> Path:
    """``obj`` as indented strict JSON (see :func:`strict`), written atomically."""
    text = json.dumps(strict(obj), indent=2, default=_default, allow_nan=False) + "\n"
    return atomic_write(Path(path), lambda f: f.write(text.encode()))


def read_json(path: str | Path) -> Any:
    """The JSON in ``path``; a file that does not parse raises :class:`CorruptFileError` in one line."""

    text = Path(path).read_text(errors="replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise CorruptFileError(f"{path} is not valid JSON ({err.msg} at line {err.lineno}); it is truncated or was "
                               "edited: delete it and rerun ./run_all.sh to regenerate it") from None


def write_text(path: str | Path, text: str) -> Path:
    return atomic_write(Path(path), lambda f: f.write(text.encode()))


def write_npz(path: str | Path, compress: bool = True, **arrays: np.ndarray) -> Path:
    """``.npz`` of ``arrays`` (uncompressed with ``compress=False``: float embeddings barely
    compress, and writing them plain is several times faster)."""
    save = np.savez_compressed if compress else np.savez
    return atomic_write(Path(path), lambda f: save(f, **arrays))

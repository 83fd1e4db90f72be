"""Where a result came from: commit, code fingerprint, packages, data, device, times."""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import platform
import subprocess
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # attnknn_lib/
PACKAGES = ("torch", "torchvision", "faiss-cpu", "numpy", "scipy", "scikit-learn", "pandas", "matplotlib")


# what decides a result; generated outputs (results/, figures/, paper PDF, README block) are not inputs
SOURCE_PATHS = ("attnknn_lib", "configs", "notebooks", "pyproject.toml", "run_all.sh")


def git_commit(repo: Path = PACKAGE_DIR.parent) -> dict:
    """HEAD commit and whether the sources that decide results differ from it ("unknown" outside git)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", *SOURCE_PATHS],
                               cwd=repo, capture_output=True, text=True, timeout=10)
        if head.returncode == 0:
            return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        pass
    return {"commit": "unknown", "dirty": None}


def code_fingerprint(files: Iterable[Path] | None = None) -> str:
    """SHA-256 (16 hex) over source files (their names relative to the library and their bytes;
    default: every file of the library): changes whenever one of them does."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*.py") if files is None else files):
        h.update(str(path.relative_to(PACKAGE_DIR)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _module_file(dotted: str) -> Path | None:
    """The library file of a dotted module name (``attnknn_lib.a.b``), or None if it is not one."""
    parts = dotted.split(".")
    if parts[0] != PACKAGE_DIR.name:
        return None
    base = PACKAGE_DIR.joinpath(*parts[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(source: str) -> set[str]:
    """The dotted names a source imports (``from m import n`` gives m and m.n: n may be a module)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def imported_files(modules: Iterable[str] = (), sources: Iterable[str] = (),
                   skip: Callable[[Path], bool] | None = None) -> list[Path]:
    """The library files that ``modules`` (dotted names) and the code ``sources`` import, directly
    or through each other, with the packages' ``__init__`` files they run: a static read of the
    import statements (what decides the code a notebook runs). A file for which ``skip`` is true is
    neither listed nor followed."""
    todo = [name for src in sources for name in _imports(src)] + list(modules)
    seen: set[Path] = set()
    skipped: set[Path] = set()
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
            path = _module_file(".".join(parts[:i]))
            if path is None or path in seen or path in skipped:
                continue
            if skip is not None and skip(path):
                skipped.add(path)
                continue
            seen.add(path)
            todo += list(_file_imports(path, path.stat().st_mtime_ns))
    return sorted(seen)


@functools.cache
def _file_imports(path: Path, mtime_ns: int) -> frozenset[str]:
    """:func:`_imports` of one library file, parsed once per process (the plan asks for every
    experiment's files, mostly the same ones); the modification time keys out an edited file."""
    return frozenset(_imports(path.read_text()))


def config_fingerprint(config: dict) -> str:
    """SHA-256 (16 hex) of a JSON-serialisable config (keys sorted)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def bf16_kernels() -> str:
    """The family of native bf16 kernels this CPU gives oneDNN, which decides the last digits of a
    bf16 training step: 'AMX' (Intel Sapphire Rapids and later), 'AVX512-BF16' (e.g. AMD Zen 4), or
    'none' (no native bf16: training runs in fp32). Two CPUs of one family give the same bits for the
    same code, config and seed; across families, results agree at the seed level, not bit for bit."""
    try:
        flags = next((ln.split(":", 1)[1].split() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                      if ln.startswith("flags")), [])
    except OSError:
        flags = []
    if "amx_bf16" in flags:
        return "AMX"
    return "AVX512-BF16" if "avx512_bf16" in flags else "none"


def machine() -> dict:
    """What can make two runs of the same code, config and seed differ in the last digits: the
    instruction set the kernels dispatch to (torch and FAISS pick AVX2/AVX-512 at run time), the
    BLAS, the thread counts (they change the order of float sums), deterministic-kernel mode and,
    on a GPU, the device and the CUDA/cuDNN versions."""
    import torch

    info = {"cpu_model": cpu_model(), "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "bf16_kernels": bf16_kernels(),
            "torch_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads(),
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "blas": next((ln.strip() for ln in torch.__config__.parallel_info().splitlines()
                          if "Math Kernel" in ln or "OpenBLAS" in ln), "unknown"),
            "thread_env": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS") if k in os.environ}}
    try:
        import faiss

        info["faiss_simd"] = faiss.get_compile_options().strip()
        info["faiss_threads"] = faiss.omp_get_max_threads()
    except (ImportError, AttributeError):
        pass
    if torch.cuda.is_available():
        idx = torch.cuda.current_device()
        info["cuda"] = {"device": torch.cuda.get_device_name(idx),
                        "capability": ".".join(map(str, torch.cuda.get_device_capability(idx))),
                        "cuda_version": torch.version.cuda, "cudnn_version": torch.backends.cudnn.version(),
                        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32}
    return info


class Provenance:
    """Start a clock at construction; :meth:`record` returns the provenance block of a result."""

    def __init__(self, config: dict, device: str = "cpu"):
        self.config = config
        self.device = device
        self.started = datetime.now(timezone.utc)
        self._t0 = time.perf_counter()

    def record(self, data_fingerprints: dict[str, str] | None = None) -> dict:
        import torch

        return {
            **git_commit(),
            "code_fingerprint": code_fingerprint(),
            "config_fingerprint": config_fingerprint(self.config),
            "packages": versions(),
            "data_fingerprints": data_fingerprints or {},
            "device": self.device,
            "threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "machine": machine(),
            "started": self.started.isoformat(timespec="seconds"),
            "wall_seconds": round(time.perf_counter() - self._t0, 2),
        }


def normalised_source(path: Path) -> str:
    """What a Python file computes, without what only a reader sees: its syntax tree with every
    docstring removed, dumped without line numbers, so comments, docstrings and formatting never
    change it (string constants that are not docstrings, a caption for example, still do)."""
    tree = ast.parse(Path(path).read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body \
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def normalised_fingerprint(files: Iterable[Path]) -> str:
    """SHA-256 (16 hex) over files' names relative to the library and their :func:`normalised_source`."""
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(str(Path(path).relative_to(PACKAGE_DIR)).encode())
        h.update(normalised_source(path).encode())
    return h.hexdigest()[:16]


def rendering_file(path: Path) -> bool:
    """Whether a library file only presents results (never measures them): the ``report`` layer,
    an experiment's ``views`` (module or package) and an experiment package's ``__init__``, which
    declares the experiment and wires its views in."""
    rel = Path(path).resolve().relative_to(PACKAGE_DIR).parts
    return (rel[0] == "report" or "views" in rel or "views.py" in rel
            or (len(rel) == 3 and rel[0] == "experiments" and rel[2] == "__init__.py"))


def measurement_files(name: str) -> list[Path]:
    """The library files that decide experiment ``name``'s record: what its ``measure`` and
    ``config`` modules import, directly or not, leaving out (and not following) the files that only
    present results (:func:`rendering_file`)."""
    base = f"{PACKAGE_DIR.name}.experiments.{name}"
    return imported_files([f"{base}.measure", f"{base}.config"], skip=rendering_file)


def measure_code(name: str) -> str:
    """The measurement key of experiment ``name``: :func:`normalised_fingerprint` of its
    :func:`measurement_files`. Stored in each record's provenance (``measure_code``), so that
    ``./run_all.sh status`` can tell whether this checkout would measure the same record; a view, a
    caption, a comment or a docstring never changes it."""
    return normalised_fingerprint(measurement_files(name))

"""Where a result came from: commit, code fingerprint, packages, data, device, times."""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import json
import os
import platform
import re
import subprocess
import time
import tokenize
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from attnknn_lib.base.errors import AttnKNNError, SourcesChangedError

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
                   skip: Callable[[Path], bool] | None = None,
                   refuse: Callable[[Path], bool] | None = None) -> list[Path]:
    """The library files that ``modules`` (dotted names) and the code ``sources`` import, directly
    or through each other, with the packages' ``__init__`` files they run: a static read of the
    import statements (what decides the code a notebook runs). A file for which ``skip`` is true is
    neither listed nor followed; an import statement that names a file for which ``refuse`` is true
    raises :class:`BoundaryError` naming the importer (a package ``__init__`` run only because a module
    below it is imported is skipped, not refused)."""
    todo = [(name, None) for src in sources for name in _imports(src)] + [(m, None) for m in modules]
    seen: set[Path] = set()
    skipped: set[Path] = set()
    while todo:
        name, importer = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
            path = _module_file(".".join(parts[:i]))
            if path is None or path in seen:
                continue
            named = i == len(parts) or _module_file(".".join(parts[:i + 1])) is None  # what the statement names
            if refuse is not None and named and importer is not None and refuse(path):
                raise BoundaryError(f"{_relative_name(importer)} imports {_relative_name(path)}, which only "
                                    f"presents results: measurement code must not reach rendering code")
            if path in skipped or (skip is not None and skip(path)):
                skipped.add(path)
                continue
            seen.add(path)
            todo += [(n, path) for n in sorted(_file_imports(path, path.stat().st_mtime_ns))]
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


def _char_col(line: str, byte_col: int) -> int:
    """The character column of ``ast``'s UTF-8 byte offset ``byte_col`` in ``line`` (tokenize counts characters)."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def _span(node: ast.AST, lines: list[str]) -> tuple[tuple[int, int], tuple[int, int]]:
    return ((node.lineno, _char_col(lines[node.lineno - 1], node.col_offset)),
            (node.end_lineno, _char_col(lines[node.end_lineno - 1], node.end_col_offset)))


def _presentation_spans(tree: ast.AST, lines: list[str]) -> tuple[list, list]:
    """Where a file holds text only a reader sees: its docstrings (of a module, class or function, and
    those under an assignment: every statement that is only a string) and the help text of each :func:`~attnknn_lib.base.knobs.knob` (its second argument, or ``help=``). Returns
    (docstring spans, help spans) as ((row, col), (row, col)) in tokenize's coordinates."""
    docs, helps = [], []
    for node in ast.walk(tree):
        # a statement that is only a string does nothing: a docstring, or one under an assignment
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            docs.append(_span(node, lines))
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "knob":
            text = node.args[1:2] + [k.value for k in node.keywords if k.arg == "help"]
            helps += [_span(t, lines) for t in text if isinstance(t, ast.Constant) and isinstance(t.value, str)]
    return docs, helps


def _inside(start: tuple[int, int], end: tuple[int, int], spans: list) -> bool:
    return any(a <= start and end <= b for a, b in spans)


_FSTRING = tuple(getattr(tokenize, n) for n in ("FSTRING_START", "FSTRING_END") if hasattr(tokenize, n))
_STRUCTURE = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
_LAYOUT = {tokenize.COMMENT, tokenize.NL}


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    """The file's tokens, each f-string one STRING token as Python 3.10 and 3.11 give it (3.12 and later
    split it into FSTRING_START, its parts and FSTRING_END, which would make the key depend on the
    interpreter)."""
    lines = text.splitlines(keepends=True)

    def source(a: tuple[int, int], b: tuple[int, int]) -> str:
        if a[0] == b[0]:
            return lines[a[0] - 1][a[1]:b[1]]
        return lines[a[0] - 1][a[1]:] + "".join(lines[a[0]:b[0] - 1]) + lines[b[0] - 1][:b[1]]

    out: list[tokenize.TokenInfo] = []
    depth, start = 0, (0, 0)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if _FSTRING and tok.type == _FSTRING[0]:
            depth, start = depth + 1, tok.start if depth == 0 else start
        elif depth and tok.type == _FSTRING[1]:
            depth -= 1
            if depth == 0:
                out.append(tokenize.TokenInfo(tokenize.STRING, source(start, tok.end), start, tok.end, tok.line))
        elif not depth:
            out.append(tok)
    return out


def _string_value(text: str) -> str:
    """A string token by its value, so quotes and prefixes a formatter may change do not matter
    (f-strings, whose value is code, stay as written)."""
    try:
        return repr(ast.literal_eval(text))
    except (ValueError, SyntaxError):
        return text


def normalised_source(path: Path) -> str:
    """What a Python file computes, without what only a reader sees: its tokens, one per line,
    without comments, blank lines, line breaks inside brackets, indentation widths, docstrings and
    the help texts of config knobs (:func:`_presentation_spans`); strings by their value. Every
    Python from 3.10 on gives the same text for the same file (``ast.dump`` does not: its output
    changes between 3.11, 3.12 and 3.13). A string that is not presentation, a caption for example,
    still counts."""
    text = Path(path).read_text()
    lines = text.splitlines()
    docs, helps = _presentation_spans(ast.parse(text), lines)
    out: list[str] = []
    after_docstring = False
    for tok in _tokens(text):
        if tok.type in _LAYOUT:
            continue
        if tok.type == tokenize.NEWLINE and after_docstring:
            after_docstring = False
            continue
        after_docstring = False
        if tok.type == tokenize.STRING and _inside(tok.start, tok.end, docs):
            after_docstring = True
            continue
        if tok.type == tokenize.STRING and _inside(tok.start, tok.end, helps):
            out.append("HELP")  # the knob keeps its place; its wording is the views'
            continue
        out.append(tokenize.tok_name[tok.type] if tok.type in _STRUCTURE
                   else _string_value(tok.string) if tok.type == tokenize.STRING else tok.string)
    return "\n".join(out)


def _relative_name(path: Path) -> str:
    path = Path(path).resolve()
    try:
        return str(path.relative_to(PACKAGE_DIR))
    except ValueError:  # a file outside the library (a test's copy): by its full path
        return str(path)


def file_digests(files: Iterable[Path], fresh: bool = False) -> dict[str, str]:
    """{name relative to the library: SHA-256 of its :func:`normalised_source`} of each file; read
    again when ``fresh`` (a bound key's check must see an edit made within the file system's time
    resolution, which the cache keyed by time and size could miss)."""
    if fresh:
        return {_relative_name(p): hashlib.sha256(normalised_source(p).encode()).hexdigest() for p in files}
    return {_relative_name(p): _digest(Path(p), *_stat(Path(p))) for p in files}


def _stat(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=4096)
def _digest(path: Path, mtime_ns: int, size: int) -> str:
    """One file's digest, computed once per version of the file (its time and size key out an edit)."""
    return hashlib.sha256(normalised_source(path).encode()).hexdigest()


def combined_key(digests: dict[str, str], environment: dict[str, str] | None = None) -> str:
    """SHA-256 (16 hex) over files' digests (by name) and, for a measurement, the environment."""
    h = hashlib.sha256()
    for name, digest in sorted(digests.items()):
        h.update(name.encode())
        h.update(digest.encode())
    if environment:
        h.update(json.dumps(environment, sort_keys=True).encode())
    return h.hexdigest()[:16]


def normalised_fingerprint(files: Iterable[Path]) -> str:
    """SHA-256 (16 hex) over files' names relative to the library and their :func:`normalised_source`."""
    return combined_key(file_digests(files))


COMPUTING = ("torch", "torchvision", "faiss-cpu", "numpy", "scipy", "scikit-learn", "pandas")
"""The packages whose version can change a measured number (pandas parses the tabular data files):
their pinned versions enter every measurement key, as an environment file enters every rule of a
showyourwork workflow. Packages that only draw (matplotlib) or run the workflow do not."""

PYPROJECT = PACKAGE_DIR.parent / "pyproject.toml"


def pinned_versions(pyproject: Path = PYPROJECT) -> dict[str, str]:
    """{package: version} of :data:`COMPUTING` as ``pyproject.toml`` pins them (``name==version``); the
    installed version where the file or a pin is missing (an installed copy of the library)."""
    try:
        text = Path(pyproject).read_text()
    except OSError:
        text = ""
    pins = {n.lower(): v for n, v in re.findall(r'"([A-Za-z0-9_.\-]+)==([^"\s;,]+)"', text)}
    return {n: pins.get(n) or installed_version(n) for n in COMPUTING}


def installed_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def version_differences(recorded: dict[str, str]) -> list[str]:
    """The computing packages a record was measured under at another version than the installed one,
    as ``torch 2.14.1 (installed: 2.15.0)``."""
    return [f"{n} {recorded[n]} (installed: {installed_version(n)})" for n in COMPUTING
            if n in recorded and recorded[n] != installed_version(n)]


@dataclass(frozen=True)
class BoundKey:
    """A key taken from the sources before the work it stamps. :meth:`stamp` returns it only if no
    source changed since (refusing otherwise), so a result computed by one code never carries the key
    of code that was edited or checked out while it ran."""

    what: str  # "experiment noise", "training code": named in the refusal
    sources: Callable[[], Iterable[Path]]  # the files, found again when stamping (an import may change)
    environment: dict[str, str]
    digests: dict[str, str]
    key: str

    @classmethod
    def take(cls, what: str, sources: Callable[[], Iterable[Path]], environment: dict[str, str] | None = None) -> BoundKey:
        digests = file_digests(sources(), fresh=True)
        env = dict(environment or {})
        return cls(what, sources, env, digests, combined_key(digests, env))

    def changed(self) -> list[str]:
        """The files whose code differs from when the key was taken (added, removed or edited)."""
        now = file_digests(self.sources(), fresh=True)
        return sorted(n for n in set(now) | set(self.digests) if now.get(n) != self.digests.get(n))

    def stamp(self) -> str:
        """The key, after checking that the sources are those it was taken from."""
        changed = self.changed()
        if changed:
            raise SourcesChangedError(
                f"{self.what}: not written, because its code changed while it ran ({', '.join(changed)}); "
                f"its result would carry a key it was not computed by. Run it again.")
        return self.key


class BoundaryError(AttnKNNError):
    """A measurement file imports a file that only presents results."""


def rendering_file(path: Path) -> bool:
    """Whether a library file only presents results (never measures them): the ``report`` layer, an
    experiment's ``views`` (module or package, ``common/views.py`` included) and an experiment
    package's ``__init__``, which declares the experiment and wires its views in (what its
    measurement runs is declared in its ``measure``)."""
    rel = Path(path).resolve().relative_to(PACKAGE_DIR).parts
    return (rel[0] == "report" or "views" in rel or rel[-1] == "views.py"
            or (len(rel) == 3 and rel[0] == "experiments" and rel[2] == "__init__.py"
                and rel[1] not in ("common", "framework")))


def measurement_files(name: str) -> list[Path]:
    """The library files that decide experiment ``name``'s record: what its ``measure`` and
    ``config`` modules import, directly or not. Its package ``__init__`` (run on the way, it wires the
    views in) is left out; a measurement file that imports a rendering file (:func:`rendering_file`)
    raises :class:`BoundaryError` (import-linter's contract in pyproject.toml says the same)."""
    base = f"{PACKAGE_DIR.name}.experiments.{name}"
    return imported_files([f"{base}.measure", f"{base}.config"], skip=rendering_file, refuse=rendering_file)


def measure_code(name: str) -> str:
    """The measurement key of experiment ``name`` as this checkout would measure it: the
    :func:`normalised_source` of its :func:`measurement_files` and the :func:`pinned_versions` of the
    computing packages. Stored in each record's provenance (``measure_code``) as :func:`bind_measure_key`
    took it when the measurement started, so ``./run_all.sh status`` can tell whether this checkout
    would measure the same record; a view, a caption, a comment, a docstring or a knob's help text
    never changes it, and neither does the Python version."""
    return combined_key(file_digests(measurement_files(name)), pinned_versions())


_BOUND: dict[str, BoundKey] = {}


def bind_measure_key(name: str) -> BoundKey:
    """Experiment ``name``'s measurement key, taken once per process: the measure and part jobs (and
    :meth:`~attnknn_lib.experiments.framework.declaration.Experiment.run`) take it before they compute,
    and a record or part is stamped with ``bind_measure_key(name).stamp()``, which refuses when a
    measurement file changed in between."""
    if name not in _BOUND:
        _BOUND[name] = BoundKey.take(f"the measurement of {name}", lambda: measurement_files(name), pinned_versions())
    return _BOUND[name]

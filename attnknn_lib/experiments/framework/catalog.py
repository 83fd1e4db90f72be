"""Where the experiments are found: every package under ``attnknn_lib/experiments/`` but ``framework``
and ``common`` declares one ``EXPERIMENT`` (:class:`~attnknn_lib.experiments.framework.declaration.Experiment`).

Packages are discovered, not listed: :func:`names` reads the folder without importing anything,
:func:`get` imports one experiment, :func:`experiments` all of them in notebook order (the
workflow's plan and the report need every one). Nothing else names the experiments.
"""

from __future__ import annotations

import importlib
import pkgutil

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.experiments.framework.declaration import Experiment

PACKAGE = "attnknn_lib.experiments"


SUPPORT = ("framework", "common")  # the two packages beside the experiments that hold none


def names() -> tuple[str, ...]:
    """The experiment packages (sorted by name; nothing is imported): every sub-package of
    ``attnknn_lib/experiments/`` but :data:`SUPPORT`."""
    package = importlib.import_module(PACKAGE)
    return tuple(sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.ispkg and m.name not in SUPPORT))


def get(name: str) -> Experiment:
    """The declaration of experiment ``name`` (imports that package only)."""
    if name not in names():
        raise ConfigError(f"experiment {name!r} is not allowed; choose one of: {', '.join(names())}")
    exp = getattr(importlib.import_module(f"{PACKAGE}.{name}"), "EXPERIMENT", None)
    if not isinstance(exp, Experiment) or exp.name != name:
        raise TypeError(f"{PACKAGE}.{name} must declare EXPERIMENT = Experiment(name={name!r}, ...)")
    return exp


def experiments() -> dict[str, Experiment]:
    """Every declaration, in notebook order (01_main, 02_k_sweep, ...)."""
    found = [get(n) for n in names()]
    return {e.name: e for e in sorted(found, key=lambda e: e.notebook)}

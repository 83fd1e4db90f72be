"""One experiment's names in one namespace, for tests: its config, measure and views modules and
its declaration (``EXPERIMENT``), looked up through the catalog as the workflow does."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

from attnknn_lib.experiments.framework import catalog


def api(name: str) -> SimpleNamespace:
    exp = catalog.get(name)
    names: dict = {}
    for part in ("config", "measure", "views"):
        mod = importlib.import_module(f"attnknn_lib.experiments.{name}.{part}")
        names.update({k: v for k, v in vars(mod).items() if not k.startswith("__")})
    return SimpleNamespace(**names, EXPERIMENT=exp)

"""Experiments: one module per experiment on the shared core (:mod:`.core`); the registry maps a
name to its module (``NAME``, ``NOTEBOOK``, ``Config``, ``runs``, ``outputs``)."""

from . import efficiency, k_sweep, long_tail, main, noise, theory

REGISTRY = {m.NAME: m for m in (main, k_sweep, noise, long_tail, efficiency, theory)}

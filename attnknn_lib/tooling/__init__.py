"""Tooling: the bench, the profiler, the GPU checks and the reproducibility view, which time and check a run; nothing in the library imports them."""

"""Exceptions whose message is one line that a user can act on.

Library code raises these instead of asserting, printing or exiting, so the
command-line front ends can print ``str(err)`` and stop with a non-zero code.
"""

from __future__ import annotations


class AttnKNNError(Exception):
    """Base class: the message names the bad value and what is allowed."""

    def _render_traceback_(self) -> list[str]:
        # IPython/Jupyter (and papermill's record of a failed cell) show this instead of the
        # traceback: a notebook given a bad parameter fails with the same one line as the CLI
        return [f"{type(self).__name__}: {self}"]


class ConfigError(AttnKNNError, ValueError):
    """A configuration value is out of range or unknown."""


class DataNotFoundError(AttnKNNError, FileNotFoundError):
    """A dataset is not on disk and could not be downloaded."""


class WeightsUnavailableError(AttnKNNError, FileNotFoundError):
    """Pretrained weights are not cached and could not be downloaded."""


class SourcesChangedError(AttnKNNError):
    """The code a job ran with changed before its result was written: the result is not stamped."""


class CorruptFileError(AttnKNNError, ValueError):
    """A file the project wrote earlier cannot be read (truncated, edited, another format)."""


def check_choice(name: str, value: object, allowed: list[str] | tuple[str, ...]) -> None:
    """Raise ConfigError unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ConfigError(f"{name}={value!r} is not allowed; choose one of: {', '.join(map(str, allowed))}")


def check_range(name: str, value: float, low: float | None = None, high: float | None = None,
                low_inclusive: bool = True, high_inclusive: bool = True) -> None:
    """Raise ConfigError unless ``low <= value <= high`` (bounds optional, inclusivity per side)."""
    ok = True
    if low is not None:
        ok &= value >= low if low_inclusive else value > low
    if high is not None:
        ok &= value <= high if high_inclusive else value < high
    if not ok:
        lo = "-inf" if low is None else f"{low}"
        hi = "inf" if high is None else f"{high}"
        lb = "[" if low_inclusive else "("
        hb = "]" if high_inclusive else ")"
        raise ConfigError(f"{name}={value!r} is out of range; allowed: {lb}{lo}, {hi}{hb}")

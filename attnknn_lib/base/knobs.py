"""Config fields with help text, comma-separated values, papermill parameter cells and type coercion.

The experiment configs (frozen dataclasses) are built from these: :func:`knob` gives a field its
default and one-line help, which :func:`parameters_cell` writes as the comment of the notebook's
parameters cell; :func:`coerce` reads command-line strings as each field's type."""

from __future__ import annotations

from dataclasses import MISSING, field, fields
from typing import Any

from attnknn_lib.base.errors import ConfigError


def knob(default: Any, help: str) -> Any:  # noqa: A002 - "help" reads best in the field list
    """A config field with a default and a one-line explanation (no '=': papermill parses these lines)."""
    if "=" in help:
        raise ValueError(f"help of a parameter must not contain '=': {help!r}")
    return field(default=default, metadata={"help": help})


def csv(value: Any, what: str = "a comma-separated list, e.g. fashion_mnist,iris") -> tuple[str, ...]:
    """'a,b' or a list -> ('a', 'b'); anything else is refused in one line."""
    if not isinstance(value, (str, list, tuple)):
        raise ConfigError(f"{value!r} is not allowed here; give {what}")
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(str(s).strip() for s in items if str(s).strip())


def choice_csv(name: str, value: Any, allowed) -> tuple[str, ...]:
    """:func:`csv`, each item one of ``allowed``; an unknown item is refused in one line naming the choices."""
    out = csv(value)
    for item in out:
        if item not in allowed:
            raise ConfigError(f"{name}={item!r} is not allowed; choose among: {', '.join(allowed)}")
    return out


def int_csv(name: str, value: Any) -> tuple[int, ...]:
    """'0,1,2' (or an int, or a list of ints) -> (0, 1, 2); non-negative integers only."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    try:
        out = tuple(int(s) for s in csv(value, "comma-separated integers, e.g. 0,1,2"))
    except ValueError:
        out = ()
    if not out or min(out) < 0:
        raise ConfigError(f"{name}={value!r} is not allowed; give non-negative integers, e.g. {name}=0,1,2")
    return out


def float_csv(name: str, value: Any, low: float, high: float) -> tuple[float, ...]:
    """'0,0.1' (or a number, or a list) -> (0.0, 0.1); each value in [low, high], one line otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    try:
        out = tuple(float(s) for s in csv(value, "comma-separated numbers, e.g. 0,0.1,0.2"))
    except ValueError:
        out = ()
    if not out or min(out) < low or max(out) > high:
        raise ConfigError(f"{name}={value!r} is not allowed; give comma-separated numbers in [{low:g}, {high:g}]")
    return out


def defaults(cls) -> dict:
    """{field: default} of a config class, tuples as comma-separated strings (as papermill passes them)."""
    out = {}
    for f in fields(cls):
        value = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
        out[f.name] = ",".join(map(str, value)) if isinstance(value, tuple) else value
    return out


DEFINED = "_defined_before"  # the names a notebook's parameters cell leaves defined (its last line records them)
NOTEBOOK_ONLY = ("recompute", "out_dir")  # a notebook's parameters that are not its config's


def parameters_cell(cls) -> str:
    """The tagged parameters cell of a notebook whose config is ``cls`` (generated, never hand-edited)."""
    lines = ["# Parameters (defaults of the cpu profile, generated from the config class; papermill overrides them).",
             "# Change one from the command line: ./run_all.sh --only NAME -p key=value"]
    for f in fields(cls):
        value = defaults(cls)[f.name]
        help_ = f.metadata.get("help", "")
        lines.append(f"{f.name} = {value!r}" + (f"  # {help_}" if help_ else ""))
    lines.append("recompute = False  # False: show the committed results (trains and writes nothing); True: measure again")
    lines.append('out_dir = "../scratch"  # where a recompute writes (results/, figures/); the workflow writes the '
                 'repository')
    # not an assignment papermill would list as a parameter: a name it adds after this cell must be one above
    lines.append(f"globals()[{DEFINED!r}] = set(globals())")
    return "\n".join(lines)


def coerce(cls, params: dict) -> dict:
    """Values of the right type for ``cls``'s fields, or one ConfigError line.

    Command-line values arrive as YAML scalars: an int is accepted for a float, a string that
    reads as a number for a number (``1e-3`` is a string to YAML), ``yes/no/on/off`` for a bool.
    """
    kinds = {f.name: type(defaults(cls)[f.name]) for f in fields(cls)}
    out = {}
    for name, value in params.items():
        if name not in kinds:
            raise ConfigError(f"unknown parameter {name!r}; allowed: {', '.join(sorted(kinds))}")
        kind = kinds[name]
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if not ok and kind is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        if not ok and isinstance(value, str) and kind in (int, float):
            try:
                value, ok = kind(value), True
            except ValueError:
                pass
        if not ok and kind is bool and isinstance(value, str) and value.lower() in ("yes", "no", "on", "off", "true",
                                                                                     "false"):
            value, ok = value.lower() in ("yes", "on", "true"), True
        if not ok and kind is str and isinstance(value, (int, float)) and not isinstance(value, bool):
            value, ok = str(value), True  # e.g. seeds=0 or cnn_widths=32
        if not ok:
            raise ConfigError(f"{name}={value!r} has the wrong type; allowed: {kind.__name__} "
                              f"(e.g. {name}={defaults(cls)[name]!r})")
        out[name] = value
    return out

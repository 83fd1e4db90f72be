"""Verdicts added to a record that was measured before its experiment stored them, without measuring again.

An experiment whose measurement computes its verdicts (``verdicts(results, cfg) -> dict``, pure: the
results and the config's margin knobs decide it) stores them as ``results["verdicts"]``, and its views
only read them. A record written before that has the results but neither the verdicts nor the margin
knobs in its config; :func:`with_verdicts` gives it both, with the margins at their defaults (the
values the library's ``MARGINS`` declared when the record was rendered), so ``./run_all.sh status``
reads the same parameters (:func:`~attnknn_lib.experiments.framework.reading.parameter_differences`)
and the views render what they rendered before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields


def margin_knobs(config_class) -> list[str]:
    """The names of a config class's margin knobs (``margin_<metric>``), in field order."""
    return [f.name for f in fields(config_class) if f.name.startswith("margin_")]


def with_verdicts(record: dict, config_class, verdicts: Callable[[dict, object], dict]) -> dict:
    """``record`` (not changed) with its config's missing margin knobs at their defaults and
    ``results["verdicts"] = verdicts(results, cfg)``, ``cfg`` built from that config. The config keeps
    its values and takes the config class's field order (a key no field names stays, at the end)."""
    names = [f.name for f in fields(config_class)]
    default = config_class().to_dict()
    config = {**record["config"], **{n: default[n] for n in margin_knobs(config_class) if n not in record["config"]}}
    config = {**{n: config[n] for n in names if n in config}, **{k: v for k, v in config.items() if k not in names}}
    cfg = config_class(**{n: config[n] for n in names if n in config})
    return {**record, "config": config, "results": {**record["results"], "verdicts": verdicts(record["results"], cfg)}}

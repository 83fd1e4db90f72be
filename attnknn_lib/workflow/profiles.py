"""Profiles and parameters: the config defaults, then the profile's values, then ``-p key=value``.

A profile's values live in one place, ``configs/<profile>.yaml``: the shared recipe (``recipe:``)
and each experiment's own knobs (``experiments: <name>:``); what a profile does not set keeps the
config dataclass's default.

Everything the user typed is checked here before any work: an unknown profile, experiment or
parameter, a value of the wrong type or out of range, missing data or weights stop the run with
one line naming the value and what is allowed."""

from __future__ import annotations

import os
from dataclasses import fields

import yaml

from attnknn_lib.base.errors import ConfigError, DataNotFoundError, WeightsUnavailableError
from attnknn_lib.base.knobs import coerce
from attnknn_lib.base.paths import REPO_ROOT
from attnknn_lib.data.registry import REGISTRY as DATASETS
from attnknn_lib.data.registry import local_sources, training_rows
from attnknn_lib.experiments.framework import catalog
from attnknn_lib.models.backbones import imagenet_weights_path

CONFIG_DIR = REPO_ROOT / "configs"


def available_profiles() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))


def profile_description(name: str) -> str:
    """The ``description`` line of configs/<name>.yaml (empty when it has none or does not parse)."""
    try:
        data = yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return ""
    return str(data.get("description", "")) if isinstance(data, dict) else ""


def load_profile(name: str) -> dict:
    """``{"recipe": {...}, "experiments": {name: {...}}}``: what the profile changes from the defaults."""
    profiles = available_profiles()
    if name not in profiles:
        raise ConfigError(f"profile={name!r} is not allowed; choose one of: {', '.join(profiles)}")
    try:
        data = yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text()) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"configs/{name}.yaml is not valid YAML{where} ({getattr(err, 'problem', None) or err}); "
                          "fix the file (see configs/smoke.yaml for the layout)") from None
    if not isinstance(data, dict):
        raise ConfigError(f"configs/{name}.yaml must hold a mapping (description, recipe, experiments); "
                          f"got {type(data).__name__}")
    unknown = set(data) - {"description", "recipe", "experiments"}
    if unknown:
        raise ConfigError(f"configs/{name}.yaml: unknown section(s) {sorted(unknown)}; allowed: description, recipe, "
                          "experiments")
    return {"recipe": data.get("recipe") or {}, "experiments": data.get("experiments") or {}}


def parse_overrides(items: list[str], selected: list[str]) -> dict[str, dict]:
    """``key=value`` (every selected experiment that has ``key``) or ``experiment.key=value``.
    Values stay strings here; :func:`attnknn_lib.training.recipe.coerce` reads them as the field's type."""
    out: dict[str, dict] = {name: {} for name in selected}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"-p {item!r} is not of the form key=value (or experiment.key=value)")
        key, raw = item.split("=", 1)
        target, _, param = key.rpartition(".")
        if target and target not in selected:
            raise ConfigError(f"-p {item!r}: experiment {target!r} is not selected; selected: {', '.join(selected)}")
        targets = [target] if target else selected
        hit = False
        for name in targets:
            if param in {f.name for f in fields(catalog.get(name).Config)} and param != "profile":
                out[name][param] = raw
                hit = True
        if not hit:
            allowed = sorted({f.name for n in targets for f in fields(catalog.get(n).Config)} - {"profile"})
            raise ConfigError(f"-p {item!r}: unknown parameter {param!r}; allowed: {', '.join(allowed)}")
    return out


def resolve(profile: str, only: list[str] | None, overrides: list[str]) -> dict[str, dict]:
    """The validated notebook parameters of every selected experiment: {experiment: params}
    (defaults, then the profile's recipe and experiment blocks, then ``-p``)."""
    prof = load_profile(profile)
    declared = catalog.experiments()
    runnable = [n for n, e in declared.items() if (REPO_ROOT / "notebooks" / e.notebook).exists()]
    # an experiment still awaiting its first run (Experiment.awaiting) is measured only when named
    selected = [n for n in runnable if not declared[n].awaiting] if not only else only
    for name in selected:
        if name not in runnable:
            raise ConfigError(f"experiment {name!r} is not allowed; choose one of: {', '.join(runnable)}")
    unknown = set(prof["experiments"]) - set(declared)
    if unknown:
        raise ConfigError(f"configs/{profile}.yaml: unknown experiment(s) {sorted(unknown)}")
    extra = parse_overrides(overrides, selected)
    out = {}
    for name in selected:
        cls = declared[name].Config
        names = {f.name for f in fields(cls)}
        params = {k: v for k, v in prof["recipe"].items() if k in names}
        bad = set(prof["recipe"]) - names
        if bad:
            raise ConfigError(f"configs/{profile}.yaml: unknown recipe parameter(s) {sorted(bad)}")
        params.update(prof["experiments"].get(name) or {})
        try:
            params = coerce(cls, params)
        except ConfigError as err:
            raise ConfigError(f"configs/{profile}.yaml: {err}") from None
        params.update(coerce(cls, extra[name]))
        params["profile"] = profile
        cfg = cls(**params)  # raises ConfigError on a bad value
        check_data(cfg)
        check_sizes(cfg)
        check_weights(cfg)
        # normalised, tuples as comma-separated strings: what papermill passes to the notebook
        out[name] = {k: ",".join(map(str, v)) if isinstance(v, list) else v for k, v in cfg.to_dict().items()}
    return out


def datasets_of(cfg) -> tuple[str, ...]:
    """The datasets an experiment config names (``datasets`` of main, ``dataset`` of the others)."""
    return tuple(getattr(cfg, "datasets", ())) or ((cfg.dataset,) if hasattr(cfg, "dataset") else ())


def check_data(cfg) -> None:
    """Stop before any work when a dataset of ``cfg`` is not on disk (unless downloads are allowed)."""

    if os.environ.get("ATTNKNN_DOWNLOAD") == "1":
        return
    for name in datasets_of(cfg):
        options = local_sources(name)
        if options and not any(p.exists() for p in options):
            raise DataNotFoundError(f"dataset {name!r}: none of {', '.join(map(str, options))} exists; "
                                    f"{DATASETS[name].description}. Provide the files (see docs/workflow.md, 'Where the data "
                                    "comes from'), or set ATTNKNN_DOWNLOAD=1 to let torchvision/OpenML download")


def check_sizes(cfg) -> None:
    """Stop before any work when k (or a k of a sweep) exceeds what the memory can give: a
    training query has at most n - 1 other rows, and training keeps one spare (k <= n - 2)."""

    ks = [("k", cfg.k)] + [("k_values", k) for k in getattr(cfg, "k_values", ())]
    for name in datasets_of(cfg):
        n = training_rows(name, cfg.val_fraction, cfg.max_train)
        if n is None:
            continue
        for key, k in ks:
            if k > n - 2:
                raise ConfigError(f"{key}: k={k} is out of range; allowed: 1..{n - 2} for the {n} training rows of "
                                  f"{name} (max_train={cfg.max_train}, val_fraction={cfg.val_fraction})")


def check_weights(cfg) -> None:
    """Stop before any training when ImageNet weights are asked for but not cached (and downloads
    are off): otherwise the first ResNet job would fail after the data had been prepared."""
    if not (cfg.pretrained and cfg.image_backbone == "resnet18_cifar") or os.environ.get("ATTNKNN_DOWNLOAD") == "1":
        return

    if not any(DATASETS[name].kind == "image" for name in datasets_of(cfg)):
        return

    cached, url = imagenet_weights_path()
    if not cached.exists():
        raise WeightsUnavailableError(f"pretrained=True needs the ImageNet ResNet18 weights at {cached}; copy "
                                      f"{cached.name} (from {url}) there, set ATTNKNN_DOWNLOAD=1 on a machine "
                                      "with network, or pass -p pretrained=false")

"""Each part computed by its name, and the record assembled from every part.

:func:`run_part` computes (or reads) one part; :func:`run` reads every part, summarises them and
writes the record."""

from __future__ import annotations

from attnknn_lib.base.paths import Paths
from attnknn_lib.base.progress import bar
from attnknn_lib.data.spec import prepare
from attnknn_lib.experiments.attention_study.config import ARTIFACTS, NAME, Config
from attnknn_lib.experiments.attention_study.measure.controls import long_tail_entry, measure_end_to_end, second_dataset
from attnknn_lib.experiments.attention_study.measure.gallery import _gallery_k
from attnknn_lib.experiments.attention_study.measure.pairing import drop_pairs
from attnknn_lib.experiments.attention_study.measure.part_names import (
    Part,
    collapse_seeds,
    parts,
    seed_part_names,
    setting_chunks,
)
from attnknn_lib.experiments.attention_study.measure.seed_settings import measure_seed
from attnknn_lib.experiments.attention_study.measure.summary import summarise
from attnknn_lib.experiments.attention_study.measure.training_runs import _long_tail_run, long_tail_setting
from attnknn_lib.experiments.attention_study.measure.variants import measure_collapse
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.experiments.framework.parts import part_result, part_seconds


def _compute_part(cfg: Config, paths: Paths, part: str):
    p = Part.parse(part)
    if p.kind == "second":
        return second_dataset(cfg, paths, p.dataset)
    if p.kind == "collapse":
        return measure_collapse(cfg, paths, p.seed)
    if p.kind == "longtail":
        return long_tail_entry(cfg, paths, _long_tail_run(cfg, p.seed), p.seed)
    if p.kind == "e2e":
        return measure_end_to_end(cfg, paths, p.seed)
    return measure_seed(cfg, paths, p.seed, p.chunk)


def run_part(cfg: Config, paths: Paths, part: str):
    """Part ``part`` (see :func:`parts`), computed and stored unless stored under this config and code."""
    core.start(cfg)
    return part_result(paths, cfg, NAME, part, lambda: _compute_part(cfg, paths, part))


def run(cfg: Config, paths: Paths) -> dict:
    """Headroom, diagnostics and variants for every seed and the second datasets (each a part,
    :func:`parts`: stored by the workflow's part jobs, or computed here), the summary and the
    gallery; writes ``results/attention_study_<d>.json``."""
    device, prov, clock = core.begin(cfg)
    prepared = prepare(core.data_spec(cfg, cfg.dataset))
    ds = prepared.dataset
    part = {p: part_result(paths, cfg, NAME, p, lambda p=p: _compute_part(cfg, paths, p))
            for p in bar(parts(cfg), desc="parts")}
    chunks = {seed: [part[p] for p in seed_part_names(seed, len(setting_chunks(cfg)))] for seed in cfg.seeds}
    per_seed = {str(seed): chunks[seed][0]["per_seed"] for seed in cfg.seeds}
    for seed in cfg.seeds:
        for more in chunks[seed][1:]:
            per_seed[str(seed)]["settings"].update(more["per_seed"]["settings"])
        # the settings in cfg.settings order, whichever part computed them
        per_seed[str(seed)]["settings"] = {st: per_seed[str(seed)]["settings"][st] for st in cfg.settings}
    for seed in collapse_seeds(cfg):
        per_seed[str(seed)]["settings"]["clean"]["collapse"] = part[Part("collapse", seed).name]
    for seed in cfg.seeds:
        long_tail, end_to_end = Part("longtail", seed).name, Part("e2e", seed).name
        if long_tail in part:
            per_seed[str(seed)]["settings"][long_tail_setting(cfg)] = part[long_tail]
        if end_to_end in part:
            per_seed[str(seed)]["end_to_end"] = part[end_to_end]
    gallery_cases = {k: v for seed in cfg.seeds for p in chunks[seed] for k, v in p["gallery_cases"].items()}
    summary = summarise(cfg, per_seed)
    results = {"dataset": ds.summary(), "seeds": list(cfg.seeds), "per_seed": drop_pairs(per_seed),
               "summary": drop_pairs(summary), "gallery": {"seed": cfg.seeds[0], "k": _gallery_k(cfg),
                                                               "class_names": list(ds.class_names),
                                                               "cases": gallery_cases},
               "second": {name: part[Part("second", dataset=name).name] for name in cfg.second_datasets},
               # the record's wall time only reads the parts; what computing them took is kept beside it
               "timings": {"seconds": clock(), "parts_seconds": part_seconds(paths, cfg, NAME, parts(cfg))}}
    return core.write_record(paths, ARTIFACTS, cfg.dataset, cfg, prov, {cfg.dataset: prepared.fingerprint()}, results)[1]

"""confirmatory: the analysis that writes its record, as ``docs/confirmatory_declaration.md`` declares it.

It needs no model of the workflow. One part per (candidate, seed) (:func:`parts`), each a job of its
own: Fashion-MNIST with the seed's validation split, the candidate embedding built from the memory
(:data:`~attnknn_lib.training.candidate_embeddings.EMBEDDERS`), then

1. the gate (:mod:`~attnknn_lib.experiments.common.gate`), on validation alone, before any head is
   trained: the tuned vote, the geometry-only vote, the label-only learner, NCA and the nonlinear
   learned metric, each cross-fitted over two halves; the two learned metrics train on 90 % of the
   memory and pick their epoch and learning rate on the other 10 %;
2. the comparison (:func:`~attnknn_lib.experiments.common.fixed_embedding.compare`) with every learner
   of the declaration under the one budget (the config's defaults), and each method's endpoints on
   every bootstrap resample of the test rows.

Every seed reads the same test rows (the whole official test set; ``max_test`` takes a fixed subset
for smaller runs), so the seeds' differences share the test set's sampling error: each interval adds
the test term of the paired bootstrap, the same resamples applied to every seed and method
(:func:`~attnknn_lib.experiments.common.fixed_embedding.paired_test_errors`), on t with S - 1 d.f.

The record (:func:`run`): per candidate the gate over seeds (it passes when its best learner's mean
cross-fitted room reaches ``room_margin``), the summary and the verdicts. Per endpoint one Holm family
holds, on every candidate that passes, the 15 declared comparisons (:func:`family`): 11 learners
against the endpoint's tuned vote, and Attn-KNN read with the vote's settings, trained at k and at
k_w, against each learned metric; the candidates that fail form one exploratory family per endpoint.
The words are the declaration's (:func:`~attnknn_lib.evaluation.verdicts.holm_confirmatory`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnknn_lib.base.paths import Paths
from attnknn_lib.base.progress import bar
from attnknn_lib.base.provenance import config_fingerprint
from attnknn_lib.data.registry import Dataset, DataSplit, load_dataset
from attnknn_lib.evaluation.bootstrap import resample_counts
from attnknn_lib.evaluation.verdicts import holm_confirmatory
from attnknn_lib.experiments.common import gate as gating
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.experiments.common.fixed_embedding import ENDPOINTS, compare, paired_test_errors, summarise
from attnknn_lib.experiments.confirmatory.config import ARTIFACTS, DATASET, LABELS, NAME, Config
from attnknn_lib.experiments.framework.declaration import Measurement
from attnknn_lib.experiments.framework.parts import part_result, part_seconds
from attnknn_lib.training.candidate_embeddings import EMBEDDERS

TEST_STREAM = 10_000  # seed of the fixed subset of test rows a smaller run reads (every seed the same rows)
BOOTSTRAP_STREAM = 67  # seed of the bootstrap counts, the same for every seed and method (they pair them)


def runs(cfg: Config) -> list:
    """No training run of the workflow: the embedders and every learner train inside the part jobs."""
    return []


def parts(cfg: Config) -> list[str]:
    """One part per candidate and seed (:mod:`~attnknn_lib.experiments.framework.parts`), each a job."""
    return [f"{c}_seed{s}" for c in cfg.candidates for s in cfg.seeds]


def load(cfg: Config, seed: int) -> tuple[Dataset, DataSplit]:
    """Fashion-MNIST with the seed's validation split (the memory is the rest of the training pool) and
    the test rows every seed reads: the official test set, or a fixed stratified subset of ``max_test``."""
    ds = load_dataset(DATASET, val_fraction=cfg.val_fraction, split_seed=seed, max_train=cfg.max_train or None,
                      max_val=cfg.max_val or None)
    if not cfg.max_test or cfg.max_test >= len(ds.test):
        return ds, ds.test
    order = np.random.default_rng(TEST_STREAM).permutation(len(ds.test))
    return ds, ds.test.subset(np.sort(order[:cfg.max_test]))


@dataclass(frozen=True)
class Rows:
    """One split of the embedding: unit vectors ``x`` (N, D) and labels ``y`` (N,)."""

    x: np.ndarray
    y: np.ndarray


def pixels(split: DataSplit) -> np.ndarray:
    """(N, 784) floats in [0, 1], the images flattened row by row."""
    return split.x.reshape(len(split), -1).astype(np.float64) / 255.0


def embedded(cfg: Config, name: str, ds: Dataset, test: DataSplit, seed: int) -> tuple[dict[str, Rows], dict]:
    """Candidate ``name``'s memory, validation and test rows and how it was built."""
    splits = {"memory": ds.train, "val": ds.val, "test": test}
    x = [pixels(d) for d in splits.values()]
    if name == "early_cnn":
        z, info = EMBEDDERS[name](*x, ds.train.y, ds.val.y, seed, num_classes=ds.num_classes)
    elif name == "autoencoder":
        z, info = EMBEDDERS[name](*x, seed, epochs=cfg.autoencoder_epochs)
    else:
        z, info = EMBEDDERS[name](*x, seed)
    return {s: Rows(z[s], d.y) for s, d in splits.items()}, info


def measure_unit(cfg: Config, name: str, seed: int) -> dict:
    """One candidate and seed: the data fingerprint, the embedding built, the gate, the comparison and
    each method's endpoints on every bootstrap resample of the shared test rows."""
    ds, test = load(cfg, seed)
    rows, info = embedded(cfg, name, ds, test, seed)
    mem, val = rows["memory"], rows["val"]
    training = cfg.nca_training()
    metrics = {"nca": gating.nca_map(mem.x, mem.y, ds.num_classes, seed, cfg.k, **training),
               "mlp_metric": gating.mlp_metric_map(mem.x, mem.y, ds.num_classes, seed, cfg.k, cfg.mlp_hidden,
                                                   **training)}
    measured_gate = gating.gate(mem.x, mem.y, val.x, val.y, ds.num_classes, seed, cfg.k, cfg.reference_k, cfg.loo_k,
                                metrics=metrics)  # before any head is trained
    counts = resample_counts(len(test), cfg.bootstrap, BOOTSTRAP_STREAM)
    result = compare(cfg, mem, val, rows["test"], ds.num_classes, seed, counts=counts)
    result["gate"] = measured_gate
    result["embedding"] = {**info, "num_classes": ds.num_classes, **{f"n_{s}": len(r.y) for s, r in rows.items()}}
    result["fingerprint"] = ds.fingerprint()  # the official test set is in it; max_test picks its fixed subset
    return result


def run_part(cfg: Config, paths: Paths, part: str) -> dict:
    """Part ``<candidate>_seed<N>`` (see :func:`parts`), computed and stored unless stored under this config
    and code."""
    core.start(cfg)
    name, seed = _parse(cfg, part)
    return part_result(paths, cfg, NAME, part, lambda: measure_unit(cfg, name, seed))


def _parse(cfg: Config, part: str) -> tuple[str, int]:
    if part not in parts(cfg):
        raise ValueError(f"part {part!r} is not allowed; choose one of: {', '.join(parts(cfg))}")
    name, _, seed = part.rpartition("_seed")
    return name, int(seed)


def family(metric: str) -> list[tuple[str, str]]:
    """The declared comparisons (method, reference) of ``metric`` on one candidate: 11 learners against
    the endpoint's tuned vote, then Attn-KNN with the vote's settings (trained at k, at k_w) against each
    learned metric. Learners with vote settings enter tuned on accuracy, or on NLL for calibration."""
    s = "" if metric == "accuracy" else "_nll"
    learners = (f"nca{s}", f"mlp_metric{s}", "linear_probe", "learner", f"attnknn_tuned{s}", f"attnknn_wide_tuned{s}",
                "attnknn_label_wide", "attnknn_self_wide", "label_aware", "readout", "query_only")
    attention = (f"attnknn_tuned{s}", f"attnknn_wide_tuned{s}")
    return ([(m, f"reference{s}") for m in learners]
            + [(a, r) for a in attention for r in (f"nca{s}", f"mlp_metric{s}")])


def holm_correct(candidates: dict[str, dict]) -> dict:
    """Per endpoint two families (the declaration's): every declared comparison (:func:`family`) on the
    candidates that pass the gate, and the same on those that fail (exploratory). Each summary entry is
    replaced by its Holm-adjusted result in the declaration's words; returns each family's size."""
    sizes: dict[str, dict[str, int]] = {"confirmatory": {}, "exploratory": {}}
    for metric, _ in ENDPOINTS:
        for kind, passed in (("confirmatory", True), ("exploratory", False)):
            tests = {(c, m, r): cand["summary"]["diff"][m][r][metric] for c, cand in candidates.items()
                     if cand["gate"]["passed"] == passed for m, r in family(metric)
                     if metric in cand["summary"]["diff"].get(m, {}).get(r, {})}
            adjusted = holm_confirmatory({"|".join(key): d for key, d in tests.items()}, metric) if tests else {}
            for (c, m, r) in tests:
                candidates[c]["summary"]["diff"][m][r][metric] = adjusted["|".join((c, m, r))]
            sizes[kind][metric] = len(tests)
    return sizes


def run(cfg: Config, paths: Paths) -> dict:
    """Every part (stored by the workflow's part jobs, or computed here), the gate over seeds, the
    summaries with the shared test rows' term, the Holm families, and the record."""
    _, prov, _ = core.begin(cfg)
    per: dict[str, dict] = {c: {} for c in cfg.candidates}
    for part in bar(parts(cfg), desc="confirmatory (candidate, seed)"):
        name, seed = _parse(cfg, part)
        per[name][str(seed)] = part_result(paths, cfg, NAME, part, lambda: measure_unit(cfg, name, seed))
    candidates = {}
    for name, per_seed in per.items():
        summary = summarise(cfg, per_seed, test_se=paired_test_errors(per_seed))
        kept = {s: {k: v for k, v in p.items() if k != "resampled"} for s, p in per_seed.items()}
        candidates[name] = {"label": LABELS[name], "per_seed": kept, "summary": summary,
                            "gate": gating.gate_summary(per_seed, cfg.room_margin)}
    family_sizes = holm_correct(candidates)
    results = {"k": cfg.k, "seeds": list(cfg.seeds), "heads": list(cfg.heads), "bootstrap": cfg.bootstrap,
               "multiplicity": {"method": "holm", "words": "confirmatory", "family_sizes": family_sizes},
               "passed": [n for n, c in candidates.items() if c["gate"]["passed"]],
               "endpoints": [list(e) for e in ENDPOINTS], "room_margin": cfg.room_margin,
               "families": {metric: [list(c) for c in family(metric)] for metric, _ in ENDPOINTS},
               "candidates": candidates,
               # the record's wall time only reads the parts; what computing them took is kept beside it
               "timings": {"parts_seconds": part_seconds(paths, cfg, NAME, parts(cfg))}}
    fingerprint = config_fingerprint({"data": {c: {s: p["fingerprint"] for s, p in v.items()} for c, v in per.items()},
                                      "candidates": list(cfg.candidates)})
    return core.write_record(paths, ARTIFACTS, DATASET, cfg, prov, {DATASET: fingerprint}, results)[1]


MEASUREMENT = Measurement(runs=runs, run=run, parts=parts, run_part=run_part)

"""headroom_regimes: the analysis that writes its record.

It needs no model of the workflow: each candidate embedding is built here, per seed, on
Fashion-MNIST (:data:`~.config.CANDIDATES`):

* ``pixels_pca``: the pixels (in [0, 1]) projected on their first ``pca_dims`` principal
  components, fitted on the memory, then L2-normalised;
* ``few_labels``: the small CNN of the recipe trained with cross-entropy on ``label_share`` of the
  memory (stratified), its features L2-normalised; the memory keeps every label, and the heads
  train on all of them;
* ``other_classes``: the same CNN trained on ``source_classes`` classes drawn by the seed, its
  frozen features used for the other classes only (memory, validation and test hold those).

Each embedder picks its epoch on ``embedder_val`` validation rows of the classes it trains on.
On every candidate the comparison of :func:`~attnknn_lib.experiments.common.fixed_embedding.compare` runs,
in its order: headroom, the tuned vote and the NLL-tuned vote, the learned metrics with the same vote
(NCA and the linear probe), the learnable headroom, then the heads (each also against NCA), the
query-only control and Attn-KNN with the tuned vote's knobs. Before it, the gate
(:mod:`~attnknn_lib.experiments.common.gate`,
declared in ``docs/regimes_declaration.md``): a candidate *has room* when a gate learner's
cross-fitted validation accuracy lies at least ``room_margin`` above the tuned vote's, as a mean over
seeds; it reads no test row. The heads run on every candidate, so the absence of room is tested
too; verdicts on a candidate that fails the gate are exploratory. Each seed reads its own block of
``test_rows`` rows of the official test set (disjoint
blocks: independent test sets, so the seed-level intervals take no test term).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from attnknn_lib.base.paths import Paths
from attnknn_lib.base.progress import bar
from attnknn_lib.base.provenance import config_fingerprint
from attnknn_lib.base.runtime import seed_everything
from attnknn_lib.data.registry import Dataset, DataSplit, load_dataset
from attnknn_lib.data.transforms import to_tensor
from attnknn_lib.evaluation.inference import embed
from attnknn_lib.evaluation.verdicts import holm
from attnknn_lib.experiments.common import gate as gating
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.experiments.common.fixed_embedding import ENDPOINTS, compare, summarise
from attnknn_lib.experiments.framework.declaration import Measurement
from attnknn_lib.experiments.framework.parts import part_result, part_seconds
from attnknn_lib.experiments.headroom_regimes.config import (
    ARTIFACTS,
    CANDIDATES,
    DATASET,
    NAME,
    OFFICIAL_TEST,
    Config,
)
from attnknn_lib.models import build_cnn
from attnknn_lib.training.convergence import plateau
from attnknn_lib.training.loops import train_cnn


def runs(cfg: Config) -> list:
    """No training run of the workflow: the embedders and heads train inside the notebook job."""
    return []


@dataclass(frozen=True)
class Rows:
    x: np.ndarray  # (N, D) float32 unit vectors
    y: np.ndarray  # (N,) int64


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def test_block(ds: Dataset, seed: int, rows: int) -> DataSplit:
    """Seed ``seed``'s block of the official test set: rows [seed * rows, (seed + 1) * rows) of one
    fixed permutation, so the seeds' test sets are disjoint."""
    order = np.random.default_rng(OFFICIAL_TEST).permutation(len(ds.test))
    return ds.test.subset(np.sort(order[seed * rows:(seed + 1) * rows]))


def pca_rows(ds: Dataset, splits: dict[str, DataSplit], dims: int) -> dict[str, Rows]:
    """Pixels in [0, 1] on the memory's first ``dims`` principal components, L2-normalised."""
    flat = {s: d.x.reshape(len(d), -1).astype(np.float64) / 255.0 for s, d in splits.items()}
    mean = flat["memory"].mean(0)
    centred = flat["memory"] - mean
    _, vecs = np.linalg.eigh(centred.T @ centred)  # ascending eigenvalues
    basis = vecs[:, ::-1][:, :dims]
    return {s: Rows(_unit((f - mean) @ basis), d.y) for (s, f), d in zip(flat.items(), splits.values())}


def _stratified(y: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` rows (at least one per class), each class in its share."""
    classes = np.unique(y)
    per = np.maximum(1, np.round(n * np.bincount(y)[classes] / len(y)).astype(int))
    return np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), min(p, (y == c).sum()), replace=False)
                                   for c, p in zip(classes, per)]))


def cnn_embedder(cfg: Config, ds: Dataset, train: DataSplit, val: DataSplit, num_classes: int, epochs: int,
                 seed: int, name: str) -> tuple[torch.nn.Module, dict]:
    """The recipe's CNN trained with cross-entropy on ``train`` (labels in [0, num_classes)), its epoch
    chosen on ``val``; returns its backbone (the embedder) and what training did."""
    seed_everything(seed)
    backbone, kwargs = cfg.backbone("image")
    model = build_cnn(backbone, ds.input_shape, num_classes, **kwargs)
    sub = replace(ds, num_classes=num_classes, train=train, val=val)
    tc = replace(cfg.train_config("image", seed), epochs=epochs, mixup_alpha=0.0, device="cpu")
    res = train_cnn(model, sub, tc, progress=False, name=name)
    best = res.history[res.best_epoch - 1]
    return res.model.backbone, {"train_rows": len(train), "epochs": epochs, "best_epoch": res.best_epoch,
                                "embedder_val_accuracy": float(best["val_accuracy"]),
                                "plateau": plateau(res.history, res.best_epoch)["plateau"],
                                "val_curve": [float(row["val_accuracy"]) for row in res.history],
                                "seconds": round(res.seconds, 1)}


def embedded(backbone: torch.nn.Module, ds: Dataset, splits: dict[str, DataSplit],
             labels: dict[str, np.ndarray]) -> dict[str, Rows]:
    return {s: Rows(_unit(embed(backbone, to_tensor(ds, d), desc=f"embed {s}")), labels[s]) for s, d in splits.items()}


def candidate(cfg: Config, name: str, ds: Dataset, test: DataSplit, seed: int) -> tuple[dict[str, Rows], int, dict]:
    """Candidate ``name``'s memory, validation and test rows, its number of classes and how it was built."""
    splits = {"memory": ds.train, "val": ds.val, "test": test}
    rng = np.random.default_rng([seed, 7])
    if name == "pixels_pca":
        return pca_rows(ds, splits, cfg.pca_dims), ds.num_classes, {"dims": cfg.pca_dims}
    val_sel = _stratified(ds.val.y, min(cfg.embedder_val, len(ds.val)), rng)
    if name == "few_labels":
        labelled = _stratified(ds.train.y, max(ds.num_classes, round(cfg.label_share * len(ds.train))), rng)
        net, info = cnn_embedder(cfg, ds, ds.train.subset(labelled), ds.val.subset(val_sel), ds.num_classes,
                                 cfg.few_label_epochs, seed, "few-label CNN")
        return (embedded(net, ds, splits, {s: d.y for s, d in splits.items()}), ds.num_classes,
                {**info, "labelled_share": len(labelled) / len(ds.train)})
    source = np.sort(rng.permutation(ds.num_classes)[:cfg.source_classes])
    target = np.setdiff1d(np.arange(ds.num_classes), source)
    src_map, tgt_map = np.full(ds.num_classes, -1), np.full(ds.num_classes, -1)
    src_map[source], tgt_map[target] = np.arange(len(source)), np.arange(len(target))

    def only(split: DataSplit, classes: np.ndarray, mapping: np.ndarray) -> DataSplit:
        keep = np.flatnonzero(np.isin(split.y, classes))
        sub = split.subset(keep)
        return sub.with_labels(mapping[sub.y])

    src_val = only(ds.val, source, src_map)
    src_val = src_val.subset(_stratified(src_val.y, min(cfg.embedder_val, len(src_val)), rng))
    net, info = cnn_embedder(cfg, ds, only(ds.train, source, src_map), src_val, len(source), cfg.transfer_epochs,
                             seed, "transfer CNN")
    tsplits = {s: only(d, target, tgt_map) for s, d in splits.items()}
    return (embedded(net, ds, tsplits, {s: d.y for s, d in tsplits.items()}), len(target),
            {**info, "source_classes": source.tolist(), "target_classes": target.tolist()})


def load(cfg: Config, seed: int) -> Dataset:
    """Fashion-MNIST with the seed's validation split (the memory is the rest of the training pool)."""
    return load_dataset(DATASET, val_fraction=cfg.val_fraction, split_seed=seed, max_train=cfg.max_train or None,
                        max_val=cfg.max_val or None)


HOLM_REFERENCES = {"accuracy": ("reference", "nca"), "nll": ("reference_nll", "nca_nll"),
                   "brier": ("reference_nll", "nca_nll")}  # per endpoint: what each head is compared with
HOLM_ATTNKNN = {"accuracy": "attnknn_tuned", "nll": "attnknn_tuned_nll", "brier": "attnknn_tuned_nll"}
"""Per endpoint, the attention head of the family: with the tuned vote's settings tuned for that endpoint (at its
trained k it is a diagnostic, outside the family)."""


def family_heads(cfg: Config, metric: str) -> tuple[str, ...]:
    """The methods of ``metric``'s family: every head of the config, Attn-KNN with the tuned vote's knobs."""
    return tuple(HOLM_ATTNKNN[metric] if h == "attnknn" else h for h in cfg.heads)


def holm_correct(cfg: Config, candidates: dict[str, dict]) -> dict:
    """Per endpoint one family (``docs/regimes_declaration.md``): every head (:func:`family_heads`) on
    every candidate against the endpoint's reference and against NCA. Each summary entry is replaced
    by its Holm-adjusted result (:func:`~attnknn_lib.evaluation.verdicts.holm`: the adjusted verdict,
    the unadjusted one kept beside it); returns each family's size."""
    sizes = {}
    for metric, refs in HOLM_REFERENCES.items():
        family = {(c, h, r): cand["summary"]["diff"][h][r][metric] for c, cand in candidates.items()
                  for h in family_heads(cfg, metric) for r in refs
                  if metric in cand["summary"]["diff"].get(h, {}).get(r, {})}
        adjusted = holm({"|".join(key): d for key, d in family.items()}, metric)
        for (c, h, r) in family:
            candidates[c]["summary"]["diff"][h][r][metric] = adjusted["|".join((c, h, r))]
        sizes[metric] = len(family)
    return sizes


def room(summary: dict) -> dict:
    """The room before any head is trained: the geometry-only and the learnable ceiling minus the
    tuned vote (test accuracy, means over seeds), and the larger of the two."""
    means = summary["means"]
    out = {m: means[m]["accuracy"] - means["reference"]["accuracy"] for m in ("geometry", "learner")}
    return {**out, "largest": max(out.values())}


def chosen_head(cfg: Config, per_seed: dict[str, dict]) -> str | None:
    """The head other than Attn-KNN with the best mean validation accuracy (the study's way of
    choosing a head: on validation, never on test); None when Attn-KNN is the only head."""
    others = [h for h in cfg.heads if h != "attnknn"]
    if not others:
        return None
    return max(others, key=lambda h: np.mean([p["methods"][h]["val_accuracy"] for p in per_seed.values()]))


def parts(cfg: Config) -> list[str]:
    """One part per candidate and seed (:mod:`~attnknn_lib.experiments.framework.parts`), each a job: a
    seed's three candidates in one job took 3 to 4.5 h on one core under the one budget."""
    return [f"{c}_seed{s}" for c in cfg.candidates for s in cfg.seeds]


def _parse(cfg: Config, part: str) -> tuple[str, int]:
    if part not in parts(cfg):
        raise ValueError(f"part {part!r} is not allowed; choose one of: {', '.join(parts(cfg))}")
    name, seed = part.rsplit("_seed", 1)
    return name, int(seed)


def measure_unit(cfg: Config, name: str, seed: int) -> dict:
    """One candidate and seed: the data fingerprint, the embedding built, the gate (validation only,
    before any head is trained: ``docs/regimes_declaration.md``) and the comparison."""
    ds = load(cfg, seed)
    test = test_block(ds, seed, cfg.test_rows)
    rows, num_classes, info = candidate(cfg, name, ds, test, seed)
    mem = rows["memory"]
    nca = gating.nca_map(mem.x, mem.y, num_classes, seed, cfg.k, lrs=cfg.nca_lrs, epochs=cfg.nca_epochs,
                         patience=cfg.nca_patience, batch_size=cfg.nca_batch_size, candidates=cfg.nca_candidates)
    measured_gate = gating.gate(mem.x, mem.y, rows["val"].x, rows["val"].y, num_classes, seed, cfg.k,
                                cfg.reference_k, cfg.loo_k, metrics={"nca": nca})
    result = compare(cfg, rows["memory"], rows["val"], rows["test"], num_classes, seed)
    result["gate"] = measured_gate
    result["embedding"] = {**info, "num_classes": num_classes, "dims": int(rows["memory"].x.shape[1]),
                           **{f"n_{s}": len(r.y) for s, r in rows.items()}}
    return {"fingerprint": ds.fingerprint(), "result": result}


def run_part(cfg: Config, paths: Paths, part: str) -> dict:
    """Part ``<candidate>_seed<N>`` (see :func:`parts`), computed and stored unless stored under this config
    and code."""
    core.start(cfg)
    name, seed = _parse(cfg, part)
    return part_result(paths, cfg, NAME, part, lambda: measure_unit(cfg, name, seed))


def run(cfg: Config, paths: Paths) -> dict:
    """Every candidate and seed (:func:`measure_unit`, stored by the workflow's part jobs or computed here), the
    summaries, the selection by measured room, and the record."""
    _, prov, _ = core.begin(cfg)
    per: dict[str, dict] = {c: {} for c in cfg.candidates}
    fingerprints = {}
    for part in bar(parts(cfg), desc="headroom regimes (candidate, seed)"):
        name, seed = _parse(cfg, part)
        unit = part_result(paths, cfg, NAME, part, lambda: measure_unit(cfg, name, seed))
        fingerprints[str(seed)] = unit["fingerprint"]  # the seed's data: the same for each candidate
        per[name][str(seed)] = unit["result"]
    candidates = {}
    for name, per_seed in per.items():
        summary = summarise(cfg, per_seed)
        gated = gating.gate_summary(per_seed, cfg.room_margin)
        candidates[name] = {"label": CANDIDATES[name][0], "per_seed": per_seed, "summary": summary,
                            "room": room(summary),  # on test, after the fact: described, decides nothing
                            "gate": gated, "has_room": gated["passed"], "chosen_head": chosen_head(cfg, per_seed)}
    family_sizes = holm_correct(cfg, candidates)  # verdicts on candidates that fail the gate are exploratory
    results = {"k": cfg.k, "seeds": list(cfg.seeds), "heads": list(cfg.heads),
               "multiplicity": {"method": "holm", "family_sizes": family_sizes},
               "confirmatory": [n for n, c in candidates.items() if c["has_room"]],
               "endpoints": [list(e) for e in ENDPOINTS], "moved_threshold": cfg.moved_share * cfg.k,
               "room_margin": cfg.room_margin, "test_rows": cfg.test_rows, "candidates": candidates,
               "selected": [n for n, c in candidates.items() if c["has_room"]],
               # the record's wall time only reads the parts; what computing them took is kept beside it
               "timings": {"parts_seconds": part_seconds(paths, cfg, NAME, parts(cfg))}}
    fingerprint = config_fingerprint({"data": fingerprints, "candidates": list(cfg.candidates)})
    return core.write_record(paths, ARTIFACTS, DATASET, cfg, prov, {DATASET: fingerprint}, results)[1]


MEASUREMENT = Measurement(runs=runs, run=run, parts=parts, run_part=run_part)

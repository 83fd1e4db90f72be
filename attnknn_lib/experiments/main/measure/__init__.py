"""main: the training runs it needs and the analysis that writes its record."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from attnknn_lib.base.files import write_npz
from attnknn_lib.base.paths import Paths
from attnknn_lib.base.runtime import seed_everything
from attnknn_lib.data.spec import prepare
from attnknn_lib.data.transforms import tta_views
from attnknn_lib.evaluation.bootstrap import paired_bootstrap_diff
from attnknn_lib.evaluation.calibration import Calibrator, fit_calibrator
from attnknn_lib.evaluation.inference import attnknn_probs
from attnknn_lib.evaluation.methods import (
    K_ENSEMBLE,
    METHOD_LABELS,
    MethodProbs,
    attnknn_method,
    attnknn_methods,
    best_baseline,
    cnn_methods,
    knn_methods,
    score,
)
from attnknn_lib.evaluation.metrics import METRICS, accuracy, confusion_matrix, reliability_bins
from attnknn_lib.evaluation.verdicts import DESCRIBED, HIGHER_IS_BETTER, seed_level, split_level, verdict
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.experiments.common.learned_metric import LABELS as LEARNED_LABELS
from attnknn_lib.experiments.common.learned_metric import LEARNED_METHODS, learned_metric_of
from attnknn_lib.experiments.framework.declaration import Measurement
from attnknn_lib.experiments.framework.parts import part_result, part_seconds
from attnknn_lib.experiments.main.config import ABLATIONS, ARTIFACTS, COMPARISONS, NAME, RELIABILITY_METHODS, Config
from attnknn_lib.experiments.main.measure.knob_search import KNOB_METHODS, knobs_entry, label_knob_methods
from attnknn_lib.knn.votes import effective_neighbours, softmax_rows, vote
from attnknn_lib.models import MultiHeadNeighbourAttention
from attnknn_lib.training.convergence import plateau
from attnknn_lib.training.loops import train_attention_head


def runs(cfg: Config):
    """Attn-KNN and CNN for every dataset and seed, and the control CNN."""
    return [r for name in cfg.datasets for seed, spec in cfg.replicates(name) for r in core.model_runs(cfg, spec, (seed,))] \
        + cfg.control_runs() + cfg.replay_runs() + cfg.fixed_vote_runs()


@dataclass
class DatasetRun:
    """Everything one dataset produced: the JSON record plus what the figures need (first seed)."""

    dataset: object
    record: dict
    methods: dict[str, MethodProbs]  # first seed
    histories: dict[str, list[dict]]  # first seed


def run_ablation(cfg: Config, ds, emb, seed: int) -> dict:
    """Attention variants trained on the frozen Attn-KNN embedding; each scored like the main methods."""
    base = cfg.attention_config(ds.num_classes)
    methods, extra = {}, {}
    train_nb = emb.bank.search_excluding(emb.bank.embeddings, cfg.k, np.arange(len(emb.bank)))  # shared by all
    for name, switches in ABLATIONS.items():
        seed_everything(seed)
        att = MultiHeadNeighbourAttention(replace(base, **switches))
        res = train_attention_head(att, emb.bank, emb.val["original"], ds.val.y, cfg.k, epochs=cfg.ablation_epochs,
                                   seed=seed, train_neighbours=train_nb,
                                   val_neighbours=emb.neighbours[("val", "original")], progress=False,
                                   patience=cfg.ablation_patience)
        probs = attnknn_method(res.model, emb, cfg.k)
        methods[name] = MethodProbs(probs.val, probs.test, {"switches": switches})
        extra[name] = {"history": res.history, "best_epoch": res.best_epoch, "seconds": res.seconds,
                       "temperatures": res.model.temperatures().tolist(),
                       "plateau": len(res.history) - res.best_epoch >= cfg.ablation_patience}
    scored = score(methods, ds, n_boot=cfg.n_boot, seed=seed)
    for name in scored:
        scored[name]["label"] = name.replace("_", " ")
        scored[name]["training"] = extra[name]
    return scored


REPLAY_ROWS = {  # defect -> its table row, on the first seed (the prototype ran one)
    "one_seed": "first seed only",
    "self_matches": "+ self-matches in training",
    "test_checkpoint": "+ checkpoint chosen on test",
    "untuned_baseline": "+ untuned distance baseline",
    "raw_calibration": "+ no calibration",
    "tta_attnknn_only": "+ TTA for Attn-KNN only",
}
VERDICT_SHORT = {"better": "better", "worse": "worse", "equivalent": "equiv.", "inconclusive": "incon.", "identical": "ident."}


def _single_run(cfg: Config, a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], labels: np.ndarray,
                seed: int, calibrated: bool = True) -> dict:
    """Attn-KNN minus a baseline on one run, read the way a single run is read: accuracy raw,
    ECE and NLL calibrated (raw when ``calibrated`` is off), each with its paired bootstrap
    interval over test points and the verdict that interval gives against the margins (ECE: no
    margin, no verdict; it is described only)."""
    raw = paired_bootstrap_diff([a[0]], [b[0]], labels, n_boot=cfg.n_boot, seed=seed)
    cal = paired_bootstrap_diff([a[1]], [b[1]], labels, n_boot=cfg.n_boot, seed=seed) if calibrated else raw
    out = {}
    for metric, d in (("accuracy", raw["accuracy"]), ("ece", cal["ece"]), ("nll", cal["nll"])):
        out[metric] = {**d, "n_seeds": 1}
        if metric not in DESCRIBED:
            out[metric].update(margin=cfg.margin(metric), verdict=verdict(d["low"], d["high"], cfg.margin(metric),
                                                                          HIGHER_IS_BETTER[metric], 2))
    return out


def prototype_replay(cfg: Config, prepared, paths: Paths, device, seed: int, methods: dict[str, MethodProbs],
                     scored: dict, best: str, emb) -> dict:
    """The prototype's defects re-introduced one at a time on the first seed (issue: prototype
    replay), each row Attn-KNN minus its baseline as one run would report it."""
    ds = prepared.dataset
    y = ds.test.y

    def pair(name: str) -> tuple[np.ndarray, np.ndarray]:
        return methods[name].test, Calibrator(**scored[name]["calibrator"]).apply(methods[name].test)

    def fitted(p: MethodProbs) -> tuple[np.ndarray, np.ndarray]:
        return p.test, fit_calibrator(p.val, ds.val.y).apply(p.test)

    def against_tuned_rule(model) -> tuple[dict, str]:
        """Attn-KNN of ``model`` minus the best kNN rule (chosen on validation) on its own embedding,
        with the mean effective k of its attention's test weights beside the row."""
        e = core.embed_views(model, prepared, 1, cfg.k, device)
        rules = knn_methods(e, ds, cfg.k)
        base = best_baseline(rules, ds.val.y, score({r: rules[r] for r in ("uniform", "distance", "cosine")},
                                                    ds, n_boot=1, seed=seed))
        row = _single_run(cfg, fitted(attnknn_method(model.attention, e, cfg.k)), fitted(rules[base]), y, seed)
        _, w = attnknn_probs(model.attention, e.bank, e.test["original"], cfg.k, neighbours=e.neighbours[("test", "original")])
        return {**row, "effective_k": float(effective_neighbours(w).mean())}, base

    rows = {"one_seed": _single_run(cfg, pair("attnknn"), pair(best), y, seed)}
    self_run, epochs_run = cfg.replay_runs()
    rows["self_matches"], best_self = against_tuned_rule(core.trained(self_run, paths, prepared)[0].model.to(device))
    rows["test_checkpoint"], checkpoint = test_checkpoint(cfg, prepared, paths, device, epochs_run, against_tuned_rule)
    nb = {s: emb.neighbours[(s, "original")] for s in ("val", "test")}
    untuned = MethodProbs(*(vote(softmax_rows(-nb[s].sq_dist[:, :cfg.k]), nb[s].labels[:, :cfg.k], ds.num_classes)
                            for s in ("val", "test")))
    rows["untuned_baseline"] = _single_run(cfg, pair("attnknn"), fitted(untuned), y, seed)
    rows["raw_calibration"] = _single_run(cfg, pair("attnknn"), pair(best), y, seed, calibrated=False)
    if "attnknn_tta" in methods:
        rows["tta_attnknn_only"] = _single_run(cfg, pair("attnknn_tta"), pair(best), y, seed)
    return {"seed": seed, "baseline": best, "self_matches_baseline": best_self, "checkpoint": checkpoint, "rows": rows}


def test_checkpoint(cfg: Config, prepared, paths: Paths, device, run, against_tuned_rule) -> tuple[dict, dict]:
    """The prototype's checkpoint rule: of ``run``'s epochs (it keeps their weights), the one whose
    Attn-KNN vote is most accurate on *test* (ties: the earlier epoch). Returns its row (Attn-KNN
    minus the tuned rule on that epoch's embedding) and what was chosen: both epochs and every
    epoch's test accuracy, which is read here for this row alone."""
    result = core.trained(run, paths, prepared)[0]
    model = result.model.to(device)
    test_acc = []
    for state in result.epoch_states:
        model.load_state_dict(state)
        model.eval()
        probs = attnknn_method(model.attention, core.embed_views(model, prepared, 1, cfg.k, device), cfg.k).test
        test_acc.append(float(accuracy(probs, prepared.dataset.test.y)))
    chosen = int(np.argmax(test_acc))  # first maximum: the earlier epoch wins a tie
    model.load_state_dict(result.epoch_states[chosen])
    model.eval()
    row, _ = against_tuned_rule(model)
    return row, {"test_selected_epoch": chosen + 1, "val_selected_epoch": result.best_epoch,
                 "epoch_test_accuracy": test_acc}


def _paired(cfg: Config, test_probs: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]],
            labels: dict[str, np.ndarray], sizes: tuple[int, int] | None = None) -> dict:
    """Attn-KNN minus the best baseline (chosen on validation per seed) and minus the CNN, raw and
    calibrated: per seed (paired-bootstrap 95 % intervals over test points) and over seeds.

    On one fixed split (``sizes`` None): pooled over seeds too, and the seed-level interval (t
    interval over the per-seed differences plus the test set's bootstrap variance); with resampled
    splits (``sizes`` = (n_test, n_train) of a split), every seed has its own test points: the
    corrected resampled t interval (:func:`~attnknn_lib.evaluation.verdicts.split_level`). Verdicts
    against the declared margins (:mod:`attnknn_lib.evaluation.verdicts`)."""
    out = {}
    for name, (a, b) in COMPARISONS.items():
        if any(b not in test_probs[s] for s in test_probs):
            continue  # a control this dataset does not train (the fixed vote: primary dataset only)
        entry = {"a": a, "b": b, "per_seed": {}, "replication": "seeds" if sizes is None else "splits"}
        for cal_i, split in enumerate(("raw", "calibrated")):
            pa = {s: test_probs[s][a][cal_i] for s in test_probs}
            pb = {s: test_probs[s][b][cal_i] for s in test_probs}
            for s in test_probs:
                entry["per_seed"].setdefault(s, {})[split] = paired_bootstrap_diff(
                    [pa[s]], [pb[s]], labels[s], n_boot=cfg.n_boot, seed=int(s))
            per = {m: [entry["per_seed"][s][split][m]["value"] for s in test_probs] for m in METRICS}
            if sizes is not None:
                entry.setdefault("seed_level", {})[split] = {
                    m: split_level(per[m], sizes[0], sizes[1], m, margin=cfg.margin(m)) for m in per}
                continue
            first = next(iter(labels.values()))
            pooled = paired_bootstrap_diff(list(pa.values()), list(pb.values()), first, n_boot=cfg.n_boot, seed=0)
            entry.setdefault("pooled", {})[split] = pooled
            entry.setdefault("seed_level", {})[split] = {
                m: seed_level(per[m], pooled[m]["se"], m, margin=cfg.margin(m)) for m in pooled}
        out[name] = entry
    return out


def measure_replicate(cfg: Config, name: str, seed: int, spec, paths: Paths) -> dict:
    """One replicate (seed, or split) of dataset ``name``: load the models, embed, evaluate and score
    every method; the ablation and the replay on the primary dataset's first seed; save its arrays.
    Returns its per-seed entry, the compared methods' test probabilities (raw, calibrated), its data
    fingerprint and, on the first replicate, every method's probabilities and the training curves
    (the figures read them)."""
    device = core.start(cfg)
    k_max = max(cfg.k, max(K_ENSEMBLE))
    prepared = prepare(spec)
    ds = prepared.dataset
    views = tta_views(ds, cfg.tta_views)
    models, cached = {}, {}
    for run in core.model_runs(cfg, prepared.spec, (seed,)):
        models[run.kind], cached[run.kind] = core.trained(run, paths, prepared)
    attn, cnn = models["attnknn"].model.to(device), models["cnn"].model.to(device)
    emb = core.embed_views(attn, prepared, cfg.tta_views, k_max, device)
    methods = {**knn_methods(emb, ds, cfg.k), **attnknn_methods(attn.attention, emb, cfg.k),
               **cnn_methods(cnn, ds, views, device=device)}
    for run in (cfg.control_runs() if name == cfg.primary else []):
        if run.seed == seed:
            control = core.trained(run, paths, prepared)[0].model.to(device)
            methods["cnn_mixup"] = core.cnn_method(control, prepared, device)
    fixed = [r for r in (cfg.fixed_vote_runs() if name == cfg.primary else []) if r.seed == seed]
    if fixed:  # the end-to-end control: its own embedding, its own fixed vote (temperature learned) at k
        models["fixed_vote"], cached["fixed_vote"] = core.trained(fixed[0], paths, prepared)
        control = models["fixed_vote"].model.to(device)
        methods["fixed_vote"] = attnknn_method(control.attention, core.embed_views(control, prepared, 1, cfg.k, device),
                                               cfg.k)
    # k, rule, filter, prior tuned on validation accuracy, and the same search for the calibration endpoint
    methods["reference"], methods["reference_nll"] = core.references_of(emb, prepared)
    # Attn-KNN with the tuned vote's knobs: k from its ladder (read from the tuned vote's search depth on),
    # filter, prior
    methods["attnknn_tuned"], methods["attnknn_tuned_nll"] = core.tuned_attention_of(
        attn.attention, emb, prepared, methods["reference"].info["k_searched"], device)
    if cfg.learned_metrics:  # NCA and the linear probe on the same embedding and memory
        methods.update(learned_metric_of(emb, prepared, cfg, seed))
    methods = {m: methods[m] for m in (*METHOD_LABELS, *KNOB_METHODS, *LEARNED_METHODS) if m in methods}
    scored = score(methods, ds, n_boot=cfg.n_boot, seed=seed)
    label_knob_methods(scored)
    for m in LEARNED_METHODS:
        if m in scored:
            scored[m]["label"] = LEARNED_LABELS[m]
    best = best_baseline(methods, ds.val.y, scored)
    first = seed == cfg.replicates(name)[0][0]
    ablation = run_ablation(cfg, ds, emb, seed) if cfg.ablation and name == cfg.primary and first else None
    replay = None
    if cfg.replay and name == cfg.primary and first:
        replay = prototype_replay(cfg, prepared, paths, device, seed, methods, scored, best, emb)
    entry = {
        "methods": scored, "best_baseline": best, "ablation": ablation,
        "training": {kind: {"history": r.history, "best_epoch": r.best_epoch, "seconds": r.seconds,
                            "plateau": plateau(r.history, r.best_epoch),
                            "loaded_from_cache": cached[kind]} for kind, r in models.items()},
        "temperatures": attn.attention.temperatures().tolist(),
        "knobs": knobs_entry(scored, cfg.k),
    }
    if "fixed_vote" in models:
        entry["fixed_vote_temperature"] = float(models["fixed_vote"].model.attention.temperatures()[0])
    test_probs = {}
    for key, m in (("attnknn", "attnknn"), ("best baseline", best), ("cnn", "cnn"), ("fixed_vote", "fixed_vote"),
                   *((m, m) for m in (*KNOB_METHODS, *LEARNED_METHODS))):
        if m not in methods:
            continue
        cal = Calibrator(**scored[m]["calibrator"])  # the one score() fitted on validation
        test_probs[key] = (methods[m].test, cal.apply(methods[m].test))
    _save_arrays(name, seed, ds, methods, emb, paths)
    return {"per_seed": entry, "test_probs": test_probs, "test_labels": ds.test.y, "fingerprint": prepared.fingerprint(),
            "replay": replay,
            "methods": methods if first else None,
            "histories": {k: r.history for k, r in models.items()} if first else None}


def parts(cfg: Config) -> list[str]:
    """One part per seed of the primary dataset and one per other dataset, all its replicates
    (:mod:`~attnknn_lib.experiments.framework.parts`): the workflow runs them as jobs of their own (main as
    one job took 16 min; a tabular dataset's ten splits take seconds)."""
    return [f"{cfg.primary}_seed{seed}" for seed, _ in cfg.replicates(cfg.primary)] \
        + [name for name in cfg.datasets if name != cfg.primary]


def _compute_part(cfg: Config, paths: Paths, part: str):
    if part in cfg.datasets:
        return [measure_replicate(cfg, part, seed, spec, paths) for seed, spec in cfg.replicates(part)]
    seed = int(part.removeprefix(f"{cfg.primary}_seed"))
    return measure_replicate(cfg, cfg.primary, seed, dict(cfg.replicates(cfg.primary))[seed], paths)


def run_part(cfg: Config, paths: Paths, part: str):
    """Part ``part`` (see :func:`parts`), computed and stored unless stored under this config and code."""
    core.start(cfg)
    return part_result(paths, cfg, NAME, part, lambda: _compute_part(cfg, paths, part))


def _dataset_parts(cfg: Config, name: str) -> list[str]:
    return [p for p in parts(cfg) if p == name or p.startswith(f"{name}_seed")]


def run_dataset(cfg: Config, name: str, paths: Paths) -> DatasetRun:
    """Every replicate of one dataset (:func:`measure_replicate`, stored by the workflow's part
    jobs or computed here): aggregate and compare; the record is written."""
    device, prov, clock = core.begin(cfg)
    got = [part_result(paths, cfg, NAME, p, lambda p=p: _compute_part(cfg, paths, p)) for p in _dataset_parts(cfg, name)]
    reps = got[0] if len(got) == 1 and isinstance(got[0], list) else got
    replicates = cfg.replicates(name)
    seeds = [str(seed) for seed, _ in replicates]
    per_seed = {s: r["per_seed"] for s, r in zip(seeds, reps)}
    test_probs = {s: r["test_probs"] for s, r in zip(seeds, reps)}
    fingerprints = {s: r["fingerprint"] for s, r in zip(seeds, reps)}
    replay = next((r["replay"] for r in reps if r["replay"] is not None), None)
    first_ds = prepare(replicates[0][1]).dataset
    ds = prepare(replicates[-1][1]).dataset if len(replicates) > 1 and cfg.by_splits(name) else first_ds
    labels = {s: r["test_labels"] for s, r in zip(seeds, reps)}
    first = DatasetRun(first_ds, {}, reps[0]["methods"], reps[0]["histories"])
    sizes = (len(ds.test), len(ds.train)) if cfg.by_splits(name) else None
    results = {
        "dataset": ds.summary(),
        "class_names": list(ds.class_names),  # the confusion matrix's labels, for rendering without the data
        "seeds": [seed for seed, _ in cfg.replicates(name)],
        "replication": "seeds" if sizes is None else f"{len(per_seed)} stratified hold-out splits (split seed = model seed)",
        "summary": core.aggregate_seeds({s: d["methods"] for s, d in per_seed.items()}),
        "paired": _paired(cfg, test_probs, labels, sizes),
        "replay": replay,
        "per_seed": per_seed,
        "model_configs": {"attention": cfg.attention_config(ds.num_classes).to_dict(),
                          "train": cfg.train_config(ds.kind, cfg.seeds[0]).to_dict(),
                          "backbone": cfg.backbone(ds.kind)[0]},
        "figure_data": figure_data(first, first_ds),
        # the record's wall time only reads the parts; what computing them took is kept beside it
        "timings": {"seconds": clock(), "parts_seconds": part_seconds(paths, cfg, NAME, _dataset_parts(cfg, name))},
    }
    fp = {name: fingerprints[seeds[0]]}
    if sizes is not None:  # one data fingerprint per split; the name keeps the first's
        fp = {name: next(iter(fingerprints.values())), **{f"{name} split {s}": f for s, f in fingerprints.items()}}
    _, record = core.write_record(paths, ARTIFACTS, name, cfg, prov, fp, results)
    first.record = record
    return first


def figure_data(first: DatasetRun, ds) -> dict:
    """What the first seed's figures are drawn from besides the record's metrics, so that they can
    be drawn again without the probabilities: the reliability bins of each method on the test set
    (raw probabilities) and Attn-KNN's confusion matrix."""
    methods = first.methods
    return {"reliability": {m: {key: v.tolist() for key, v in reliability_bins(methods[m].test, ds.test.y).items()}
                            for m in RELIABILITY_METHODS if m in methods},
            "confusion": confusion_matrix(methods["attnknn"].test, ds.test.y, ds.num_classes).tolist()}


def _save_arrays(name: str, seed: int, ds, methods: dict[str, MethodProbs], emb, paths: Paths) -> None:
    """Per-method probabilities (val and test, raw) with labels, and the memory / query embeddings."""
    # float64: a broken tie is 1e-9 ahead (knn.votes.break_ties), which float32 would round away
    probs = {f"{split}_{m}": getattr(p, split).astype(np.float64) for m, p in methods.items()
             for split in ("val", "test")}
    write_npz(paths.artifacts / f"main_{name}_s{seed}_probs.npz", val_labels=ds.val.y, test_labels=ds.test.y,
              val_ids=ds.val.ids, test_ids=ds.test.ids, **probs)
    write_npz(paths.artifacts / f"main_{name}_s{seed}_embeddings.npz", memory=emb.bank.embeddings,
              memory_labels=emb.bank.labels, memory_ids=ds.train.ids, val=emb.val["original"],
              test=emb.test["original"], val_labels=ds.val.y, test_labels=ds.test.y)


def run(cfg: Config, paths: Paths) -> dict[str, DatasetRun]:
    """Every dataset of ``cfg``, the primary one first (the notebook runs them in this order, with
    its narrative between): {dataset: its run, whose record is written}."""
    order = [cfg.primary] + [d for d in cfg.datasets if d != cfg.primary]
    return {name: run_dataset(cfg, name, paths) for name in order}


MEASUREMENT = Measurement(runs=runs, run=run, parts=parts, run_part=run_part)

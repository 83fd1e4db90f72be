"""Main comparison (notebook ``01_main``): Attn-KNN against tuned kNN baselines and a CNN, over seeds.

For each dataset and seed: load the trained Attn-KNN and CNN (workflow jobs; trained here only
when the notebook runs alone), embed train / val / test (every TTA view), evaluate every method
of :mod:`attnknn_lib.evaluation.methods` and score it with bootstrap intervals. Across seeds: mean and
standard deviation of every metric, and the paired difference Attn-KNN minus the best baseline
(and minus the CNN) per seed and pooled over seeds (:func:`attnknn_lib.evaluation.metrics.paired_bootstrap_diff`).
On the primary dataset, for the first seed, the attention components are ablated on the frozen
Attn-KNN embedding. Writes ``results/main_<dataset>.json``, LaTeX tables, figures and the ``.npz``
artifacts from which every number can be recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from attnknn_lib.base.errors import ConfigError, check_choice, check_range
from attnknn_lib.base.files import read_json, write_npz, write_text
from attnknn_lib.base.knobs import csv, int_csv, knob
from attnknn_lib.base.paths import Paths
from attnknn_lib.base.runtime import seed_everything
from attnknn_lib.data.registry import DATASET_NAMES, REGISTRY
from attnknn_lib.data.spec import DataSpec, prepare
from attnknn_lib.data.transforms import tta_views
from attnknn_lib.evaluation.calibration import Calibrator, fit_calibrator
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
from attnknn_lib.evaluation.metrics import METRICS, accuracy, confusion_matrix, paired_bootstrap_diff, reliability_bins
from attnknn_lib.evaluation.verdicts import HIGHER_IS_BETTER, MARGINS, VERDICTS, seed_level, split_level, verdict
from attnknn_lib.experiments import shared as core
from attnknn_lib.experiments.shared import ExperimentConfig
from attnknn_lib.knn.votes import softmax_rows, vote
from attnknn_lib.models import MultiHeadNeighborAttention
from attnknn_lib.report import figures
from attnknn_lib.report.findings import difference_text, mean_pct, seeds_text
from attnknn_lib.report.macros import (
    PATH_MARK,
    VERDICT_PHRASES,
    diff_macros,
    macro_name,
    metric_macros,
    record_macros,
    signed,
    source_note,
)
from attnknn_lib.report.tables import booktabs, fmt, interval_text, methods_frame, num, sd_text, seed_frame
from attnknn_lib.training.convergence import plateau
from attnknn_lib.training.loops import train_attention_head

NAME = "main"
NOTEBOOK = "01_main.ipynb"
# attention variants of the ablation: name -> switches on top of the main configuration
ABLATIONS: dict[str, dict] = {
    "default": {},
    "no_distance_bias": {"distance_bias": False},
    "fixed_temperature": {"learn_temperature": False},
    "label_bias": {"label_bias": True},
    "prototypes": {"prototypes": True},
    "neighbor_self_attention": {"neighbor_self_attention": True},
    "all_components": {"label_bias": True, "prototypes": True, "neighbor_self_attention": True},
}
RELIABILITY_METHODS = ("uniform", "distance", "attnknn", "attnknn_tta", "cnn")
SUMMARY_METHODS = ("uniform", "distance", "cosine", "attnknn", "attnknn_tta", "cnn")
COMPARISONS = {"attnknn_vs_best_baseline": ("attnknn", "best baseline"), "attnknn_vs_cnn": ("attnknn", "cnn")}


@dataclass(frozen=True)
class Config(ExperimentConfig):
    """The main experiment's own knobs on top of the shared recipe."""

    datasets: tuple[str, ...] = knob(("fashion_mnist", "digits", "iris", "wine", "breast_cancer"),
                                     "comma-separated dataset names")
    primary: str = knob("fashion_mnist", "dataset of the ablation, training curves and confusion matrix")
    seeds: tuple[int, ...] = knob((0, 1, 2, 3, 4), "training seeds (comma-separated)")
    tta_views: int = knob(6, "test-time augmentation views, 1 to 6")
    n_boot: int = knob(1000, "bootstrap resamples for the 95 % intervals")
    ablation: bool = knob(True, "ablate the attention components on the primary dataset (first seed)")
    ablation_epochs: int = knob(2, "epochs per ablation variant")
    mixup_control: float = knob(0.2, "MixUp alpha of a control CNN on the primary dataset (0: no control)")
    control_seeds: int = knob(3, "the control CNN is trained for the first n seeds")
    replay: bool = knob(True, "prototype replay on the primary dataset's first seed: re-introduce its defects one at a time")
    small_data_splits: int = knob(10, "tabular data sets: stratified hold-out splits, each with its own split and "
                                      "model seed (0: the seeds on one split)")
    margin_accuracy: float = knob(MARGINS["accuracy"], "equivalence margin of accuracy differences (0.0025 is 0.25 pp)")
    margin_ece: float = knob(MARGINS["ece"], "equivalence margin of ECE differences")
    margin_nll: float = knob(MARGINS["nll"], "equivalence margin of NLL differences")

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "datasets", csv(self.datasets))
        object.__setattr__(self, "seeds", int_csv("seeds", self.seeds))
        if not self.datasets:
            raise ConfigError("datasets='' is empty; give at least one of: " + ", ".join(DATASET_NAMES))
        for name in self.datasets:
            check_choice("dataset", name, DATASET_NAMES)
        check_choice("primary", self.primary, self.datasets)
        check_range("tta_views", self.tta_views, 1, 6)
        check_range("ablation_epochs", self.ablation_epochs, 1, None)
        check_range("n_boot", self.n_boot, 1, None)
        check_range("k", self.k, 1, max(K_ENSEMBLE))
        check_range("control_seeds", self.control_seeds, 1, None)
        check_range("small_data_splits", self.small_data_splits, 0, None)
        for name in ("mixup_control", "margin_accuracy", "margin_ece", "margin_nll"):
            check_range(name, getattr(self, name), 0.0, None)

    def margin(self, metric: str) -> float:
        """The declared equivalence margin of a metric (the config's, else the library's)."""
        return getattr(self, f"margin_{metric}", MARGINS[metric])


    def replicates(self, name: str) -> list[tuple[int, DataSpec]]:
        """(model seed, data) of each replicate of dataset ``name``: the seeds on one fixed split for
        image data; for tabular data (tens to hundreds of test points), ``small_data_splits``
        stratified hold-out splits, split r with split seed r and model seed r, so the comparison
        counts the split's sampling error (:func:`~attnknn_lib.evaluation.verdicts.split_level`)."""
        if REGISTRY[name].kind == "image" or not self.small_data_splits:
            return [(s, core.data_spec(self, name)) for s in self.seeds]
        return [(r, core.data_spec(self, name, split_seed=r)) for r in range(self.small_data_splits)]

    def by_splits(self, name: str) -> bool:
        return REGISTRY[name].kind != "image" and bool(self.small_data_splits)

    def replay_runs(self):
        """The replay's two Attn-KNN runs on the primary dataset's first seed, otherwise the recipe's
        run: one trained with self-matches (the prototype's defect), and one that keeps every
        epoch's weights, so the replay can choose the checkpoint on test (the other defect that
        needs training). The second trains like the recipe's run; only what it saves differs."""
        if not self.replay:
            return []
        run = core.model_runs(self, core.data_spec(self, self.primary), self.seeds[:1], kinds=("attnknn",))[0]
        return [replace(run, train={**run.train, "exclude_self": False}),
                replace(run, train={**run.train, "keep_epochs": True})]

    def control_runs(self):
        """The control CNN's runs: the recipe with ``mixup_control`` as its MixUp alpha, on the
        primary dataset, first ``control_seeds`` seeds; none if that is the recipe's own alpha."""
        if not self.mixup_control or self.mixup_control == self.mixup_alpha:
            return []
        recipe = replace(self.recipe(), mixup_alpha=self.mixup_control)
        return core.model_runs(recipe, core.data_spec(self, self.primary), self.seeds[:self.control_seeds],
                               kinds=("cnn",))


def runs(cfg: Config):
    """Attn-KNN and CNN for every dataset and seed, and the control CNN."""
    return [r for name in cfg.datasets for seed, spec in cfg.replicates(name) for r in core.model_runs(cfg, spec, (seed,))] \
        + cfg.control_runs() + cfg.replay_runs()


def outputs(cfg: Config) -> list[str]:
    """Files the notebook writes (relative to the output root)."""
    out = ["results/tables/main_summary.tex"]
    for name in cfg.datasets:
        out += [f"results/main_{name}.json", f"results/tables/main_{name}.tex",
                f"figures/main_{name}_reliability.pdf", f"figures/main_{name}_reliability.png"]
    p = cfg.primary
    out += [f"results/tables/main_{p}_paired.tex", f"results/tables/main_{p}_seeds.tex"]
    out += [f"figures/main_{p}_{f}.{ext}" for f in ("curves", "confusion") for ext in ("pdf", "png")]
    if cfg.ablation:
        out.append(f"results/tables/main_{p}_ablation.tex")
    if cfg.replay:
        out.append(f"results/tables/main_{p}_replay.tex")
    return out


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
        att = MultiHeadNeighborAttention(replace(base, **switches))
        res = train_attention_head(att, emb.bank, emb.val["original"], ds.val.y, cfg.k, epochs=cfg.ablation_epochs,
                                   seed=seed, train_neighbors=train_nb,
                                   val_neighbors=emb.neighbors[("val", "original")], progress=False)
        probs = attnknn_method(res.model, emb, cfg.k)
        methods[name] = MethodProbs(probs.val, probs.test, {"switches": switches})
        extra[name] = {"history": res.history, "best_epoch": res.best_epoch, "seconds": res.seconds,
                       "temperatures": res.model.temperatures().tolist()}
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


VERDICT_SHORT = {"better": "better", "worse": "worse", "equivalent": "equiv.", "inconclusive": "incon."}


def _single_run(cfg: Config, a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], labels: np.ndarray,
                seed: int, calibrated: bool = True) -> dict:
    """Attn-KNN minus a baseline on one run, read the way a single run is read: accuracy raw,
    ECE and NLL calibrated (raw when ``calibrated`` is off), each with its paired bootstrap
    interval over test points and the verdict that interval gives against the margins."""
    raw = paired_bootstrap_diff([a[0]], [b[0]], labels, n_boot=cfg.n_boot, seed=seed)
    cal = paired_bootstrap_diff([a[1]], [b[1]], labels, n_boot=cfg.n_boot, seed=seed) if calibrated else raw
    out = {}
    for metric, d in (("accuracy", raw["accuracy"]), ("ece", cal["ece"]), ("nll", cal["nll"])):
        out[metric] = {**d, "margin": cfg.margin(metric), "n_seeds": 1,
                       "verdict": verdict(d["low"], d["high"], cfg.margin(metric), HIGHER_IS_BETTER[metric], 2)}
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
        """Attn-KNN of ``model`` minus the best kNN rule (chosen on validation) on its own embedding."""
        e = core.embed(model, prepared, 1, cfg.k, device)
        rules = knn_methods(e, ds, cfg.k)
        base = best_baseline(rules, ds.val.y, score({r: rules[r] for r in ("uniform", "distance", "cosine")},
                                                    ds, n_boot=1, seed=seed))
        return _single_run(cfg, fitted(attnknn_method(model.attention, e, cfg.k)), fitted(rules[base]), y, seed), base

    rows = {"one_seed": _single_run(cfg, pair("attnknn"), pair(best), y, seed)}
    self_run, epochs_run = cfg.replay_runs()
    rows["self_matches"], best_self = against_tuned_rule(core.trained(self_run, paths, prepared)[0].model.to(device))
    rows["test_checkpoint"], checkpoint = test_checkpoint(cfg, prepared, paths, device, epochs_run, against_tuned_rule)
    nb = {s: emb.neighbors[(s, "original")] for s in ("val", "test")}
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
        probs = attnknn_method(model.attention, core.embed(model, prepared, 1, cfg.k, device), cfg.k).test
        test_acc.append(float(accuracy(probs, prepared.dataset.test.y)))
    chosen = int(np.argmax(test_acc))  # first maximum: the earlier epoch wins a tie
    model.load_state_dict(result.epoch_states[chosen])
    model.eval()
    row, _ = against_tuned_rule(model)
    return row, {"test_selected_epoch": chosen + 1, "val_selected_epoch": result.best_epoch,
                 "epoch_test_accuracy": test_acc}


def _checkpoint_text(replay: dict) -> str:
    """`` (epoch a; validation chose epoch b)`` for the replay's checkpoint row, or ``""``."""
    c = replay.get("checkpoint")
    return f" (epoch {c['test_selected_epoch']}; validation chose epoch {c['val_selected_epoch']})" if c else ""


def replay_frame(record: dict, latex: bool = True) -> pd.DataFrame:
    """Our protocol (seed-level, every seed) and each re-introduced defect (one run): the difference
    Attn-KNN minus the baseline with its interval and verdict."""
    res = record["results"]
    replay = res.get("replay")
    if not replay:
        return pd.DataFrame()
    protocol = res["paired"]["attnknn_vs_best_baseline"]["seed_level"]
    rows = {f"our protocol ({len(res['seeds'])} seeds)": {"accuracy": protocol["raw"]["accuracy"],
                                                         "ece": protocol["calibrated"]["ece"],
                                                         "nll": protocol["calibrated"]["nll"]}}
    for name, d in replay["rows"].items():
        rows[REPLAY_ROWS[name]] = d
    cols = {"accuracy": "$\\Delta$ Acc. (pp)" if latex else "Δ acc. (pp)",
            "ece": "$\\Delta$ ECE" if latex else "Δ ECE", "nll": "$\\Delta$ NLL" if latex else "Δ NLL"}
    out = {}
    for label, d in rows.items():
        out[label] = {cols[m]: (f"{fmt(d[m], m, signed=True)} {VERDICT_SHORT[d[m]['verdict']]}" if m == "accuracy" else
                                f"{fmt(d[m], m, ci=False, signed=True)} {VERDICT_SHORT[d[m]['verdict']]}") if latex else
                      f"{signed((100 if m == 'accuracy' else 1) * d[m]['value'], 2 if m == 'accuracy' else 4)} "
                      f"{d[m]['verdict']}" for m in cols}
    df = pd.DataFrame.from_dict(out, orient="index")
    df.index.name = "protocol"
    return df


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


def run_dataset(cfg: Config, name: str, paths: Paths) -> DatasetRun:
    """Every seed of one dataset: load the models, evaluate, aggregate, compare; save the arrays."""
    device, prov, clock = core.begin(cfg)
    k_max = max(cfg.k, max(K_ENSEMBLE))
    per_seed, test_probs, labels, fingerprints, first, replay = {}, {}, {}, {}, None, None
    for seed, spec in cfg.replicates(name):
        prepared = prepare(spec)
        ds = prepared.dataset
        fingerprints[str(seed)] = prepared.fingerprint()
        views = tta_views(ds, cfg.tta_views)
        models, cached = {}, {}
        for run in core.model_runs(cfg, prepared.spec, (seed,)):
            models[run.kind], cached[run.kind] = core.trained(run, paths, prepared)
        attn, cnn = models["attnknn"].model.to(device), models["cnn"].model.to(device)
        emb = core.embed(attn, prepared, cfg.tta_views, k_max, device)
        methods = {**knn_methods(emb, ds, cfg.k), **attnknn_methods(attn.attention, emb, cfg.k),
                   **cnn_methods(cnn, ds, views, device=device)}
        for run in (cfg.control_runs() if name == cfg.primary else []):
            if run.seed == seed:
                control = core.trained(run, paths, prepared)[0].model.to(device)
                methods["cnn_mixup"] = core.cnn_method(control, prepared, device)
        methods = {m: methods[m] for m in METHOD_LABELS if m in methods}
        scored = score(methods, ds, n_boot=cfg.n_boot, seed=seed)
        best = best_baseline(methods, ds.val.y, scored)
        ablation = None
        if cfg.ablation and name == cfg.primary and seed == cfg.seeds[0]:
            ablation = run_ablation(cfg, ds, emb, seed)
        if cfg.replay and name == cfg.primary and seed == cfg.seeds[0]:
            replay = prototype_replay(cfg, prepared, paths, device, seed, methods, scored, best, emb)
        per_seed[str(seed)] = {
            "methods": scored, "best_baseline": best, "ablation": ablation,
            "training": {kind: {"history": r.history, "best_epoch": r.best_epoch, "seconds": r.seconds,
                                "plateau": plateau(r.history, r.best_epoch),
                                "loaded_from_cache": cached[kind]} for kind, r in models.items()},
            "temperatures": attn.attention.temperatures().tolist(),
        }
        test_probs[str(seed)], labels[str(seed)] = {}, ds.test.y
        for key, m in (("attnknn", "attnknn"), ("best baseline", best), ("cnn", "cnn")):
            cal = Calibrator(**scored[m]["calibrator"])  # the one score() fitted on validation
            test_probs[str(seed)][key] = (methods[m].test, cal.apply(methods[m].test))
        _save_arrays(name, seed, ds, methods, emb, paths)
        if first is None:
            first = DatasetRun(ds, {}, methods, {k: r.history for k, r in models.items()})
    sizes = (len(ds.test), len(ds.train)) if cfg.by_splits(name) else None
    results = {
        "dataset": ds.summary(),
        "seeds": [seed for seed, _ in cfg.replicates(name)],
        "replication": "seeds" if sizes is None else f"{len(per_seed)} stratified hold-out splits (split seed = model seed)",
        "summary": core.aggregate_seeds({s: d["methods"] for s, d in per_seed.items()}),
        "paired": _paired(cfg, test_probs, labels, sizes),
        "replay": replay,
        "per_seed": per_seed,
        "model_configs": {"attention": cfg.attention_config(ds.num_classes).to_dict(),
                          "train": cfg.train_config(ds.kind, cfg.seeds[0]).to_dict(),
                          "backbone": cfg.backbone(ds.kind)[0]},
        "timings": {"seconds": clock()},
    }
    fp = {name: prepared.fingerprint()}
    if sizes is not None:  # one data fingerprint per split; the name keeps the first's
        fp = {name: next(iter(fingerprints.values())), **{f"{name} split {s}": f for s, f in fingerprints.items()}}
    _, record = core.write_record(paths, NAME, name, cfg, prov, fp, results)
    first.record = record
    return first


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


def _diff_frame(paired: dict) -> pd.DataFrame:
    """Rows: comparison x seed, then over seeds (seed-level interval and verdict); columns:
    accuracy, ECE, NLL differences with 95 % intervals."""

    rows = {}
    cols = (("$\\Delta$ Acc. (pp)", "raw", "accuracy"), ("$\\Delta$ ECE", "raw", "ece"),
            ("$\\Delta$ ECE (cal.)", "calibrated", "ece"), ("$\\Delta$ NLL (cal.)", "calibrated", "nll"))
    for _name, entry in paired.items():
        label = f"$-$ {'best baseline' if entry['b'] == 'best baseline' else 'CNN'}"  # short: the table fits unscaled
        for s, d in entry["per_seed"].items():
            rows[f"{label}, seed {s}"] = {c: fmt(d[split][m], m, signed=True) for c, split, m in cols}
        over = entry["seed_level"]
        rows[f"{label}, over seeds"] = {c: fmt(over[split][m], m, signed=True) for c, split, m in cols}
        rows[f"{label}, verdict"] = {c: over[split][m]["verdict"] for c, split, m in cols}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "Attn-KNN"
    return df


CAL_NOTE = ("each method's second row: after the post-hoc calibrator fitted on validation (one rule for every "
            "method: a temperature, plus a smoothing toward uniform that stays 0 unless it lowers validation NLL; "
            "it keeps the predicted class, so accuracy and F1 do not change)")


def write_outputs(run: DatasetRun, paths: Paths, primary: bool) -> dict[str, Path]:
    """The dataset's LaTeX table(s) and figures (curves, confusion matrix, ablation, paired
    differences and per-seed intervals on the primary dataset)."""

    ds, res, profile = run.dataset, run.record["results"], run.record["profile"]
    name, title = ds.name, REGISTRY[ds.name].title
    seeds = ", ".join(map(str, res["seeds"]))
    src = source_note(NOTEBOOK, NAME, name)
    out = {"table": write_text(paths.tables / f"main_{name}.tex", booktabs(
        seed_frame(res["summary"]),
        f"{title}: test metrics, mean $\\pm$ s.d.\\ {_over(res)}; {CAL_NOTE}. Profile "
        f"\\texttt{{{profile}}}. {src}.", "tab:main-primary" if primary else f"tab:main-{name.replace('_', '-')}",
        escape_index=False))}
    first = str(res["seeds"][0])
    bins = {METHOD_LABELS[m]: reliability_bins(run.methods[m].test, ds.test.y) for m in RELIABILITY_METHODS
            if m in run.methods}
    eces = {METHOD_LABELS[m]: res["per_seed"][first]["methods"][m]["test_raw"]["ece"]["value"]
            for m in RELIABILITY_METHODS if m in run.methods}
    fig = figures.reliability_diagrams(bins, eces, f"{title} (test, seed {first}, before calibration)")
    out["reliability"] = figures.save_figure(fig, paths.figures, f"main_{name}_reliability")[0]
    if not primary:
        return out
    out["paired"] = write_text(paths.tables / f"main_{name}_paired.tex", booktabs(
        _diff_frame(res["paired"]),
        f"{title}: paired differences on the same test points (Attn-KNN minus the other method). Per seed: 95\\% "
        f"paired bootstrap intervals over test points. Over seeds {seeds}: mean of the per-seed differences, 95\\% "
        f"$t$ interval counting the seeds' spread and the test set's bootstrap variance, and the verdict against "
        f"the declared margins ({_margins_text(run.record['config'])}). Accuracy in percentage points; negative "
        f"ECE / NLL differences favour Attn-KNN. {src}.", "tab:main-paired", colsep="2pt"))
    per_seed = {s: d["methods"] for s, d in res["per_seed"].items()}
    out["seeds"] = write_text(paths.tables / f"main_{name}_seeds.tex", booktabs(
        seed_intervals_frame(per_seed),
        f"{title}: test accuracy (\\%) of each seed with its 95\\% bootstrap interval. {src}.", "tab:main-seeds"))
    fig = figures.training_curves({"Attn-KNN": run.histories["attnknn"], "CNN": run.histories["cnn"]},
                                f"{title} (seed {first})")
    out["curves"] = figures.save_figure(fig, paths.figures, f"main_{name}_curves")[0]
    cm = confusion_matrix(run.methods["attnknn"].test, ds.test.y, ds.num_classes)
    fig = figures.confusion_matrix_plot(cm, ds.class_names, f"Attn-KNN on {title} (test, seed {first})")
    out["confusion"] = figures.save_figure(fig, paths.figures, f"main_{name}_confusion")[0]
    if res.get("replay"):
        out["replay"] = write_text(paths.tables / f"main_{name}_replay.tex", booktabs(
            replay_frame(run.record),
            f"{title}: the prototype's defects re-introduced one at a time (seed {res['replay']['seed']}), each "
            f"row Attn-KNN minus its baseline as one run reports it: paired bootstrap 95\\% interval over test "
            f"points and the verdict it gives against the margins ({_margins_text(run.record['config'])}; "
            f"equiv.: equivalent, incon.: inconclusive). First row: our protocol over seeds {seeds} (seed-level interval). "
            f"Self-matches: Attn-KNN retrained with training queries that find themselves; untuned baseline: "
            f"distance weights with $\\tau = 1$ on squared distances (nearly uniform); no calibration: ECE and NLL "
            f"of the raw probabilities (elsewhere after calibration); checkpoint chosen on test: a rerun of "
            f"the recipe's run that keeps every epoch, at the epoch whose Attn-KNN test accuracy is highest"
            f"{_checkpoint_text(res['replay'])}. {src}.", "tab:main-replay"))
    ablation = res["per_seed"][first]["ablation"]
    if ablation:
        out["ablation"] = write_text(paths.tables / f"main_{name}_ablation.tex", booktabs(
            methods_frame(ablation),
            f"{title}: attention components trained on the frozen Attn-KNN embedding of seed {first} "
            f"(test, 95\\% intervals; {CAL_NOTE}). {src}.", "tab:ablation-primary", escape_index=False))
    return out


def _over(res: dict) -> str:
    """What a record's means run over: its seeds, or its resampled splits."""
    if res.get("replication", "seeds") == "seeds":
        return f"over seeds {', '.join(map(str, res['seeds']))}"
    return f"over {len(res['seeds'])} stratified hold-out splits (each with its own model seed)"


def seed_intervals_frame(per_seed: dict[str, dict]) -> pd.DataFrame:
    rows = {}
    for s, methods in per_seed.items():
        for m in SUMMARY_METHODS:
            if m in methods:
                rows.setdefault(methods[m]["label"], {})[f"seed {s}"] = fmt(methods[m]["test_raw"]["accuracy"],
                                                                            "accuracy")
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "Method"
    return df


def summary_frame(record: dict) -> pd.DataFrame:
    """Mean and s.d. over seeds of accuracy and ECE (raw and calibrated) per method, as plain numbers."""
    rows = {}
    for _m, r in record["results"]["summary"].items():
        raw, cal = r["test_raw"], r["test_calibrated"]
        rows[r["label"]] = {"accuracy (%)": num(raw["accuracy"]["mean"], 2, 100),
                            "± s.d.": sd_text(raw["accuracy"]["std"], 100, 2),
                            "ECE": num(raw["ece"]["mean"], 4), "ECE (cal.)": num(cal["ece"]["mean"], 4),
                            "NLL (cal.)": num(cal["nll"]["mean"], 3)}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "method"
    return df


PAIRED_METRICS = {"accuracy": ("accuracy (pp)", 100.0, 2), "ece": ("ECE", 1.0, 4), "nll": ("NLL", 1.0, 3)}


def paired_frame(record: dict) -> pd.DataFrame:
    """Seed-level paired differences of one record, Attn-KNN minus each comparison, raw and after
    calibration: per metric the mean difference (accuracy in percentage points), its 95 % interval
    and the verdict against the declared margin (named in the column header)."""
    res = record["results"]
    rows = {}
    for e in res["paired"].values():
        other = "best baseline" if e["b"] == "best baseline" else METHOD_LABELS.get(e["b"], e["b"])
        for split, split_label in (("raw", "raw"), ("calibrated", "after calibration")):
            row = {}
            for metric, (label, scale, dec) in PAIRED_METRICS.items():
                d = e["seed_level"][split][metric]
                head = f"{label}, margin {scale * d['margin']:g}"
                row[(head, "Δ")] = num(d["value"], dec, scale)
                row[(head, "95% interval")] = interval_text(d["low"], d["high"], dec, scale)
                row[(head, "verdict")] = d["verdict"]
            rows[(f"Attn-KNN − {other}", split_label)] = row
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    df.index.names = ["comparison", "probabilities"]
    return df.rename_axis(columns=[f"over {len(res['seeds'])} {_replicates(res)}", ""])


def _replicates(res: dict) -> str:
    return "seeds" if res.get("replication", "seeds") == "seeds" else "splits"


def _margins_text(config: dict) -> str:
    m = {k: config.get(f"margin_{k}", MARGINS[k]) for k in ("accuracy", "ece", "nll")}  # older records: defaults
    return f"accuracy {100 * m['accuracy']:g} pp, ECE {m['ece']:g}, NLL {m['nll']:g}"


def write_summary_table(paths: Paths, datasets: tuple[str, ...]) -> Path:
    """Accuracy and calibrated ECE (means over seeds) of the key methods across datasets."""
    rows = {}
    for name in datasets:
        summary = read_json(core.result_path(paths, NAME, name))["results"]["summary"]
        rows[REGISTRY[name].title] = {
            METHOD_LABELS[m]: f"{100 * summary[m]['test_raw']['accuracy']['mean']:.2f} / "
                              f"{summary[m]['test_calibrated']['ece']['mean']:.3f}" for m in SUMMARY_METHODS
            if m in summary}
    df = pd.DataFrame.from_dict(rows, orient="index").fillna("--")
    df.index.name = "Dataset"
    return write_text(paths.tables / "main_summary.tex", booktabs(
        df, "Test accuracy (\\%) / ECE after calibration, means over seeds (image data) or stratified hold-out splits "
            "(tabular data), per dataset and method. Notebook "
            "\\texttt{01\\_main}, \\texttt{results/main\\_*.json}.", "tab:main-summary"))


def main_macros(record: dict) -> dict[str, str]:
    """Macros of one ``main_<dataset>.json`` record (means over seeds, paired differences)."""
    ds = record["dataset"]
    res = record["results"]
    first = res["per_seed"][str(res["seeds"][0])]
    out: dict[str, str] = {}
    for method, entry in res["summary"].items():
        out.update(metric_macros(("main", ds, method), entry, key="mean"))
    for name, tag in (("attnknn_vs_best_baseline", "DiffBase"), ("attnknn_vs_cnn", "DiffCnn")):
        out.update(diff_macros(("main", ds, tag), res["paired"][name]["seed_level"]))
    for kind, tr in first["training"].items():
        out[macro_name("main", ds, kind, "Epochs")] = str(len(tr["history"]))
        out[macro_name("main", ds, kind, "BestEpoch")] = str(tr["best_epoch"])
        out[macro_name("main", ds, kind, "TrainMinutes")] = f"{tr['seconds'] / 60:.1f}"
    for kind in ("attnknn", "cnn"):  # the plateau rule (training.convergence) over seeds
        rules = [res["per_seed"][str(s)]["training"][kind].get("plateau") for s in res["seeds"]]
        rules = [r for r in rules if r]
        if rules:
            out[macro_name("main", ds, kind, "Plateau Count")] = str(sum(r["plateau"] for r in rules))
            out[macro_name("main", ds, kind, "Tail Range Max")] = f"{100 * max(r['tail_range'] for r in rules):.2f}"
            out[macro_name("main", ds, kind, "Selected Epochs")] = ", ".join(str(r["best_epoch"]) for r in rules)
    bests = [res["per_seed"][str(s)]["best_baseline"] for s in res["seeds"]]
    out[macro_name("main", ds, "BestBaseline")] = ", ".join(sorted(set(bests)))
    out[macro_name("main", ds, "NTrain")] = str(res["dataset"]["n_train"])
    out[macro_name("main", ds, "NTest")] = str(res["dataset"]["n_test"])
    out[macro_name("main", ds, "NSeeds")] = str(len(res["seeds"]))
    for name, entry in (first.get("ablation") or {}).items():
        out.update(metric_macros(("ablation", ds, name), entry))
    for row, d in ((res.get("replay") or {}).get("rows") or {}).items():
        out[macro_name("main", ds, "replay", row, "Acc")] = signed(100 * d["accuracy"]["value"], 2)
        out[macro_name("main", ds, "replay", row, "Acc Verdict")] = VERDICT_PHRASES[d["accuracy"]["verdict"]]
        out[macro_name("main", ds, "replay", row, "Ece")] = signed(d["ece"]["value"], 4)
        out[macro_name("main", ds, "replay", row, "Ece Verdict")] = VERDICT_PHRASES[d["ece"]["verdict"]]
    checkpoint = (res.get("replay") or {}).get("checkpoint")
    if checkpoint:
        out[macro_name("main", ds, "replay", "Test Selected Epoch")] = str(checkpoint["test_selected_epoch"])
        out[macro_name("main", ds, "replay", "Val Selected Epoch")] = str(checkpoint["val_selected_epoch"])
    out[macro_name("main", ds, "Profile")] = record["profile"]
    if record["config"].get("primary") == ds:  # dataset-independent names for the paper's main text
        prefix = macro_name("main", ds)
        for k, v in list(out.items()):
            if k.startswith(prefix):
                out["Primary" + k[len(prefix):]] = v
        out["PrimarySource"] = PATH_MARK + source_note(NOTEBOOK, NAME, ds)
        out["PrimaryName"] = REGISTRY[ds].title
        out["PrimaryNumClasses"] = str(res["dataset"]["num_classes"])
        out["PrimaryNVal"] = str(res["dataset"]["n_val"])
        for tab in ("", "_ablation", "_paired", "_seeds", "_replay"):
            out[macro_name("primary", tab, "table", "file")] = PATH_MARK + f"../results/tables/main_{ds}{tab}.tex"
        for fig in ("reliability", "curves", "confusion"):
            out[macro_name("primary", fig, "figure")] = PATH_MARK + f"../figures/main_{ds}_{fig}.pdf"
        out["PrimaryTemperatures"] = ", ".join(f"{t:.2f}" for t in first["temperatures"])
        out["PrimaryTuneTau"] = f"{first['methods']['distance']['info']['param']:g}"
        out["PrimaryTuneT"] = f"{first['methods']['cosine']['info']['param']:g}"
        out["PrimaryBestBaselineLabel"] = ", ".join(sorted({first["methods"][b]["label"] for b in bests}))
        out["MainProfile"] = record["profile"]
        out["MainDatasetCount"] = str(len(record["config"]["datasets"]))
        out["MainSeeds"] = ", ".join(map(str, res["seeds"]))
        conf = record["config"]
        for key in ("k", "epochs", "tabular_epochs", "n_boot", "embed_dim", "num_heads", "mixup_alpha",
                    "contrastive_weight", "entropy_weight", "tta_views", "hold_frac", "final_lr_frac"):
            if key in conf:  # records of older code lack the newer knobs
                out[macro_name("config", key)] = f"{conf[key]:,}" if key == "n_boot" else f"{conf[key]:g}"
        att, train = res["model_configs"]["attention"], res["model_configs"]["train"]
        out["ConfigTauMin"], out["ConfigTauMax"] = f"{att['tau_min']:g}", f"{att['tau_max']:g}"
        out["ConfigContrastiveTemperature"] = f"{train['contrastive_temperature']:g}"
        out["ConfigGradClip"] = f"{train['grad_clip']:g}"
        precision = first["training"]["attnknn"]["history"][-1].get("precision", "fp32")  # older records: fp32
        out["PrimaryTrainPrecision"] = {"bf16": "bf16 mixed precision", "fp16": "fp16 mixed precision"}.get(
            precision, "fp32")
        out["PrimaryTrainSearch"] = ("a bf16 scan of the bank that keeps $2k$ candidates, re-ranked in fp32"
                                     if train.get("search_precision") == "bf16" else "an exact fp32 scan of the bank")
        out["ConfigValPercent"] = f"{100 * conf['val_fraction']:g}"
    return out


def is_perfect(record: dict) -> bool:
    """Every method scores 100 % test accuracy on every seed: the dataset cannot tell them apart."""
    summary = record["results"]["summary"]
    return all(min(e["test_raw"]["accuracy"]["values"]) == 1.0 for e in summary.values())


def verdict_count_macros(records: list[dict]) -> dict[str, str]:
    """Over the main experiment's datasets: on how many Attn-KNN is better than / worse than /
    equivalent to the best baseline and the CNN, or inconclusive, per metric (seed-level verdicts,
    ``\\MainBaseAccCalWorse`` ...). Datasets where every method is perfect are counted apart
    (``\\MainPerfectCount``) and left out of the verdict counts."""
    if not records:
        return {}
    counted = [r for r in records if not is_perfect(r)]
    out = {macro_name("main", "Perfect Count"): str(len(records) - len(counted)),
           macro_name("main", "Counted Datasets"): str(len(counted))}
    for name, tag in (("attnknn_vs_best_baseline", "Base"), ("attnknn_vs_cnn", "Cnn")):
        for split, cal in (("raw", ""), ("calibrated", "Cal")):
            for metric, mname in (("accuracy", "Acc"), ("ece", "Ece"), ("nll", "Nll")):
                words = [r["results"]["paired"][name]["seed_level"][split][metric]["verdict"] for r in counted]
                for word in VERDICTS:
                    out[macro_name("main", tag, mname + cal, word)] = str(words.count(word))
    return out


README_SECTION = None  # the main table leads the README's results block


def macros(records: list[dict]) -> dict[str, str]:
    """Every macro of the main experiment: per dataset (:func:`main_macros`, caption sources) and the
    verdict counts over datasets (:func:`verdict_count_macros`)."""
    return {**record_macros(records, main_macros, NOTEBOOK, aliases=False), **verdict_count_macros(records)}


def readme_lines(records: list[dict]) -> list[str]:
    """A Markdown table of test accuracy (mean +- s.d. over seeds) and ECE (raw / after calibration)
    per dataset and key method: the first lines of the README's results block."""

    keys = ("uniform", "distance", "cosine", "attnknn", "attnknn_tta", "cnn")
    lines = []
    for record in records:
        summary = record["results"]["summary"]
        if not lines:
            lines = ["Test accuracy % (mean ± s.d. over replicates: seeds on image data, stratified held-out splits "
                     "with their own model seeds on tabular data) / "
                     f"ECE / ECE after calibration (profile `{record['profile']}`, commit "
                     f"`{record['provenance']['commit'][:8]}`; TTA needs image data):", "",
                     "| dataset | " + " | ".join(METHOD_LABELS[m] for m in keys) + " |",
                     "| --- " * (1 + len(keys)) + "|"]
        cells = []
        for m in keys:
            if m not in summary:
                cells.append("--")
                continue
            raw, cal = summary[m]["test_raw"], summary[m]["test_calibrated"]
            cells.append(f"{100 * raw['accuracy']['mean']:.2f} ± {sd_text(raw['accuracy']['std'], 100, 2)} / "
                         f"{raw['ece']['mean']:.3f} / {cal['ece']['mean']:.3f}")
        res = record["results"]
        reps = f"{len(res['seeds'])} {'seeds' if res.get('replication', 'seeds') == 'seeds' else 'splits'}"
        lines.append(f"| {REGISTRY[record['dataset']].title} ({reps}) | " + " | ".join(cells) + " |")
    return lines


def findings(records: list[dict]) -> str:
    """The notebook's answer: on the primary dataset, Attn-KNN against the best tuned kNN vote and the
    CNN (seed-level verdicts), whether the models reached a plateau, the verdict counts over every
    dataset and what the prototype's protocol would have shown. Every number is read from ``records``."""
    if not records:
        return "No results yet."
    primary = next((r for r in records if r["config"].get("primary") == r["dataset"]), records[0])
    res, cfg = primary["results"], primary["config"]
    summ, paired = res["summary"], res["paired"]
    title = REGISTRY[primary["dataset"]].title
    n = seeds_text(len(res["seeds"]), "seed" if res.get("replication", "seeds") == "seeds" else "split")
    best = sorted({res["per_seed"][str(s)]["best_baseline"] for s in res["seeds"]})
    lines = [f"**{title}** ({n}): Attn-KNN {mean_pct(summ['attnknn']['test_raw']['accuracy'])} test accuracy, "
             "the best tuned kNN vote chosen on validation (" + ", ".join(
                 f"{METHOD_LABELS.get(b, b)} {mean_pct(summ[b]['test_raw']['accuracy'])}" for b in best) + "), the CNN "
             f"{mean_pct(summ['cnn']['test_raw']['accuracy'])}. Declared margins: {_margins_text(cfg)}.", ""]
    for name, who in (("attnknn_vs_best_baseline", "the best kNN vote"), ("attnknn_vs_cnn", "the CNN")):
        sl = paired[name]["seed_level"]
        lines.append(f"- Attn-KNN minus {who}: accuracy {difference_text(sl['raw']['accuracy'], 'accuracy')}; "
                     f"ECE after calibration {difference_text(sl['calibrated']['ece'], 'ece')}; "
                     f"NLL after calibration {difference_text(sl['calibrated']['nll'], 'nll')}.")
    rules = {kind: [res["per_seed"][str(s)]["training"][kind].get("plateau") for s in res["seeds"]]
             for kind in ("attnknn", "cnn")}
    if all(all(rs) for rs in rules.values()):
        lines.append("- Operating point: the plateau rule holds for " + " and ".join(
            f"{METHOD_LABELS[k]} in {sum(r['plateau'] for r in rs)} of {len(rs)} runs (selected epochs "
            f"{', '.join(str(r['best_epoch']) for r in rs)})" for k, rs in rules.items()) + ".")
    counted = [r for r in records if not is_perfect(r)]
    if len(records) > 1:
        words = [r["results"]["paired"]["attnknn_vs_best_baseline"]["seed_level"]["raw"]["accuracy"]["verdict"]
                 for r in counted]
        lines.append(f"- Over the {len(counted)} datasets where the methods differ at all, Attn-KNN against the best "
                     "kNN vote in accuracy: " + ", ".join(f"{words.count(w)} {w}" for w in VERDICTS if words.count(w))
                     + ".")
    replay = (res.get("replay") or {}).get("rows") or {}
    if replay:
        lines.append(f"- Prototype replay (seed {res['replay']['seed']} alone, one defect at a time), Attn-KNN minus "
                     "its baseline in accuracy: " + "; ".join(
                         f"{REPLAY_ROWS[row]}: {difference_text(d['accuracy'], 'accuracy')}" for row, d in replay.items()) + ".")
    return "\n".join(lines)


def tuning_frame(record: dict) -> pd.DataFrame:
    """Per seed: the baseline validation chose, the tuned temperatures of the distance (tau) and
    cosine (T) votes and the learned temperatures of the attention heads."""
    rows = {}
    for seed, r in record["results"]["per_seed"].items():
        best = r["best_baseline"]
        rows[int(seed)] = {"best baseline": METHOD_LABELS.get(best, best),
                           "distance tau": f"{r['methods']['distance']['info']['param']:g}",
                           "cosine T": f"{r['methods']['cosine']['info']['param']:g}",
                           "head temperatures": ", ".join(f"{t:.3f}" for t in r["temperatures"])}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("seed")


def _duration(seconds: float) -> str:
    """``7.3 min`` or, under a minute, ``0.75 s`` (a tabular run takes a second)."""
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.2f} s"


def training_frame(record: dict) -> pd.DataFrame:
    """Per seed and model: the epoch validation selected, of how many, and the training minutes."""
    rows = {}
    for seed, r in record["results"]["per_seed"].items():
        for kind, t in r["training"].items():
            rows[(int(seed), METHOD_LABELS.get(kind, kind))] = {
                "selected epoch": int(t["best_epoch"]), "epochs": len(t["history"]),
                "training time": _duration(t["seconds"])}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis(["seed", "model"])


def ablation_frame(record: dict) -> pd.DataFrame:
    """The ablation of the attention components (first seed of the primary dataset) as the
    notebook shows it; empty when the run had the ablation off."""
    res = record["results"]
    ablation = res["per_seed"][str(res["seeds"][0])].get("ablation")
    return methods_frame(ablation, latex=False) if ablation else pd.DataFrame()


def answer_lines(records: list[dict]) -> list[str]:
    """The README's first lines: the primary dataset's seed-level verdicts of Attn-KNN against the
    best tuned kNN vote and the CNN (generated; the paper's abstract reads the same numbers)."""
    primary = next((r for r in records if r["config"].get("primary") == r["dataset"]), None)
    if primary is None or "seed_level" not in primary["results"]["paired"].get("attnknn_vs_best_baseline", {}):
        return []
    res = primary["results"]
    base, cnn = (res["paired"][n]["seed_level"] for n in ("attnknn_vs_best_baseline", "attnknn_vs_cnn"))
    n = seeds_text(len(res["seeds"]))
    return [f"- **Attn-KNN against tuned kNN votes** on {REGISTRY[primary['dataset']].title} ({n}, profile "
            f"`{primary['profile']}`), minus the best tuned kNN vote on the same embedding: accuracy "
            f"{difference_text(base['raw']['accuracy'], 'accuracy')}; ECE after calibration "
            f"{difference_text(base['calibrated']['ece'], 'ece')}; NLL after calibration "
            f"{difference_text(base['calibrated']['nll'], 'nll')} (margins {_margins_text(primary['config'])}).",
            f"- Against the CNN: accuracy {difference_text(cnn['raw']['accuracy'], 'accuracy')}; NLL after "
            f"calibration {difference_text(cnn['calibrated']['nll'], 'nll')}."]

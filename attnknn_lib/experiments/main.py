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
from attnknn_lib.data.spec import prepare
from attnknn_lib.data.transforms import tta_views
from attnknn_lib.evaluation.calibration import Calibrator
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
from attnknn_lib.evaluation.metrics import confusion_matrix, paired_bootstrap_diff, reliability_bins
from attnknn_lib.evaluation.verdicts import MARGINS, VERDICTS, seed_level
from attnknn_lib.experiments import shared as core
from attnknn_lib.experiments.shared import ExperimentConfig
from attnknn_lib.models import MultiHeadNeighborAttention
from attnknn_lib.report import figures
from attnknn_lib.report.macros import (
    PATH_MARK,
    diff_macros,
    macro_name,
    metric_macros,
    record_macros,
    source_note,
)
from attnknn_lib.report.tables import booktabs, fmt, methods_frame, sd_text, seed_frame
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
        for name in ("mixup_control", "margin_accuracy", "margin_ece", "margin_nll"):
            check_range(name, getattr(self, name), 0.0, None)

    def margin(self, metric: str) -> float:
        """The declared equivalence margin of a metric (the config's, else the library's)."""
        return getattr(self, f"margin_{metric}", MARGINS[metric])


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
    return [r for name in cfg.datasets for r in core.model_runs(cfg, core.data_spec(cfg, name), cfg.seeds)] + \
        cfg.control_runs()


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


def _paired(cfg: Config, test_probs: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]], labels: np.ndarray) -> dict:
    """Attn-KNN minus the best baseline (chosen on validation per seed) and minus the CNN, raw and
    calibrated: per seed and pooled over seeds (paired-bootstrap 95 % intervals over test points),
    and at the seed level (t interval over the per-seed differences plus the test set's bootstrap
    variance, with the verdict against the declared margin: :mod:`attnknn_lib.evaluation.verdicts`)."""
    out = {}
    for name, (a, b) in COMPARISONS.items():
        entry = {"a": a, "b": b, "per_seed": {}}
        for cal_i, split in enumerate(("raw", "calibrated")):
            pa = {s: test_probs[s][a][cal_i] for s in test_probs}
            pb = {s: test_probs[s][b][cal_i] for s in test_probs}
            for s in test_probs:
                entry["per_seed"].setdefault(s, {})[split] = paired_bootstrap_diff(
                    [pa[s]], [pb[s]], labels, n_boot=cfg.n_boot, seed=int(s))
            pooled = paired_bootstrap_diff(list(pa.values()), list(pb.values()), labels, n_boot=cfg.n_boot, seed=0)
            entry.setdefault("pooled", {})[split] = pooled
            entry.setdefault("seed_level", {})[split] = {
                m: seed_level([entry["per_seed"][s][split][m]["value"] for s in test_probs], pooled[m]["se"], m,
                              margin=cfg.margin(m)) for m in pooled}
        out[name] = entry
    return out


def run_dataset(cfg: Config, name: str, paths: Paths) -> DatasetRun:
    """Every seed of one dataset: load the models, evaluate, aggregate, compare; save the arrays."""
    device, prov, clock = core.begin(cfg)
    prepared = prepare(core.data_spec(cfg, name))
    ds = prepared.dataset
    views = tta_views(ds, cfg.tta_views)
    k_max = max(cfg.k, max(K_ENSEMBLE))
    per_seed, test_probs, first = {}, {}, None
    for seed in cfg.seeds:
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
        per_seed[str(seed)] = {
            "methods": scored, "best_baseline": best, "ablation": ablation,
            "training": {kind: {"history": r.history, "best_epoch": r.best_epoch, "seconds": r.seconds,
                                "loaded_from_cache": cached[kind]} for kind, r in models.items()},
            "temperatures": attn.attention.temperatures().tolist(),
        }
        test_probs[str(seed)] = {}
        for key, m in (("attnknn", "attnknn"), ("best baseline", best), ("cnn", "cnn")):
            cal = Calibrator(**scored[m]["calibrator"])  # the one score() fitted on validation
            test_probs[str(seed)][key] = (methods[m].test, cal.apply(methods[m].test))
        _save_arrays(name, seed, ds, methods, emb, paths)
        if first is None:
            first = DatasetRun(ds, {}, methods, {k: r.history for k, r in models.items()})
    results = {
        "dataset": ds.summary(),
        "seeds": list(cfg.seeds),
        "summary": core.aggregate_seeds({s: d["methods"] for s, d in per_seed.items()}),
        "paired": _paired(cfg, test_probs, ds.test.y),
        "per_seed": per_seed,
        "model_configs": {"attention": cfg.attention_config(ds.num_classes).to_dict(),
                          "train": cfg.train_config(ds.kind, cfg.seeds[0]).to_dict(),
                          "backbone": cfg.backbone(ds.kind)[0]},
        "timings": {"seconds": clock()},
    }
    _, record = core.write_record(paths, NAME, name, cfg, prov, {name: prepared.fingerprint()}, results)
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
        f"{title}: test metrics, mean $\\pm$ s.d.\\ over seeds {seeds}; {CAL_NOTE}. Profile "
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
        f"ECE / NLL differences favour Attn-KNN. {src}.", "tab:main-paired"))
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
    ablation = res["per_seed"][first]["ablation"]
    if ablation:
        out["ablation"] = write_text(paths.tables / f"main_{name}_ablation.tex", booktabs(
            methods_frame(ablation),
            f"{title}: attention components trained on the frozen Attn-KNN embedding of seed {first} "
            f"(test, 95\\% intervals; {CAL_NOTE}). {src}.", "tab:ablation-primary", escape_index=False))
    return out


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
        rows[r["label"]] = {"accuracy (%)": 100 * raw["accuracy"]["mean"], "± s.d.": sd_text(raw["accuracy"]["std"], 100, 2),
                            "ECE": raw["ece"]["mean"], "ECE (cal.)": cal["ece"]["mean"],
                            "NLL (cal.)": cal["nll"]["mean"]}
    return pd.DataFrame.from_dict(rows, orient="index").round(4)


def paired_frame(record: dict) -> pd.DataFrame:
    """Seed-level paired differences of one record: mean, 95 % interval, margin, verdict."""
    rows = {}
    for name, e in record["results"]["paired"].items():
        for split in ("raw", "calibrated"):
            for metric in ("accuracy", "ece", "nll"):
                d = e["seed_level"][split][metric]
                scale = 100 if metric == "accuracy" else 1
                low, high = (float("nan") if v is None else scale * v for v in (d["low"], d["high"]))
                rows[(name, split, metric)] = {"difference": scale * d["value"], "low": low,
                                               "high": high, "margin": scale * d["margin"],
                                               "seeds": d["n_seeds"], "verdict": d["verdict"]}
    return pd.DataFrame.from_dict(rows, orient="index").round(4)


def _margins_text(config: dict) -> str:
    return (f"accuracy {100 * config['margin_accuracy']:g} pp, ECE {config['margin_ece']:g}, "
            f"NLL {config['margin_nll']:g}")


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
        df, "Test accuracy (\\%) / ECE after calibration, means over seeds, per dataset and method. Notebook "
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
    bests = [res["per_seed"][str(s)]["best_baseline"] for s in res["seeds"]]
    out[macro_name("main", ds, "BestBaseline")] = ", ".join(sorted(set(bests)))
    out[macro_name("main", ds, "NTrain")] = str(res["dataset"]["n_train"])
    out[macro_name("main", ds, "NTest")] = str(res["dataset"]["n_test"])
    out[macro_name("main", ds, "NSeeds")] = str(len(res["seeds"]))
    for name, entry in (first.get("ablation") or {}).items():
        out.update(metric_macros(("ablation", ds, name), entry))
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
        for tab in ("", "_ablation", "_paired", "_seeds"):
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
                    "contrastive_weight", "entropy_weight", "tta_views"):
            out[macro_name("config", key)] = f"{conf[key]:,}" if key == "n_boot" else f"{conf[key]:g}"
        att, train = res["model_configs"]["attention"], res["model_configs"]["train"]
        out["ConfigTauMin"], out["ConfigTauMax"] = f"{att['tau_min']:g}", f"{att['tau_max']:g}"
        out["ConfigContrastiveTemperature"] = f"{train['contrastive_temperature']:g}"
        out["ConfigGradClip"] = f"{train['grad_clip']:g}"
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
            lines = [f"Test accuracy % (mean ± s.d. over seeds {', '.join(map(str, record['results']['seeds']))}) / "
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
        lines.append(f"| {REGISTRY[record['dataset']].title} | " + " | ".join(cells) + " |")
    return lines

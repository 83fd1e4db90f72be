"""Main comparison (notebook ``01_main``): Attn-KNN against tuned kNN baselines and a CNN.

For each dataset: train (or load from the cache) Attn-KNN and the CNN with the same backbone;
embed train / val / test (every TTA view); evaluate every method of
:mod:`attnknn_lib.evaluation`; on the primary dataset, ablate the attention components on the
frozen Attn-KNN embedding. Writes ``results/main_<dataset>.json``, the LaTeX tables, figures and
the ``.npz`` artifacts from which every number can be recomputed.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..cache import load_or_train, model_key
from ..datasets import DATASET_NAMES, REGISTRY, Dataset, load_dataset
from ..errors import ConfigError, check_choice, check_range
from ..evaluation import (K_ENSEMBLE, METHOD_LABELS, MethodProbs, attnknn_method, attnknn_methods, best_baseline,
                          cnn_methods, embed_all, knn_methods, score)
from ..io import write_json, write_npz, write_text
from ..metrics import confusion_matrix, reliability_bins
from ..models import AttentionConfig, MultiHeadNeighborAttention, build_attnknn, build_cnn
from ..models.backbones import BACKBONES
from ..paths import Paths
from ..provenance import Provenance
from ..runtime import pick_device, seed_everything, set_threads
from ..tables import booktabs, methods_frame
from ..training import TrainConfig, train_attention_head, train_attnknn, train_cnn
from ..transforms import tta_views

EXPERIMENT = "main"
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


def _csv(value: str | list | tuple) -> tuple[str, ...]:
    if not isinstance(value, (str, list, tuple)):
        raise ConfigError(f"{value!r} is not allowed here; give a comma-separated list, e.g. fashion_mnist,iris")
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(s.strip() for s in items if str(s).strip())


@dataclass(frozen=True)
class MainConfig:
    """Parameters of the main experiment; defaults are the ``cpu`` profile (see configs/cpu.yaml)."""

    profile: str = "cpu"
    datasets: tuple[str, ...] = ("fashion_mnist", "digits", "iris", "wine", "breast_cancer")
    primary: str = "fashion_mnist"  # dataset of the ablation, curves and confusion matrix
    seed: int = 0
    image_backbone: str = "small_cnn"
    cnn_widths: str = "16,32,64"  # small_cnn channels per stage (measured here: 2,700 training images/s)
    pretrained: bool = False  # ImageNet weights (resnet18_cifar only)
    embed_dim: int = 128
    num_heads: int = 4
    k: int = 16  # neighbours for training and evaluation
    epochs: int = 8  # image datasets
    tabular_epochs: int = 60
    batch_size: int = 256
    tabular_batch_size: int = 64
    lr: float = 2e-3
    backbone_lr_mult: float = 1.0
    weight_decay: float = 5e-4
    mixup_alpha: float = 0.2
    contrastive_weight: float = 0.5
    entropy_weight: float = 0.01
    max_train: int = 0  # 0: the whole training split; else a stratified subset of this size
    max_val: int = 0
    max_test: int = 0
    val_fraction: float = 0.1
    tta_views: int = 6
    n_boot: int = 1000
    ablation: bool = True
    ablation_epochs: int = 3
    device: str = "auto"
    amp: bool = False  # mixed precision (CUDA only)
    compile: bool = False  # torch.compile (CUDA only)
    threads: int = 0  # 0: all cores

    def __post_init__(self) -> None:
        object.__setattr__(self, "datasets", _csv(self.datasets))
        if not self.datasets:
            raise ConfigError("datasets='' is empty; give at least one of: " + ", ".join(DATASET_NAMES))
        for name in self.datasets:
            check_choice("dataset", name, DATASET_NAMES)
        check_choice("primary", self.primary, self.datasets)
        check_choice("image_backbone", self.image_backbone, tuple(n for n, (kind, _) in BACKBONES.items()
                                                                    if kind == "image"))
        for name in ("embed_dim", "num_heads", "k", "epochs", "tabular_epochs", "batch_size", "tabular_batch_size",
                     "ablation_epochs"):
            check_range(name, getattr(self, name), 1, None)
        for name in ("max_train", "max_val", "max_test", "n_boot", "threads", "seed"):
            check_range(name, getattr(self, name), 0, None)
        check_range("tta_views", self.tta_views, 1, 6)
        check_range("val_fraction", self.val_fraction, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
        check_range("k", self.k, 1, max(K_ENSEMBLE))
        try:
            widths = tuple(int(w) for w in _csv(self.cnn_widths))
        except ValueError:
            widths = ()
        if not widths or min(widths) < 1:
            raise ConfigError(f"cnn_widths={self.cnn_widths!r} is not allowed; give positive integers, e.g. 16,32,64")
        # the training-time configs validate the rest (learning rates, weights, device)
        self.attention_config(10)
        self.train_config("image")

    @classmethod
    def from_namespace(cls, namespace: dict) -> "MainConfig":
        """Build from a notebook's globals (its papermill parameters), ignoring other names."""
        return cls(**{f.name: namespace[f.name] for f in fields(cls) if f.name in namespace})

    def to_dict(self) -> dict:
        d = asdict(self)
        d["datasets"] = list(self.datasets)
        return d

    def attention_config(self, num_classes: int) -> AttentionConfig:
        return AttentionConfig(num_classes=num_classes, embed_dim=self.embed_dim, num_heads=self.num_heads)

    def train_config(self, kind: str) -> TrainConfig:
        image = kind == "image"
        return TrainConfig(epochs=self.epochs if image else self.tabular_epochs,
                           batch_size=self.batch_size if image else self.tabular_batch_size, lr=self.lr,
                           backbone_lr_mult=self.backbone_lr_mult, weight_decay=self.weight_decay, k=self.k,
                           mixup_alpha=self.mixup_alpha, contrastive_weight=self.contrastive_weight,
                           entropy_weight=self.entropy_weight, seed=self.seed, device=self.device, amp=self.amp,
                           compile=self.compile)


@dataclass
class DatasetRun:
    """Everything one dataset produced: the results block plus what the plots need."""

    dataset: Dataset
    record: dict  # the JSON document: experiment, dataset, profile, config, provenance, results
    methods: dict[str, MethodProbs]
    histories: dict[str, list[dict]]


def load(cfg: MainConfig, name: str) -> Dataset:
    return load_dataset(name, val_fraction=cfg.val_fraction, split_seed=0, max_train=cfg.max_train or None,
                        max_val=cfg.max_val or None, max_test=cfg.max_test or None)


def _backbone(cfg: MainConfig, ds: Dataset) -> tuple[str, dict]:
    if ds.kind == "tabular":
        return "mlp", {}
    if cfg.image_backbone == "small_cnn":
        return "small_cnn", {"widths": tuple(int(w) for w in _csv(cfg.cnn_widths))}
    return cfg.image_backbone, {"pretrained": cfg.pretrained}


def train_models(cfg: MainConfig, ds: Dataset, paths: Paths, force: bool = False, train_labels: np.ndarray | None = None):
    """Attn-KNN and CNN for ``ds`` (from the cache when their key matches). Returns
    ``({"attnknn": TrainResult, "cnn": TrainResult}, {"attnknn": cached?, "cnn": cached?})``."""
    labels = ds.train.y if train_labels is None else train_labels
    backbone, bb_kwargs = _backbone(cfg, ds)
    tcfg = cfg.train_config(ds.kind)
    if tcfg.k + 2 > len(labels):
        raise ConfigError(f"k={cfg.k} is out of range for {ds.name}: its training split has {len(labels)} samples")
    acfg = cfg.attention_config(ds.num_classes)
    specs = {
        "attnknn": ({"backbone": backbone, **bb_kwargs, "attention": acfg.to_dict()},
                    lambda: build_attnknn(backbone, ds.input_shape, acfg, **bb_kwargs),
                    lambda m: train_attnknn(m, ds, tcfg, labels)),
        "cnn": ({"backbone": backbone, **bb_kwargs, "num_classes": ds.num_classes},
                lambda: build_cnn(backbone, ds.input_shape, ds.num_classes, **bb_kwargs),
                lambda m: train_cnn(m, ds, tcfg, labels)),
    }
    results, cached = {}, {}
    for kind, (model_cfg, build, train) in specs.items():
        key = model_key(kind, model_cfg, tcfg.to_dict(), ds.fingerprint(), labels)
        results[kind], cached[kind] = load_or_train(paths.artifacts, ds.name, key, build, train, force, seed=cfg.seed)
    return results, cached


def run_ablation(cfg: MainConfig, ds: Dataset, emb, device) -> dict:
    """Attention variants trained on the frozen Attn-KNN embedding; each scored like the main methods."""
    base = cfg.attention_config(ds.num_classes)
    methods, extra = {}, {}
    train_nb = emb.bank.search_excluding(emb.bank.embeddings, cfg.k, np.arange(len(emb.bank)))  # shared by all
    for name, switches in ABLATIONS.items():
        seed_everything(cfg.seed)
        att = MultiHeadNeighborAttention(replace(base, **switches))
        res = train_attention_head(att, emb.bank, emb.val["original"], ds.val.y, cfg.k, epochs=cfg.ablation_epochs,
                                   seed=cfg.seed, train_neighbors=train_nb,
                                   val_neighbors=emb.neighbors[("val", "original")], progress=False)
        probs = attnknn_method(res.model, emb, cfg.k)
        methods[name] = MethodProbs(probs.val, probs.test, {"switches": switches})
        extra[name] = {"history": res.history, "best_epoch": res.best_epoch, "seconds": res.seconds,
                       "temperatures": res.model.temperatures().tolist()}
    scored = score(methods, ds, n_boot=cfg.n_boot, seed=cfg.seed)
    for name in scored:
        scored[name]["label"] = name.replace("_", " ")
        scored[name]["training"] = extra[name]
    return scored


def run_dataset(cfg: MainConfig, name: str, paths: Paths, force: bool = False) -> DatasetRun:
    """Train (or load), evaluate and (on the primary dataset) ablate one dataset."""
    set_threads(cfg.threads or None)
    device = pick_device(cfg.device)
    prov = Provenance(cfg.to_dict(), str(device))
    t0 = time.perf_counter()
    ds = load(cfg, name)
    trained, cached = train_models(cfg, ds, paths, force)
    t_train = time.perf_counter() - t0
    attn, cnn = trained["attnknn"].model.to(device), trained["cnn"].model.to(device)
    views = tta_views(ds, cfg.tta_views)
    k_max = max(cfg.k, max(K_ENSEMBLE))
    emb = embed_all(attn.embedder, ds, views, k_max, device=device)
    methods = {**knn_methods(emb, ds, cfg.k), **attnknn_methods(attn.attention, emb, cfg.k),
               **cnn_methods(cnn, ds, views, device=device)}
    order = [m for m in METHOD_LABELS if m in methods]
    methods = {m: methods[m] for m in order}
    scored = score(methods, ds, n_boot=cfg.n_boot, seed=cfg.seed)
    t_eval = time.perf_counter() - t0 - t_train
    ablation = run_ablation(cfg, ds, emb, device) if (cfg.ablation and name == cfg.primary) else None
    results = {
        "dataset": ds.summary(),
        "methods": scored,
        "best_baseline": best_baseline(methods, ds.val.y),
        "training": {kind: {"history": r.history, "best_epoch": r.best_epoch, "seconds": r.seconds,
                            "loaded_from_cache": cached[kind]} for kind, r in trained.items()},
        "model_configs": {"attention": cfg.attention_config(ds.num_classes).to_dict(),
                          "train": cfg.train_config(ds.kind).to_dict(), "backbone": _backbone(cfg, ds)[0]},
        "temperatures": attn.attention.temperatures().tolist(),
        "ablation": ablation,
        "timings": {"train_or_load_seconds": t_train, "evaluate_seconds": t_eval,
                    "ablation_seconds": time.perf_counter() - t0 - t_train - t_eval},
    }
    record = {"experiment": EXPERIMENT, "dataset": name, "profile": cfg.profile, "config": cfg.to_dict(),
              "provenance": prov.record({name: ds.fingerprint()}), "results": results}
    run = DatasetRun(ds, record, methods, {k: r.history for k, r in trained.items()})
    _save_arrays(run, emb, paths)
    return run


def _save_arrays(run: DatasetRun, emb, paths: Paths) -> None:
    """Per-method probabilities (val and test, raw) with labels, and the memory / query embeddings."""
    ds, name = run.dataset, run.dataset.name
    probs = {f"{split}_{m}": getattr(p, split).astype(np.float32) for m, p in run.methods.items()
             for split in ("val", "test")}
    write_npz(paths.artifacts / f"main_{name}_probs.npz", val_labels=ds.val.y, test_labels=ds.test.y,
              val_ids=ds.val.ids, test_ids=ds.test.ids, **probs)
    write_npz(paths.artifacts / f"main_{name}_embeddings.npz", memory=emb.bank.embeddings, memory_labels=ds.train.y,
              memory_ids=ds.train.ids, val=emb.val["original"], test=emb.test["original"],
              val_labels=ds.val.y, test_labels=ds.test.y)


def write_outputs(run: DatasetRun, paths: Paths, primary: bool) -> dict[str, Path]:
    """results/main_<dataset>.json, its LaTeX table(s) and figures (curves and confusion matrix
    on the primary dataset)."""
    from .. import plots

    ds, res = run.dataset, run.record["results"]
    name = ds.name
    out = {"json": write_json(paths.results / f"main_{name}.json", run.record)}
    title = REGISTRY[name].title
    df = methods_frame(res["methods"])
    out["table"] = write_text(paths.tables / f"main_{name}.tex", booktabs(
        df, f"{title}: test metrics with bootstrap 95\\% intervals; (TS) after temperature scaling fitted on "
            f"validation. Profile \\texttt{{{run.record['profile']}}}.",
        "tab:main-primary" if primary else f"tab:main-{name.replace('_', '-')}"))
    bins = {METHOD_LABELS[m]: reliability_bins(run.methods[m].test, ds.test.y) for m in RELIABILITY_METHODS
            if m in run.methods}
    eces = {METHOD_LABELS[m]: res["methods"][m]["test_raw"]["ece"]["value"] for m in RELIABILITY_METHODS
            if m in run.methods}
    fig = plots.reliability_diagrams(bins, eces, f"{title} (test, before calibration)")
    out["reliability"] = plots.save_figure(fig, paths.figures, f"main_{name}_reliability")[0]
    plots.plt.close(fig)
    if primary:
        fig = plots.training_curves({"Attn-KNN": run.histories["attnknn"], "CNN": run.histories["cnn"]}, title)
        out["curves"] = plots.save_figure(fig, paths.figures, f"main_{name}_curves")[0]
        plots.plt.close(fig)
        cm = confusion_matrix(run.methods["attnknn"].test, ds.test.y, ds.num_classes)
        fig = plots.confusion_matrix_plot(cm, ds.class_names, f"Attn-KNN on {title} (test)")
        out["confusion"] = plots.save_figure(fig, paths.figures, f"main_{name}_confusion")[0]
        plots.plt.close(fig)
        if res["ablation"]:
            adf = methods_frame(res["ablation"])
            out["ablation"] = write_text(paths.tables / f"main_{name}_ablation.tex", booktabs(
                adf, f"{title}: attention components trained on the frozen Attn-KNN embedding "
                     f"(test, 95\\% intervals; (TS) after temperature scaling).", "tab:ablation-primary"))
    return out


def summary_frame(results: dict, calibrated: bool = True) -> pd.DataFrame:
    """Accuracy and ECE (raw and calibrated) of every method of one results record, as plain numbers."""
    rows = {}
    for m, r in results["results"]["methods"].items():
        rows[r["label"]] = {"accuracy (%)": 100 * r["test_raw"]["accuracy"]["value"],
                            "acc 95% CI": f"[{100 * r['test_raw']['accuracy']['low']:.2f}, "
                                          f"{100 * r['test_raw']['accuracy']['high']:.2f}]",
                            "ECE": r["test_raw"]["ece"]["value"], "ECE (TS)": r["test_calibrated"]["ece"]["value"],
                            "NLL (TS)": r["test_calibrated"]["nll"]["value"]}
    return pd.DataFrame.from_dict(rows, orient="index").round(4)


def write_summary_table(paths: Paths, datasets: tuple[str, ...]) -> Path:
    """Accuracy and calibrated ECE of the key methods across datasets, from results/main_*.json."""
    from ..io import read_json

    keys = ("uniform", "distance", "cosine", "attnknn", "attnknn_tta", "cnn")
    rows = {}
    for name in datasets:
        path = paths.results / f"main_{name}.json"
        if not path.exists():
            continue
        methods = read_json(path)["results"]["methods"]
        rows[REGISTRY[name].title] = {
            METHOD_LABELS[m]: f"{100 * methods[m]['test_raw']['accuracy']['value']:.2f} / "
                              f"{methods[m]['test_calibrated']['ece']['value']:.3f}" for m in keys if m in methods}
    df = pd.DataFrame.from_dict(rows, orient="index").fillna("--")
    df.index.name = "Dataset"
    return write_text(paths.tables / "main_summary.tex", booktabs(
        df, "Test accuracy (\\%) / ECE after temperature scaling, per dataset and method.", "tab:main-summary"))

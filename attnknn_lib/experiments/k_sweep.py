"""k-sweep (notebook ``02_k_sweep``): how each voting rule depends on the number of neighbours k.

On main's trained Attn-KNN models (every seed), with the memory bank of its embedding: uniform,
distance and cosine kNN (tau and T tuned on validation at each k) and Attn-KNN, at every k of the
grid plus k = round(sqrt(n)). Attn-KNN is evaluated twice: as trained (its attention saw k = the
recipe's k), and with a fresh attention trained at that k on the frozen embedding, so the curves
separate "more neighbours" from "attention trained for them". Per k: test metrics raw and
calibrated (mean +- s.d. over seeds, per-seed bootstrap intervals), and the paired difference
Attn-KNN minus the best baseline (chosen on validation at that k), pooled over seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from attnknn_lib.base.errors import ConfigError, check_choice, check_range
from attnknn_lib.base.files import write_text
from attnknn_lib.base.knobs import int_csv, knob
from attnknn_lib.base.paths import Paths
from attnknn_lib.base.progress import bar
from attnknn_lib.base.runtime import seed_everything
from attnknn_lib.data.registry import DATASET_NAMES, REGISTRY
from attnknn_lib.data.spec import prepare
from attnknn_lib.evaluation.calibration import Calibrator
from attnknn_lib.evaluation.methods import MethodProbs, attnknn_method, best_baseline, method_labels, score
from attnknn_lib.evaluation.metrics import paired_bootstrap_diff
from attnknn_lib.evaluation.verdicts import VERDICTS
from attnknn_lib.experiments import shared as core
from attnknn_lib.experiments.shared import ExperimentConfig, output_context
from attnknn_lib.models import MultiHeadNeighborAttention
from attnknn_lib.report import figures
from attnknn_lib.report.findings import difference_text, seed_difference, seeds_text
from attnknn_lib.report.macros import macro_name, pct, record_macros, signed
from attnknn_lib.report.readme import per_dataset
from attnknn_lib.report.tables import booktabs, error_bars, fmt, fmt_mean_sd, num
from attnknn_lib.training.loops import train_attention_head

NAME = "k_sweep"
NOTEBOOK = "02_k_sweep.ipynb"
LABELS = method_labels("uniform", "distance", "cosine", "attnknn", "attnknn_retrained", attnknn="Attn-KNN (as trained)")
COMPARED = ("attnknn", "attnknn_retrained")  # each minus the best baseline at the same k


@dataclass(frozen=True)
class Config(ExperimentConfig):
    """The k-sweep's own knobs on top of the shared recipe (which names main's models)."""

    dataset: str = knob("fashion_mnist", "dataset whose trained main models are swept")
    seeds: tuple[int, ...] = knob((0, 1, 2), "seeds of main's models (comma-separated)")
    k_values: tuple[int, ...] = knob((1, 3, 5, 10, 20, 50), "neighbour counts (comma-separated)")
    sqrt_k: bool = knob(True, "add k as round(sqrt(training rows)), marked in the figure")
    retrain: bool = knob(True, "also train a fresh attention at each k on the frozen embedding")
    retrain_seeds: int = knob(3, "how many of the seeds (the first ones) get the attention retrained")
    head_epochs: int = knob(1, "epochs of each retrained attention")
    n_boot: int = knob(200, "bootstrap resamples for the 95 % intervals")

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "seeds", int_csv("seeds", self.seeds))
        object.__setattr__(self, "k_values", int_csv("k_values", self.k_values))
        check_choice("dataset", self.dataset, DATASET_NAMES)
        if min(self.k_values) < 1:
            raise ConfigError(f"k_values={','.join(map(str, self.k_values))} is not allowed; every k must be >= 1")
        check_range("retrain_seeds", self.retrain_seeds, 1, len(self.seeds))
        check_range("head_epochs", self.head_epochs, 1, None)
        check_range("n_boot", self.n_boot, 1, None)


def runs(cfg: Config):
    """Main's Attn-KNN runs of the dataset (shared with main: trained once)."""
    return core.model_runs(cfg, core.data_spec(cfg, cfg.dataset), cfg.seeds, kinds=("attnknn",))


def outputs(cfg: Config) -> list[str]:
    d = cfg.dataset
    return [f"results/{NAME}_{d}.json", f"results/tables/{NAME}_{d}.tex", f"results/tables/{NAME}_{d}_calibration.tex",
            f"figures/{NAME}_{d}.pdf", f"figures/{NAME}_{d}.png"]


def k_grid(cfg: Config, n_train: int) -> tuple[list[int], int | None]:
    """The sorted k values (with round(sqrt(n)) when asked) and that k; one line if one is too big
    for the bank (a training query's neighbours exclude itself: k <= n - 2)."""
    k_sqrt = int(round(math.sqrt(n_train))) if cfg.sqrt_k else None
    ks = sorted(set(cfg.k_values) | ({k_sqrt} if k_sqrt else set()))
    if ks[-1] > n_train - 2:
        raise ConfigError(f"k_values: k={ks[-1]} is out of range; allowed: 1..{n_train - 2} for {n_train} training rows")
    return ks, k_sqrt


def _retrained(cfg: Config, emb, val, val_y, k: int, num_classes: int, seed: int, train_nb) -> tuple[MethodProbs, dict]:
    """A fresh attention trained at k on the frozen embedding (the training queries' neighbours
    exclude themselves), evaluated at k."""
    seed_everything(seed)
    head = MultiHeadNeighborAttention(cfg.attention_config(num_classes))
    res = train_attention_head(head, emb.bank, val, val_y, k, epochs=cfg.head_epochs, seed=seed,
                               train_neighbors=train_nb, val_neighbors=emb.neighbors[("val", "original")],
                               progress=False)
    info = {"history": res.history, "best_epoch": res.best_epoch, "seconds": round(res.seconds, 2),
            "temperatures": res.model.temperatures().tolist()}
    return attnknn_method(res.model, emb, k), info


def run(cfg: Config, paths: Paths) -> dict:
    """Every seed and k; writes ``results/k_sweep_<dataset>.json`` and returns its record."""

    device, prov, clock = core.begin(cfg)
    prepared = prepare(core.data_spec(cfg, cfg.dataset))
    ds = prepared.dataset
    ks, k_sqrt = k_grid(cfg, len(ds.train))
    per_seed: dict[str, dict] = {}
    test_probs: dict[int, dict[str, list]] = {k: {} for k in ks}  # k -> key -> [(raw, calibrated) per seed]
    for i, seed in enumerate(cfg.seeds):
        run_ = core.model_runs(cfg, prepared.spec, (seed,), kinds=("attnknn",))[0]
        result, cached = core.trained(run_, paths, prepared)
        model = result.model.to(device)
        frozen = core.frozen_embeddings(run_, model, prepared, paths, device)
        emb = core.bank_of(frozen, ds.train.y, max(ks))
        retrain = cfg.retrain and i < cfg.retrain_seeds
        train_nb = emb.bank.search_excluding(frozen.train, max(ks), np.arange(len(ds.train))) if retrain else None
        seed_out = {"loaded_from_cache": cached, "by_k": {}}
        for k in bar(ks, desc=f"seed {seed}: k"):
            methods = core.vote_methods(emb, prepared, model.attention, k)
            head = None
            if retrain:
                methods["attnknn_retrained"], head = _retrained(cfg, emb, frozen.val, ds.val.y, k, ds.num_classes,
                                                                seed, train_nb)
            scored = score(methods, ds, n_boot=cfg.n_boot, seed=seed)
            for m in scored:
                scored[m]["label"] = LABELS[m]
            best = best_baseline(methods, ds.val.y, scored)
            seed_out["by_k"][str(k)] = {"methods": scored, "best_baseline": best, "retrained_attention": head}
            for key in (best, *COMPARED):
                if key in methods:
                    cal = Calibrator(**scored[key]["calibrator"])
                    name = "best baseline" if key == best else key
                    test_probs[k].setdefault(name, []).append((methods[key].test, cal.apply(methods[key].test)))
        per_seed[str(seed)] = seed_out
    summary = {str(k): core.aggregate_seeds({s: per_seed[s]["by_k"][str(k)]["methods"] for s in per_seed}) for k in ks}
    paired = {str(k): _paired(test_probs[k], ds.test.y, cfg.n_boot) for k in ks}
    results = {"dataset": ds.summary(), "seeds": list(cfg.seeds), "k_values": ks, "k_sqrt": k_sqrt,
               "training_k": cfg.k, "summary": summary, "paired": paired, "advantage": _advantage(paired),
               "per_seed": per_seed, "timings": {"seconds": clock()}}
    return core.write_record(paths, NAME, cfg.dataset, cfg, prov, {cfg.dataset: prepared.fingerprint()}, results)[1]


def _paired(probs: dict[str, list], labels: np.ndarray, n_boot: int) -> dict:
    """Each compared method minus the best baseline, pooled over the seeds that have it."""
    out = {}
    base = probs["best baseline"]
    for m in COMPARED:
        if m not in probs:
            continue
        a = probs[m]
        out[m] = {split: paired_bootstrap_diff([p[j] for p in a], [p[j] for p in base[:len(a)]], labels,
                                               n_boot=n_boot, seed=0) for j, split in enumerate(("raw", "calibrated"))}
        out[m]["n_seeds"] = len(a)
    return out


def _advantage(paired: dict) -> dict:
    """For each compared method: the k where its accuracy gain over the best baseline is largest,
    and the k where its calibrated NLL gain is largest (differences pooled over seeds). k = 1 is
    left out: one neighbour gets all the weight under every rule, so the difference is 0 there."""
    out = {}
    for m in COMPARED:
        ks = [k for k in paired if m in paired[k] and int(k) > 1]
        if not ks:
            continue
        acc = {k: paired[k][m]["raw"]["accuracy"] for k in ks}
        nll = {k: paired[k][m]["calibrated"]["nll"] for k in ks}
        k_acc = max(ks, key=lambda k: acc[k]["value"])
        k_nll = min(ks, key=lambda k: nll[k]["value"])
        k_abs = max(ks, key=lambda k: abs(acc[k]["value"]))
        out[m] = {"accuracy": {"k": int(k_acc), **acc[k_acc]}, "nll_calibrated": {"k": int(k_nll), **nll[k_nll]},
                  "largest_accuracy_difference": {"k": int(k_abs), **acc[k_abs]}}
    return out


# ----------------------------------------------------------------------------- views of the record

def _series(record: dict, method: str, split: str, metric: str, scale: float = 1.0):
    res = record["results"]
    ks = [k for k in res["k_values"] if method in res["summary"][str(k)]]
    e = [res["summary"][str(k)][method][split][metric] for k in ks]
    return ks, [scale * x["mean"] for x in e], error_bars(e, scale)


def figure(record: dict):
    """Accuracy, macro-F1, NLL and ECE (raw and calibrated) against k, and the paired differences."""

    res = record["results"]
    methods = [m for m in LABELS if m in res["summary"][str(res["k_values"][0])]]
    label = dict(LABELS)
    for m in methods:  # say so when a line averages fewer seeds than the others
        seeds = res["summary"][str(res["k_values"][0])][m]["seeds"]
        if len(seeds) < len(res["seeds"]):
            label[m] = f"{LABELS[m]}, seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)}"
    panels = {}
    for ylabel, split, metric, scale in (("accuracy (%)", "test_raw", "accuracy", 100),
                                         ("macro-F1 (%)", "test_raw", "macro_f1", 100),
                                         ("NLL", "test_raw", "nll", 1), ("NLL (cal.)", "test_calibrated", "nll", 1),
                                         ("ECE", "test_raw", "ece", 1), ("ECE (cal.)", "test_calibrated", "ece", 1)):
        panels[ylabel] = {label[m]: _series(record, m, split, metric, scale) for m in methods}
    for ylabel, split, metric, scale in (("$\\Delta$ acc. vs best kNN (pp)", "raw", "accuracy", 100),
                                         ("$\\Delta$ NLL (cal.) vs best kNN", "calibrated", "nll", 1)):
        panels[ylabel] = {}
        for m in COMPARED:
            ks = [k for k in res["k_values"] if m in res["paired"][str(k)]]
            if ks:
                d = [res["paired"][str(k)][m][split][metric] for k in ks]
                panels[ylabel][label[m]] = (ks, [scale * x["value"] for x in d], None)
    title = REGISTRY[record["dataset"]].title
    seeds = ", ".join(map(str, res["seeds"]))
    vline = (res["k_sqrt"], f"k = round(sqrt(n)) = {res['k_sqrt']}") if res["k_sqrt"] else None
    ticks = [res["k_values"][0]]
    for k in res["k_values"][1:]:  # labels at least ~2.2x apart on the log axis, the largest k always
        if math.log10(k / ticks[-1]) >= 0.35 or k == res["k_values"][-1]:
            ticks.append(k)
    return figures.curve_panels(panels, "k (neighbours, log scale)", ncols=4, logx=True, xticks=ticks,
                              vline=vline, hlines={p: 0.0 for p in panels if p.startswith("$\\Delta$")},
                              title=f"{title}: test metrics against k (mean $\\pm$ s.d. over seeds {seeds})")


def _k_label(k: int, res: dict) -> str:
    tags = [t for t, on in (("$\\sqrt{n}$", k == res["k_sqrt"]), ("training $k$", k == res["training_k"])) if on]
    return f"{k} ({', '.join(tags)})" if tags else str(k)


def table_frame(record: dict, split: str = "test_raw", metric: str = "accuracy") -> pd.DataFrame:
    """Rows: k; columns: each method's mean +- s.d. over seeds, and Attn-KNN minus the best
    baseline (pooled paired difference with its interval)."""
    res = record["results"]
    pair_split = "raw" if split == "test_raw" else "calibrated"
    short = {"uniform": "Uniform", "distance": "Distance", "cosine": "Cosine", "attnknn": "Attn-KNN",
             "attnknn_retrained": "Attn.\\ at $k$"}
    rows = {}
    for k in res["k_values"]:
        summ = res["summary"][str(k)]
        row = {short[m]: fmt_mean_sd(summ[m][split][metric], metric) for m in LABELS if m in summ}
        d = res["paired"][str(k)].get("attnknn")
        if d:
            row["$\\Delta$ Attn-KNN"] = fmt(d[pair_split][metric], metric, signed=True)
        rows[_k_label(k, res)] = row
    df = pd.DataFrame.from_dict(rows, orient="index").fillna("--")
    df.index.name = "$k$"
    return df


def write_outputs(record: dict, paths: Paths) -> dict:
    res, d, title, src = output_context(record, NOTEBOOK, NAME)
    seeds = ", ".join(map(str, res["seeds"]))
    retrained = res["paired"][str(res["k_values"][0])].get("attnknn_retrained", {}).get("n_seeds", 0)
    note = (f"Mean $\\pm$ s.d.\\ over seeds {seeds} of main's models (profile \\texttt{{{record['profile']}}}); "
            f"Attn-KNN as trained (attention trained at $k = {res['training_k']}$) and with a fresh attention trained "
            f"at each $k$ on the frozen embedding (\"Attn.\\ at $k$\", {retrained} seed(s)); $\\Delta$: Attn-KNN minus "
            f"the best baseline chosen on validation at that $k$, paired on the test points, pooled over seeds, 95\\% "
            f"bootstrap interval.")
    out = {"table": write_text(paths.tables / f"{NAME}_{d}.tex", booktabs(
        table_frame(record), f"{title}: test accuracy (\\%) against $k$. {note} {src}.", f"tab:{NAME}",
        escape_index=False))}
    out["calibration"] = write_text(paths.tables / f"{NAME}_{d}_calibration.tex", booktabs(
        table_frame(record, "test_calibrated", "ece"),
        f"{title}: test ECE after the post-hoc calibrator fitted on validation, against $k$. {note} {src}.",
        f"tab:{NAME}-calibration", escape_index=False))
    fig = figure(record)
    out["figure"] = figures.save_figure(fig, paths.figures, f"{NAME}_{d}")[0]
    return out


def summary_frame(record: dict) -> pd.DataFrame:
    """Plain numbers, one row per k (integer): each method's mean test accuracy (%), Attn-KNN minus
    the best baseline at that k (pooled paired difference, percentage points), and each method's
    calibrated ECE; the s.d. over seeds and the intervals are in the LaTeX tables and the record."""
    res = record["results"]
    short = {"uniform": "Uniform", "distance": "Distance", "cosine": "Cosine", "attnknn": "Attn-KNN",
             "attnknn_retrained": "Attn. at k"}
    rows = {}
    for k in res["k_values"]:
        summ, row = res["summary"][str(k)], {}
        row.update({("accuracy (%)", short[m]): num(summ[m]["test_raw"]["accuracy"]["mean"], 2, 100)
                    for m in short if m in summ})
        row.update({("Δ accuracy vs best baseline (pp)", short[m]): num(d["raw"]["accuracy"]["value"], 2, 100)
                    for m, d in res["paired"][str(k)].items() if m in short})
        row.update({("ECE after calibration", short[m]): num(summ[m]["test_calibrated"]["ece"]["mean"], 4)
                    for m in short if m in summ})
        rows[int(k)] = row
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    df.index.name = "k"
    return df


def k_sweep_macros(record: dict) -> dict[str, str]:
    """k-sweep: the sqrt(n) k, and where each Attn-KNN variant differs most from the best baseline."""
    ds, res = record["dataset"], record["results"]
    out = {macro_name("k sweep", ds, "K sqrt"): str(res["k_sqrt"]),
           macro_name("k sweep", ds, "K values"): ", ".join(map(str, res["k_values"]))}
    for m, adv in res["advantage"].items():
        for what, tag in (("largest_accuracy_difference", "LargestDiff"), ("accuracy", "BestGain")):
            e = adv[what]
            out[macro_name("k sweep", ds, m, tag, "K")] = str(e["k"])
            for part, word in (("value", ""), ("low", "Low"), ("high", "High")):
                out[macro_name("k sweep", ds, m, tag, "Acc", word)] = signed(100 * e[part], 2)
    for m in COMPARED:  # seed-level verdicts against the best baseline at each k, counted over the k grid
        words = [d["verdict"] for d in seed_verdicts(record, m).values()]
        for word in VERDICTS:
            out[macro_name("k sweep", ds, m, word, "Count")] = str(words.count(word))
        out[macro_name("k sweep", ds, m, "K Count")] = str(len(words))
    for k in res["k_values"]:
        for m, e in res["summary"][str(k)].items():
            out[macro_name("k sweep", ds, "k", str(k), m, "Acc")] = pct(e["test_raw"]["accuracy"]["mean"])
    return out


README_SECTION = "Robustness"


def macros(records: list[dict]) -> dict[str, str]:
    """Every macro of this experiment, with caption sources and dataset-free aliases."""
    return record_macros(records, k_sweep_macros, NOTEBOOK)


def readme_lines(records: list[dict]) -> list[str]:
    """One README bullet per dataset: where Attn-KNN and the best baseline differ most."""
    def bullet(res: dict, title: str) -> str:
        record = next(r for r in records if r["results"] is res)
        words = [d["verdict"] for d in seed_verdicts(record, "attnknn").values()]
        return (f"- k-sweep ({title}, k in {', '.join(map(str, res['k_values']))}): Attn-KNN against the best "
                "baseline at each k, seed-level verdicts in accuracy: "
                + ", ".join(f"{words.count(w)} {w}" for w in VERDICTS if words.count(w)) + ".")

    return per_dataset(records, bullet)


def seed_verdicts(record: dict, method: str, metric: str = "accuracy", split: str = "raw") -> dict[str, dict]:
    """Per k: the seed-level verdict of ``method`` minus that seed's best baseline at k (chosen on
    validation), with the pooled paired bootstrap's standard error as the test points' share."""
    res = record["results"]
    key = "test_raw" if split == "raw" else "test_calibrated"
    out = {}
    for k in map(str, res["k_values"]):
        seeds = [s for s in map(str, res["seeds"]) if method in res["per_seed"][s]["by_k"][k]["methods"]]
        if not seeds or method not in res["paired"][k]:
            continue
        cells = [res["per_seed"][s]["by_k"][k] for s in seeds]
        a = [c["methods"][method][key][metric]["value"] for c in cells]
        b = [c["methods"][c["best_baseline"]][key][metric]["value"] for c in cells]
        out[k] = seed_difference(a, b, metric, test_se=res["paired"][k][method][split][metric]["se"])
    return out


def findings(record: dict) -> str:
    """The notebook's answer: at each k, Attn-KNN (trained at one k) and the attention retrained at that
    k against the best tuned kNN vote at the same k, as seed-level verdicts."""
    res = record["results"]
    lines = [f"Attn-KNN minus the best kNN vote at the same k (accuracy; the attention was trained at "
             f"k = {res['training_k']}), {seeds_text(len(res['seeds']))}:"]
    for method in COMPARED:
        v = seed_verdicts(record, method)
        if not v:
            continue
        words = [d["verdict"] for d in v.values()]
        lines.append(f"- {LABELS[method]}: " + "; ".join(f"k = {k}: {difference_text(d, 'accuracy')}"
                                                         for k, d in v.items()) + ". Counts: " + ", ".join(
            f"{words.count(w)} {w}" for w in VERDICTS if words.count(w)) + ".")
    nll = seed_verdicts(record, "attnknn", "nll", "calibrated")
    words = [d["verdict"] for d in nll.values()]
    lines.append("- NLL after calibration, Attn-KNN: " + ", ".join(f"{words.count(w)} {w}" for w in VERDICTS
                                                                     if words.count(w)) + f" over {len(words)} k.")
    return "\n".join(lines)


def advantage_frame(record: dict) -> pd.DataFrame:
    """For each compared method: the k with its largest accuracy gain, its best calibrated NLL and its
    largest accuracy difference over the best baseline (pooled paired differences)."""
    what = {"accuracy": "largest accuracy gain", "nll_calibrated": "best NLL (cal.)",
            "largest_accuracy_difference": "largest accuracy difference"}
    rows = {}
    for m, d in record["results"]["advantage"].items():
        for key, e in d.items():
            scale, unit = (1, "") if key == "nll_calibrated" else (100, " (pp)")
            dec = 4 if key == "nll_calibrated" else 2
            rows[(LABELS[m], what.get(key, key))] = {
                "k": int(e["k"]), "difference": f"{scale * e['value']:+.{dec}f}{unit}",
                "95 % interval": f"[{scale * e['low']:+.{dec}f}, {scale * e['high']:+.{dec}f}]"}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis(["method", "what"])


def tuning_frame(record: dict) -> pd.DataFrame:
    """Per k: the baseline each seed's validation chose and the first seed's tuned temperatures."""
    res = record["results"]
    seeds = list(res["per_seed"])
    first = res["per_seed"][seeds[0]]["by_k"]
    rows = {int(k): {"best baseline (per seed)": "; ".join(LABELS.get(b, b) for b in (
                         res["per_seed"][s]["by_k"][k]["best_baseline"] for s in seeds)),
                     f"distance tau (seed {seeds[0]})": f"{first[k]['methods']['distance']['info']['param']:g}",
                     f"cosine T (seed {seeds[0]})": f"{first[k]['methods']['cosine']['info']['param']:g}"}
            for k in first}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("k")

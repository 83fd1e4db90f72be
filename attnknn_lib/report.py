"""``results/macros.tex``: one ``\\newcommand`` per number the paper quotes, built from results JSON.

Names are letters only (LaTeX macro rule): ``\\<Experiment><Dataset><Method><Metric>``, e.g.
``\\MainFashionMnistAttnknnAcc`` (accuracy in %), ``...EceCal`` (ECE after temperature
scaling). Digits in names are spelled out (cifar10 -> CifarTen).
"""

from __future__ import annotations

import re
from pathlib import Path

from .datasets import REGISTRY
from .errors import AttnKNNError, CorruptFileError
from .io import read_json, write_text
from .tables import latex_escape

PATH_MARK = "\x00path:"  # values that are file paths: written verbatim (underscores kept)
DIGITS = {"0": "Zero", "1": "One", "2": "Two", "3": "Three", "4": "Four", "5": "Five", "6": "Six", "7": "Seven",
          "8": "Eight", "9": "Nine"}


def macro_name(*parts: str) -> str:
    """CamelCase of the parts with digits spelled out: ("main", "cifar10", "acc") -> MainCifarOneZeroAcc."""
    words = []
    for part in parts:
        for w in re.split(r"[^A-Za-z0-9]+", str(part)):
            w = "".join(DIGITS.get(ch, ch) for ch in w)
            if w:
                words.append(w[0].upper() + w[1:])
    return "".join(words)


def _metric_macros(prefix: tuple[str, ...], entry: dict, key: str = "value") -> dict[str, str]:
    """Test metrics of one method: ``key`` = "value" (one run) or "mean" (over seeds, with ``...Sd``)."""
    raw, cal = entry["test_raw"], entry["test_calibrated"]
    out = {
        macro_name(*prefix, "Acc"): f"{100 * raw['accuracy'][key]:.2f}",
        macro_name(*prefix, "Fone"): f"{100 * raw['macro_f1'][key]:.2f}",
        macro_name(*prefix, "Ece"): f"{raw['ece'][key]:.4f}",
        macro_name(*prefix, "EceCal"): f"{cal['ece'][key]:.4f}",
        macro_name(*prefix, "Nll"): f"{raw['nll'][key]:.3f}",
        macro_name(*prefix, "NllCal"): f"{cal['nll'][key]:.3f}",
        macro_name(*prefix, "BrierCal"): f"{cal['brier'][key]:.4f}",
    }
    if key == "mean":
        out[macro_name(*prefix, "AccSd")] = f"{100 * raw['accuracy']['std']:.2f}"
        out[macro_name(*prefix, "EceSd")] = f"{raw['ece']['std']:.4f}"
        out[macro_name(*prefix, "EceCalSd")] = f"{cal['ece']['std']:.4f}"
    else:
        out[macro_name(*prefix, "AccLow")] = f"{100 * raw['accuracy']['low']:.2f}"
        out[macro_name(*prefix, "AccHigh")] = f"{100 * raw['accuracy']['high']:.2f}"
    return out


def verdict(low: float, high: float, higher_is_better: bool) -> str:
    """The word for a difference A - B with 95 % interval [low, high]: "better than" or "worse
    than" when the interval excludes 0, else "indistinguishable from" (so the paper's sentences
    follow the numbers of each run)."""
    if low > 0 or high < 0:
        return "better than" if (low > 0) == higher_is_better else "worse than"
    return "indistinguishable from"


def _diff_macros(prefix: tuple[str, ...], d: dict) -> dict[str, str]:
    """A paired difference (pooled over seeds): accuracy in points, ECE / NLL as they are, and a
    ``...Verdict`` word for each (see :func:`verdict`)."""
    out = {}
    for split, tag in (("raw", ""), ("calibrated", "Cal")):
        for metric, name, scale, dec in (("accuracy", "Acc", 100, 2), ("ece", "Ece", 1, 4), ("nll", "Nll", 1, 3)):
            e = d[split][metric]
            for part, word in (("value", ""), ("low", "Low"), ("high", "High")):
                out[macro_name(*prefix, name + tag + word)] = f"{scale * e[part]:+.{dec}f}"
            out[macro_name(*prefix, name + tag, "Verdict")] = verdict(e["low"], e["high"], metric == "accuracy")
    return out


def source_macros(record: dict) -> dict[str, str]:
    """``\\<Experiment><Dataset>Source``: the caption note naming the notebook and results file of
    a record, so every figure caption in the paper points to its code in one hop."""
    import importlib

    from .experiments.core import source_note

    name, ds = record["experiment"], record["dataset"]
    notebook = importlib.import_module(f"attnknn_lib.experiments.{name}").NOTEBOOK
    note = PATH_MARK + source_note(notebook, name, ds)
    out = {macro_name(name, ds, "Source"): note}
    if name == "main" and record["config"].get("primary") == ds:
        out["PrimarySource"] = note
    return out


def main_macros(record: dict) -> dict[str, str]:
    """Macros of one ``main_<dataset>.json`` record (means over seeds, paired differences)."""
    ds = record["dataset"]
    res = record["results"]
    first = res["per_seed"][str(res["seeds"][0])]
    out: dict[str, str] = {}
    for method, entry in res["summary"].items():
        out.update(_metric_macros(("main", ds, method), entry, key="mean"))
    for name, tag in (("attnknn_vs_best_baseline", "DiffBase"), ("attnknn_vs_cnn", "DiffCnn")):
        out.update(_diff_macros(("main", ds, tag), res["paired"][name]["pooled"]))
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
        out.update(_metric_macros(("ablation", ds, name), entry))
    out[macro_name("main", ds, "Profile")] = record["profile"]
    if record["config"].get("primary") == ds:  # dataset-independent names for the paper's main text
        prefix = macro_name("main", ds)
        for k, v in list(out.items()):
            if k.startswith(prefix):
                out["Primary" + k[len(prefix):]] = v
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


def _pct(x: float) -> str:
    return f"{100 * x:.2f}"


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
                out[macro_name("k sweep", ds, m, tag, "Acc", word)] = f"{100 * e[part]:+.2f}"
    for k in res["k_values"]:
        for m, e in res["summary"][str(k)].items():
            out[macro_name("k sweep", ds, "k", str(k), m, "Acc")] = _pct(e["test_raw"]["accuracy"]["mean"])
    return out


def noise_macros(record: dict) -> dict[str, str]:
    """Label noise: accuracy and calibrated ECE of every method, and the flipped / clean weight
    ratios, per setting, kind and rate (rate in percent: NoiseFashionMnistTrainedSymmetricThreeZero...)."""
    ds, res = record["dataset"], record["results"]
    out = {}
    for sname, s in res["settings"].items():
        for key, cell in s["curves"].items():
            kind, rate = key.split("/")
            prefix = ("noise", ds, sname, kind, str(round(100 * float(rate))))
            for m, e in cell["summary"].items():
                out[macro_name(*prefix, m, "Acc")] = _pct(e["test_raw"]["accuracy"]["mean"])
                out[macro_name(*prefix, m, "EceCal")] = f"{e['test_calibrated']['ece']['mean']:.4f}"
            if kind != "none":
                for m, r in cell["weight_ratio"].items():
                    out[macro_name(*prefix, m, "WeightRatio")] = f"{r['mean']:.3f}"
                out[macro_name(*prefix, "attnknn", "EffectiveK")] = f"{cell['effective_neighbours']['attnknn']:.1f}"
        for kind in {key.split("/")[0] for key in s["curves"]} - {"none"}:  # the grid's highest rate, any grid
            rate = max((float(key.split("/")[1]) for key in s["curves"] if key.startswith(kind + "/")))
            exact = macro_name("noise", ds, sname, kind, str(round(100 * rate)))
            for k, v in list(out.items()):
                if k.startswith(exact):
                    out[macro_name("noise", ds, sname, kind, "Max") + k[len(exact):]] = v
            out[macro_name("noise", ds, sname, kind, "Max Rate")] = f"{100 * rate:g}"
        out[macro_name("noise", ds, sname, "Seeds")] = ", ".join(map(str, s["seeds"]))
    trained = res["settings"].get("trained")
    if trained:
        out[macro_name("noise", ds, "trained", "NTrain")] = str(trained["n_train_before_change"] or "all")
        out[macro_name("noise", ds, "trained", "Epochs")] = str(trained["epochs"])
    return out


def long_tail_macros(record: dict) -> dict[str, str]:
    """Long tail: accuracy, head and tail accuracy of every method per setting and ratio
    (ratio spelled with its digits: LongTailFashionMnistTrainedZeroZeroOne...)."""
    ds, res = record["dataset"], record["results"]
    out = {}
    for sname, s in res["settings"].items():
        for key, cell in s["curves"].items():
            prefix = ("long tail", ds, sname, key.replace(".", ""))
            for m, e in cell["summary"].items():
                out[macro_name(*prefix, m, "Acc")] = _pct(e["test_raw"]["accuracy"]["mean"])
                out[macro_name(*prefix, m, "HeadAcc")] = _pct(cell["group_accuracy"][m]["head"])
                out[macro_name(*prefix, m, "TailAcc")] = _pct(cell["group_accuracy"][m]["tail"])
        smallest = min(s["curves"], key=float)  # the grid's strongest imbalance, any grid
        exact = macro_name("long tail", ds, sname, smallest.replace(".", ""))
        for k, v in list(out.items()):
            if k.startswith(exact):
                out[macro_name("long tail", ds, sname, "Min") + k[len(exact):]] = v
        out[macro_name("long tail", ds, "Min Ratio")] = smallest
    return out


def efficiency_macros(record: dict) -> dict[str, str]:
    """Efficiency: the GEMM yardstick, the default HNSW's recall, where a prediction's time goes,
    training time per epoch, and the fitted slopes against n (EfficiencyFashionMnist...)."""
    ds, res = record["dataset"], record["results"]
    p, g, h, tr = res["prediction"], res["gemm"], res["default_hnsw"], res["training"]
    pre = ("efficiency", ds)
    out = {macro_name(*pre, "Gemm Gflops"): f"{g['gemm_gflops']:.0f}",
           macro_name(*pre, "Flat Search Gflops"): f"{g['flat_search_gflops']:.0f}",
           macro_name(*pre, "Flat Search Over Gemm"): f"{g['flat_search_over_gemm']:.2f}",
           macro_name(*pre, "Flat Search Over Gemm Same Shape"): f"{g['flat_search_over_gemm_same_shape']:.2f}",
           macro_name(*pre, "Flat Ip Search Over Gemm"): f"{g['flat_ip_search_over_gemm']:.2f}",
           macro_name(*pre, "Hnsw Default Recall"): f"{h['recall']:.3f}",
           macro_name(*pre, "Hnsw Default Speedup"): f"{h['speedup_over_flat_single']:.1f}",
           macro_name(*pre, "N Bank"): f"{res['n_bank']:,}", macro_name(*pre, "Recall K"): str(res["recall_k"]),
           macro_name(*pre, "Threads"): str(res["threads"])}
    for mode, tag in (("batched", "Batched"), ("single", "Single")):
        sh = p[f"{mode}_shares"]
        out[macro_name(*pre, "Attention Share", tag)] = f"{100 * sh['attention']:.1f}"
        out[macro_name(*pre, "Attention Over Distance", tag)] = f"{sh['attention_over_distance']:.1f}"
        out[macro_name(*pre, "Attnknn Over Cnn", tag)] = f"{sh['attnknn_over_cnn']:.1f}"
        out[macro_name(*pre, "Attnknn Us", tag)] = f"{sh['attnknn_total_us']:.1f}"
    out[macro_name(*pre, "Train Epoch Attnknn")] = f"{tr['attnknn']['seconds_per_epoch']:.1f}"
    out[macro_name(*pre, "Train Epoch Cnn")] = f"{tr['cnn']['seconds_per_epoch']:.1f}"
    out[macro_name(*pre, "Train Epoch Ratio")] = f"{tr['attnknn_over_cnn']:.2f}"
    for e in res["search_engines"]:
        out[macro_name(*pre, e["use"], "Faiss Over Torch")] = f"{e['faiss_over_torch']:.2f}"
    for label, e in res["synthetic"]["by_index"].items():
        kind = e["setting"]["kind"]
        for key, tag in (("batched_us", "Batched"), ("single_us", "Single"), ("build_s", "Build")):
            out[macro_name(*pre, "Slope", kind, tag)] = f"{e['fit'][key]['slope']:.2f}"
        out[macro_name(*pre, "Synthetic Recall", kind)] = f"{e['recall'][-1]:.3f}"
    out[macro_name(*pre, "Synthetic Max N")] = f"{res['synthetic']['sizes'][-1]:,}"
    return out


def theory_macros(record: dict) -> dict[str, str]:
    """Theory: errors against k, the Bayes proxy and Cover-Hart line, how uniform the attention is,
    the truncation errors and slopes (TheoryFashionMnist...)."""
    ds, res = record["dataset"], record["results"]
    pre = ("theory", ds)
    ks, summ, bp = res["k_values"], res["curves"]["summary"], res["bayes_proxy"]
    tr, final = res["truncation"], res["geometry"]["final"]
    out = {macro_name(*pre, "K sqrt"): str(res["k_sqrt"]),
           macro_name(*pre, "Cnn Ensemble Error"): _pct(bp["cnn_ensemble_error"]),
           macro_name(*pre, "Cover Hart Bound"): _pct(bp["cover_hart_bound"])}
    for m in ("uniform", "attnknn"):
        for k in (1, res["k_sqrt"], res["training_k"]):
            if k in ks:
                out[macro_name(*pre, m, "Error K", str(k))] = _pct(summ[m]["error"]["mean"][ks.index(k)])
        if res["k_sqrt"] in ks:
            out[macro_name(*pre, m, "Error K Sqrt")] = _pct(summ[m]["error"]["mean"][ks.index(res["k_sqrt"])])
    eff = [f["effective_k"] for f in final.values()]
    out[macro_name(*pre, "Effective K")] = f"{sum(eff) / len(eff):.3f}"
    out[macro_name(*pre, "Kl Uniform")] = f"{sum(f['kl_uniform'] for f in final.values()) / len(final):.2g}"
    temps = sorted(tr["softmax"], key=float)
    for t, e in tr["softmax"].items():
        tags = [("Softmax T", t.replace(".", ""))]
        tags += [("Softmax T Low",)] if t == temps[0] else []  # the grid's lowest and highest T, any grid
        tags += [("Softmax T High",)] if t == temps[-1] else []
        for tag in tags:
            out[macro_name(*pre, *tag, "Slope")] = f"{e['fit']['slope']:.2f}"
            if res["k_sqrt"] in tr["ks"]:
                out[macro_name(*pre, *tag, "Error Sqrt")] = f"{e['error'][tr['ks'].index(res['k_sqrt'])]:.3g}"
    out[macro_name(*pre, "Softmax T Low")], out[macro_name(*pre, "Softmax T High")] = temps[0], temps[-1]
    att = tr["attnknn"]
    i = tr["ks"].index(res["training_k"])
    out[macro_name(*pre, "Attnknn Trunc Slope")] = f"{att['fit']['slope']:.2f}"
    out[macro_name(*pre, "Attnknn Trunc Error")] = f"{att['error'][i]:.3g}"
    out[macro_name(*pre, "Attnknn Trunc Acc")] = _pct(att["accuracy"][i])
    out[macro_name(*pre, "Attnknn Dense Acc")] = _pct(att["accuracy"][-1])
    for key, tag in (("dense_us", "Dense"), ("topk_exact_us", "Topk Exact"), ("topk_hnsw_us", "Topk Hnsw")):
        out[macro_name(*pre, "Cost Slope", tag)] = f"{res['cost']['fit'][key]['slope']:.2f}"
    return out


BUILDERS = {"main": main_macros, "k_sweep": k_sweep_macros, "noise": noise_macros, "long_tail": long_tail_macros,
            "efficiency": efficiency_macros, "theory": theory_macros}


RECORD_KEYS = {"experiment", "dataset", "profile", "config", "provenance", "results"}


def read_records(files: list[str | Path]) -> list[dict]:
    """The result records of ``files``; they must all come from one profile (never mix runs)."""
    records = [read_json(f) for f in files]
    for f, r in zip(files, records):
        if not isinstance(r, dict) or not RECORD_KEYS <= set(r):
            raise CorruptFileError(f"{f} is not a result record (needs the keys {', '.join(sorted(RECORD_KEYS))}); "
                                   "delete it and rerun ./run_all.sh to regenerate it")
    profiles = sorted({r["profile"] for r in records})
    if len(profiles) > 1:
        raise AttnKNNError(f"result files of different profiles ({', '.join(profiles)}) cannot share one report; "
                           "rerun them under one profile")
    return records


def collect_macros(files: list[str | Path]) -> dict[str, str]:
    """Macros from the given result files (those whose experiment has a builder)."""
    out: dict[str, str] = {}
    for record in read_records(files):
        builder = BUILDERS.get(record.get("experiment"))
        if builder:
            made = {**builder(record), **source_macros(record)}
            out.update(made)
            out.update(experiment_aliases(record, made))
    out.update(verdict_count_macros([r for r in read_records(files) if r.get("experiment") == "main"]))
    return out


def experiment_aliases(record: dict, macros: dict[str, str]) -> dict[str, str]:
    """Dataset-free names for the experiments other than main (``\\NoiseFashionMnistTrained...`` ->
    ``\\NoiseTrained...``, plus ``\\NoiseName``), so the paper's text builds under every profile,
    whatever dataset it runs the experiment on (main has its ``Primary`` names)."""
    name, ds = record["experiment"], record["dataset"]
    if name == "main":
        return {}
    prefix, short = macro_name(name, ds), macro_name(name)
    out = {short + k[len(prefix):]: v for k, v in macros.items() if k.startswith(prefix)}
    out[macro_name(name, "Name")] = REGISTRY[ds].title
    out[macro_name(name, "File")] = PATH_MARK + f"{name}_{ds}"  # figures/<File>.pdf, results/tables/<File>.tex
    return out


def verdict_count_macros(records: list[dict]) -> dict[str, str]:
    """Over the main experiment's datasets: on how many Attn-KNN is better than / worse than /
    indistinguishable from the best baseline and the CNN, per metric (``\\MainBaseAccCalWorse`` ...)."""
    if not records:
        return {}
    out = {}
    for name, tag in (("attnknn_vs_best_baseline", "Base"), ("attnknn_vs_cnn", "Cnn")):
        for split, cal in (("raw", ""), ("calibrated", "Cal")):
            for metric, mname in (("accuracy", "Acc"), ("ece", "Ece"), ("nll", "Nll")):
                words = [verdict(e["low"], e["high"], metric == "accuracy") for e in
                         (r["results"]["paired"][name]["pooled"][split][metric] for r in records)]
                for word, w in (("better than", "Better"), ("worse than", "Worse"), ("indistinguishable from", "Tied")):
                    out[macro_name("main", tag, mname + cal, w)] = str(words.count(word))
    return out


def write_macros(files: list[str | Path], path: str | Path) -> Path:
    """Write ``path`` (sorted, one ``\\newcommand`` per line) from the result files ``files``."""
    macros = collect_macros(files)
    lines = ["% Generated by attnknn_lib.report from the results JSON of one run. Do not edit."]
    for k, v in sorted(macros.items()):
        value = v[len(PATH_MARK):] if v.startswith(PATH_MARK) else latex_escape(v)
        lines.append(f"\\newcommand{{\\{k}}}{{{value}}}")
    return write_text(path, "\n".join(lines) + "\n")


README_START, README_END = "<!-- results:start -->", "<!-- results:end -->"


def results_markdown(files: list[str | Path]) -> str:
    """A Markdown table of test accuracy (mean +- s.d. over seeds) and ECE (raw / after calibration)
    per dataset and key method, from the ``main_*.json`` result files."""
    from .evaluation import METHOD_LABELS

    keys = ("uniform", "distance", "cosine", "attnknn", "attnknn_tta", "cnn")
    lines = []
    for record in read_records([f for f in files if Path(f).name.startswith("main_")]):
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
            cells.append(f"{100 * raw['accuracy']['mean']:.2f} ± {100 * raw['accuracy']['std']:.2f} / "
                         f"{raw['ece']['mean']:.3f} / {cal['ece']['mean']:.3f}")
        lines.append(f"| {REGISTRY[record['dataset']].title} | " + " | ".join(cells) + " |")
    lines += robustness_markdown(files)
    lines += cost_theory_markdown(files)
    return "\n".join(lines) if lines else "(no results yet: run ./run_all.sh)"


def _closest(keys, target: float) -> str:
    return min(keys, key=lambda k: abs(float(k.split("/")[-1]) - target))


def robustness_markdown(files: list[str | Path]) -> list[str]:
    """One bullet per robustness result file (k-sweep, label noise, long tail): the headline numbers."""
    order = ("k_sweep", "noise", "long_tail")
    records = read_records([f for f in files if Path(f).name.startswith(tuple(f"{e}_" for e in order))])
    records.sort(key=lambda r: (order.index(r["experiment"]), r["dataset"]))
    out = []
    for r in records:
        res, title = r["results"], REGISTRY[r["dataset"]].title
        if r["experiment"] == "k_sweep":
            a = res["advantage"]["attnknn"]["largest_accuracy_difference"]
            out.append(f"- k-sweep ({title}, k in {', '.join(map(str, res['k_values']))}): Attn-KNN minus the best "
                       f"baseline differs most at k = {a['k']}: {100 * a['value']:+.2f} pp "
                       f"[{100 * a['low']:+.2f}, {100 * a['high']:+.2f}] (paired, pooled over seeds).")
        elif r["experiment"] == "noise":
            s = res["settings"].get("trained") or res["settings"]["bank"]
            key = _closest([k for k in s["curves"] if k.startswith("symmetric/")] or list(s["curves"]), 0.3)
            cell = s["curves"][key]
            acc = {m: 100 * cell["summary"][m]["test_raw"]["accuracy"]["mean"] for m in ("best_baseline", "attnknn",
                                                                                       "cnn")}
            out.append(f"- label noise ({title}, {key.replace('/', ' ')}, models "
                       f"{'retrained on the noisy labels' if s is res['settings'].get('trained') else 'unchanged'}): "
                       f"test accuracy best kNN {acc['best_baseline']:.2f} %, Attn-KNN {acc['attnknn']:.2f} %, "
                       f"CNN {acc['cnn']:.2f} %; weight of a flipped neighbour / a clean one: Attn-KNN "
                       f"{cell['weight_ratio']['attnknn']['mean']:.3f}, distance "
                       f"{cell['weight_ratio']['distance']['mean']:.3f}.")
        elif r["experiment"] == "long_tail":
            s = res["settings"].get("trained") or res["settings"]["bank"]
            key = min(s["curves"], key=float)
            g = s["curves"][key]["group_accuracy"]
            out.append(f"- long tail ({title}, ratio {key}, models "
                       f"{'retrained on the subset' if s is res['settings'].get('trained') else 'unchanged'}): "
                       f"tail-class accuracy best kNN {100 * g['best_baseline']['tail']:.1f} %, with class-balanced "
                       f"voting {100 * g['best_baseline_balanced']['tail']:.1f} %; Attn-KNN "
                       f"{100 * g['attnknn']['tail']:.1f} % / {100 * g['attnknn_balanced']['tail']:.1f} %.")
    return ["", "Robustness (profile `" + records[0]["profile"] + "`):", ""] + out if out else []


def cost_theory_markdown(files: list[str | Path]) -> list[str]:
    """One bullet per efficiency / theory result file: the headline numbers."""
    order = ("efficiency", "theory")
    records = read_records([f for f in files if Path(f).name.startswith(tuple(f"{e}_" for e in order))])
    records.sort(key=lambda r: (order.index(r["experiment"]), r["dataset"]))
    out = []
    for r in records:
        res, title = r["results"], REGISTRY[r["dataset"]].title
        if r["experiment"] == "efficiency":
            g, h, p = res["gemm"], res["default_hnsw"], res["prediction"]
            out.append(f"- efficiency ({title}, bank of {res['n_bank']:,}, {res['threads']} threads): exact batched "
                       f"search (Flat L2) runs at {g['flat_search_over_gemm']:.2f} x this machine's fp32 GEMM throughput "
                       f"({g['flat_search_gflops']:.0f} of {g['gemm_gflops']:.0f} GFLOP/s; Flat IP "
                       f"{g['flat_ip_search_over_gemm']:.2f}); {h['label']} recall@"
                       f"{res['recall_k']} {h['recall']:.3f}; the attention vote takes "
                       f"{100 * p['single_shares']['attention']:.1f} % of one prediction (one query at a time; "
                       f"{100 * p['batched_shares']['attention']:.1f} % batched) and "
                       f"{p['batched_shares']['attention_over_distance']:.0f} x the distance vote's time.")
        else:
            tr = res["truncation"]
            fits = ", ".join(f"T = {t}: {e['fit']['slope']:.2f}" for t, e in tr["softmax"].items())
            att = tr["attnknn"]
            i = tr["ks"].index(res["training_k"])
            eff = [f["effective_k"] for f in res["geometry"]["final"].values()]
            out.append(f"- theory ({title}): top-k softmax attention error against k, log-log slopes {fits}; "
                       f"Attn-KNN truncated to its {res['training_k']} nearest neighbours vs the same scores over all "
                       f"{tr['n']:,} rows: L1 {att['error'][i]:.3g}, accuracy {100 * att['accuracy'][i]:.2f} % vs "
                       f"{100 * att['accuracy'][-1]:.2f} %; effective neighbours of the trained attention "
                       f"{sum(eff) / len(eff):.3f} of {res['training_k']}.")
    return ["", "Cost and theory (profile `" + records[0]["profile"] + "`):", ""] + out if out else []


def replace_block(path: str | Path, start: str, end: str, body: str) -> bool:
    """Replace what lies between the ``start`` and ``end`` markers of ``path`` (a generated block of
    the README); False if the file has no such markers."""
    path = Path(path)
    text = path.read_text()
    if start not in text or end not in text:
        return False
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    write_text(path, f"{head}{start}\n{body}\n{end}{tail}")
    return True


def update_readme(readme: str | Path, files: list[str | Path]) -> bool:
    """Replace the block between the results markers of ``readme``; False if it has no markers."""
    return replace_block(readme, README_START, README_END, results_markdown(files))

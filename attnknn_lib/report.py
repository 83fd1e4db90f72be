"""``results/macros.tex``: one ``\\newcommand`` per number the paper quotes, built from results JSON.

Names are letters only (LaTeX macro rule): ``\\<Experiment><Dataset><Method><Metric>``, e.g.
``\\MainFashionMnistAttnknnAcc`` (accuracy in %), ``...EceCal`` (ECE after temperature
scaling). Digits in names are spelled out (cifar10 -> CifarTen).
"""

from __future__ import annotations

import re
from pathlib import Path

from .datasets import REGISTRY
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


def _metric_macros(prefix: tuple[str, ...], entry: dict) -> dict[str, str]:
    raw, cal = entry["test_raw"], entry["test_calibrated"]
    return {
        macro_name(*prefix, "Acc"): f"{100 * raw['accuracy']['value']:.2f}",
        macro_name(*prefix, "AccLow"): f"{100 * raw['accuracy']['low']:.2f}",
        macro_name(*prefix, "AccHigh"): f"{100 * raw['accuracy']['high']:.2f}",
        macro_name(*prefix, "Fone"): f"{100 * raw['macro_f1']['value']:.2f}",
        macro_name(*prefix, "Ece"): f"{raw['ece']['value']:.4f}",
        macro_name(*prefix, "EceCal"): f"{cal['ece']['value']:.4f}",
        macro_name(*prefix, "Nll"): f"{raw['nll']['value']:.3f}",
        macro_name(*prefix, "NllCal"): f"{cal['nll']['value']:.3f}",
        macro_name(*prefix, "BrierCal"): f"{cal['brier']['value']:.4f}",
    }


def main_macros(record: dict) -> dict[str, str]:
    """Macros of one ``main_<dataset>.json`` record."""
    ds = record["dataset"]
    res = record["results"]
    out: dict[str, str] = {}
    for method, entry in res["methods"].items():
        out.update(_metric_macros(("main", ds, method), entry))
    for kind, tr in res["training"].items():
        out[macro_name("main", ds, kind, "Epochs")] = str(len(tr["history"]))
        out[macro_name("main", ds, kind, "BestEpoch")] = str(tr["best_epoch"])
        out[macro_name("main", ds, kind, "TrainMinutes")] = f"{tr['seconds'] / 60:.1f}"
    out[macro_name("main", ds, "BestBaseline")] = res["best_baseline"]
    out[macro_name("main", ds, "NTrain")] = str(res["dataset"]["n_train"])
    out[macro_name("main", ds, "NTest")] = str(res["dataset"]["n_test"])
    for name, entry in (res.get("ablation") or {}).items():
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
        out["PrimaryTableFile"] = PATH_MARK + f"../results/tables/main_{ds}.tex"
        out["PrimaryAblationFile"] = PATH_MARK + f"../results/tables/main_{ds}_ablation.tex"
        for fig in ("reliability", "curves", "confusion"):
            out[macro_name("primary", fig, "figure")] = PATH_MARK + f"../figures/main_{ds}_{fig}.pdf"
        out["PrimaryTemperatures"] = ", ".join(f"{t:.2f}" for t in res["temperatures"])
        out["PrimaryTuneTau"] = f"{res['methods']['distance']['info']['param']:g}"
        out["PrimaryTuneT"] = f"{res['methods']['cosine']['info']['param']:g}"
        out["PrimaryBestBaselineLabel"] = res["methods"][res["best_baseline"]]["label"]
        out["MainProfile"] = record["profile"]
        out["MainDatasetCount"] = str(len(record["config"]["datasets"]))
        conf = record["config"]
        for key in ("k", "epochs", "n_boot", "embed_dim", "num_heads", "mixup_alpha", "contrastive_weight",
                    "entropy_weight", "tta_views"):
            out[macro_name("config", key)] = f"{conf[key]:,}" if key == "n_boot" else f"{conf[key]:g}"
        att, train = res["model_configs"]["attention"], res["model_configs"]["train"]
        out["ConfigTauMin"], out["ConfigTauMax"] = f"{att['tau_min']:g}", f"{att['tau_max']:g}"
        out["ConfigContrastiveTemperature"] = f"{train['contrastive_temperature']:g}"
        out["ConfigGradClip"] = f"{train['grad_clip']:g}"
        out["ConfigValPercent"] = f"{100 * conf['val_fraction']:g}"
    return out


BUILDERS = {"main": main_macros}


def collect_macros(results_dir: str | Path) -> dict[str, str]:
    """Macros from every results JSON whose experiment has a builder."""
    out: dict[str, str] = {}
    for path in sorted(Path(results_dir).glob("*.json")):
        record = read_json(path)
        builder = BUILDERS.get(record.get("experiment"))
        if builder:
            out.update(builder(record))
    return out


def write_macros(results_dir: str | Path) -> Path:
    """Write ``results_dir/macros.tex`` (sorted, one ``\\newcommand`` per line)."""
    macros = collect_macros(results_dir)
    lines = ["% Generated by attnknn_lib.report from results/*.json. Do not edit."]
    for k, v in sorted(macros.items()):
        value = v[len(PATH_MARK):] if v.startswith(PATH_MARK) else latex_escape(v)
        lines.append(f"\\newcommand{{\\{k}}}{{{value}}}")
    return write_text(Path(results_dir) / "macros.tex", "\n".join(lines) + "\n")


README_START, README_END = "<!-- results:start -->", "<!-- results:end -->"


def results_markdown(results_dir: str | Path) -> str:
    """A Markdown table of test accuracy and ECE (raw / after temperature scaling) per dataset and
    key method, from ``main_*.json``."""
    from .evaluation import METHOD_LABELS

    keys = ("uniform", "distance", "cosine", "attnknn", "attnknn_tta", "cnn")
    lines = []
    for path in sorted(Path(results_dir).glob("main_*.json")):
        record = read_json(path)
        methods = record["results"]["methods"]
        if not lines:
            lines = [f"Test accuracy % / ECE / ECE after temperature scaling (profile `{record['profile']}`, "
                     f"commit `{record['provenance']['commit'][:8]}`; TTA needs image data):", "",
                     "| dataset | " + " | ".join(METHOD_LABELS[m] for m in keys) + " |",
                     "| --- " * (1 + len(keys)) + "|"]
        cells = [f"{100 * methods[m]['test_raw']['accuracy']['value']:.2f} / {methods[m]['test_raw']['ece']['value']:.3f}"
                 f" / {methods[m]['test_calibrated']['ece']['value']:.3f}" if m in methods else "--" for m in keys]
        lines.append(f"| {REGISTRY[record['dataset']].title} | " + " | ".join(cells) + " |")
    return "\n".join(lines) if lines else "(no results yet: run ./run_all.sh)"


def update_readme(readme: str | Path, results_dir: str | Path) -> bool:
    """Replace the block between the results markers of ``readme``; False if it has no markers."""
    readme = Path(readme)
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        return False
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    write_text(readme, f"{head}{README_START}\n{results_markdown(results_dir)}\n{README_END}{tail}")
    return True

"""The paper's numbers from main's records: each dataset's macros (means, paired differences, training,
replay, knobs; dataset-free names for the primary dataset) and the verdict counts over datasets."""

from __future__ import annotations

from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.evaluation.verdicts import IDENTICAL, VERDICTS
from attnknn_lib.experiments.main.config import ARTIFACTS, NOTEBOOK
from attnknn_lib.experiments.main.views import knob_tables as vk
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
from attnknn_lib.training.convergence import PLATEAU_TOL


def main_macros(record: dict) -> dict[str, str]:
    """Macros of one main record (means over seeds, paired differences)."""
    ds = record["dataset"]
    res = record["results"]
    first = res["per_seed"][str(res["seeds"][0])]
    out: dict[str, str] = {}
    for method, entry in res["summary"].items():
        out.update(metric_macros(("main", ds, method), entry, key="mean"))
    for name, tag in (("attnknn_vs_reference", "DiffRef"), ("attnknn_vs_best_baseline", "DiffBase"),
                      ("attnknn_vs_cnn", "DiffCnn"), ("attnknn_vs_fixed_vote", "DiffFixedVote")):
        if name in res["paired"]:  # records from before the tuned vote was scored here have no DiffRef
            out.update(diff_macros(("main", ds, tag), res["paired"][name]["seed_level"]))
    for kind, tr in first["training"].items():
        out[macro_name("main", ds, kind, "Epochs")] = str(len(tr["history"]))
        out[macro_name("main", ds, kind, "BestEpoch")] = str(tr["best_epoch"])
        out[macro_name("main", ds, kind, "TrainMinutes")] = f"{tr['seconds'] / 60:.1f}"
    for kind in ("attnknn", "cnn"):  # the plateau rule (training.convergence) over seeds
        rules = [res["per_seed"][str(s)]["training"][kind]["plateau"] for s in res["seeds"]]
        out[macro_name("main", ds, kind, "Plateau Count")] = str(sum(r["plateau"] for r in rules))
        out[macro_name("main", ds, kind, "Tail Range Max")] = f"{100 * max(r['tail_range'] for r in rules):.2f}"
        out[macro_name("main", ds, kind, "Selected Epochs")] = ", ".join(str(r["best_epoch"]) for r in rules)
        # whether the first seed's run, the one the curves figure draws, is among those that reached it
        out[macro_name("main", ds, kind, "First Seed Plateau")] = ("reached a plateau" if rules[0]["plateau"]
                                                                  else "had not reached a plateau")
    taus = [res["per_seed"][str(s)].get("fixed_vote_temperature") for s in res["seeds"]]
    if all(t is not None for t in taus):  # the end-to-end control's learned temperatures
        out[macro_name("main", ds, "FixedVote Temperatures")] = ", ".join(f"{t:.3f}" for t in taus)
    bests = [res["per_seed"][str(s)]["best_baseline"] for s in res["seeds"]]
    out[macro_name("main", ds, "BestBaseline")] = ", ".join(sorted(set(bests)))
    out[macro_name("main", ds, "NTrain")] = f"{res['dataset']['n_train']:,}"
    out[macro_name("main", ds, "NTest")] = f"{res['dataset']['n_test']:,}"
    out[macro_name("main", ds, "NSeeds")] = str(len(res["seeds"]))
    out["PlateauTolPoints"] = f"{100 * PLATEAU_TOL:g}"  # the plateau rule's tolerance, in points of accuracy
    for name, entry in (first.get("ablation") or {}).items():
        out.update(metric_macros(("ablation", ds, name), entry))
    for row, d in ((res.get("replay") or {}).get("rows") or {}).items():
        out[macro_name("main", ds, "replay", row, "Acc")] = signed(100 * d["accuracy"]["value"], 2)
        out[macro_name("main", ds, "replay", row, "Acc Verdict")] = VERDICT_PHRASES[d["accuracy"]["verdict"]]
        out[macro_name("main", ds, "replay", row, "Ece")] = signed(d["ece"]["value"], 4)
        if "effective_k" in d:  # the attention's mean effective k on test (rows on a model of their own)
            out[macro_name("main", ds, "replay", row, "Effective K")] = f"{d['effective_k']:.2f}"
    checkpoint = (res.get("replay") or {}).get("checkpoint")
    if checkpoint:
        out[macro_name("main", ds, "replay", "Test Selected Epoch")] = str(checkpoint["test_selected_epoch"])
        out[macro_name("main", ds, "replay", "Val Selected Epoch")] = str(checkpoint["val_selected_epoch"])
        same = checkpoint["test_selected_epoch"] == checkpoint["val_selected_epoch"]
        out[macro_name("main", ds, "replay", "Checkpoint Reading")] = (
            "Test and validation chose the same epoch on this run, so this row cannot differ from the protocol's "
            "and tests nothing here." if same else
            "The two choices differ, so this row measures what choosing the checkpoint on test adds.")
    methods = [res["per_seed"][str(s)]["methods"] for s in res["seeds"]]
    if all("reference" in m for m in methods):  # the tuned vote's search: its filter thresholds and its size
        thetas = methods[0]["reference"]["info"]["grids"]["theta"]
        out[macro_name("main", ds, "Reference Thetas")] = ", ".join(f"{t:g}" for t in thetas if t is not None)
        for sel, tag in (("reference", "Reference Configs"), ("reference_nll", "Reference Nll Configs")):
            if all(sel in m for m in methods):  # configurations scored on validation, mean over seeds
                configs = [m[sel]["info"]["configs"] for m in methods]
                out[macro_name("main", ds, tag)] = f"{round(sum(configs) / len(configs)):,}"
    out.update(vk.knob_macros(("main", ds), res))
    out[macro_name("main", ds, "Profile")] = record["profile"]
    if record["config"].get("primary") == ds:  # dataset-independent names for the paper's main text
        prefix = macro_name("main", ds)
        for k, v in list(out.items()):
            if k.startswith(prefix):
                out["Primary" + k[len(prefix):]] = v
        out["PrimarySource"] = PATH_MARK + source_note(NOTEBOOK, ARTIFACTS.record_file(ds))
        out["PrimaryName"] = REGISTRY[ds].title
        out["PrimaryNumClasses"] = str(res["dataset"]["num_classes"])
        out["PrimaryNVal"] = f"{res['dataset']['n_val']:,}"
        for tab in ("table", "ablation", "paired", "seeds", "replay", "knobs"):  # paths from paper/
            name = macro_name("primary", "" if tab == "table" else tab, "table", "file")
            out[name] = PATH_MARK + "../" + ARTIFACTS.relative(tab, ds)
        for fig in ("reliability", "curves", "confusion"):
            out[macro_name("primary", fig, "figure")] = PATH_MARK + "../" + ARTIFACTS.relative(fig, ds, "pdf")
        out["PrimaryTemperatures"] = ", ".join(f"{t:.2f}" for t in first["temperatures"])
        out["PrimaryTuneTau"] = f"{first['methods']['distance']['info']['param']:g}"
        out["PrimaryTuneT"] = f"{first['methods']['cosine']['info']['param']:g}"
        out["PrimaryBestBaselineLabel"] = ", ".join(sorted({first["methods"][b]["label"] for b in bests}))
        out["MainProfile"] = record["profile"]
        out["MainDatasetCount"] = str(len(record["config"]["datasets"]))
        out["MainSeeds"] = ", ".join(map(str, res["seeds"]))
        train = res["model_configs"]["train"]
        precision = first["training"]["attnknn"]["history"][-1]["precision"]
        out["PrimaryTrainPrecision"] = {"bf16": "bf16 mixed precision", "fp16": "fp16 mixed precision"}.get(
            precision, "fp32")
        out["PrimaryTrainSearch"] = ("a bf16 scan of the memory that keeps $2k$ candidates, re-ranked in fp32"
                                     if train.get("search_precision") == "bf16" else "an exact fp32 scan of the memory")
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
    tabular = [r for r in records if REGISTRY[r["dataset"]].kind == "tabular"]
    if tabular:  # the paper says how small they are: "30 (iris), 114 (breast cancer)"
        out[macro_name("main", "Tabular Test Sizes")] = ", ".join(
            f"{r['results']['dataset']['n_test']} ({REGISTRY[r['dataset']].title.lower()})" for r in tabular)
    for name, tag in (("attnknn_vs_reference", "Ref"), ("attnknn_vs_best_baseline", "Base"), ("attnknn_vs_cnn", "Cnn")):
        if not all(name in r["results"]["paired"] for r in counted):
            continue
        for split, cal in (("raw", ""), ("calibrated", "Cal")):
            for metric, mname in (("accuracy", "Acc"), ("nll", "Nll")):  # ECE is described, never counted
                words = [r["results"]["paired"][name]["seed_level"][split][metric]["verdict"] for r in counted]
                for word in (*VERDICTS, IDENTICAL):  # identical predictions: counted apart, never as equivalent
                    out[macro_name("main", tag, mname + cal, word)] = str(words.count(word))
    return out


def macros(records: list[dict]) -> dict[str, str]:
    """Every macro of the main experiment: per dataset (:func:`main_macros`, caption sources) and the
    verdict counts over datasets (:func:`verdict_count_macros`)."""
    return {**record_macros(records, main_macros, NOTEBOOK, ARTIFACTS.record_file, aliases=False), **verdict_count_macros(records)}

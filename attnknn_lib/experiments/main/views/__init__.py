"""main: tables, figures, macros, README lines and findings read off its record (the macros: :mod:`.paper_numbers`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from attnknn_lib.base.paths import Paths
from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.evaluation.methods import K_ENSEMBLE, METHOD_LABELS
from attnknn_lib.evaluation.verdicts import MARGINS
from attnknn_lib.experiments.common.views import detectable_tabular
from attnknn_lib.experiments.main.config import ARTIFACTS, NOTEBOOK, RELIABILITY_METHODS, SUMMARY_METHODS
from attnknn_lib.experiments.main.measure import REPLAY_ROWS, VERDICT_SHORT, run_dataset
from attnknn_lib.experiments.main.views import knob_tables as vk
from attnknn_lib.experiments.main.views.across import PAPER_NAMES, write_summary_table
from attnknn_lib.experiments.main.views.paired import diff_frame, paired_frame  # noqa: F401 (the notebook reads views.paired_frame)
from attnknn_lib.experiments.main.views.paper_numbers import is_perfect, macros  # noqa: F401 (the declaration reads views.macros)
from attnknn_lib.report import figures
from attnknn_lib.report.figures import save_output_figure
from attnknn_lib.report.findings import (
    markdown_lists,
    mean_pct,
    point_text,
    seeds_text,
    verdict_counts,
)
from attnknn_lib.report.macros import signed, source_note
from attnknn_lib.report.tables import (
    booktabs,
    fmt,
    latex_escape,
    methods_frame,
    num,
    sd_text,
    seed_frame,
)


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
        out[label] = {cols[m]: ((f"{fmt(d[m], m, signed=True)} {VERDICT_SHORT[d[m]['verdict']]}" if m == "accuracy" else
                                 f"{fmt(d[m], m, ci=False, signed=True)} {VERDICT_SHORT.get(d[m].get('verdict'), '')}")
                                if latex else
                                f"{signed((100 if m == 'accuracy' else 1) * d[m]['value'], 2 if m == 'accuracy' else 4)} "
                                f"{d[m].get('verdict', '')}").rstrip() for m in cols}  # ECE: described, no verdict
    df = pd.DataFrame.from_dict(out, orient="index")
    df.index.name = "protocol"
    return df


CAL_NOTE = ("each method's second row: after the post-hoc calibrator fitted on validation (one rule for every "
            "method: a temperature, plus a smoothing toward uniform that stays 0 unless it lowers validation NLL; "
            "it keeps the predicted class, so accuracy and F1 do not change)")


FAMILY_ORDER = ("uniform", "distance", "cosine", "reference", "reference_nll",  # votes that learn nothing
                "nca", "nca_nll", "linear_probe",  # learned metrics and the probe
                "attnknn", "attnknn_tuned", "attnknn_tuned_nll", "fixed_vote",  # attention and its control
                "cnn", "cnn_mixup",  # the parametric reference
                "attnknn_tta", "best_baseline_tta", "cnn_tta", "attnknn_kens", "attnknn_adaptive")  # variants
"""The primary table's rows: each family together, as Section 4 of the paper introduces them."""


def variants_note(record: dict) -> str:
    """What the primary table's variant rows are, for those the record has (their settings from its config)."""
    summary, cfg = record["results"]["summary"], record["config"]
    ks = ", ".join(map(str, K_ENSEMBLE))
    notes = {"attnknn_tta": f"TTA: probabilities averaged over {cfg.get('tta_views', 6)} fixed views of each image",
             "attnknn_kens": f"$k$-ensemble: Attn-KNN's votes at $k$ = {ks} averaged",
             "attnknn_adaptive": f"adaptive $k$: per query, the smallest of these $k$ not below the effective $k$ of "
                                 f"its attention at $k$ = {max(K_ENSEMBLE)}",
             "cnn_mixup": f"MixUp control: the CNN trained with MixUp ($\\alpha$ = {cfg.get('mixup_control', 0.2):g})"}
    said = [text for m, text in notes.items() if m in summary]
    return "; ".join(said)[:1].upper() + "; ".join(said)[1:] + ". " if said else ""


def by_family(methods) -> list[str]:
    """``methods`` in :data:`FAMILY_ORDER`, any method it does not list last (in the record's order)."""
    return [m for m in FAMILY_ORDER if m in methods] + [m for m in methods if m not in FAMILY_ORDER]


TUNED_NOTE = ("Attn-KNN with its vote settings tuned: $k$ from the tuned vote's grid, the label filter and the prior "
              "correction chosen as the tuned vote chooses them (for NLL: as the NLL-tuned vote does); the paired "
              "differences and their verdicts are in Table~\\ref{tab:main-paired}. ")
CAL_COLUMNS_NOTE = ("NLL of the raw probabilities, then NLL, ECE and Brier score after the post-hoc calibrator fitted "
                    "on validation (one rule for every method: a temperature, plus a smoothing toward uniform that stays "
                    "0 unless it lowers validation NLL; it keeps the predicted class, so accuracy does not change)")


DETECTABLE_COMPARISONS = {  # per endpoint, the comparisons of the primary dataset that draw counted verdicts
    # (NCA against the tuned vote draws one on accuracy only: its calibration there is described, no verdict)
    "accuracy": ("attnknn_tuned_vs_reference", "nca_vs_reference", "attnknn_vs_cnn", "attnknn_vs_fixed_vote"),
    "nll": ("attnknn_tuned_vs_reference_nll", "attnknn_vs_cnn", "attnknn_vs_fixed_vote"),
    "brier": ("attnknn_tuned_vs_reference_nll", "attnknn_vs_cnn", "attnknn_vs_fixed_vote")}


def detectable_families(record: dict) -> dict[str, dict[str, list[dict]]]:
    """The primary dataset's one family (uncorrected): per endpoint, the seed-level results of
    :data:`DETECTABLE_COMPARISONS` the record has (accuracy raw, NLL and Brier after calibration)."""
    paired = record["results"]["paired"]
    label = f"{REGISTRY[record['dataset']].title}: Attn-KNN, tuned, and NCA vs tuned vote; Attn-KNN vs CNN, vs fixed-vote control"
    return {label: {m: [paired[c]["seed_level"]["raw" if m == "accuracy" else "calibrated"][m] for c in cs if c in paired]
                    for m, cs in DETECTABLE_COMPARISONS.items()}}


def write_outputs(record: dict, paths: Paths, primary: bool) -> dict[str, Path]:
    """The dataset's LaTeX table(s) and figures (curves, confusion matrix, ablation, paired
    differences and per-seed intervals on the primary dataset), from its record. The reliability and
    confusion figures read its ``figure_data``; a record measured before it was stored leaves them
    as they were drawn."""

    res = record["results"]
    name = record["dataset"]
    title = REGISTRY[name].title
    seeds = ", ".join(map(str, res["seeds"]))
    src = source_note(NOTEBOOK, ARTIFACTS.record_file(name))
    means = seed_frame({m: {**res["summary"][m], "label": PAPER_NAMES.get(m, res["summary"][m].get("label", m))}
                        for m in by_family(res["summary"])})
    out = {"table": ARTIFACTS.write_table(paths, "table", name, booktabs(
        means,
        f"{title}: test metrics, mean $\\pm$ s.d.\\ {_over(res)}{_control_note(res)}{_mlp_note(name)}; "
        f"{CAL_COLUMNS_NOTE}. {variants_note(record)}{TUNED_NOTE}{src}.",
        "tab:main-primary" if primary else f"tab:main-{name.replace('_', '-')}",
        escape_index=False, colsep="3pt", size="footnotesize"))}
    if not primary:
        return out
    out["detectable"] = ARTIFACTS.write_table(paths, "detectable", name, detectable_tabular(src, detectable_families(record)))
    first = str(res["seeds"][0])
    drawn = res.get("figure_data")
    if drawn is not None:
        shown = [m for m in RELIABILITY_METHODS if m in drawn["reliability"]]
        bins = {METHOD_LABELS[m]: {key: np.array(v, dtype=np.float64) for key, v in drawn["reliability"][m].items()}
                for m in shown}
        eces = {METHOD_LABELS[m]: res["per_seed"][first]["methods"][m]["test_raw"]["ece"]["value"] for m in shown}
        fig = figures.reliability_diagrams(bins, eces, f"{title} (test, seed {first}, before calibration)")
        out["reliability"] = save_output_figure(ARTIFACTS, paths, "reliability", name, fig)
    out["paired"] = ARTIFACTS.write_table(paths, "paired", name, booktabs(
        diff_frame(res["paired"]),
        f"{title}: paired differences on the same test points (A minus B; Attn-KNN, tuned: Attn-KNN with its vote "
        f"settings ($k$, label filter and prior correction) chosen on validation, for NLL where it says so; rows against the NLL-tuned vote (or NCA tuned for NLL) give "
        f"NLL and Brier only, and calibration is judged there: against the tuned vote and NCA (both tuned on accuracy), NLL and Brier are "
        f"described without a verdict; the comparisons with tuned vote settings give no per-seed rows). Per seed: 95\\% "
        f"paired bootstrap intervals over test points. Mean: over seeds {seeds}, the mean of the per-seed differences, its 95\\% "
        f"$t$ interval counting the seeds' spread and the test set's bootstrap variance, and the verdict against "
        f"the declared margins ({_margins_text(record['config'])}). Accuracy in percentage points; negative "
        f"NLL / Brier differences favour A (ECE, described only, is in the metrics table). {src}.", "tab:main-paired", colsep="2pt", size="scriptsize"))
    out["knobs"] = ARTIFACTS.write_table(paths, "knobs", name, booktabs(  # empty for a record from before the knobs
        vk.knobs_frame(record).rename(columns=latex_escape), vk.KNOBS_CAPTION + f" {src}.", "tab:main-knobs",
        escape_index=True, colsep="3pt", size="footnotesize"))
    per_seed = {s: d["methods"] for s, d in res["per_seed"].items()}
    out["seeds"] = ARTIFACTS.write_table(paths, "seeds", name, booktabs(
        seed_intervals_frame(per_seed),
        f"{title}: test accuracy (\\%) of each seed with its 95\\% bootstrap interval. {src}.", "tab:main-seeds"))
    trained = res["per_seed"][first]["training"]
    fig = figures.training_curves({"Attn-KNN": trained["attnknn"]["history"], "CNN": trained["cnn"]["history"]},
                                f"{title} (seed {first})")
    out["curves"] = save_output_figure(ARTIFACTS, paths, "curves", name, fig)
    if drawn is not None:
        cm = np.array(drawn["confusion"])
        names = res.get("class_names") or [str(c) for c in range(res["dataset"]["num_classes"])]
        fig = figures.confusion_matrix_plot(cm, tuple(names), f"Attn-KNN on {title} (test, seed {first})")
        out["confusion"] = save_output_figure(ARTIFACTS, paths, "confusion", name, fig)
    if res.get("replay"):
        out["replay"] = ARTIFACTS.write_table(paths, "replay", name, booktabs(
            replay_frame(record),
            f"{title}: the prototype's defects re-introduced one at a time (seed {res['replay']['seed']}), each "
            f"row Attn-KNN minus the fixed-$k$ vote (the best weighting at $k = {record['config']['k']}$, chosen on "
            f"validation, the baseline the prototype compared with) as one run reports it: paired bootstrap 95\\% interval over test "
            f"points and the verdict it gives against the margins ({_margins_text(record['config'], brier=False)}; "
            f"equiv.: equivalent, incon.: inconclusive). First row: our protocol over seeds {seeds} (seed-level interval). "
            f"Self-matches: Attn-KNN retrained with training queries that find themselves; untuned distance "
            f"baseline: the fixed-$k$ vote replaced by distance weights with $\\tau = 1$ on squared distances (nearly "
            f"uniform); no calibration: ECE and NLL "
            f"of the raw probabilities (elsewhere after calibration); checkpoint chosen on test: a rerun of "
            f"the recipe's run that keeps every epoch, at the epoch whose Attn-KNN test accuracy is highest"
            f"{_checkpoint_text(res['replay'])}. {src}.", "tab:main-replay"))
    ablation = res["per_seed"][first]["ablation"]
    if ablation:
        out["ablation"] = ARTIFACTS.write_table(paths, "ablation", name, booktabs(
            methods_frame(ablation),
            f"{title}: attention components trained on the frozen Attn-KNN embedding of seed {first}"
            f"{_ablation_epochs(ablation)} (test, 95\\% intervals; {CAL_NOTE}). {src}.", "tab:ablation-primary",
            escape_index=False))
    return out


def _control_note(res: dict) -> str:
    """'; the MixUp control CNN over seeds 0, 1, 2 only' where the control ran on fewer seeds."""
    mix = [s for s, d in res["per_seed"].items() if "cnn_mixup" in d.get("methods", {})]
    return f"; the MixUp control CNN over seeds {', '.join(mix)} only" if mix and len(mix) < len(res["per_seed"]) else ""


def _mlp_note(name: str) -> str:
    """On a tabular set the network called CNN is a multilayer perceptron: the caption says so."""
    return "; on this tabular set the ``CNN'' is a multilayer perceptron" if REGISTRY[name].kind == "tabular" else ""


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


def _margins_text(config: dict, brier: bool = True) -> str:
    """The declared margins as a caption reads them (``brier`` off: a table with no Brier column)."""
    m = {k: config.get(f"margin_{k}", MARGINS[k]) for k in ("accuracy", "nll", "brier")}  # older records: defaults
    return (f"accuracy {100 * m['accuracy']:g} pp, NLL {m['nll']:g}" + (f", Brier {m['brier']:g}" if brier else "")
            + "; ECE is described, without a verdict")


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
                     "| dataset | " + " | ".join(PAPER_NAMES.get(m, METHOD_LABELS[m]) for m in keys) + " |",
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


def _seed_level(res: dict, comparison: str, split: str, metric: str) -> dict | None:
    """A stored seed-level difference (value, interval, verdict), or None where the record lacks it."""
    return (((res["paired"].get(comparison) or {}).get("seed_level") or {}).get(split) or {}).get(metric)


def answer_paragraph(record: dict) -> str:
    """The notebook's answer in words, on the primary dataset: Attn-KNN with its vote settings tuned
    against the tuned vote (accuracy) and the NLL-tuned vote (calibrated NLL), and NCA against the
    tuned vote, each as its mean over seeds and its verdict word (numbers and words from ``record``)."""
    res = record["results"]
    title = REGISTRY[record["dataset"]].title
    n = seeds_text(len(res["seeds"]), "seed" if res.get("replication", "seeds") == "seeds" else "split")
    tuned = _seed_level(res, "attnknn_tuned_vs_reference", "raw", "accuracy")
    if tuned is None:  # a record measured before Attn-KNN got the tuned vote's settings
        own = _seed_level(res, "attnknn_vs_reference", "raw", "accuracy") or \
            _seed_level(res, "attnknn_vs_best_baseline", "raw", "accuracy")
        return (f"On {title} ({n}), Attn-KNN at its trained k = {record['config']['k']} differs from the tuned vote "
                f"by {point_text(own, 'accuracy')} in accuracy.")
    text = (f"On {title} ({n}), Attn-KNN with its vote settings tuned differs from the tuned vote by "
            f"{point_text(tuned, 'accuracy')} in accuracy")
    nll = _seed_level(res, "attnknn_tuned_vs_reference_nll", "calibrated", "nll")
    if nll is not None:
        text += f", and from the NLL-tuned vote by {point_text(nll, 'nll')} in calibrated NLL"
    nca = _seed_level(res, "nca_vs_reference", "raw", "accuracy")
    if nca is not None:
        text += f"; NCA differs from the tuned vote by {point_text(nca, 'accuracy')}"
    return text + ". The differences are Attn-KNN (or NCA) minus the vote, means over seeds; the tables above give their intervals."


def _replay_line(res: dict) -> str | None:
    """The prototype replay in one sentence: the defect that moves Attn-KNN's difference most, the others' words."""
    replay = (res.get("replay") or {}).get("rows") or {}
    if not replay:
        return None
    top = max(replay, key=lambda row: abs(replay[row]["accuracy"]["value"]))
    rest = [d["accuracy"]["verdict"] for row, d in replay.items() if row != top]
    return (f"- Prototype replay (seed {res['replay']['seed']}, one defect at a time): the largest change is "
            f"{REPLAY_ROWS[top].lstrip('+ ')}, Attn-KNN minus its baseline {point_text(replay[top]['accuracy'], 'accuracy')}; "
            f"the other {len(rest)} rows: {verdict_counts(rest)}.")


def _descriptive_line(records: list[dict], primary: dict) -> str | None:
    """The other datasets, described (they draw no verdict): Attn-KNN minus the tuned vote, mean over replicates."""
    others = [r for r in records if r is not primary]
    if not others:
        return None
    parts = []
    for r in others:
        d = _seed_level(r["results"], "attnknn_tuned_vs_reference", "raw", "accuracy") or \
            _seed_level(r["results"], "attnknn_vs_reference", "raw", "accuracy")
        if d is not None:
            parts.append(f"{REGISTRY[r['dataset']].title} {100 * d['value']:+.2f} pp")
    if not parts:
        return None
    return ("- The other datasets are descriptive (no verdict): Attn-KNN" + (" with its vote settings tuned" if any(
        "attnknn_tuned_vs_reference" in r["results"]["paired"] for r in others) else "")
            + " minus the tuned vote in accuracy: " + "; ".join(parts) + ".")


def findings(records: list[dict]) -> str:
    """The notebook's answer: a paragraph (:func:`answer_paragraph`) on the primary dataset, then one
    point per bullet: the accuracies, Attn-KNN at its trained k (a diagnostic), the CNN, the calibration
    endpoint, the choices on validation, the plateau, the other datasets (described) and the prototype
    replay. Values and verdict words only; the intervals are in the tables above. Every number is read
    from ``records``."""
    if not records:
        return "No results yet."
    primary = next((r for r in records if r["config"].get("primary") == r["dataset"]), records[0])
    res, cfg = primary["results"], primary["config"]
    summ = res["summary"]
    lines = [answer_paragraph(primary), ""]
    accs = [f"{name} {mean_pct(summ[m]['test_raw']['accuracy'])}" for m, name in (
        ("attnknn_tuned", "Attn-KNN with its vote settings tuned"), ("attnknn", f"Attn-KNN at k = {cfg['k']}"),
        ("reference", "the tuned vote"), ("nca", "NCA"), ("cnn", "the CNN")) if m in summ]
    lines.append("- Test accuracy, mean over seeds: " + ", ".join(accs) + ".")
    for name, who in (("attnknn_vs_reference", f"At its trained k = {cfg['k']} (a diagnostic), Attn-KNN minus the tuned vote"),
                      ("attnknn_vs_best_baseline", f"Attn-KNN minus the best kNN vote at k = {cfg['k']} (secondary)"),
                      ("attnknn_vs_cnn", "Attn-KNN minus the CNN")):
        acc, nll = (_seed_level(res, name, "raw", "accuracy"), _seed_level(res, name, "calibrated", "nll"))
        if acc is not None:
            lines.append(f"- {who}: {point_text(acc, 'accuracy')} in accuracy, {point_text(nll, 'nll')} in calibrated NLL.")
    for name, who in (("attnknn_tuned_vs_reference_nll", "Attn-KNN with its vote settings tuned for NLL minus the NLL-tuned vote"),
                      ("attnknn_tuned_vs_nca_nll", "Attn-KNN with its vote settings tuned for NLL minus NCA tuned for NLL")):
        nll, brier = _seed_level(res, name, "calibrated", "nll"), _seed_level(res, name, "calibrated", "brier")
        if nll is not None:
            lines.append(f"- Calibration endpoint, {who}: NLL {point_text(nll, 'nll')}, Brier {point_text(brier, 'brier')}.")
    lines += vk.knob_summary(res)
    rules = {kind: [res["per_seed"][str(s)]["training"][kind]["plateau"] for s in res["seeds"]]
             for kind in ("attnknn", "cnn")}
    lines.append("- Operating point: the plateau rule holds for " + " and ".join(
        f"{METHOD_LABELS[k]} in {sum(r['plateau'] for r in rs)} of {len(rs)} runs" for k, rs in rules.items())
        + " (the training table above gives the selected epochs).")
    lines += [line for line in (_descriptive_line(records, primary), _replay_line(res)) if line]
    return markdown_lists(lines)


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


def _ablation_epochs(ablation: dict) -> str:
    """', each to a plateau of its validation score (epochs run a-b)' (or how many reached one)."""
    runs = [m["training"] for m in ablation.values()]
    n = [len(r["history"]) for r in runs]
    reached = sum(r["plateau"] for r in runs)
    head = "each to a plateau of its validation score" if reached == len(runs) else \
        f"{reached} of {len(runs)} to a plateau of their validation score"
    return f", {head} (epochs run {min(n)}\u2013{max(n)})"


def ablation_frame(record: dict) -> pd.DataFrame:
    """The ablation of the attention components (first seed of the primary dataset) as the
    notebook shows it; empty when the run had the ablation off."""
    res = record["results"]
    ablation = res["per_seed"][str(res["seeds"][0])].get("ablation")
    return methods_frame(ablation, latex=False) if ablation else pd.DataFrame()


def dataset_record(nb, cfg, name: str) -> dict:
    """One dataset's record for the notebook ``nb`` (:class:`~attnknn_lib.experiments.framework.reading.Session`):
    measured (:func:`~attnknn_lib.experiments.main.measure.run_dataset`) and written out when it
    recomputes, else the committed one."""
    def compute(paths: Paths) -> dict:
        return run_dataset(cfg, name, paths).record
    return nb.record(compute, name, write=lambda record, paths: write_outputs(record, paths, primary=name == cfg.primary))


def summary_table(nb, cfg) -> list[Path]:
    """The tables the notebook lists: the summary across datasets is written first when it recomputes
    (a reading notebook writes nothing)."""
    if nb.recompute or nb.render:
        write_summary_table(nb.paths, cfg.datasets)
    return ARTIFACTS.written(nb.paths, cfg)

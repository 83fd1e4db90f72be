"""main: the paired differences of its record as tables (LaTeX for the paper, a frame for the notebook)."""

from __future__ import annotations

import pandas as pd

from attnknn_lib.experiments.main.views import knob_tables as vk
from attnknn_lib.report.tables import DIFF_FORMAT, fmt, interval_text, num


def diff_frame(paired: dict) -> pd.DataFrame:
    """Rows: comparison x seed, then over seeds (seed-level interval and verdict); columns:
    the endpoints that draw a verdict: accuracy, and NLL and Brier after calibration, with 95 % intervals
    (ECE, described only, is in the metrics table and the notebook's; the table fits the page unscaled)."""

    rows = {}
    cols = (("$\\Delta$ Acc. (pp)", "raw", "accuracy"), ("$\\Delta$ NLL (cal.)", "calibrated", "nll"),
            ("$\\Delta$ Brier (cal.)", "calibrated", "brier"))
    for name, entry in paired.items():
        label = vk.comparison_label(entry, short=True, latex=True)  # short: the table fits unscaled
        shown = [c for c in cols if not vk.is_calibration(name) or c[2] in vk.ENDPOINT]  # the endpoint's own metrics
        # calibration is judged against the NLL-tuned vote (its own rows): against the accuracy-tuned one, described
        judged = [c for c in shown if c[2] == "accuracy" or not name.endswith(("_vs_reference", "_vs_nca"))]

        def cells(d: dict, word: bool = False) -> dict:
            return {c: ((d[split][m].get("verdict", "(described)") if (c, split, m) in judged else "(described)")
                        if word else fmt(d[split][m], m, signed=True))
                    if (c, split, m) in shown else "--" for c, split, m in cols}
        if name in vk.PER_SEED_ROWS:  # the knob comparisons give their seed-level rows only (the table stays one page)
            for s, d in entry["per_seed"].items():
                rows[f"{label}, seed {s}"] = cells(d)
        rows[f"{label}, mean"] = cells(entry["seed_level"])  # over seeds (the caption says so)
        rows[f"{label}, verdict"] = cells(entry["seed_level"], word=True)
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "A $-$ B"
    return df


PAIRED_METRICS = {m: (label, *DIFF_FORMAT[m][:2]) for m, label in (("accuracy", "accuracy (pp)"), ("ece", "ECE"),
                                                                    ("nll", "NLL"), ("brier", "Brier"))}


def paired_frame(record: dict) -> pd.DataFrame:
    """Seed-level paired differences of one record, Attn-KNN minus each comparison, raw and after
    calibration: per metric the mean difference (accuracy in percentage points), its 95 % interval
    and the verdict against the declared margin (named in the column header)."""
    res = record["results"]
    rows = {}
    for name, e in res["paired"].items():
        for split, split_label in (("raw", "raw"), ("calibrated", "after calibration")):
            if vk.is_calibration(name) and split == "raw":
                continue  # the calibration endpoint is read after calibration only
            row = {}
            for metric, (label, scale, dec) in PAIRED_METRICS.items():
                d = e["seed_level"][split][metric]
                head = f"{label}, margin {scale * d['margin']:g}" if "margin" in d else f"{label}, described"
                own = not vk.is_calibration(name) or metric in vk.ENDPOINT
                row[(head, "Δ")] = num(d["value"], dec, scale) if own else "--"
                row[(head, "95% interval")] = interval_text(d["low"], d["high"], dec, scale, d.get("margin")) if own else "--"
                row[(head, "verdict")] = d.get("verdict", "") if own else "--"  # ECE: no verdict
            rows[(vk.comparison_label(e), split_label)] = row
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    df.index.names = ["comparison", "probabilities"]
    return df.rename_axis(columns=[f"over {len(res['seeds'])} {_replicates(res)}", ""])


def _replicates(res: dict) -> str:
    return "seeds" if res.get("replication", "seeds") == "seeds" else "splits"

"""The study's learned metrics drawn from its record: NCA and the linear probe on each memory against
the tuned vote, and main's Attn-KNN with its vote settings tuned against NCA."""

from __future__ import annotations

import pandas as pd

from attnknn_lib.experiments.attention_study.views.cells import diff_cell
from attnknn_lib.experiments.attention_study.views.labels import short_setting
from attnknn_lib.report.tables import latex_escape

ROWS = (("nca", "NCA (rule re-tuned in its space)"), ("linear_probe", "linear probe"))


def learned_frame(record: dict, latex: bool = False) -> pd.DataFrame:
    """Per memory setting: NCA and the linear probe (test accuracy, mean over seeds; seed-level
    difference to the accuracy-tuned rule), NCA tuned for the calibration endpoint against the tuned vote
    tuned for it (NLL and Brier after calibration), and main's Attn-KNN with the tuned vote's knobs minus
    NCA (accuracy; NLL and Brier of the calibration-endpoint versions)."""
    pc = "\\%" if latex else "%"
    cols = (f"acc. ({pc})", "Δ acc. (pp)", "Δ NLL cal.", "Δ Brier cal.")
    rows = {}
    for setting, s in record["results"]["summary"]["settings"].items():
        lm = s.get("learned_metric")
        if not lm:
            continue
        where = latex_escape(short_setting(setting)) if latex else short_setting(setting)
        for name, label in ROWS:
            m = lm[name]
            rows[f"{where}: {label} $-$ rule" if latex else f"{where}: {label} − rule"] = {
                cols[0]: f"{100 * m['accuracy']['mean']:.2f}",
                cols[1]: diff_cell(m["verdicts_reference"]["accuracy"], "accuracy", latex), cols[2]: "", cols[3]: ""}
        cal = lm["nca_nll"]["verdicts_reference_nll"]
        rows[f"{where}: NCA $-$ rule, calibration endpoint" if latex else f"{where}: NCA − rule, calibration endpoint"] = {
            cols[0]: "", cols[1]: "", cols[2]: diff_cell(cal["nll"], "nll", latex), cols[3]: diff_cell(cal["brier"], "brier", latex)}
        if "attnknn_tuned_vs_nca" in lm:
            v = lm["attnknn_tuned_vs_nca"]
            rows[f"{where}: Attn-KNN, tuned $-$ NCA" if latex else f"{where}: Attn-KNN, tuned − NCA"] = {
                cols[0]: "", cols[1]: diff_cell(v["accuracy"], "accuracy", latex),
                cols[2]: diff_cell(v["nll"], "nll", latex), cols[3]: diff_cell(v["brier"], "brier", latex)}
    df = pd.DataFrame.from_dict(rows, orient="index", columns=list(cols))
    df.index.name = "memory: comparison"
    if latex:
        df.columns = [c.replace("Δ", "$\\Delta$") for c in df.columns]
    return df

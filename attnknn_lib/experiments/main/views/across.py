"""Table 1: each family's accuracy and calibrated NLL on every dataset of the main experiment, one
column per dataset, from the main records."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from attnknn_lib.base.files import read_json
from attnknn_lib.base.paths import Paths
from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.evaluation.methods import METHOD_LABELS, OTHER_LABELS
from attnknn_lib.experiments.common.learned_metric import LABELS as LEARNED_LABELS
from attnknn_lib.experiments.main.config import ARTIFACTS
from attnknn_lib.report.findings import method_names
from attnknn_lib.report.tables import booktabs

PAPER_NAMES = method_names({**METHOD_LABELS, **OTHER_LABELS, **LEARNED_LABELS})  # every method under the paper's name


ACROSS_DATASETS = ("uniform", "reference", "reference_nll", "attnknn", "attnknn_tuned", "fixed_vote", "nca",
                   "linear_probe", "cnn")
"""Table 1's rows: the three families and the parametric reference, each with the name the paper gives it;
TTA and Attn-KNN's inference variants stay in the primary dataset's own table."""


def summary_frame_across(records: dict[str, dict]) -> pd.DataFrame:
    """Accuracy (%) / calibrated NLL, means over seeds or splits: one row per method of
    :data:`ACROSS_DATASETS` that some record has, one column per dataset ("--" where it was not run)."""
    names = dict(PAPER_NAMES)
    if any(REGISTRY[r["dataset"]].kind == "tabular" for r in records.values()):  # one row, two backbones
        names["cnn"] = f"{names['cnn']} (MLP on tabular sets)"
    cols = {}
    for title, record in records.items():
        summary = record["results"]["summary"]
        cols[title] = {names[m]: f"{100 * summary[m]['test_raw']['accuracy']['mean']:.2f} / "
                                 f"{summary[m]['test_calibrated']['nll']['mean']:.3f}"
                       for m in ACROSS_DATASETS if m in summary}
    rows = [names[m] for m in ACROSS_DATASETS if any(names[m] in c for c in cols.values())]
    df = pd.DataFrame(cols).reindex(rows).fillna("--")
    df.index.name = "Method"
    return df


def same_vote_note(records: dict[str, dict]) -> str:
    """Where the NLL-tuned vote is the tuned vote itself (it keeps whichever of the two searches'
    choices has the lower calibrated validation NLL), per dataset: "N of M splits of T" ("" if nowhere)."""
    said = []
    for title, record in records.items():
        picks = [p.get("knobs", {}).get("reference_nll", {}).get("tuned_on") for p in record["results"]["per_seed"].values()]
        if "accuracy" in picks:
            unit = "splits" if record["results"].get("paired", {}).get("attnknn_vs_best_baseline", {}).get(
                "replication") == "splits" else "seeds"
            said.append(f"{picks.count('accuracy')} of {len(picks)} {unit} of {title}")
    if not said:
        return ""
    return ("; the NLL-tuned vote is the tuned vote itself where that one has the lower calibrated validation NLL, "
            "as in " + ", ".join(said[:-1]) + (" and " if len(said) > 1 else "") + said[-1] + ", so their rows can agree")


def write_summary_table(paths: Paths, datasets: tuple[str, ...]) -> Path:
    """Accuracy and calibrated NLL (means over seeds) of each family's methods across datasets."""
    records = {REGISTRY[name].title: read_json(ARTIFACTS.record_path(paths, name)) for name in datasets}
    return ARTIFACTS.write_table(paths, "summary", None, booktabs(
        summary_frame_across(records),
        "Test accuracy (\\%) / NLL after calibration, means over seeds (image data) or stratified hold-out splits "
        "(tabular data); --: not run on that dataset (the "
        f"fixed-vote control is trained on the primary dataset only){same_vote_note(records)}. Notebook "
        "\\texttt{01\\_main}, \\texttt{results/main\\_*.json}.", "tab:main-summary", size="footnotesize"))

"""Confirmatory views: the gate table, the verdict table, the forest plot, macros, README lines and
findings read off its record (no measuring). The words are the declaration's
(``docs/confirmatory_declaration.md``); a win counted is "better", never "better, within the margin"."""

from __future__ import annotations

import pandas as pd

from attnknn_lib.base.paths import Paths
from attnknn_lib.experiments.common.fixed_embedding_views import forest_figure
from attnknn_lib.experiments.confirmatory.config import ARTIFACTS, DATASET, NAME, NOTEBOOK
from attnknn_lib.report.figures import save_output_figure
from attnknn_lib.report.findings import HEAD_NAMES, METHOD_NAMES, table_link
from attnknn_lib.report.macros import macro_name, signed, source_note
from attnknn_lib.report.tables import booktabs, interval_text

GATE_NAMES = {"geometry": "geometry-only vote", "learner": "boosted-trees learner", "nca": "NCA",
              "mlp_metric": "nonlinear metric"}
NAMES = {**METHOD_NAMES, **HEAD_NAMES, "learner": "boosted-trees learner",
         "attnknn_tuned": "attention head, vote settings tuned", "attnknn_tuned_nll": "attention head, vote settings tuned",
         "attnknn_wide_tuned": "attention head at k_w, vote settings tuned",
         "attnknn_wide_tuned_nll": "attention head at k_w, vote settings tuned",
         "reference": "tuned vote", "reference_nll": "tuned vote", "nca": "NCA", "nca_nll": "NCA",
         "mlp_metric": "nonlinear metric", "mlp_metric_nll": "nonlinear metric"}
"""Each method's name in the tables: one name per learner whatever the endpoint it was tuned for."""
SCALE = {"accuracy": (100.0, 2), "nll": (1.0, 3), "brier": (1.0, 4)}  # shown in points, or as measured


def _candidates(record: dict) -> list[tuple[str, dict]]:
    return list(record["results"]["candidates"].items())


def gate_frame(record: dict) -> pd.DataFrame:
    """Per candidate: each gate learner's cross-fitted validation room over the tuned vote (pp, mean
    over seeds), the best and whether the candidate passes the declared margin."""
    rows = {}
    for _, cand in _candidates(record):
        g = cand["gate"]
        rows[cand["label"]] = {**{GATE_NAMES.get(m, m): f"{signed(100 * v, 2)}" for m, v in g["room"].items()},
                               "best": GATE_NAMES.get(g["best"], g["best"]), "passes": "yes" if g["passed"] else "no"}
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "candidate"
    return frame


def _cell(d: dict, metric: str) -> str:
    scale, digits = SCALE[metric]
    return f"{signed(scale * d['value'], digits)} {interval_text(d['low'], d['high'], digits, scale, d.get('margin'))}"


def verdict_frame(record: dict) -> pd.DataFrame:
    """Every declared comparison (rows: candidate, method, against) with each endpoint's difference
    [95 % interval] and its Holm-adjusted verdict; the family it belongs to (confirmatory when the
    candidate passed the gate, else exploratory)."""
    res = record["results"]
    rows = []
    for _, cand in _candidates(record):
        diff = cand["summary"]["diff"]
        for i, (name, ref) in enumerate(res["families"]["accuracy"]):
            row = {"candidate": cand["label"], "method": NAMES.get(name, name), "against": NAMES.get(ref, ref),
                   "family": "confirmatory" if cand["gate"]["passed"] else "exploratory"}
            for metric, pairs in res["families"].items():
                m, r = pairs[i]
                d = diff.get(m, {}).get(r, {}).get(metric)
                row[metric] = _cell(d, metric) if d else "--"
                row[f"{metric} verdict"] = d["verdict"] if d else "--"
            rows.append(row)
    return pd.DataFrame(rows).set_index(["candidate", "method", "against"])


def forest_learners(record: dict) -> dict[str, str]:
    """The forest plot's rows: every learner of the accuracy family against the tuned vote."""
    return {m: NAMES.get(m, m) for m, r in record["results"]["families"]["accuracy"] if r == "reference"}


def write_outputs(record: dict, paths: Paths) -> dict:
    src = source_note(NOTEBOOK, ARTIFACTS.record_file(DATASET))
    res = record["results"]
    n = len(res["seeds"])
    sizes = res["multiplicity"]["family_sizes"]
    fig = forest_figure([(c["label"], c) for _, c in _candidates(record)], forest_learners(record),
                        f"Declared embeddings: test accuracy minus the tuned vote's ({n} seeds)")
    return {"gate": ARTIFACTS.write_table(paths, "gate", DATASET, booktabs(
        gate_frame(record),
        f"The declared candidate embeddings of Fashion-MNIST at the gate, before any head is trained: each gate "
        f"learner's validation accuracy minus the tuned vote's (pp, mean over {n} seeds), both cross-fitted on two "
        f"halves of the validation rows; a candidate passes at {100 * res['room_margin']:g}\\,pp or more. {src}.",
        f"tab:{NAME}_gate", size="footnotesize")),
        "verdicts": ARTIFACTS.write_table(paths, "verdicts", DATASET, booktabs(
            verdict_frame(record),
            f"The declared comparisons on each candidate: difference and seed-level 95\\,\\% interval over {n} "
            f"seeds that read the same test rows (the interval adds the paired bootstrap's test term), and the "
            f"verdict after Holm within the endpoint's family: the candidates that pass the gate (m = "
            f"{sizes['confirmatory'].get('accuracy', 0)} per endpoint), and those that fail (exploratory, m = "
            f"{sizes['exploratory'].get('accuracy', 0)}). Accuracy in points; NLL and Brier after calibration on "
            f"validation, against the NLL-tuned vote or the learned metric tuned for NLL. {src}.",
            f"tab:{NAME}_verdicts", colsep="2pt", size="scriptsize")),
        "forest": save_output_figure(ARTIFACTS, paths, "forest", DATASET, fig)}


def _better(record: dict, name: str, ref: str = "reference") -> list[str]:
    """The candidates that passed the gate where ``name`` reads "better" than ``ref`` in accuracy."""
    return [c["label"] for _, c in _candidates(record) if c["gate"]["passed"]
            and c["summary"]["diff"].get(name, {}).get(ref, {}).get("accuracy", {}).get("verdict") == "better"]


def macros(records: list[dict]) -> dict[str, str]:
    """The paper's numbers: seeds, candidates that pass, and per candidate the attention head's and NCA's
    accuracy difference from the tuned vote with its verdict."""
    out: dict[str, str] = {}
    for record in records:
        res = record["results"]
        out[macro_name("Confirmatory", "Seeds")] = str(len(res["seeds"]))
        out[macro_name("Confirmatory", "Passed")] = str(len(res["passed"]))
        for key, cand in _candidates(record):
            for name in ("attnknn_tuned", "nca", "mlp_metric"):
                d = cand["summary"]["diff"].get(name, {}).get("reference", {}).get("accuracy")
                if d:
                    tag = ("Confirmatory", key.replace("_", " ").title(), name.replace("_", " ").title())
                    out[macro_name(*tag, "Diff")] = signed(100 * d["value"], 2)
                    out[macro_name(*tag, "Verdict")] = d["verdict"]
    return out


def finding_lines(record: dict) -> list[str]:
    """One line per candidate: the gate, then the attention head and the learned metrics against the
    tuned vote (accuracy, Holm-adjusted verdict)."""
    out = []
    for _, cand in _candidates(record):
        diff = cand["summary"]["diff"]
        parts = []
        for name in ("attnknn_tuned", "attnknn_wide_tuned", "nca", "mlp_metric"):
            d = diff.get(name, {}).get("reference", {}).get("accuracy")
            if d:
                parts.append(f"{NAMES[name]} {signed(100 * d['value'], 2)} pp, {d['verdict']}")
        gate = "passes the gate" if cand["gate"]["passed"] else "fails the gate (exploratory)"
        out.append(f"- *{cand['label']}* {gate}; against the tuned vote: " + "; ".join(parts) + ".")
    return out


def _summary(record: dict) -> str:
    res = record["results"]
    wins = _better(record, "attnknn_tuned")
    return (f"**Declared embeddings**: {len(res['passed'])} of {len(res['candidates'])} pass the gate; the attention "
            f"head with its vote settings tuned is better than the tuned vote on {len(wins)} of them "
            f"(Holm-adjusted, {len(res['seeds'])} seeds). {table_link(NOTEBOOK)}")


def readme_lines(records: list[dict]) -> list[str]:
    """The confirmatory experiment's answer, then one line per candidate."""
    return [line for record in records for line in (_summary(record), *finding_lines(record))]


def findings(record: dict) -> str:
    """The notebook's answer (the README's lines of this record)."""
    return "\n".join([_summary(record), "", *finding_lines(record)])

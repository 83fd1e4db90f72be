"""main: the tuned vote's knobs drawn from its record: Attn-KNN with k, filter and prior chosen on
validation against the tuned vote, the calibration endpoint against the NLL-tuned vote, and
each seed's choices (the tuned vote's validation-test gap and every open edge of its search)."""

from __future__ import annotations

import pandas as pd

from attnknn_lib.evaluation.methods import METHOD_LABELS, OTHER_LABELS
from attnknn_lib.experiments.common.learned_metric import LABELS as LEARNED_LABELS
from attnknn_lib.experiments.main.config import CALIBRATION_COMPARISONS
from attnknn_lib.experiments.main.measure.knob_search import KNOB_LABELS
from attnknn_lib.report.findings import difference_text, method_names
from attnknn_lib.report.macros import VERDICT_PHRASES, macro_name, signed
from attnknn_lib.report.tables import DIFF_FORMAT, signed_bound

LABELS = {**method_names({**METHOD_LABELS, **OTHER_LABELS}), **KNOB_LABELS, **LEARNED_LABELS,
          "best baseline": "fixed-k vote", "fixed_vote": "fixed-vote control"}
SHORT = {"attnknn": "Attn-KNN", "attnknn_tuned": "Attn-KNN, tuned", "attnknn_tuned_nll": "Attn-KNN, tuned for NLL",
         "reference": "tuned vote", "reference_nll": "NLL-tuned vote", "best baseline": "fixed-k vote",
         "cnn": "CNN", "nca": "NCA", "nca_nll": "NCA, tuned for NLL", "linear_probe": "linear probe",
         "fixed_vote": "fixed-vote control"}
"""Short names for the rows of the paired tables (they must fit the page unscaled)."""
ENDPOINT = ("nll", "brier")  # the calibration endpoint: proper scores after calibration
PER_SEED_ROWS = ("attnknn_vs_reference", "attnknn_vs_best_baseline", "attnknn_vs_cnn")
KNOBS_CAPTION = ("The vote settings each seed chose on validation: the tuned vote, the NLL-tuned vote, and Attn-KNN "
                 "with its vote settings tuned ($k$ from the tuned vote's grid, read up to the neighbours searched; "
                 "label filter; prior correction), with the $k$ it was trained at where the choice differs; the "
                 "neighbours searched; every grid edge the choice still sits on; validation and test accuracy and "
                 "their gap.")
MACRO_TAGS = {"attnknn_tuned_vs_reference": "DiffTuned", "attnknn_tuned_vs_reference_nll": "DiffTunedCalRef",
              "attnknn_vs_reference_nll": "DiffCalRef", "nca_vs_reference": "DiffNcaRef",
              "linear_probe_vs_reference": "DiffProbeRef", "attnknn_tuned_vs_nca": "DiffTunedNca",
              "attnknn_tuned_vs_nca_nll": "DiffTunedCalNca"}


def comparison_label(entry: dict, short: bool = False, latex: bool = False) -> str:
    """``A − B`` of a paired entry, in readers' names (``$-$`` in LaTeX)."""
    names = SHORT if short else LABELS
    return f"{names.get(entry['a'], entry['a'])} {'$-$' if latex else '−'} {names.get(entry['b'], entry['b'])}"


def is_calibration(name: str) -> bool:
    """A comparison read on the calibration endpoint only (its reference is tuned for it)."""
    return name in CALIBRATION_COMPARISONS


def edges_text(e: dict) -> str:
    """A search's open edges; k left open by the NLL search's tolerance says what its last doubling gained."""
    return ", ".join(f"k (last doubling: NLL {-e['k_gain']:+.1e})" if x == "k" and e.get("k_gain") is not None else x
                     for x in e["edges"]) or "none"


def knobs_frame(record: dict) -> pd.DataFrame:
    """Per seed and tuned method: its choice, the k Attn-KNN was trained at where it differs, the
    neighbours searched, the open edges its grids left, validation and test accuracy and their gap."""
    rows = {}
    for seed, r in record["results"]["per_seed"].items():
        for m, e in (r.get("knobs") or {}).items():
            trained = f" (trained at k={e['k_trained']})" if e.get("k_differs") else ""
            rows[f"seed {seed}: {SHORT.get(m, m)}" + (" (NLL)" if m == "attnknn_tuned_nll" else "")] = {
                "choice": e["label"] + trained, "searched": str(e["k_searched"]), "open edges": edges_text(e),
                "val. acc. (%)": f"{100 * e['val_accuracy']:.2f}", "test acc. (%)": f"{100 * e['test_accuracy']:.2f}",
                "val. - test (pp)": f"{100 * e['val_test_gap']:+.2f}"}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("seed: method")


def knob_macros(prefix: tuple[str, ...], res: dict) -> dict[str, str]:
    """Seed-level differences of the knob comparisons (Brier too: the calibration endpoint), and per
    tuned method over seeds: the chosen k, how many seeds chose a k other than the trained one, the
    open edges and the largest validation-test gap."""
    out: dict[str, str] = {}
    for name, tag in MACRO_TAGS.items():
        entry = res["paired"].get(name)
        if entry is None:
            continue
        metrics = ENDPOINT if is_calibration(name) else ("accuracy", *ENDPOINT)
        for metric in metrics:
            split = "raw" if metric == "accuracy" else "calibrated"
            e = entry["seed_level"][split][metric]
            scale, dec, _ = DIFF_FORMAT[metric]
            word = {"accuracy": "Acc", "nll": "NllCal", "brier": "BrierCal"}[metric]
            out[macro_name(*prefix, tag, word)] = signed(None if e["value"] is None else scale * e["value"], dec)
            for part, suffix in (("low", "Low"), ("high", "High")):  # an end never rounds to a zero that hides it
                out[macro_name(*prefix, tag, word + suffix)] = "--" if e[part] is None or e[part] != e[part] else \
                    signed_bound(scale * e[part], dec)
            out[macro_name(*prefix, tag, word, "Verdict")] = VERDICT_PHRASES[e["verdict"]]
    knobs = [r.get("knobs") or {} for r in res["per_seed"].values()]
    for m in ("reference", "reference_nll", "attnknn_tuned", "attnknn_tuned_nll"):
        got = [k[m] for k in knobs if m in k]
        if not got:
            continue
        tag = "".join(w.capitalize() for w in m.split("_"))
        out[macro_name(*prefix, tag, "Ks")] = ", ".join(str(e["k"]) for e in got)
        out[macro_name(*prefix, tag, "Edges")] = ", ".join(sorted({x for e in got for x in e["edges"]})) or "none"
        out[macro_name(*prefix, tag, "Gap Max")] = f"{100 * max(e['val_test_gap'] for e in got):+.2f}"
        if m.startswith("attnknn"):
            out[macro_name(*prefix, tag, "K Differs Count")] = str(sum(e["k_differs"] for e in got))
    return out


def knob_findings(res: dict) -> list[str]:
    """The notebook's lines on the knobs: Attn-KNN tuned against the tuned vote (accuracy), both Attn-KNNs
    against the NLL-tuned vote (NLL, Brier after calibration), the choices."""
    lines = []
    paired = res["paired"]
    if "attnknn_tuned_vs_reference" in paired:
        sl = paired["attnknn_tuned_vs_reference"]["seed_level"]
        lines.append(f"- {comparison_label(paired['attnknn_tuned_vs_reference'])}: accuracy "
                     f"{difference_text(sl['raw']['accuracy'], 'accuracy')} (the k = {_trained_k(res)} Attn-KNN "
                     "above is the diagnostic).")
    for name in CALIBRATION_COMPARISONS:
        if name in paired:
            sl = paired[name]["seed_level"]["calibrated"]
            lines.append(f"- Calibration endpoint, {comparison_label(paired[name])}: NLL after calibration "
                         f"{difference_text(sl['nll'], 'nll')}; Brier after calibration "
                         f"{difference_text(sl['brier'], 'brier')}.")
    knobs = {s: r.get("knobs") or {} for s, r in res["per_seed"].items()}
    if any(knobs.values()):
        lines.append("- Choices on validation per seed: " + "; ".join(
            f"seed {s}: " + ", ".join(f"{SHORT.get(m, m)}{' (NLL)' if m == 'attnknn_tuned_nll' else ''} "
                                      f"{e['label']}" + (f" [open edge: {edges_text(e)}]" if e["edges"] else "")
                                      for m, e in k.items()) for s, k in knobs.items() if k) + ".")
        gaps = [(s, k["reference"]["val_test_gap"]) for s, k in knobs.items() if "reference" in k]
        if gaps:
            lines.append("- The rule's validation minus test accuracy (pp): " + ", ".join(
                f"seed {s} {100 * g:+.2f}" for s, g in gaps) + ".")
    return lines


def knob_summary(res: dict) -> list[str]:
    """The findings' bullets on the vote settings chosen on validation: the range of k each tuned
    method chose over seeds, the choices left on an open edge of their grid, and the tuned vote's
    validation-minus-test gap (each seed's choice: the knobs table)."""
    knobs = {s: r.get("knobs") or {} for s, r in res["per_seed"].items()}
    if not any(knobs.values()):
        return []
    ks: dict[str, list[int]] = {}
    for k in knobs.values():
        for m, e in k.items():
            ks.setdefault(m, []).append(int(e["k"]))
    ranges = ", ".join(f"{SHORT.get(m, m)} {min(v)}" + (f"-{max(v)}" if max(v) > min(v) else "") for m, v in ks.items())
    edges = [f"seed {s}'s {SHORT.get(m, m)} ({', '.join(e['edges'])})" for s, k in knobs.items() for m, e in k.items() if e["edges"]]
    lines = [f"- Vote settings chosen on validation, k over seeds: {ranges}; "
             + (f"on an open edge of the grid: {', '.join(edges)}." if edges else "no choice on an open edge of its grid.")]
    gaps = [100 * k["reference"]["val_test_gap"] for k in knobs.values() if "reference" in k]
    if gaps:
        lines.append(f"- The tuned vote's validation accuracy exceeds its test accuracy by {min(gaps):+.2f} to "
                     f"{max(gaps):+.2f} pp over seeds (it is chosen on validation).")
    return lines


def _trained_k(res: dict) -> str:
    ks = {e["k_trained"] for r in res["per_seed"].values() for m, e in (r.get("knobs") or {}).items()
          if "k_trained" in e}
    return ", ".join(map(str, sorted(ks))) or "?"

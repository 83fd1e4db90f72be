"""main: the knobs the tuned vote tunes, measured for the record: the tuned vote's search (tuned on
accuracy and for the calibration endpoint) and Attn-KNN with k, filter and prior chosen on
validation, per seed."""

from __future__ import annotations

from attnknn_lib.evaluation.methods import method_labels

KNOB_METHODS = ("reference", "reference_nll", "attnknn_tuned", "attnknn_tuned_nll")
"""The tuned vote (tuned on validation accuracy; for the calibration endpoint) and Attn-KNN with
the tuned vote's settings (the same two selections), in the order main's tables list them."""


def search_entry(scored: dict, k_trained: int | None = None) -> dict:
    """One tuned method's search as the record keeps it: its choice (label, k), the configurations
    scored, the open edges its grids left, the neighbours searched, validation and test accuracy and
    their gap (validation minus test, points of accuracy as a share); with ``k_trained`` (Attn-KNN)
    also the k it was trained at and whether the chosen k differs from it."""
    info = scored["info"]
    val, test = scored["val"]["accuracy"], scored["test_raw"]["accuracy"]["value"]
    out = {"label": info["label"], "k": info["choice"]["k"], "configs": info["configs"], "edges": list(info["edges"]),
           "k_searched": info["k_searched"], "val_accuracy": val, "test_accuracy": test, "val_test_gap": val - test}
    for key in ("tuned_on", "k_gain"):
        if key in info:
            out[key] = info[key]
    if k_trained is not None:
        out.update(k_trained=k_trained, k_differs=info["choice"]["k"] != k_trained)
    return out


def knobs_entry(scored: dict, k_trained: int) -> dict:
    """Per method of :data:`KNOB_METHODS` present in ``scored`` (main's scored methods of one seed):
    :func:`search_entry`, Attn-KNN's with the k it was trained at."""
    return {m: search_entry(scored[m], k_trained if m.startswith("attnknn") else None)
            for m in KNOB_METHODS if m in scored}


KNOB_LABELS = method_labels(*KNOB_METHODS, reference="Strongest rule (val. accuracy)")
"""Their labels in main, where two references sit side by side: the first says what it is tuned on."""


def label_knob_methods(scored: dict) -> None:
    """The readers' labels of the knob methods (:data:`KNOB_LABELS`), in place of their keys."""
    for m in KNOB_METHODS:
        if m in scored:
            scored[m]["label"] = KNOB_LABELS[m]

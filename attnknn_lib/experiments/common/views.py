"""Names the fixed-embedding and robustness views share: how the robustness experiments (label noise,
long tail) name their settings for a reader (the memory alone changed under the clean-trained models,
or the models retrained on the changed data), and which attention head a fixed-embedding verdict
counts and how a table names it."""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields

import pandas as pd

from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.evaluation.verdicts import IDENTICAL, detectable, resolvable
from attnknn_lib.experiments.common.fixed_embedding import TUNED
from attnknn_lib.experiments.framework.declaration import Artifacts
from attnknn_lib.report.findings import markdown_lists
from attnknn_lib.report.macros import source_note
from attnknn_lib.report.tables import markdown_frame, tabular

SETTING_TITLES = {"bank": "memory only", "trained": "retrained"}

TUNED_ATTNKNN = {"accuracy": TUNED[0], "nll": TUNED[1], "brier": TUNED[1]}
"""Per endpoint, the attention head with the tuned vote's settings (k, filter, prior) chosen for it."""
TUNED_LABEL = "attention head, tuned"
TUNED_CAPTION = ("The attention head with its vote settings tuned reads the $k$ chosen on validation, its $k$, label filter and prior "
                 "correction chosen on validation as the tuned vote's are (accuracy), and as the NLL-tuned vote's for "
                 "NLL and Brier; at the $k$ it was trained at it is a diagnostic. ")
"""A verdict table's caption sentence on the row of the attention head with tuned vote settings."""
AT_K_LABEL = "attention head at k = {k}"  # the head as trained: a diagnostic where the tuned one exists


def counted_method(diff: Mapping, name: str, metric: str) -> str:
    """The method whose verdict on ``metric`` counts for ``name``: for the attention head
    (``attnknn``), the head with the vote settings tuned for that endpoint where the record has it
    (the head at its trained k is then a diagnostic); any other name as it is."""
    tuned = TUNED_ATTNKNN[metric]
    return tuned if name == "attnknn" and tuned in diff else name


def counted_diff(setting: Mapping, name: str, ref: str, metric: str) -> dict:
    """One setting's (a level's or a candidate's) comparison of ``name`` with ``ref`` on ``metric``,
    read from the method whose verdict counts (:func:`counted_method`)."""
    diff = setting["summary"]["diff"]
    return diff[counted_method(diff, name, metric)][ref][metric]


def all_tuned(diffs: Iterable[Mapping]) -> bool:
    """Whether every setting's comparisons (``summary["diff"]`` of each level or candidate) hold the
    attention head with tuned vote settings: only then do the views lead with it."""
    diffs = list(diffs)
    return bool(diffs) and all(TUNED_ATTNKNN["accuracy"] in d for d in diffs)


def row_method(name: str, metric: str) -> str:
    """The method a verdict-table row reads on ``metric``: the row of the attention head with tuned
    vote settings (at k or at k_w) reads the settings tuned for that endpoint; any other row its own method."""
    if name == TUNED_ATTNKNN["accuracy"]:
        return TUNED_ATTNKNN[metric]
    # a learner with vote settings enters tuned for the endpoint: NCA, the nonlinear metric and Attn-KNN at k_w
    return f"{name}_nll" if name in ("attnknn_wide_tuned", "nca", "mlp_metric") and metric != "accuracy" else name


def k_range(ks: list[int]) -> str:
    """A k over seeds: one value, or the lowest and highest joined by an en dash (a range, not a minus),
    thousands separated as the paper writes them (4,096)."""
    return f"{min(ks):,}" if min(ks) == max(ks) else f"{min(ks):,}\u2013{max(ks):,}"


def tuned_k(per_seed: Mapping, metric: str = "accuracy") -> str:
    """The k each seed's attention head with vote settings tuned for ``metric`` chose, as a range."""
    return k_range([p["methods"][TUNED_ATTNKNN[metric]]["info"]["choice"]["k"] for p in per_seed.values()])


def tuned_k_text(per_seed: Mapping) -> str:
    """'k 64', or 'k 64, for NLL k 1024' where the settings tuned for calibration chose other k."""
    acc, cal = tuned_k(per_seed), tuned_k(per_seed, "nll")
    return f"k {acc}" if acc == cal else f"k {acc}, for NLL k {cal}"


def head_labels(heads: Mapping[str, str], k: int, tuned: bool, per_seed: Mapping | None = None) -> dict[str, str]:
    """``heads`` (name -> paper name), led by the attention head with tuned vote settings where
    ``tuned`` (its k per seed when ``per_seed`` is given), the head as trained then named by its k."""
    if not tuned or "attnknn" not in heads:
        return dict(heads)
    label = TUNED_LABEL + (f" ({tuned_k_text(per_seed)})" if per_seed is not None else "")
    return {TUNED_ATTNKNN["accuracy"]: label,
            **{h: AT_K_LABEL.format(k=k) if h == "attnknn" else name for h, name in heads.items()}}


def attention_words(per_seed: Mapping | None, k: int, at_k: str = "") -> tuple[str, str]:
    """How a finding names the counted attention head, and the clause that gives the head as trained
    (``at_k``: its verdict text) beside it: ('the attention head with its vote settings tuned (k
    ...)', ' (at k = 16, as trained: ...)'), or ('the attention head', '') without a tuned head."""
    if per_seed is None:
        return "the attention head", ""
    return (f"the attention head with its vote settings tuned ({tuned_k_text(per_seed)})",
            f" (at k = {k}, as trained: {at_k})" if at_k else "")


def tuned_k_note(settings: Iterable[tuple[str, Mapping]], prefix: str = "") -> str:
    """A caption's sentence on the k the tuned attention head chose per seed in each setting
    (``(name, level or candidate)`` pairs, each with ``per_seed``), for a table too narrow to hold it."""
    return "Its $k$ per seed: " + "; ".join(f"{prefix}{name}: {tuned_k_text(c['per_seed'])}" for name, c in settings) + ". "


def output_context(record: dict, notebook: str, artifacts: Artifacts) -> tuple[dict, str, str, str]:
    """What every ``write_outputs`` starts from: (results, dataset name, dataset title, the caption's
    source note naming the notebook and the results JSON)."""
    d = record["dataset"]
    return record["results"], d, REGISTRY[d].title, source_note(notebook, artifacts.record_file(d))


def _knob_text(value) -> str:
    return ", ".join(map(str, value)) if isinstance(value, (tuple, list)) else str(value)


def parameters_frame(cfg) -> pd.DataFrame:
    """The run's parameters, once, for the notebook's PDF: the profile and every knob whose value
    differs from its default (the defaults are the notebook's parameters cell; the full list is the
    record's ``config``), then one row counting the knobs left at their defaults."""
    default = type(cfg)()  # validated defaults: tuples parsed as the run's values are
    changed = [f for f in fields(cfg) if f.name == "profile" or getattr(cfg, f.name) != getattr(default, f.name)]
    rows = {f.name: {"value": _knob_text(getattr(cfg, f.name)), "meaning": f.metadata.get("help", "")}
            for f in changed}
    rows["(the others)"] = {"value": f"{len(fields(cfg)) - len(changed)} at their defaults",
                            "meaning": "the notebook's parameters cell lists them; the record's config holds all"}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "parameter"
    return df


def _first_clause(text: str) -> str:
    """A knob's help up to its first '; ' (what follows explains why), for the PDF's parameter table;
    the whole help is in the notebook's parameters cell and ``./run_all.sh --list``."""
    return text.split("; ", 1)[0]


def parameters_markdown(cfg) -> str:
    """:func:`parameters_frame` as a Markdown table (the notebook's PDF wraps its cells instead of
    splitting the table into column blocks)."""
    df = parameters_frame(cfg)
    df["meaning"] = df["meaning"].map(_first_clause)
    return markdown_frame(df)


# ----------------------------------------------------------------------------- the text both fixed-embedding experiments share

def answer_then_lines(records: list[dict], summary: Callable[[dict], str],
                      lines: Callable[[dict], list[str]]) -> list[str]:
    """README lines of an experiment on fixed embeddings: per record its answer in bold, then its lines."""
    out: list[str] = []
    for r in records:
        out += [f"**{summary(r)}**", ""] + lines(r)
    return out


def answer_findings(record: dict, summary: Callable[[dict], str], lines: Callable[[dict], list[str]]) -> str:
    """The notebook's findings: the answer, then the README's lines of this record."""
    return markdown_lists([summary(record), "", *lines(record)])


def with_term(out: list[str], term: str) -> list[str]:
    """The README answer's bullets followed by the glossary line they need (nothing when there are none)."""
    return out + ["", "**Terms.**", "", term] if out else out


# ----------------------------------------------------------------------------- detectable differences (Protocol section)

DETECTABLE_ENDPOINTS = {"accuracy": ("accuracy (pp)", 100.0, 2), "nll": ("calibrated NLL", 1.0, 3),
                        "brier": ("Brier", 1.0, 4)}
"""Each endpoint of a verdict: its name in the table, the scale of its numbers and their decimals."""
DETECTABLE_COLUMNS = r">{\raggedright\arraybackslash}p{3.6cm}p{1.4cm}rrp{2.9cm}p{2.9cm}rr"  # needs the array package
"""Every experiment's block of the table has these widths, so that the blocks line up in the paper."""


def _spread(values: list[float], scale: float, decimals: int) -> str:
    """'0.17' for one value or equal ones, else 'median (min--max)' in one unbreakable box."""
    lo, mid, hi = (scale * v for v in (min(values), float(pd.Series(values).median()), max(values)))
    text = f"{mid:.{decimals}f}"
    return text if f"{lo:.{decimals}f}" == f"{hi:.{decimals}f}" else f"\\mbox{{{text} ({lo:.{decimals}f}--{hi:.{decimals}f})}}"


def smallest_better(threshold: float, margin: float) -> float:
    """The smallest observed difference that reads "better" (a counted win) when a difference test's
    threshold is ``threshold`` (:func:`~attnknn_lib.evaluation.verdicts.detectable`, the half-width at
    the family's level) and the equivalence margin is ``margin``: an interval [d - h, d + h] that lies
    inside (-margin, +margin) reads "equivalent" (or, in the confirmatory words, "better, within the
    margin", never counted), so

        d_min = max(h, margin - h)

    the second term binding only where the half-width is below half the margin."""
    return max(threshold, margin - threshold)


def detectable_frame(families: Mapping[str, Mapping[str, list[dict]]],
                     sizes: Mapping[str, Mapping[str, int]] | None = None) -> pd.DataFrame:
    """One row per family and endpoint (``families``: family label -> endpoint -> the seed-level
    results of its comparisons; ``sizes``: family label -> endpoint -> the size m of its Holm family,
    absent for an uncorrected one): the seeds S, m, the half-width of the 95 % seed-level interval
    (:func:`~attnknn_lib.evaluation.verdicts.resolvable`) and the smallest difference that reads
    "better" after the correction (:func:`smallest_better` of :func:`~attnknn_lib.evaluation.verdicts.detectable`), each as the
    median (range) over the family's comparisons, the declared margin and in how many comparisons
    equivalence is reachable (half-width below the margin). Identical comparisons are left out."""
    rows: list[tuple[str, dict]] = []
    for family, by_metric in families.items():
        first = True
        for metric, entries in by_metric.items():
            entries = [e for e in entries if e.get("verdict") != IDENTICAL and e.get("n_seeds", 0) >= 2]
            if not entries:
                continue
            name, scale, dec = DETECTABLE_ENDPOINTS[metric]
            m = (sizes or {}).get(family, {}).get(metric, 1)
            half = [resolvable(e["seed_sd"], e.get("test_se", 0.0), e["n_seeds"]) for e in entries]
            threshold = [detectable(e["seed_sd"], e["n_seeds"], m, test_se=e.get("test_se", 0.0)) for e in entries]
            smallest = [smallest_better(h, e["margin"]) for h, e in zip(threshold, entries)]
            margins = {e["margin"] for e in entries}
            seeds = sorted({e["n_seeds"] for e in entries})
            rows.append((family if first else "", {
                "endpoint": name, "$S$": "/".join(map(str, seeds)), "$m$": str(m),
                "half-width": _spread(half, scale, dec), "smallest ``better''": _spread(smallest, scale, dec),
                "margin": "/".join(f"{scale * x:g}" for x in sorted(margins)),
                "equiv.\\ reachable": f"{sum(h < e['margin'] for h, e in zip(threshold, entries))} of {len(entries)}"}))
            first = False
    df = pd.DataFrame([r for _, r in rows], index=[label for label, _ in rows])
    df.index.name = "group"
    return df


def detectable_tabular(source: str, families: Mapping[str, Mapping[str, list[dict]]],
                       sizes: Mapping[str, Mapping[str, int]] | None = None) -> str:
    """:func:`detectable_frame` as one block (a ``tabular``) of the paper's table of detectable differences,
    ending with a comment that names its notebook and record (``source``, a caption's source note)."""
    return (tabular(detectable_frame(families, sizes), DETECTABLE_COLUMNS, escape_index=False)
            + f"% {source}\n")  # the block's notebook and record, as every table's caption names them

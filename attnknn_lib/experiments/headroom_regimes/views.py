"""Real-regime views: tables, the figure, macros, README lines and findings read off its record
(no measuring)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnknn_lib.base.paths import Paths
from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.experiments.common.fixed_embedding import (
    TUNED,
    k_range,
)
from attnknn_lib.experiments.common.fixed_embedding_views import (
    LEARNED_MACROS,
    difference,
    forest_and_detectable,
    latex_headroom_columns,
    learned_macros,
    pp,
    tuned_everywhere,
    verdict_row,
    verdict_table,
    wins,
)
from attnknn_lib.experiments.common.views import (
    TUNED_CAPTION,
    all_tuned,
    answer_findings,
    answer_then_lines,
    counted_diff,
    counted_method,
    head_labels,
    tuned_k,
    tuned_k_note,
    tuned_k_text,
    with_term,
)
from attnknn_lib.experiments.headroom_regimes.config import ARTIFACTS, DATASET, NAME, NOTEBOOK
from attnknn_lib.report.figures import plt, save_output_figure
from attnknn_lib.report.findings import (
    across_text,
    head_names,
    point_text,
    table_link,
    vote_heads,
)
from attnknn_lib.report.macros import count_macros, count_phrase, macro_name, record_macros, signed, source_note
from attnknn_lib.report.tables import booktabs, latex_escape


def _candidates(record: dict) -> list[tuple[str, dict]]:
    return list(record["results"]["candidates"].items())


def _tuned(record: dict) -> bool:
    """Whether every candidate holds the attention head with tuned vote settings (then the views count it)."""
    return tuned_everywhere(_candidates(record))


def _family(record: dict, cand: dict, metric: str = "accuracy") -> list[str]:
    """The heads whose verdicts on ``metric`` count (and the Holm family holds): the attention head
    with its vote settings tuned where measured, every other head as trained."""
    return [counted_method(cand["summary"]["diff"], h, metric) for h in record["results"]["heads"]]


def _shown(record: dict, cand: dict) -> dict[str, str]:
    """The attention head with tuned vote settings (where measured), Attn-KNN as trained, then the
    chosen head (marked), then the other heads: name -> the paper's name."""
    heads = head_labels(head_names(record["results"]["heads"]), record["results"]["k"], _tuned(record), cand["per_seed"])
    chosen = cand.get("chosen_head")
    order = [h for h in heads if h in (*TUNED, "attnknn")] + [chosen] * (chosen is not None)
    order += [h for h in heads if h not in order]
    return {h: heads[h] + (" (chosen)" if h == chosen else "") for h in order}


def headroom_frame(record: dict, latex: bool = False) -> pd.DataFrame:
    """One row per candidate (means over seeds): its classes and memory rows, the headroom at k
    before any head is trained, the tuned vote (its k per seed), the geometry-only and the
    learnable ceiling; the gate's room (the largest cross-fitted validation room of a gate learner, the
    one that decides) and whether it reaches the margin; and the better ceiling's room on test, after the fact."""
    res = record["results"]
    k = res["k"]
    rows = {}
    for _, c in _candidates(record):
        s = c["summary"]
        emb = next(iter(c["per_seed"].values()))["embedding"]
        hr, means = s["headroom"]["at_k"], s["means"]
        n_test = sorted({p["embedding"]["n_test"] for p in c["per_seed"].values() if "n_test" in p["embedding"]})
        rows[c["label"]] = {"classes": str(emb["num_classes"]), "memory": f"{emb['n_memory']:,}",
                            "test rows per seed": "--" if not n_test else f"{n_test[0]:,}" if len(n_test) == 1
                            else f"{n_test[0]:,}-{n_test[-1]:,}",
                            f"recall@{k}": pp(hr["recall"]), f"fixable@{k}": pp(hr["fixable"]),
                            "tuned vote's k": k_range(s["reference_k"]), "tuned vote": pp(means["reference"]["accuracy"]),
                            f"geometry, k<={k}": pp(means["geometry"]["accuracy"]),
                            "boosted trees": pp(means["learner"]["accuracy"]),
                            "NCA": pp(means["nca"]["accuracy"]),
                            "linear probe": pp(means["linear_probe"]["accuracy"]),
                            "gate room, val. (pp)": signed(100 * c["gate"]["largest"], 2),
                            "passes the gate": "yes" if c["has_room"] else "no",
                            "trees or geometry, test (pp)": signed(100 * c["room"]["largest"], 2)}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "candidate"
    if latex:  # the candidates' labels become the LaTeX table's header ("1 %" must not start a comment)
        df = latex_headroom_columns(df)
        df.index = [latex_escape(i) for i in df.index]
    return df


SHORT = {"pixels_pca": "PCA", "few_labels": "few labels", "other_classes": "other classes",  # LaTeX rows
         "attnknn": "attention head", "label_aware": "label-aware head", "readout": "readout head",
         TUNED[0]: "attention head, tuned",
         "learner": "boosted trees",
         "nca": "NCA", "linear_probe": "linear probe", "query_only": "query-only"}
AFTER_HEADS = ("learner", "nca", "linear_probe", "query_only")  # the verdict table's rows after the heads


def verdict_frame(record: dict, latex: bool = False) -> pd.DataFrame:
    """One row per (candidate, method, what it is against): each head, the boosted-trees learner,
    NCA, the linear probe and the query-only control against the tuned vote, then each head against NCA
    (rows "vs NCA"): accuracy against the accuracy-tuned one, NLL and Brier (after calibration)
    against the NLL-tuned one, as difference [95 % interval] and verdict; and each head's effective
    k (exp of the weights' entropy, mean over test queries and seeds). Rows carry short names
    (:data:`SHORT`) and the chosen head a star, so the table fits the page."""
    rows = {}
    k = record["results"]["k"]
    for key, c in _candidates(record):
        diff = c["summary"]["diff"]
        short = dict(SHORT)
        if _tuned(record):  # LaTeX: the tuned k in the caption and a dagger for unadjusted, so the table fits
            short[TUNED[0]] = "attention, tuned" if latex else f"attention head, tuned ({tuned_k_text(c['per_seed'])})"
            short["attnknn"] = f"attention, k = {k}$^\\dagger$" if latex else f"attention head, k = {k} (unadj.)"
        compared = [(n, "rule") for n in [*_shown(record, c), *AFTER_HEADS] if n in diff]
        compared += [(n, "NCA") for n in _shown(record, c) if "nca" in diff[n]]
        for name, against in compared:
            star = ("$^*$" if latex else "*") if name == c.get("chosen_head") else ""
            vs = " vs NCA" if against == "NCA" else ""
            rows[f"{SHORT.get(key, key)}: {short.get(name, name)}{star}{vs}"] = verdict_row(c, name, against)
    return verdict_table(rows, "candidate: method", latex)


def embedder_frame(record: dict) -> pd.DataFrame:
    """How each CNN embedding was built, per seed: rows it trained on, its chosen epoch (of those
    run) and its validation accuracy on the classes it trained on, and the classes evaluated."""
    rows = {}
    for key, c in _candidates(record):
        for seed, p in c["per_seed"].items():
            e = p["embedding"]
            if "epochs" not in e:  # PCA: nothing trained
                continue
            rows[f"{SHORT.get(key, key)}, seed {seed}"] = {
                "trained on": f"{e['train_rows']:,} rows", "epoch": f"{e['best_epoch']} of {e['epochs']}",
                "val. acc.": pp(e["embedder_val_accuracy"]),
                "classes evaluated": " ".join(map(str, e["target_classes"])) if "target_classes" in e else "all"}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "embedder"
    return df


def figure(record: dict):
    """Left: per candidate, each head and the boosted-trees learner minus the tuned vote,
    in accuracy points (mean over seeds, seed-level 95 % interval), with the room the
    ceilings measured before any head trained. Right: the effective k of the heads that vote (not the
    readout)."""
    res = record["results"]
    cands = _candidates(record)
    heads = list(res["heads"])
    names = head_labels(head_names(res["heads"]), res["k"], _tuned(record))
    shown = [h for h in names if h not in heads] + heads + ["learner"]
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.2), layout="constrained", width_ratios=(3, 2))
    x = np.arange(len(cands))
    width = 0.8 / len(shown)
    for i, name in enumerate(shown):
        d = [difference(c, name, "reference", "accuracy") for _, c in cands]
        mean = np.array([100 * e["value"] for e in d])
        err = np.array([[100 * (e["value"] - e["low"]) for e in d], [100 * (e["high"] - e["value"]) for e in d]])
        label = names.get(name, "boosted-trees learner (learnable room)")
        color = "tab:brown" if name == "learner" else f"C{i}"
        axes[0].bar(x + (i - (len(shown) - 1) / 2) * width, mean, width, yerr=err, color=color, capsize=2,
                    label=label, alpha=0.85, error_kw={"ecolor": "0.45", "lw": 1})
        if name in vote_heads(res["heads"]):  # a readout is not a vote: its weights' effective k is not its k
            axes[1].plot(x, [c["summary"]["effective_k"][name] for _, c in cands], color=color, marker="o", ms=5,
                         ls="none", label=label)  # candidates are categories: no line between them
    axes[0].plot(x, [100 * (c["gate"] if "gate" in c else c["room"])["largest"] for _, c in cands], "k_", ms=18,
                 mew=1.5, label="the gate's room (validation, cross-fitted)")
    axes[0].axhline(0, color="black", lw=0.8)
    axes[0].axhline(100 * res["room_margin"], color="grey", lw=0.8, ls=":")
    axes[0].set_ylabel("minus the tuned vote (accuracy, pp)")
    axes[1].axhline(res["k"], color="black", lw=0.8, ls="--")
    axes[1].axhline(res["moved_threshold"], color="grey", lw=0.8, ls=":")
    axes[1].set_ylim(0, res["k"] + 1)
    axes[1].set_ylabel(f"effective k = exp(H), of k = {res['k']}")
    for ax in axes:
        ax.set_xticks(x, [c["label"].replace(" on ", "\non ") for _, c in cands], fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=7, frameon=False)
    fig.suptitle(f"Weaker embeddings of Fashion-MNIST: gain over the tuned vote and sharpness "
                 f"({len(res['seeds'])} seeds)", fontsize=9)
    return fig


def write_outputs(record: dict, paths: Paths) -> dict:
    src = source_note(NOTEBOOK, ARTIFACTS.record_file(DATASET))
    res = record["results"]
    n, k = len(res["seeds"]), res["k"]
    return {"headroom": ARTIFACTS.write_table(paths, "headroom", DATASET, booktabs(
        headroom_frame(record, latex=True).T,
        f"Weaker embeddings: room to win on the three candidates of Fashion-MNIST, measured before any head is "
        f"trained (test accuracy in \\%, mean over {n} seeds, each with its own block of test rows, whose size is a row of the table). "
        f"Recall and fixable share at $k = {k}$; the tuned vote (its $k$ per seed); the "
        f"geometry-only vote (the best uniform, distance or cosine vote over at most {k} neighbours, no filter "
        f"or prior correction) and the boosted-trees learner on neighbour features. The "
        f"gate reads validation only: each of the geometry-only vote, the boosted trees and NCA, cross-fitted on "
        f"two halves of the validation rows, minus the tuned vote cross-fitted the same way; a candidate passes at "
        f"{100 * res['room_margin']:g}\\,pp or more (declared before the run). The last row, on test, is "
        f"the better of the geometry-only vote and the boosted-trees learner (NCA not included) minus the tuned "
        f"vote, reported after the fact and used by no verdict. {src}.", f"tab:{NAME}_headroom",
        escape_index=False, size="footnotesize")),
        "verdicts": ARTIFACTS.write_table(paths, "verdicts", DATASET, booktabs(
            verdict_frame(record, latex=True),
            f"Weaker embeddings: each head, the boosted-trees learner, NCA (the tuned vote's search run again in the space of a linear "
            f"map learned with the NCA loss), the linear probe and the query-only control minus the tuned vote, then "
            f"each head minus NCA (rows 'vs NCA'), seed-level 95\\,\\% intervals over {n} seeds. Accuracy against "
            f"the tuned vote (or NCA); NLL and Brier, after calibration on validation, against the NLL-tuned vote (or NCA tuned for NLL). "
            f"Candidates: PCA of pixels, the CNN "
            f"trained on few labels, the CNN trained on other classes; $^*$: the head chosen on validation (the "
            f"best validation accuracy among the study's heads). {TUNED_CAPTION + tuned_k_note([(SHORT.get(n, n), c) for n, c in _candidates(record)]) if _tuned(record) else ''}Effective $k$: exp "
            f"of the entropy of the weights as trained (--: not a vote, or the attention head with tuned vote settings, "
            f"whose weights are those of its row at $k = {k}$). "
            f"{_multiplicity_note(res)}{src}.",
            f"tab:{NAME}_verdicts", escape_index=False, colsep="2pt", size="scriptsize")),
        "figure": save_output_figure(ARTIFACTS, paths, "figure", DATASET, figure(record)),
        **forest_and_detectable(ARTIFACTS, paths, DATASET, src, "Weaker embeddings", [(c["label"], c) for _, c in _candidates(record)],
                                res["heads"], _tuned(record), family="every head vs tuned vote and vs NCA, every candidate (Holm)",
                                sizes=res["multiplicity"]["family_sizes"])}


def _multiplicity_note(res: dict) -> str:
    """The verdicts' multiplicity correction and which candidates passed the gate, as the record says."""
    sizes = res["multiplicity"]["family_sizes"]
    passed = [latex_escape(res["candidates"][n]["label"]) for n in res["confirmatory"]]
    # the record's "confirmatory" lists the candidates that passed the gate; the gate and the candidates were
    # chosen after earlier results of the same candidates, so no verdict here is confirmatory
    if not passed:
        which = "no candidate passed the gate; every verdict is exploratory. "
    elif len(passed) == len(res["candidates"]):
        which = ("every candidate passed the gate; every verdict is exploratory, as the candidates had been measured "
                 "before the gate was set. ")
    else:
        which = (f"{', '.join(passed)} passed the gate; every verdict is exploratory, as the candidates had been "
                 f"measured before the gate was set. ")
    attn = ("the attention head enters with its vote settings tuned, and at the $k$ it was trained at it is a diagnostic "
            "outside the family, its verdicts unadjusted ($^\\dagger$); " if _tuned({"results": res}) else "")
    return (f"Verdicts of the heads are Holm-adjusted per endpoint over the comparisons with the tuned vote and with NCA "
            f"({sizes.get('accuracy', 0)} for accuracy, {sizes.get('nll', 0)} each for NLL and Brier); {attn}the "
            f"boosted-trees learner, NCA, the linear probe and the query-only control are references outside the family, "
            f"their verdicts unadjusted; intervals are not adjusted, so an interval that excludes zero can carry an "
            f"inconclusive verdict; " + which)


TAGS = {"pixels_pca": "Pca", "few_labels": "Few", "other_classes": "Other"}  # macro names of the candidates


def _candidate_macros(pre: tuple, tag: str, cand: dict | None) -> dict[str, str]:
    """One candidate's macros under ``tag``; '--' for each when the profile leaves it out."""
    names = ("Room", "Test Room", "Has Room", "Reference Acc", "Reference K", "Attnknn Acc Diff", "Attnknn Acc Low",
             "Attnknn Acc High", "Attnknn Acc Verdict", "Attnknn Nll Diff", "Attnknn Nll Low", "Attnknn Nll High",
             "Attnknn Nll Verdict", "Attnknn Eff K", "Chosen", "Chosen Acc Diff", "Chosen Acc Verdict",
             "Learner Acc Diff", "Learner Acc Verdict", "Fixable", "Attnknn At K Acc Diff", "Attnknn At K Acc Verdict",
             "Attnknn Tuned K")
    if cand is None:
        return {macro_name(*pre, tag, n): "--" for n in names}
    s = cand["summary"]
    out = {macro_name(*pre, tag, "Room"): signed(100 * cand["gate"]["largest"], 2),
           macro_name(*pre, tag, "Test Room"): signed(100 * cand["room"]["largest"], 2),
           macro_name(*pre, tag, "Has Room"): "yes" if cand["has_room"] else "no",
           macro_name(*pre, tag, "Reference Acc"): pp(s["means"]["reference"]["accuracy"]),
           macro_name(*pre, tag, "Reference K"): k_range(s["reference_k"]),
           macro_name(*pre, tag, "Fixable"): pp(s["headroom"]["at_k"]["fixable"])}
    acc, nll = counted_diff(cand, "attnknn", "reference", "accuracy"), counted_diff(cand, "attnknn", "reference_nll", "nll")
    at_k = difference(cand, "attnknn", "reference", "accuracy")  # the head as trained: a diagnostic where tuned exists
    out[macro_name(*pre, tag, "Attnknn At K Acc Diff")] = signed(100 * at_k["value"], 2)
    out[macro_name(*pre, tag, "Attnknn At K Acc Verdict")] = at_k["verdict"]
    out[macro_name(*pre, tag, "Attnknn Tuned K")] = tuned_k(cand["per_seed"]) if all_tuned([s["diff"]]) else "--"
    for metric, d, dec, scale in (("Acc", acc, 2, 100), ("Nll", nll, 3, 1)):
        out[macro_name(*pre, tag, "Attnknn", metric, "Diff")] = signed(scale * d["value"], dec)
        out[macro_name(*pre, tag, "Attnknn", metric, "Low")] = signed(scale * d["low"], dec)
        out[macro_name(*pre, tag, "Attnknn", metric, "High")] = signed(scale * d["high"], dec)
        out[macro_name(*pre, tag, "Attnknn", metric, "Verdict")] = d["verdict"]
    out[macro_name(*pre, tag, "Attnknn Eff K")] = f"{s['effective_k']['attnknn']:.1f}"
    chosen = cand.get("chosen_head")
    for key, name in (("Chosen", chosen), ("Learner", "learner")):
        d = difference(cand, name, "reference", "accuracy") if name else None
        out[macro_name(*pre, tag, key, "Acc Diff")] = signed(100 * d["value"], 2) if d else "--"
        out[macro_name(*pre, tag, key, "Acc Verdict")] = d["verdict"] if d else "--"
    out[macro_name(*pre, tag, "Chosen")] = _shown_label(chosen)
    return out


def _shown_label(head: str | None) -> str:
    return head_names([head])[head] if head else "--"


CANDIDATE_LEARNED_MACROS = (*LEARNED_MACROS, "Chosen Vs Nca Acc Diff", "Chosen Vs Nca Acc Verdict")


def _learned_macros(pre: tuple, tag: str, cand: dict | None) -> dict[str, str]:
    """One candidate's learned metric: NCA's accuracy and its verdict against the tuned vote, Attn-KNN's
    and the chosen head's against NCA, the probe's and the control's accuracy ('--' for each when the
    profile leaves the candidate out)."""
    if cand is None:
        return {macro_name(*pre, tag, n): "--" for n in CANDIDATE_LEARNED_MACROS}
    out = learned_macros(pre, tag, cand)
    chosen = cand.get("chosen_head")
    d = difference(cand, chosen, "nca", "accuracy") if chosen else None
    out[macro_name(*pre, tag, "Chosen Vs Nca Acc Diff")] = signed(100 * d["value"], 2) if d else "--"
    out[macro_name(*pre, tag, "Chosen Vs Nca Acc Verdict")] = d["verdict"] if d else "--"
    return out


def regime_macros(record: dict) -> dict[str, str]:
    """Counts (seeds, candidates, those with room, Attn-KNN's wins) and per candidate (:data:`TAGS`)
    its room, the tuned vote, Attn-KNN's accuracy and NLL verdicts, its effective k, the chosen head's and
    the learner's accuracy verdicts."""
    res = record["results"]
    pre = (NAME,)
    cands = res["candidates"]
    out = {macro_name(*pre, "Seeds"): str(len(res["seeds"])), macro_name(*pre, "Candidates"): str(len(cands)),
           macro_name(*pre, "With Room"): str(len(res["selected"])),
           macro_name(*pre, "With Room Words"): count_phrase(len(res["selected"]), len(cands)),
           macro_name(*pre, "Room Margin"): f"{100 * res['room_margin']:g}",
           macro_name(*pre, "Test Rows"): f"{res['test_rows']:,}"}
    cfg = record["config"]  # how the candidates were built, for the text
    out.update({macro_name(*pre, "Pca Dims"): str(cfg["pca_dims"]),
                macro_name(*pre, "Label Share"): f"{100 * cfg['label_share']:g}",
                macro_name(*pre, "Source Classes"): str(cfg["source_classes"]),
                macro_name(*pre, "Moved Threshold"): f"{res['moved_threshold']:.1f}"})
    for name, tag in TAGS.items():
        out.update(_candidate_macros(pre, tag, cands.get(name)))
        out.update(_learned_macros(pre, tag, cands.get(name)))
    # how many candidates each learner wins, in words for the abstract and the conclusion ("all three")
    unadjusted = [c["label"] for _, c in _candidates(record)  # the heads' verdicts are Holm-adjusted, NCA's not
                  if counted_diff(c, "attnknn", "reference", "accuracy").get("verdict_unadjusted") == "better"]
    counts = {"Attnknn Wins": _wins(record, "attnknn"), "Attnknn Wins Unadjusted": unadjusted,
              "Any Head Wins": _any_head_wins(record),
              "Heads Below Nca": [c["label"] for _, c in _candidates(record) if all(  # means, no verdict
                  difference(c, h, "nca", "accuracy")["value"] < 0 for h in _family(record, c))],
              "Nca Wins": _wins(record, "nca"),
              # the control that reads no neighbour: a win there is the embedding's, not the neighbours'
              "Query Only Wins": _wins(record, "query_only"),
              "Attnknn Beats Nca": _wins(record, "attnknn", "nca")}
    out.update(count_macros(pre, counts, len(cands)))
    return out


def macros(records: list[dict]) -> dict[str, str]:
    return record_macros(records, regime_macros, NOTEBOOK, ARTIFACTS.record_file, aliases=False)


def _wins(record: dict, name: str, against: str = "reference") -> list[str]:
    """The candidates on which ``name``'s counted verdict is 'better' in accuracy (by their labels)."""
    return wins([(c["label"], c) for _, c in _candidates(record)], name, against)


def _any_head_wins(record: dict) -> list[str]:
    """The candidates on which at least one head of the family (:func:`_family`) beats the tuned vote in accuracy."""
    return [c["label"] for _, c in _candidates(record)
            if any(difference(c, h, "reference", "accuracy")["verdict"] == "better" for h in _family(record, c))]


def finding_lines(record: dict) -> list[str]:
    """The findings' bullets, one point each across the candidates: the gate's room before training,
    the vote settings chosen, the counted attention head against the tuned vote (accuracy) and the
    NLL-tuned vote (calibrated NLL), the head as trained at k (a diagnostic), its effective k, the
    chosen head; then per candidate NCA against the tuned vote and the attention head against NCA.
    Values and verdict words; the intervals are in the notebook's tables."""
    res = record["results"]
    k, cands, tuned = res["k"], _candidates(record), _tuned(record)
    who = "The attention head with its vote settings tuned" if tuned else "The attention head"

    def row(what: str, text) -> str:
        return across_text(what, [(f"{c['label']}:", text(c)) for _, c in cands])

    lines = [row(f"The gate's room on validation before any head is trained (declared: {100 * res['room_margin']:g} pp)",
                 lambda c: f"{signed(100 * c['gate']['largest'], 2)} pp"),
             row("Vote settings chosen on validation, over seeds",
                 lambda c: f"tuned vote k {k_range(c['summary']['reference_k'])}"
                 + (f", attention head {tuned_k_text(c['per_seed'])}" if tuned else "")),
             row(f"{who} minus the tuned vote in accuracy (Holm-adjusted)",
                 lambda c: point_text(counted_diff(c, "attnknn", "reference", "accuracy"), "accuracy"))]
    if tuned:
        lines.append(row(f"The attention head at k = {k}, as trained (a diagnostic, unadjusted), minus the tuned vote",
                         lambda c: point_text(difference(c, "attnknn", "reference", "accuracy"), "accuracy")))
    lines += [row(f"{who} minus the NLL-tuned vote in calibrated NLL",
                  lambda c: point_text(counted_diff(c, "attnknn", "reference_nll", "nll"), "nll")),
              row(f"As trained, the attention head's effective k (of {k})",
                  lambda c: f"{c['summary']['effective_k']['attnknn']:.1f}")]
    chosen = [(c["label"], c["chosen_head"], c) for _, c in cands if c.get("chosen_head")]
    if chosen:
        lines.append(across_text("The head chosen on validation minus the tuned vote", [
            (f"{label}: {_shown_label(h)}", point_text(difference(c, h, "reference", "accuracy"), "accuracy"))
            for label, h, c in chosen]))
    for _, c in cands:
        lines.append(f"- **{c['label']}**: NCA (a linear metric learned with the same vote) minus the tuned vote "
                     f"{point_text(difference(c, 'nca', 'reference', 'accuracy'), 'accuracy')}; the attention head "
                     f"against NCA {point_text(counted_diff(c, 'attnknn', 'nca', 'accuracy'), 'accuracy')}.")
    return lines


def _summary(record: dict) -> str:
    """Which candidates had room before training, where the attention head won, and, when a head won where no
    room was measured, that the room measures missed it; then NCA's wins and the attention head's over NCA."""
    res = record["results"]
    n = len(res["candidates"])
    labels = {c["label"] for _, c in _candidates(record) if c["has_room"]}
    wins = _wins(record, "attnknn")
    any_head = _any_head_wins(record)
    room = (f"{len(labels)} of {n} candidate embeddings of Fashion-MNIST ({', '.join(sorted(labels))}) have room "
            f"of at least {100 * res['room_margin']:g} pp on validation before any head is trained" if labels else
            f"None of {n} candidate embeddings of Fashion-MNIST has room of {100 * res['room_margin']:g} pp on "
            f"validation before any head is trained")
    who = "the attention head, its vote settings tuned," if _tuned(record) else "the attention head"
    won = (f"{who} beats the tuned vote on {len(wins)} ({', '.join(wins)})" if wins else
           f"{who} beats the tuned vote on none")
    missed = [c for c in any_head if c not in labels]
    tail = (f"; some head beats it on {len(any_head)} ({', '.join(any_head)})" if any_head else "")
    tail += (", where the gate found less than the margin" if missed else "")
    tail += (f"; NCA, a linear metric learned with the same vote, beats it on {len(_wins(record, 'nca'))} and the "
             f"attention head beats NCA on {len(_wins(record, 'attnknn', 'nca'))}")
    return f"{room}; {won}{tail} ({len(res['seeds'])} seeds)."


def answer_lines(records: list[dict]) -> list[str]:
    """One short bullet of the README's answer: how many candidate embeddings had room before any
    head was trained, where Attn-KNN, NCA and any head beat the tuned vote; then the
    term it uses. The intervals are in the notebook's tables."""
    out = []
    for record in records:
        cands = _candidates(record)
        wins = _wins(record, "attnknn")
        any_head = _any_head_wins(record)
        text = (f"- **Weaker embeddings of {REGISTRY[record['dataset']].title}** ({', '.join(c['label'] for _, c in cands)}): "
                f"{sum(c['has_room'] for _, c in cands)} of {len(cands)} show room on validation; "
                f"the attention head{', vote settings tuned,' if _tuned(record) else ''} "
                f"beats the tuned vote on {len(wins)}" + (f" ({', '.join(wins)})" if wins else "")
                + f", NCA on {len(_wins(record, 'nca'))}")
        out.append(f"{text}, some head on {len(any_head)} (Holm-adjusted). {table_link(NOTEBOOK)}")
    margin = f"{100 * records[0]['results']['room_margin']:g}" if records else ""
    return with_term(out, f"- *Room*: the most a reweighting of the neighbours, or a learner reading them, gains over "
                          f"the tuned vote on validation, before any head is trained; an embedding has room from "
                          f"{margin} point{'' if margin == '1' else 's'} of accuracy.")


def readme_lines(records: list[dict]) -> list[str]:
    """The real regimes' answer, then one line per candidate."""
    return answer_then_lines(records, _summary, finding_lines)


def findings(record: dict) -> str:
    """The notebook's answer (the README's lines of this record)."""
    return answer_findings(record, _summary, finding_lines)

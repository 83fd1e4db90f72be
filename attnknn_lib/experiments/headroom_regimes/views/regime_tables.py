"""The weaker embeddings' tables and figures: the notebook's frames, the figure, the forest plot and
``write_outputs`` (the LaTeX tables with their captions), read off its record."""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnknn_lib.base.paths import Paths
from attnknn_lib.experiments.common.fixed_embedding import (
    TUNED,
)
from attnknn_lib.experiments.common.fixed_embedding_views import (
    VERDICT_COLUMNS,
    difference,
    forest_and_detectable,
    has_one_budget,
    latex_headroom_columns,
    optional_learners,
    pp,
    verdict_row,
    verdict_table,
)
from attnknn_lib.experiments.common.views import (
    TUNED_CAPTION,
    head_labels,
    k_range,
    tuned_k_note,
    tuned_k_text,
)
from attnknn_lib.experiments.headroom_regimes.config import ARTIFACTS, DATASET, NAME, NOTEBOOK
from attnknn_lib.experiments.headroom_regimes.views.regime_family import AFTER_HEADS, _candidates, _tuned, one_family
from attnknn_lib.report.figures import plt, save_output_figure
from attnknn_lib.report.findings import (
    head_names,
    vote_heads,
)
from attnknn_lib.report.macros import signed, source_note
from attnknn_lib.report.tables import booktabs, latex_escape, paged_booktabs


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
                            else f"{n_test[0]:,}\u2013{n_test[-1]:,}",
                            f"recall@{k}": pp(hr["recall"]), f"fixable@{k}": pp(hr["fixable"]),
                            "tuned vote's k": k_range(s["reference_k"]), "tuned vote": pp(means["reference"]["accuracy"]),
                            f"geometry, k<={k}": pp(means["geometry"]["accuracy"]),
                            "boosted-trees learner": pp(means["learner"]["accuracy"]),
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


# the verdict table's learners (the candidates go by their record labels)
SHORT = {"attnknn": "attention head", "label_aware": "label-aware head", "readout": "readout head",
         TUNED[0]: "attention head, tuned",
         "learner": "boosted-trees learner",
         "nca": "NCA", "linear_probe": "linear probe", "query_only": "query-only control"}


def verdict_frame(record: dict, latex: bool = False) -> pd.DataFrame:
    """One row per (candidate, method, what it is against): each head, the boosted-trees learner,
    NCA, the linear probe and the query-only control against the tuned vote, then each head against NCA
    (rows "vs NCA"): accuracy against the accuracy-tuned one, NLL and Brier (after calibration)
    against the NLL-tuned one, as difference [95 % interval] and verdict; and each head's effective
    k (exp of the weights' entropy, mean over test queries and seeds). Rows carry short names
    (:data:`SHORT`) and the chosen head a star, so the table fits the page."""
    record = one_family(record)
    rows = {}
    k = record["results"]["k"]
    for _, c in _candidates(record):
        diff = c["summary"]["diff"]
        short = dict(SHORT)
        if _tuned(record):  # LaTeX: the tuned k in the caption and a dagger for unadjusted, so the table fits
            short[TUNED[0]] = "attention head, tuned" if latex else f"attention head, tuned ({tuned_k_text(c['per_seed'])})"
            short["attnknn"] = f"attention head, k = {k}$^\\dagger$" if latex else f"attention head, k = {k} (unadj.)"
        extra = optional_learners(c)  # a record under the one budget: the nonlinear metric, the heads at k_w
        short.update(extra)
        compared = [(n, "rule") for n in [*_shown(record, c), *AFTER_HEADS, *extra] if n in diff]
        compared += [(n, "NCA") for n in [*_shown(record, c), *extra] if "nca" in diff[n]]
        # against the nonlinear metric: the attention head's comparisons the family holds (at k and at k_w, tuned)
        compared += [(n, "nonlinear metric") for n in (TUNED[0], "attnknn_wide_tuned") if "mlp_metric" in diff.get(n, {})]
        for name, against in compared:
            star = ("$^*$" if latex else "*") if name == c.get("chosen_head") else ""
            vs = "" if against == "rule" else f" vs {against}"
            rows[f"{latex_escape(c['label']) if latex else c['label']}: {short.get(name, name)}{star}{vs}"] = verdict_row(c, name, against)
    return verdict_table(rows, "candidate: method", latex)


def embedder_frame(record: dict) -> pd.DataFrame:
    """How each CNN embedding was built, per seed: rows it trained on, its chosen epoch (of those
    run) and its validation accuracy on the classes it trained on, and the classes evaluated."""
    rows = {}
    for _, c in _candidates(record):
        for seed, p in c["per_seed"].items():
            e = p["embedding"]
            if "epochs" not in e:  # PCA: nothing trained
                continue
            rows[f"{c['label']}, seed {seed}"] = {
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
    record = one_family(record)  # one multiplicity rule for every learner (see one_family)
    src = source_note(NOTEBOOK, ARTIFACTS.record_file(DATASET))
    res = record["results"]
    n, k = len(res["seeds"]), res["k"]
    one_budget = all(has_one_budget(c) for _, c in _candidates(record))
    learners = (", NCA (the tuned vote's search run again in the space of a linear map learned with the NCA loss), the "
                "nonlinear metric (the same with NCA's map plus an MLP), the attention head at $k_w$, tuned, the "
                "label-conditioned attention, the self-attention over neighbours") if one_budget else (
        ", NCA (the tuned vote's search run again in the space of a linear map learned with the NCA loss)")
    mlp_words = (f", and the attention head, tuned, trained at $k = {k}$ and at $k_w$, minus the nonlinear metric (rows "
                 f"`vs nonlinear metric')") if one_budget else ""
    return {"headroom": ARTIFACTS.write_table(paths, "headroom", DATASET, booktabs(
        headroom_frame(record, latex=True).T,
        f"Weaker embeddings: room to win on the three candidates of Fashion-MNIST, measured before any head is "
        f"trained (test accuracy in \\%, mean over {n} seeds, each with its own block of test rows, whose size is a row of the table). "
        f"Recall and fixable share at $k = {k}$; the tuned vote (its $k$ per seed); the "
        f"geometry-only vote (the best uniform, distance or cosine vote over at most {k} neighbours, no filter "
        f"or prior correction) and the boosted-trees learner on neighbour features. The "
        f"gate reads validation only: each of the geometry-only vote, the boosted-trees learner and NCA, cross-fitted on "
        f"two halves of the validation rows, minus the tuned vote cross-fitted the same way; a candidate passes at "
        f"{100 * res['room_margin']:g}\\,pp or more (declared before the run). The last row, on test, is "
        f"the better of the geometry-only vote and the boosted-trees learner (NCA not included) minus the tuned "
        f"vote, reported after the fact and used by no verdict. {src}.", f"tab:{NAME}_headroom",
        escape_index=False, size="footnotesize")),
        "verdicts": ARTIFACTS.write_table(paths, "verdicts", DATASET, paged_booktabs(
            verdict_frame(record, latex=True),
            f"Weaker embeddings: each head, the boosted-trees learner{learners}, the linear probe and the query-only "
            f"control minus the tuned vote, then "
            f"each head minus NCA (rows `vs NCA'){mlp_words}, seed-level 95\\,\\% intervals over {n} seeds. Accuracy against "
            f"the tuned vote (or NCA); NLL and Brier, after calibration on validation, against the NLL-tuned vote (or NCA tuned for NLL); "
            f"the Brier verdicts are in the notebook. "
            f"Candidates: PCA of pixels, the CNN "
            f"trained on few labels, the CNN trained on other classes; $^*$: the head chosen on validation (the "
            f"best validation accuracy among the study's heads). {TUNED_CAPTION + tuned_k_note([(latex_escape(c['label']), c) for _, c in _candidates(record)]) if _tuned(record) else ''}Effective $k$: exp "
            f"of the entropy of the weights as trained (--: not a vote, or the attention head with tuned vote settings, "
            f"whose weights are those of its row at $k = {k}$). "
            f"{_multiplicity_note(res)}{src}.",
            f"tab:{NAME}_verdicts", lambda row: tuple(row.split(": ", 1)), max_rows=54, index_name="method",
            column_format=VERDICT_COLUMNS, escape_index=False, colsep="2pt", size="scriptsize")),
        "figure": save_output_figure(ARTIFACTS, paths, "figure", DATASET, figure(record)),
        **forest_and_detectable(ARTIFACTS, paths, DATASET, src, "Weaker embeddings", [(c["label"], c) for _, c in _candidates(record)],
                                res["heads"], _tuned(record), family="every learner vs tuned vote, every head vs NCA" + (", the attention head vs the nonlinear metric"
                                                                      if one_budget else "") + ", every candidate (Holm)",
                                sizes=res["multiplicity"]["family_sizes"])}


def _multiplicity_note(res: dict) -> str:
    """The verdicts' multiplicity correction (:func:`one_family`) and which candidates passed the gate."""
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
    return (f"Verdicts are Holm-adjusted per endpoint in one family that holds every learner's comparison with the tuned "
            f"vote and each head's with NCA, on every candidate ({sizes.get('accuracy', 0)} comparisons for accuracy, "
            f"{sizes.get('nll', 0)} each for NLL and Brier); {attn}intervals are not adjusted, so an interval that "
            f"excludes zero can carry an inconclusive verdict; " + which)

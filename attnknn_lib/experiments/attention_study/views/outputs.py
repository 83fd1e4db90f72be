"""write_outputs: the study's LaTeX tables with their captions (results/tables) and its figures, from a record."""

from __future__ import annotations

import pandas as pd

from attnknn_lib.base.paths import Paths
from attnknn_lib.experiments.attention_study.config import ARTIFACTS, NOTEBOOK
from attnknn_lib.experiments.attention_study.views.frames import (
    collapse_frame,
    diagnostics_frame,
    headroom_frame,
    learnable_frame,
    reference_frame,
    second_frame,
    variants_frame,
    verdict_matrix_frame,
)
from attnknn_lib.experiments.attention_study.views.labels import setting_title
from attnknn_lib.experiments.attention_study.views.learned import learned_frame
from attnknn_lib.experiments.attention_study.views.plots import (
    curves_figure,
    diagnostics_figure,
    headroom_figure,
    variants_figure,
)
from attnknn_lib.experiments.common.views import detectable_tabular, output_context
from attnknn_lib.report.figures import save_output_figure
from attnknn_lib.report.tables import EMPTY_CELLS, booktabs


def _fewer_seeds(res: dict) -> str:
    """'; long tail 0.01 (retrained): seeds 0, 1, 2' for settings run on fewer seeds than the study."""
    return "".join(f"; {setting_title(n)}: seeds {', '.join(map(str, s['seeds']))}"
                   for n, s in res["summary"]["settings"].items() if len(s["seeds"]) < len(res["seeds"]))


CAPTURE_COLUMNS = ("attention head", "chosen")  # the learnable table's captured shares (LaTeX headers)


def capture_note(frame: pd.DataFrame) -> str:
    """The learnable table's sentence on its captured shares, only where a share column has a value
    (:func:`~attnknn_lib.report.tables.booktabs` leaves out a column of dashes, and its note goes with it)."""
    shown = [c for c in CAPTURE_COLUMNS if c in frame and any(str(v).strip() not in EMPTY_CELLS for v in frame[c])]
    if not shown:
        return ""
    return (" Captured (\\%): the share of that room the attention head and the head chosen on validation "
            "won over the tuned vote (--: no room established; on a second dataset's rows, Attn-KNN).")


def detectable_families(record: dict) -> dict[str, dict[str, list[dict]]]:
    """The study's one family (uncorrected): every head at the trained k on every memory setting against
    the tuned vote (accuracy) and against the NLL-tuned vote (NLL and Brier after calibration)."""
    k = str(record["config"]["k"])
    heads = [h for s in record["results"]["summary"]["settings"].values()
             for h in ((s.get("variants") or {}).get(k) or {}).get("methods", {}).values()]
    return {f"Attention study: every head at $k = {k}$ vs tuned vote, every memory": {
        m: [h[ref][m] for h in heads if m in h.get(ref, {})]
        for m, ref in (("accuracy", "verdicts_reference"), ("nll", "verdicts_reference_nll"),
                       ("brier", "verdicts_reference_nll"))}}


def write_outputs(record: dict, paths: Paths) -> dict:
    res, d, title, src = output_context(record, NOTEBOOK, ARTIFACTS)
    seeds = ", ".join(map(str, res["seeds"])) + _fewer_seeds(res)
    cfg = record["config"]
    ref_frame = reference_frame(record, latex=True)
    learnable = learnable_frame(record, latex=True)
    diagnostics = diagnostics_frame(record)
    out = {"headroom": ARTIFACTS.write_table(paths, "headroom", d, booktabs(
        headroom_frame(record, latex=True),
        f"{title}: how much any reweighting of the k neighbours can gain (\\% of test queries, mean over seeds "
        f"{seeds}; Attn-KNN's embedding, noise in the memory's labels only; a long-tailed memory uses the "
        f"embedding of its own model, retrained on that subset). Recall@k: the true label is "
        f"among the k; agree: all k neighbours carry one label; fixable: the true label is among the k but the "
        f"uniform vote misses it; $\\le m$ votes: fixable with the true class at most m votes behind. {src}.",
        "tab:study-headroom")),
        "variants": ARTIFACTS.write_table(paths, "variants", d, booktabs(
            variants_frame(record, latex=True),
            f"{title}: attention variants trained on the frozen embedding, against the kNN rule tuned on "
            f"validation at the same k, a secondary reference (Table~\\ref{{tab:study-best}} holds the verdicts "
            f"against the tuned vote; seeds {seeds}); rows: memory, k: variant. Blind: the prototype's label-blind attention with an "
            f"entropy bonus, none, or a penalty, or trained on held-out validation queries; readout: TabR-style, "
            f"query only its control. Accuracy difference with its 95\\% seed-level $t$ interval; verdict "
            f"B / W / E / ? / = = better / worse / equivalent / inconclusive / identical predictions against a margin "
            f"of {100 * cfg['margin_accuracy']:g} pp (NLL: in the notebook); ECE is described, without a verdict. "
            f"Captured: share of the fixable room won over the uniform vote. * chosen on validation. "
            f"k-mixture $-$ fixed k: the learned mixture over k against the uniform vote at the one k of its ladder "
            f"chosen on validation (in brackets). {src}.",
            "tab:study-variants", escape_index=True, colsep="2.5pt", size="footnotesize")),
        "best": ARTIFACTS.write_table(paths, "best", d, booktabs(
            verdict_matrix_frame(record),
            f"{title}: test accuracy minus the tuned vote's, in points, per memory setting (seeds {seeds}; noise "
            f"in the memory's labels only, validation and test labels clean), with the verdict (B / W / E / ? = "
            f"better / worse / equivalent / inconclusive) and the seed-level 95\\% interval below (an end that rounds "
            f"onto the margin shows one more decimal). Heads read "
            f"$k={cfg['k']}$ neighbours of the frozen embedding; ``chosen'' names the head with the best validation accuracy. "
            f"Attn-KNN: the end-to-end model at the $k$ it was trained at, and tuned: with its vote settings chosen on "
            f"validation. Query-only: the query-only control. The noisy memories sit on the clean-trained embedding; the long-tailed one on a model "
            f"retrained on the long-tailed training set. Unlike the label-noise experiment (Table~\\ref{{tab:noise}}), whose validation labels "
            f"are noisy, every choice here is made on clean validation labels. {src}.",
            "tab:study-best", escape_index=True, colsep="2pt", size="scriptsize")),
        "reference": ARTIFACTS.write_table(paths, "reference", d, booktabs(
            ref_frame,
            f"{title}: the tuned vote, per memory setting (seeds {seeds}): the neighbour "
            f"vote (uniform, distance or cosine weights with their temperature), k, a consistency filter (only "
            f"neighbours whose own nearest rows agree with their label at least this share vote) and a prior "
            f"correction (probabilities divided by the memory's class shares to this power) chosen jointly on "
            f"validation, best accuracy then NLL; each grid is extended where the choice sits on its edge, k by "
            f"searching more neighbours. Configs: configurations scored per seed (the tuning budget). Val.\\ $-$ "
            f"test: the tuned vote's validation minus test accuracy, mean over seeds (it is chosen on validation); "
            f"NLL-tuned: the open edges of the same search tuned for the calibration endpoint (k searched). {src}.",
            "tab:study-reference", column_format="lrrp{4.2cm}rlr" + "r" * (len(ref_frame.columns) - 6),
            escape_index=True, colsep="3pt")),
        "learnable": ARTIFACTS.write_table(paths, "learnable", d, booktabs(
            learnable,
            f"{title}: learnable room, per memory setting and k (seeds {seeds}; test accuracy in \\%, "
            f"recall@k in \\% of test queries). Two learners read the "
            f"neighbours' labels, distances, ranks and their own neighbours' agreement and are trained on clean "
            f"held-out validation labels, cross-fitted in two halves (each fit on one half, tuned on a fifth of it, "
            f"applied to the other): gradient-boosted trees on per-class neighbour features (trees), reading as "
            f"many neighbours as the reference chose (at least k), "
            f"and the label-aware attention at k (label-aware). Learnable room: per seed, the one with the better out-of-fold validation accuracy minus the "
            f"tuned vote (so it need not equal a difference of the columns, which average each learner over seeds), "
            f"with its 95\\% seed-level $t$ interval and verdict "
            f"B / W / E / ? against a {100 * cfg['margin_accuracy']:g} pp margin.{capture_note(learnable)} Rows of "
            f"a second dataset: its hold-out splits, split-level intervals. {src}.",
            "tab:study-learnable", escape_index=True, colsep="3pt")),
        **({"collapse": ARTIFACTS.write_table(paths, "collapse", d, booktabs(
            collapse_frame(record, latex=True),
            f"{title}: what could hold the label-blind attention at uniform weights. The prototype's head, "
            f"without the entropy term, trained at $k={cfg['k']}$ on the frozen clean memory with one setting changed "
            f"at a time (seeds {', '.join(map(str, res['summary']['settings']['clean']['collapse']['seeds']))}): "
            f"effective k on test ($k$ = uniform weights), the score range (max $-$ min of the softmax's inputs "
            f"within a query's neighbourhood, mean over test queries and heads: the largest weight is at most "
            f"$e^{{\\text{{range}}}}$ times the smallest) beside the mean temperature $\\tau$, accuracy, and the "
            f"difference to the tuned vote with its 95\\% seed-level $t$ interval and verdict "
            f"B / W / E / ?. Difference score: a head whose score is an MLP of $q - n_j$ (TabR's difference feature), "
            f"trained the same way; Attn-KNN: its attention as trained, not retrained. {src}.",
            "tab:study-collapse", escape_index=True, column_format="lp{4.4cm}rrrrl", colsep="3pt",
            size="footnotesize"))}
           if not collapse_frame(record).empty else {}),
        **({"second": ARTIFACTS.write_table(paths, "second", d, booktabs(
            second_frame(record, latex=True),
            f"The study's core comparison on a second dataset: Attn-KNN of each stratified hold-out split "
            f"(its attention at $k={cfg['k']}$ on its own embedding) and the uniform vote at $k$ (unif.), each against the "
            f"tuned vote on the same memory (ref.; its $k$ per split), with noise in the "
            f"memory's labels only (each split draws its own flips); learnable: the learnable room (the better of "
            f"the two learners of Table~\\ref{{tab:study-learnable}} minus ref.). Attn-KNN's difference with the 95\\% "
            f"split-level interval (corrected resampled $t$: the splits share their data), every accuracy difference in "
            f"points with its "
            f"verdict B / W / E / ?; the other intervals are in Table~\\ref{{tab:study-learnable}} and the notebook. "
            f"{src}.",
            "tab:study-second", escape_index=True, colsep="3pt", size="footnotesize"))} if res.get("second") else {}),
        "diagnostics": ARTIFACTS.write_table(paths, "diagnostics", d, booktabs(
            diagnostics.rename(columns=lambda c: c.replace("%", "\\%")),
            f"{title}: Attn-KNN's attention during its training, per epoch (mean over seeds "
            f"{', '.join(map(str, res['seeds']))}). "
            f"Grad.\\ share: training queries whose vote carries a gradient (the true label among the k and the "
            f"neighbourhood mixed); "
            + ("H: entropy in nats of the head-averaged weights, equal to the mean of each head's at the digits "
               "shown; " if "H" in diagnostics.columns else
               "H: entropies in nats of the head-averaged weights and of each head's; ") +
            f"|dH| / |dNLL|: the entropy term's gradient over the NLL's on the attention's parameters, before "
            f"its weight; temp.: mean temperature. {src}.", "tab:study-diagnostics"))}
    drawn = [("headroom", headroom_figure(record)), ("diagnostics", diagnostics_figure(record)),
             ("variants", variants_figure(record))]
    if cfg["variant_settings"]:
        drawn.append(("curves", curves_figure(record)))
    for name, fig in drawn:
        out[name + "_figure"] = save_output_figure(ARTIFACTS, paths, name + "_figure", d, fig)
    out["detectable"] = ARTIFACTS.write_table(paths, "detectable", d, detectable_tabular(src, detectable_families(record)))
    if cfg["learned_metrics"]:
        out["learned"] = ARTIFACTS.write_table(paths, "learned", d, booktabs(
            learned_frame(record, latex=True),
            f"{title}: the learned metrics with the same vote on each memory (trained on that memory's labels; "
            f"validation labels clean): NCA, a linear map learned through the leave-one-out softmax vote with the "
            f"tuned vote's search run again in its space, and the linear probe, each minus the tuned vote; NCA tuned "
            f"for the calibration endpoint minus the vote tuned for it (NLL and Brier after calibration); and "
            f"Attn-KNN with its vote settings tuned minus NCA. Seed-level 95\\% intervals over seeds {seeds}; verdict "
            f"marks as in Table~\\ref{{tab:study-variants}}. {src}.", "tab:study-learned", escape_index=False,
            size="footnotesize"))
    return out

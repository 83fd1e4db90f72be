"""The study's prose from a record: the findings' detailed bullets and glossary, the notebook's findings, the README section."""

from __future__ import annotations

import numpy as np

from attnknn_lib.evaluation.metrics import N_BINS
from attnknn_lib.experiments.attention_study.views.cells import interval_text
from attnknn_lib.experiments.attention_study.views.frames import gradient_shares
from attnknn_lib.experiments.attention_study.views.labels import below_budget, is_noise, setting_title, variant_label
from attnknn_lib.experiments.attention_study.views.sentences import (
    attnknn_line,
    collapse_sentences,
    end_to_end_reading,
    plain_answer,
    proper_line,
    second_line,
)
from attnknn_lib.report.findings import across_text, markdown_lists, point_text, seeds_text
from attnknn_lib.report.macros import pct
from attnknn_lib.report.readme import per_dataset

GLOSSARY = (
    "- *pp*: percentage points of test accuracy; *[low, high]*: the 95 % interval over seeds (seed-level t "
    "interval, the shared test set's bootstrap error included).",
    "- *Tuned vote*: a neighbour vote whose weights (uniform, distance or "
    "cosine), k, label filter and class-prior correction are all chosen on validation.",
    "- *Better* / *worse*: the interval excludes zero on the good / bad side; *equivalent*: the whole interval lies "
    "within the margin declared before the run ({margins}); *inconclusive*: none of these; *identical*: every "
    "seed's difference is exactly 0 (the same predictions), which is not evidence of equivalence and no count "
    "includes it.",
    "- *ECE*: expected calibration error over {bins} equal-width confidence bins, described with its interval but "
    "never given a verdict (it is not a proper score); *NLL*: negative log-likelihood; both after the post-hoc "
    "calibrator (a temperature and a smoothing toward uniform) fitted on validation.",
    "- *Chosen head*: the attention variant with the best validation accuracy among {n_heads} trained on the frozen "
    "embedding (label-blind or label-aware scores, a readout and its query-only control, a mixture over k).",
    "- *Learnable room*: the better of two learners that read {learner_reads} and learn from clean "
    "held-out labels (the boosted-trees learner, the label-aware head), minus the tuned vote.",
    "- *Effective k*: exp(H), H the entropy of a query's neighbour weights (mean over test queries); it equals k when "
    "every neighbour weighs the same and 1 when one neighbour takes all the weight.",
    "- *Brier*: mean squared distance between the predicted class probabilities and the one-hot label; with NLL a "
    "proper score, the calibration endpoints; calibration is judged against the same reference search tuned on "
    "validation NLL.",
    "- *Attn-KNN*: the paper's method, a CNN embedding and multi-head attention over the k = {k} nearest memory rows, "
    "trained end to end; *TTA*: test-time augmentation (the mean over flipped and cropped views).",
    "- *Memory*: the labelled training embeddings the neighbours come from; noise flips a share of its labels only.",
)


def _chosen_against_reference(kv: dict | None) -> dict | None:
    if kv and kv.get("chosen"):
        return kv["methods"][kv["chosen"]]["verdicts_reference"]["accuracy"]
    return None


def finding_bullets(records: list[dict], headroom: bool = True) -> list[str]:
    """The detailed answer of the findings: a few bullets, Attn-KNN itself first, each a method against the strongest
    rule that learns nothing with its seed-level difference and verdict, then a glossary (generated
    from the study's record). ``headroom`` off leaves the clean memory's learnable headroom out of the chosen head's line (the
    notebook's findings give it for every setting in a line of its own)."""
    if not records:
        return []
    record = records[0]
    res, cfg = record["results"], record["config"]
    settings = res["summary"]["settings"]
    clean = settings["clean"]
    k = str(cfg["k"])
    answer = plain_answer(record)
    lines = [f"- **The answer.** {answer}"] if answer else []
    lines.append(attnknn_line(record))
    proper = proper_line(record)
    if proper:
        lines.append(proper)
    kv = (clean.get("variants") or {}).get(k)
    v = _chosen_against_reference(kv)
    if v:  # the clean memory, then the noisy ones, in one line
        room = (f" (learnable room {interval_text(kv['learnable']['verdicts']['accuracy'], 'accuracy')})"
                if headroom else "")
        noisy = [f"{setting_title(st)} {interval_text(n, 'accuracy')}" for st, s in settings.items()
                 if is_noise(st) and (n := _chosen_against_reference((s.get("variants") or {}).get(k)))]
        lines.append(f"- **The chosen head** (k = {k}; on the clean memory {variant_label(kv['chosen'])}) against the "
                     f"tuned vote: clean memory {interval_text(v, 'accuracy')}{room}"
                     + "".join(f"; {c}" for c in noisy) + ".")
    for setting, s in settings.items():
        v = _chosen_against_reference((s.get("variants") or {}).get(k))
        if setting.startswith("long_tail/") and v:
            rows = f"{cfg['long_tail_max_train']:,}" if cfg["long_tail_max_train"] else "all"
            epochs = cfg["long_tail_epochs"] or "main's"
            budget = (f"; not counted in the answer: its models train on {rows} images for {epochs} epochs, below "
                      f"main's budget" if below_budget(cfg) else "")
            lines.append(f"- **Long-tailed memory** (imbalance ratio {setting.partition('/')[2]}, retrained on "
                         f"it, {seeds_text(len(s['seeds']))}), the chosen head against the tuned vote, which may "
                         f"correct for class shares: {interval_text(v, 'accuracy')}{budget}.")
    second = second_line(record)
    if second:
        lines.append(f"- **A second dataset, descriptive only** (in no verdict): {second[0].upper()}{second[1:]}.")
    e2e = res["summary"].get("end_to_end")
    if e2e:
        m = e2e["models"]
        lines.append(f"- **Why the weights stay uniform**: trained end to end without the entropy bonus "
                     f"({seeds_text(len(e2e['seeds']))}), effective k {m['no_bonus']['effective_k']['mean']:.2f} of {k} "
                     f"({m['prototype']['effective_k']['mean']:.2f} with it): {end_to_end_reading(e2e, int(k))}.")
    margins = (f"{100 * cfg['margin_accuracy']:g} pp accuracy, {cfg['margin_nll']:g} NLL"
               + (f", {cfg['margin_brier']:g} Brier" if "margin_brier" in cfg else ""))
    heads = len(cfg["variants"])
    reads = "the neighbours (the trees as many as the reference chose, the attention k)"
    glossary = [g.format(margins=margins, bins=N_BINS, n_heads=heads, k=k, learner_reads=reads) for g in GLOSSARY]
    return lines + ["", "**Terms.**", ""] + glossary


def _across(what: str, cells: list[tuple[str, dict | None]], metric: str = "accuracy") -> str | None:
    """One findings bullet: ``what``, then each setting's stored difference as value and verdict word."""
    cells = [(title, v) for title, v in cells if v]
    return across_text(what, [(title, point_text(v, metric)) for title, v in cells]) if cells else None


def findings(record: dict) -> str:
    """The notebook's answer: the plain answer (:func:`plain_answer`) in bold, then one point per
    bullet across the memory settings: Attn-KNN as trained and with its vote settings tuned against the
    tuned vote, calibrated NLL against the NLL-tuned vote, the chosen head, the second dataset
    (descriptive), the fixable share and learnable headroom, what holds the weights at uniform, the
    gradient diagnostics. Values and verdict words; the intervals are in the tables above. Every number
    and verdict word is read from the record."""
    res, cfg = record["results"], record["config"]
    k = str(cfg["k"])
    settings = res["summary"]["settings"]
    answer = plain_answer(record)
    lines = [f"**{answer}**", ""] if answer else []
    own = {st: s["attnknn"] for st, s in settings.items() if "attnknn" in s}
    lines.append(_across(f"Attn-KNN as trained (k = {k}, a diagnostic) minus the tuned vote in accuracy",
                         [(setting_title(st), a["verdicts_reference"]["accuracy"]) for st, a in own.items()]))
    tuned = {st: a["tuned"] for st, a in own.items() if "tuned" in a}
    lines.append(_across("Attn-KNN with its vote settings tuned minus the tuned vote in accuracy",
                         [(setting_title(st), t["verdicts_reference"]["accuracy"]) for st, t in tuned.items()]))
    lines.append(_across("Attn-KNN with its vote settings tuned minus the NLL-tuned vote in calibrated NLL",
                         [(setting_title(st), (t.get("verdicts_reference_nll") or {}).get("nll"))
                          for st, t in tuned.items()], "nll"))
    chosen = {st: kv for st, s in settings.items() if (kv := (s.get("variants") or {}).get(k)) and kv.get("chosen")}
    clean = chosen.get("clean")
    which = f"; on the clean memory {variant_label(clean['chosen'])}" if clean else ""
    lines.append(_across(f"The head chosen on validation (k = {k}{which}) minus the tuned vote in accuracy",
                         [(setting_title(st), kv["methods"][kv["chosen"]]["verdicts_reference"]["accuracy"])
                          for st, kv in chosen.items()]))
    lines.append(_across("The chosen head minus the NLL-tuned vote in calibrated NLL",
                         [(setting_title(st), (kv["methods"][kv["chosen"]].get("verdicts_reference_nll") or {}).get("nll"))
                          for st, kv in chosen.items()], "nll"))
    if below_budget(cfg) and any(st.startswith("long_tail/") for st in settings):
        lines.append("- The long-tailed memory's models train below main's budget: it is not counted in the answer.")
    second = second_line(record)
    if second:
        lines.append(f"- A second dataset, descriptive only (in no verdict): {second[0].upper()}{second[1:]}.")
    fixable = [f"{setting_title(st)} {pct(s['headroom'][k]['fixable'])} %" for st, s in settings.items()
               if s["headroom"].get(k)]
    if fixable:
        lines.append(f"- Fixable at k = {k} (test queries the uniform vote gets wrong with the true class among the "
                     f"{k} neighbours): " + "; ".join(fixable) + ".")
    lines.append(_across(f"Learnable room at k = {k} (the best learner on clean held-out labels minus the tuned vote)",
                         [(setting_title(st), kv["learnable"]["verdicts"]["accuracy"])
                          for st, s in settings.items() if (kv := (s.get("variants") or {}).get(k))]))
    lines += [f"- {c[0].upper()}{c[1:]}." for c in collapse_sentences(record, point_text)]
    shares = gradient_shares(record)
    per = [d["diagnostics"]["per_epoch"] for d in res["per_seed"].values()]
    last = [p["diag_gradient_share"][-1] for p in per if p["diag_gradient_share"][-1] is not None]
    train = f"{100 * np.mean(last):.1f} %" if last else "not recorded"
    lines.append(f"- Diagnostics: the vote carries a gradient for {train} of training queries (main's "
                 f"last epoch) and {100 * shares['test']:.1f} % of test queries.")
    return markdown_lists([line for line in lines if line is not None])


def readme_lines(records: list[dict]) -> list[str]:
    def bullet(res: dict, title: str) -> str:
        record = next(r for r in records if r["results"] is res)
        return f"{title}:\n" + findings(record)

    return per_dataset(records, bullet)

"""One-sentence readings of the record (Attn-KNN, calibration, second dataset, collapse, end to end) and its plain answer."""

from __future__ import annotations

import numpy as np

from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.evaluation.verdicts import VERDICTS
from attnknn_lib.experiments.attention_study.measure import AS_TRAINED, COLLAPSE, DIFFERENCE, MAIN_ATTNKNN
from attnknn_lib.experiments.attention_study.views.cells import interval_text
from attnknn_lib.experiments.attention_study.views.labels import counts_toward_answer, is_noise, setting_title
from attnknn_lib.experiments.common.fixed_embedding import HeadKnobs as FixedEmbeddingConfig
from attnknn_lib.experiments.common.views import k_range
from attnknn_lib.report.findings import seeds_text
from attnknn_lib.report.macros import VERDICT_PHRASES, signed

# effective k at or above this share of k reads as "still uniform" (14.4 of 16): the share the positive
# control and the real regimes declared before their runs, so every experiment reads the same threshold
UNIFORM_SHARE = FixedEmbeddingConfig.__dataclass_fields__["moved_share"].default


def second_line(record: dict) -> str | None:
    """One descriptive clause per second dataset: in how many hold-out splits main's Attn-KNN and the
    tuned vote differ by exactly 0 in accuracy on the clean memory (a difference with no spread
    says nothing about a method: both are right on the same points), and the mean difference per
    setting; None without a second study. It is counted in no verdict."""
    parts = []
    for e in (record["results"].get("second") or {}).values():
        per = e["summary"].get("clean", {}).get("attnknn_vs_reference", {}).get("accuracy", {}).get("per_seed") or []
        zeros = sum(abs(d) < 1e-12 for d in per)
        cells = [f"{setting_title(st)} {signed(100 * s['attnknn_vs_reference']['accuracy']['value'], 2)} pp"
                 for st, s in e["summary"].items()]
        parts.append(f"on {e['title']}, Attn-KNN and the tuned vote give the same accuracy in {zeros} of "
                     f"{len(per)} hold-out splits on the clean memory; mean differences " + "; ".join(cells))
    return ". ".join(parts) or None



def attnknn_line(record: dict) -> str:
    """Attn-KNN itself against the tuned vote in every setting the record measured it in, then
    the tuned vote's k where Attn-KNN loses (the reason a fixed k = 16 loses under noise)."""
    res, k = record["results"], str(record["config"]["k"])
    settings = res["summary"]["settings"]
    cells = []
    for st, s in settings.items():
        if "attnknn" not in s:
            continue
        v = s["attnknn"]["verdicts_reference"]["accuracy"]
        note = "" if counts_toward_answer(st, record["config"]) else " (not counted: models below main's budget)"
        cells.append(f"{setting_title(st)} {interval_text(v, 'accuracy')}{note}")
    clean = settings["clean"]
    losses = [st for st, s in settings.items() if "attnknn" in s and
              s["attnknn"]["verdicts_reference"]["accuracy"]["verdict"] == "worse"]
    wide = [st for st in losses if max(settings[st]["reference"]["k"]) > int(k)]
    noisy = [st for st in wide if is_noise(st)]
    why = ""
    if wide:
        ranges = ", ".join(f"{k_range(settings[st]['reference']['k'])} ({setting_title(st)})" for st in wide)
        why = (f" Where it loses, the tuned vote reads more neighbours than Attn-KNN's fixed {k}: k {ranges}"
               + (f"; a wider vote outweighs flipped labels, and Attn-KNN's weighting of {k}, trained on clean "
                  f"labels, does not." if noisy else "."))
    tuned = [f"{setting_title(st)} {interval_text(s['attnknn']['tuned']['verdicts_reference']['accuracy'], 'accuracy')}"
             f" (k {k_range(s['attnknn']['tuned']['k'])})" for st, s in settings.items() if "tuned" in (s.get("attnknn") or {})]
    if tuned:  # the tuned vote's k, filter and prior given to Attn-KNN answer the why: its numbers replace it
        why = f" At k = {k} a diagnostic only; with vote settings tuned: " + "; ".join(tuned) + "."
    return (f"- **Attn-KNN** ({REGISTRY[record['dataset']].title}, trained end to end, "
            f"{seeds_text(len(clean['seeds']))}) against the tuned vote on its own embedding, "
            f"accuracy: " + "; ".join(cells) + "." + why)


def proper_line(record: dict) -> str | None:
    """Calibration by proper scores: Attn-KNN's and the chosen head's calibrated NLL against the
    reference tuned on NLL, per setting, with what 5 seeds resolve; None for a record without them."""
    k = str(record["config"]["k"])
    cells = []
    for st, s in record["results"]["summary"]["settings"].items():
        kv = (s.get("variants") or {}).get(k) or {}
        parts = []
        tuned = (s.get("attnknn") or {}).get("tuned") or {}
        if "verdicts_reference_nll" in tuned:  # with the tuned vote's knobs; the k = 16 numbers stay in the tables
            parts.append(f"Attn-KNN (tuned) {interval_text(tuned['verdicts_reference_nll']['nll'], 'nll')}")
        elif "verdicts_reference_nll" in (s.get("attnknn") or {}):
            parts.append(f"Attn-KNN {interval_text(s['attnknn']['verdicts_reference_nll']['nll'], 'nll')}")
        chosen = kv.get("chosen")
        if chosen and "verdicts_reference_nll" in kv["methods"][chosen]:
            parts.append(f"chosen head {interval_text(kv['methods'][chosen]['verdicts_reference_nll']['nll'], 'nll')}")
        if parts:
            cells.append(f"{setting_title(st)}: " + ", ".join(parts))
    if not cells:
        return None
    return ("- **Calibration**: calibrated NLL minus the NLL-tuned vote's: " + "; ".join(cells) + ".")


def budgets(setting: dict, kv: dict) -> dict[str, int] | None:
    """Median tuning budget per seed (configurations scored) of the tuned vote, the boosted trees and the
    searched label-aware attention (learning rate x epochs to a plateau, both folds) at one setting and
    k; None without a searched learner."""
    search = (kv["methods"].get("label_aware_heldout") or {}).get("search")
    if not search:
        return None
    per_seed = len(search["configs"]) // max(1, len(kv["learner"]["configs"]))
    att = [sum(search["configs"][i:i + per_seed]) for i in range(0, len(search["configs"]), per_seed)]
    return {name: round(float(np.median(v))) for name, v in (("reference", setting["reference"]["configs"]),
                                                    ("trees", kv["learner"]["configs"]), ("attention", att))}


def budget_text(setting: dict, kv: dict) -> str:
    """' Tuning budgets per seed: ...' (:func:`budgets`), with the attention's fits whose learning rate
    sits at an end of the grid or that never reached a plateau; '' without a searched learner."""
    b = budgets(setting, kv)
    if b is None:
        return ""
    search = kv["methods"]["label_aware_heldout"]["search"]
    lrs = sorted(set(search["lrs"]))
    return (f" Tuning budgets per seed (configurations scored): tuned vote {b['reference']}, boosted-trees learner "
            f"{b['trees']}, label-aware attention {b['attention']} (learning rate x epochs to a plateau; chosen rates "
            f"{', '.join(f'{x:.2g}' for x in lrs)}; {search['edges']} of {search['fits']} fits at an end of the rate "
            f"grid, {search['no_plateau']} without a plateau).")


def second_learnable(record: dict, settings: tuple[str, ...] | None = ("clean",)) -> str | None:
    """One clause per second dataset: its learnable headroom (split-level) in ``settings`` (None: all);
    None without one."""
    parts = []
    for e in (record["results"].get("second") or {}).values():
        cells = [f"{setting_title(st)} {interval_text(s['learnable_vs_reference']['accuracy'], 'accuracy')}"
                 for st, s in e["summary"].items()
                 if settings is None or st in settings]
        if cells:
            parts.append(f"on {e['title']} " + "; ".join(cells))
    return ", ".join(parts) or None


def collapse_reading(record: dict) -> str | None:
    """One sentence on the sweep: which setting moved the weights furthest from uniform, by how much,
    and whether that helped against the tuned vote; None without a sweep."""
    parts = collapse_sentences(record)
    return ". ".join(parts) if parts else None


def collapse_sentences(record: dict, diff_text=interval_text) -> list[str]:
    """The sweep's reading as sentences without their stops (empty without a sweep): the heads of the
    sweep proper, the difference-scoring head, Attn-KNN's score range. ``diff_text(v, metric)`` writes
    a stored difference (with its interval by default; a findings bullet gives the value and word)."""
    sweep = record["results"]["summary"]["settings"].get("clean", {}).get("collapse")
    if not sweep:
        return []
    k = int(record["config"]["k"])
    out = [_sweep_reading({n: e for n, e in sweep["settings"].items() if n in COLLAPSE}, k, diff_text)]
    beside = sweep["settings"]
    if DIFFERENCE in beside:
        d = beside[DIFFERENCE]
        out.append(f"A sweep variant of the attention head whose MLP scores the difference between query and "
                   f"neighbour (as TabR's attention does) "
                   f"reaches effective k {d['effective_k']['mean']:.2f} and "
                   f"{diff_text(d['verdicts_reference']['accuracy'], 'accuracy')}")
    m = beside.get(MAIN_ATTNKNN)
    if m and (m.get("score_range") or {}).get("mean") is not None:
        out.append(f"Within a neighbourhood, Attn-KNN's scores, with its per-head temperatures "
                   f"(mean {m['temperature']['mean']:.3f}) applied, span {m['score_range']['mean']:.3f}: its largest weight is at most "
                   f"{np.exp(m['score_range']['mean']):.2f} times its smallest")
    return out


def _sweep_reading(es: dict, k: int, diff_text=interval_text) -> str:
    """The sentence on the heads of the collapse sweep proper (``es``: name -> summary)."""
    name = min(es, key=lambda n: es[n]["effective_k"]["mean"])
    keff = es[name]["effective_k"]["mean"]
    v = es[name]["verdicts_reference"]["accuracy"]
    moved = [n for n in es if es[n]["effective_k"]["mean"] < UNIFORM_SHARE * k]
    changes = sum(n != AS_TRAINED for n in es)  # one head is the head as trained, which the others change
    if not moved:
        return (f"none of the {changes} changed heads (learning rate, temperature bounds or initialisation) brings "
                f"the effective k below the declared {UNIFORM_SHARE * k:.1f} of {k}; the lowest, "
                f"{keff:.2f}, scores {diff_text(v, 'accuracy')} against the tuned vote")
    said = {"better": "sharper weights beat the tuned vote there", "worse": "sharper weights cost accuracy there",
            "equivalent": "sharper weights matched the tuned vote there",
            "inconclusive": "the seeds cannot tell whether sharper weights help",
            "identical": "its predictions are the tuned vote's"}[v["verdict"]]
    return (f"{len(moved)} of {len(es)} heads (the head as trained and {changes} changes) bring the effective k below {UNIFORM_SHARE * k:.1f} of {k} "
            f"({100 * UNIFORM_SHARE:g} % of k); the sharpest (\"{name}\", {keff:.2f}) scores {diff_text(v, 'accuracy')} "
            f"against the tuned vote: {said}")


def end_to_end_reading(e2e: dict, k: int) -> str:
    """One clause on what the end-to-end control shows, chosen by the numbers: whether the weights
    of the model trained without the bonus stayed at uniform (effective k above ``UNIFORM_SHARE``
    of k), and whether they did with the bonus."""
    keff = {name: m["effective_k"]["mean"] for name, m in e2e["models"].items()}
    flat = {name: v >= UNIFORM_SHARE * k for name, v in keff.items()}
    if flat["no_bonus"] and flat["prototype"]:
        return "the weights stay as near uniform as with it, so the bonus does not hold them there"
    if flat["prototype"]:
        return "without the bonus the weights leave uniform, so the bonus does hold them there"
    if flat["no_bonus"]:
        return "the weights stay near uniform without the bonus but not with it"
    return "the weights leave uniform with and without the bonus"


def plain_answer(record: dict) -> str | None:
    """The study's answer in plain sentences, chosen by the verdicts: first Attn-KNN itself (as trained
    end to end) against the tuned vote in each memory setting the record
    measured it in, then whether the head chosen on validation at the experiment's k beats that rule
    in any setting, and whether attention trained end to end leaves uniform weights. Settings whose
    models train below main's budget (:func:`below_budget`) are left out of the counts. None where no
    head was chosen at the experiment's k."""
    res, k = record["results"], str(record["config"]["k"])
    settings = {st: s for st, s in res["summary"]["settings"].items() if counts_toward_answer(st, record["config"])}
    verdicts = {}
    for setting, s in settings.items():
        kv = (s.get("variants") or {}).get(k)
        if kv and kv.get("chosen"):
            verdicts[setting] = kv["methods"][kv["chosen"]]["verdicts_reference"]["accuracy"]["verdict"]
    if not verdicts:
        return None

    def counts(vs: dict) -> str:
        return ", ".join(f"{n} {w}" for w in VERDICTS if (n := list(vs.values()).count(w)))

    own = {st: s["attnknn"]["verdicts_reference"]["accuracy"]["verdict"] for st, s in settings.items() if "attnknn" in s}
    text = ""
    if len(own) > 1:
        text = (f"Attn-KNN as trained does not beat the tuned vote in any of {len(own)} memory "
                f"settings ({counts(own)})" if "better" not in own.values() else
                f"Attn-KNN as trained beats the tuned vote on "
                f"{' and '.join(setting_title(st) for st, v in own.items() if v == 'better')}")
        text += ". "
    elif own:
        text = f"Attn-KNN as trained is {VERDICT_PHRASES[next(iter(own.values()))]} the tuned vote on the clean memory. "
    wins = [setting_title(st) for st, v in verdicts.items() if v == "better"]
    if wins:
        text += (f"The head chosen on validation beats it on {' and '.join(wins)}"
                 + (f", and not on the other {len(verdicts) - len(wins)} memories" if len(wins) < len(verdicts) else ""))
    elif not own:
        text += (f"No: in none of {len(verdicts)} memory settings does the attention head chosen on validation "
                 f"beat the tuned vote ({counts(verdicts)})")
    else:
        text += (f"The attention head chosen on validation does not beat it in any of {len(verdicts)} settings "
                 f"({counts(verdicts)})")
    e2e = res["summary"].get("end_to_end")
    if e2e:
        keff = e2e["models"]["no_bonus"]["effective_k"]["mean"]
        stays = keff >= UNIFORM_SHARE * int(k)
        text += (f", and attention trained end to end {'stays uniform' if stays else 'leaves uniform weights'} "
                 f"(effective k {keff:.2f} of {k}, without the entropy bonus)")
    return text + "."

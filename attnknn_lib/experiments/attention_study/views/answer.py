"""The study's bullets of the README's answer: a few words each, verdicts counted over memory settings.

The intervals and per-setting values stay in the tables the bullets link to (the notebook's PDF);
the findings cell keeps the detailed bullets (:func:`~.text.finding_bullets`). A record measured
before the knob-tuned Attn-KNN and the learned metrics existed is read with its older comparisons
(Attn-KNN at its trained k, the chosen head, calibration of Attn-KNN as trained).
"""

from __future__ import annotations

from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.experiments.attention_study.config import NOTEBOOK
from attnknn_lib.experiments.attention_study.views.labels import counts_toward_answer, is_noise
from attnknn_lib.experiments.attention_study.views.sentences import UNIFORM_SHARE
from attnknn_lib.report.findings import table_link, verdict_counts

LINK = table_link(NOTEBOOK)
TERMS = (
    "- *Tuned vote*: a kNN vote that learns nothing, its weighting (uniform, distance or cosine), k, label "
    "filter and class-prior correction chosen on validation.",
    "- *Better* / *worse* / *equivalent* / *inconclusive*: the 95 % interval of the difference over seeds (or hold-out "
    "splits) lies "
    "above zero / below zero / within the margin declared before the run ({margins}) / none of these.",
    "- *Memory*: the labelled training embeddings the neighbours come from; label noise flips some of its "
    "labels, a long tail keeps few images of most classes.",
    "- *Calibrated NLL*: negative log-likelihood after temperature scaling fitted on validation (lower is better), "
    "compared with the vote tuned for it.",
)
NCA_TERM = ("- *NCA*: a linear map of the embedding learned through the same soft neighbour vote (Goldberger et al., "
            "2004); the *linear probe*: a softmax regression on the embedding.")


def memory_kinds(settings: list[str]) -> str:
    """'clean, label noise, long tail': the kinds of memory among ``settings``, in their order."""
    kinds = ["label noise" if is_noise(st) else "long tail" if st.startswith("long_tail/") else st
             for st in settings]
    return ", ".join(dict.fromkeys(kinds))


def _verdict(entry: dict | None, *path: str) -> str | None:
    for key in path:
        if not isinstance(entry, dict) or key not in entry:
            return None
        entry = entry[key]
    return entry.get("verdict") if isinstance(entry, dict) else None


def _counts(settings: dict, *path: str) -> tuple[str, int] | None:
    """Verdict counts of the entry at ``path`` over ``settings`` (name -> summary), and how many
    settings have it; None where no setting has it."""
    vs = [v for s in settings.values() if (v := _verdict(s, *path))]
    return (verdict_counts(vs), len(vs)) if vs else None


def _chosen(settings: dict, k: str) -> list[str]:
    """The chosen head's accuracy verdict against the tuned vote, per setting that chose one at ``k``."""
    out = []
    for s in settings.values():
        kv = (s.get("variants") or {}).get(k) or {}
        if kv.get("chosen"):
            out.append(kv["methods"][kv["chosen"]]["verdicts_reference"]["accuracy"]["verdict"])
    return out


def attnknn_bullet(record: dict, settings: dict, k: str) -> str | None:
    """Attn-KNN against the tuned vote over the memories, in accuracy and in calibrated NLL (against the
    rule tuned for it): with the tuned vote's knobs where measured, else at its trained k."""
    where = f"**Memories of {REGISTRY[record['dataset']].title}** ({memory_kinds(list(settings))}; {len(settings)} settings)"
    tuned = _counts(settings, "attnknn", "tuned", "verdicts_reference", "accuracy")
    path, how = (("attnknn", "tuned"), "with its vote settings tuned") if tuned else (("attnknn",), f"at its trained k = {k}")
    acc = tuned or _counts(settings, *path, "verdicts_reference", "accuracy")
    if not acc:
        return None
    nll = _counts(settings, *path, "verdicts_reference_nll", "nll")
    cal = f" and {nll[0]} in calibrated NLL" if nll else ""
    return f"- {where}: {how}, Attn-KNN is {acc[0]} against the tuned vote in accuracy{cal}. {LINK}"


def heads_bullet(record: dict, settings: dict, k: str) -> str | None:
    """The head chosen on validation against the tuned vote, and whether end-to-end training without the
    entropy bonus leaves equal weights."""
    chosen = _chosen(settings, k)
    if not chosen:
        return None
    text = (f"- **Heads on the frozen embedding**: the attention chosen on validation (of "
            f"{len(record['config']['variants'])}) is {verdict_counts(chosen)} against the tuned vote")
    e2e = record["results"]["summary"].get("end_to_end")
    if e2e:
        keff = e2e["models"]["no_bonus"]["effective_k"]["mean"]
        weights = ("still weighs its neighbours almost equally" if keff >= UNIFORM_SHARE * int(k) else
                   "moves away from equal weights")
        text += f"; trained end to end without a reward for even weights, the attention {weights}"
    return f"{text}. {LINK}"


def learned_bullet(settings: dict) -> str | None:
    """NCA and the linear probe against the tuned vote, Attn-KNN with the knobs against NCA; None for a
    record without the learned metrics."""
    nca = _counts(settings, "learned_metric", "nca", "verdicts_reference", "accuracy")
    if not nca:
        return None
    probe = _counts(settings, "learned_metric", "linear_probe", "verdicts_reference", "accuracy")
    versus = _counts(settings, "learned_metric", "attnknn_tuned_vs_nca", "accuracy")
    text = f"- **Learned metrics with the same vote**: NCA is {nca[0]} against the tuned vote"
    if probe:
        text += f", the linear probe {probe[0]}"
    if versus:
        text += f"; Attn-KNN with its vote settings tuned against NCA: {versus[0]}"
    return f"{text}. {LINK}"


def answer_lines(records: list[dict]) -> list[str]:
    """The README's answer from the study's record: at most three short bullets (Attn-KNN over the
    memories, the heads and the end-to-end control, the learned metrics), each counting verdicts
    over the settings counted toward the answer and linking the notebook's tables; then the terms
    they use."""
    if not records:
        return []
    record = records[0]
    cfg = record["config"]
    k = str(cfg["k"])
    settings = {st: s for st, s in record["results"]["summary"]["settings"].items() if counts_toward_answer(st, cfg)}
    learned = learned_bullet(settings)
    bullets = [b for b in (attnknn_bullet(record, settings, k), heads_bullet(record, settings, k), learned) if b]
    margins = f"{100 * cfg['margin_accuracy']:g} points of accuracy, {cfg['margin_nll']:g} in NLL"  # the bullets' endpoints
    terms = [t.format(margins=margins) for t in TERMS] + ([NCA_TERM] if learned else [])
    return bullets + ["", "**Terms.**", ""] + terms if bullets else []

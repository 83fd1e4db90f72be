"""``results/macros.tex``: one ``\\newcommand`` per number the paper quotes, built from results JSON.

The generic part: names, number formats, verdict words, caption notes, dataset-free aliases and
the file; each experiment builds its own macros from its records with these helpers
(``attnknn_lib.experiments.<name>.macros``), so this module names no experiment.

Names are letters only (LaTeX macro rule): ``\\<Experiment><Dataset><Method><Metric>``, e.g.
``\\MainFashionMnistAttnknnAcc`` (accuracy in %), ``...EceCal`` (ECE after temperature
scaling). Digits in names are spelled out (cifar10 -> CifarTen).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.base.files import write_text
from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.evaluation.metrics import N_BINS
from attnknn_lib.evaluation.reference import NLL_K_MAX
from attnknn_lib.report.tables import DIFF_FORMAT, latex_escape, sd_text, signed_bound
from attnknn_lib.training.recipe import Recipe

PATH_MARK = "\x00path:"  # values that are file paths: written verbatim (underscores kept)
DIGITS = {"0": "Zero", "1": "One", "2": "Two", "3": "Three", "4": "Four", "5": "Five", "6": "Six", "7": "Seven",
          "8": "Eight", "9": "Nine"}


def macro_name(*parts: str) -> str:
    """CamelCase of the parts with digits spelled out: ("table", "cifar10", "acc") -> TableCifarOneZeroAcc."""
    words = []
    for part in parts:
        for w in re.split(r"[^A-Za-z0-9]+", str(part)):
            w = "".join(DIGITS.get(ch, ch) for ch in w)
            if w:
                words.append(w[0].upper() + w[1:])
    return "".join(words)


def metric_macros(prefix: tuple[str, ...], entry: dict, key: str = "value") -> dict[str, str]:
    """Test metrics of one method: ``key`` = "value" (one run) or "mean" (over seeds, with ``...Sd``)."""
    raw, cal = entry["test_raw"], entry["test_calibrated"]
    out = {
        macro_name(*prefix, "Acc"): f"{100 * raw['accuracy'][key]:.2f}",
        macro_name(*prefix, "Fone"): f"{100 * raw['macro_f1'][key]:.2f}",
        macro_name(*prefix, "Ece"): f"{raw['ece'][key]:.4f}",
        macro_name(*prefix, "EceCal"): f"{cal['ece'][key]:.4f}",
        macro_name(*prefix, "Nll"): f"{raw['nll'][key]:.3f}",
        macro_name(*prefix, "NllCal"): f"{cal['nll'][key]:.3f}",
        macro_name(*prefix, "BrierCal"): f"{cal['brier'][key]:.4f}",
    }
    if key == "mean":
        out[macro_name(*prefix, "AccSd")] = sd_text(raw["accuracy"]["std"], 100, 2)
        out[macro_name(*prefix, "EceSd")] = sd_text(raw["ece"]["std"], 1, 4)
        out[macro_name(*prefix, "EceCalSd")] = sd_text(cal["ece"]["std"], 1, 4)
    else:
        out[macro_name(*prefix, "AccLow")] = f"{100 * raw['accuracy']['low']:.2f}"
        out[macro_name(*prefix, "AccHigh")] = f"{100 * raw['accuracy']['high']:.2f}"
    return out


# how a seed-level verdict (attnknn_lib.evaluation.verdicts) reads in "A is ... B"
VERDICT_PHRASES = {"better": "better than", "worse": "worse than", "equivalent": "equivalent to",
                   "inconclusive": "inconclusive against", "identical": "identical to",
                   "better, within the margin": "better (within the margin) than",
                   "worse, within the margin": "worse (within the margin) than"}


def verdict_words(macros: dict[str, str]) -> dict[str, str]:
    """``<name>Word`` = the bare verdict ("inconclusive", "better", ...) of every verdict-phrase macro
    ``<name>``, for a sentence that names what was compared before the parenthesis:
    "+0.01 points (inconclusive)" rather than "(inconclusive against it)"."""
    words = {phrase: word for word, phrase in VERDICT_PHRASES.items()}
    return {f"{k}Word": words[v] for k, v in macros.items() if k.endswith("Verdict") and v in words}


NUMBER_WORDS = ("none", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                "twelve")


def count_phrase(n: int, total: int) -> str:
    """How many of ``total`` in words, for a sentence that names the things next: "none of the six",
    "all three", "four of six" (digits past twelve)."""
    def word(x: int) -> str:
        return NUMBER_WORDS[x] if 0 < x < len(NUMBER_WORDS) else str(x)
    if n == 0:
        return f"none of the {word(total)}"
    return f"all {word(total)}" if n == total else f"{word(n)} of {word(total)}"


def count_macros(prefix: tuple[str, ...], counts: dict[str, list | None], total: int) -> dict[str, str]:
    """For each ``counts[key]`` (the things a method won; None where the record cannot say) two macros:
    ``<prefix><key>`` the number and ``<prefix><key>Words`` the :func:`count_phrase` of ``total``; '--' for None."""
    out = {}
    for key, won in counts.items():
        out[macro_name(*prefix, key)] = "--" if won is None else str(len(won))
        out[macro_name(*prefix, key, "Words")] = "--" if won is None else count_phrase(len(won), total)
    return out


def signed(value: float, decimals: int) -> str:
    """A signed number that never hides its sign behind a rounded zero: a value that is not zero but
    rounds to zero gets up to two more decimals (-0.004, not +0.00; :func:`~attnknn_lib.report.tables.
    signed_bound`), zero itself prints +0.00; "--" if NaN or None (strict JSON stores a one-seed
    record's missing interval as null)."""
    if value is None or value != value:
        return "--"
    return signed_bound(float(value), decimals)


def diff_macros(prefix: tuple[str, ...], d: dict) -> dict[str, str]:
    """A seed-level difference A - B (``d[split][metric]`` from :func:`~attnknn_lib.evaluation.verdicts.seed_level`):
    value and 95 % interval (accuracy in points, ECE / NLL as they are), the interval's half-width
    (what the seeds can resolve), and where the metric is judged (not ECE) the declared margin and the
    ``...Verdict`` phrase (better than / worse than / equivalent to / inconclusive against / identical to)."""
    out = {}
    for split, tag in (("raw", ""), ("calibrated", "Cal")):
        for metric, name in (("accuracy", "Acc"), ("ece", "Ece"), ("nll", "Nll"), ("brier", "Brier")):
            if metric == "brier" and metric not in d[split]:  # a record that judged no Brier score here
                continue
            scale, dec, _ = DIFF_FORMAT[metric]
            e = d[split][metric]
            out[macro_name(*prefix, name + tag)] = signed(None if e["value"] is None else scale * e["value"], dec)
            for part, word in (("low", "Low"), ("high", "High")):  # an end never rounds to a zero that hides its sign
                out[macro_name(*prefix, name + tag + word)] = "--" if e[part] is None or e[part] != e[part] else \
                    signed_bound(scale * e[part], dec)
            if e["low"] is not None and e["high"] is not None:  # what the seeds resolve: the interval's half-width
                out[macro_name(*prefix, name + tag, "Half Width")] = f"{scale * (e['high'] - e['low']) / 2:.{dec}f}"
                # the largest reduction of the metric (a gain for ECE and NLL) the interval leaves possible
                out[macro_name(*prefix, name + tag, "Gain Bound")] = f"{max(0.0, -scale * e['low']):.{dec}f}"
            if "verdict" in e:  # ECE is described only: no margin, no verdict
                out[macro_name(*prefix, name + tag, "Margin")] = f"{scale * e['margin']:.{dec}f}"
                out[macro_name(*prefix, name + tag, "Verdict")] = VERDICT_PHRASES[e["verdict"]]
    return out


def source_note(notebook: str, record_file: str) -> str:
    """A caption's pointer to its notebook and result file, e.g. Notebook \\texttt{02\\_k\\_sweep}, ..."""
    return (f"Notebook \\texttt{{{latex_escape(notebook.removesuffix('.ipynb'))}}}, "
            f"\\texttt{{{latex_escape(record_file)}}}")


def pct(x: float) -> str:
    """A share as a percentage with two decimals (0.9012 -> "90.12")."""
    return f"{100 * x:.2f}"


def dataset_free(experiment: str, dataset: str, macros: dict[str, str], file_stem: str) -> dict[str, str]:
    """Dataset-free names (``\\NoiseFashionMnistTrained...`` -> ``\\NoiseTrained...``, plus
    ``\\NoiseName`` and ``\\NoiseFile``), so the paper's text builds under every profile, whatever
    dataset the profile runs the experiment on."""
    prefix, short = macro_name(experiment, dataset), macro_name(experiment)
    out = {short + k[len(prefix):]: v for k, v in macros.items() if k.startswith(prefix)}
    out[macro_name(experiment, "Name")] = REGISTRY[dataset].title
    out[macro_name(experiment, "File")] = PATH_MARK + file_stem  # figures/<File>.pdf, tables/<File>.tex
    return out


def record_macros(records: list[dict], build: Callable[[dict], dict[str, str]], notebook: str,
                  record_file: Callable[[str], str], aliases: bool = True) -> dict[str, str]:
    """An experiment's macros over its records (one per dataset): ``build(record)``, the caption note
    ``\\<Experiment><Dataset>Source`` naming the notebook and results file (every figure caption in
    the paper points to its code in one hop) and, with ``aliases``, the :func:`dataset_free` names.
    ``record_file(dataset)`` is the record's path relative to the output root (the experiment's
    declared name for it)."""
    out: dict[str, str] = {}
    for record in records:
        name, ds = record["experiment"], record["dataset"]
        file = record_file(ds)
        made = {**build(record), macro_name(name, ds, "Source"): PATH_MARK + source_note(notebook, file)}
        out.update(made)
        if aliases:
            out.update(dataset_free(name, ds, made, Path(file).stem))
    return out


CONFIG_KNOBS = ("k", "epochs", "tabular_epochs", "n_boot", "embed_dim", "num_heads", "mixup_alpha",
                "contrastive_weight", "entropy_weight", "tta_views", "hold_frac", "final_lr_frac")


PROTOTYPE_REPORTED = {  # CIFAR-10 test numbers as the prototype's public release reports them (cited, not rerun)
    "Uniform Acc": "91.53", "Distance Acc": "91.52", "Attnknn Acc": "91.55", "Attnknn Ece": "0.08",
    "Attnknn Tta Acc": "90.99", "Attnknn Tta Ece": "0.027", "Cnn Acc": "96.51"}


def config_macros(config: dict) -> dict[str, str]:
    """The paper-wide ``\\Config...`` macros from a record's config (the recipe every experiment of a
    run shares): its knobs, and the attention's and training's fixed settings derived from it."""
    out = {macro_name("config", key): f"{config[key]:,}" if key == "n_boot" else f"{config[key]:g}"
           for key in CONFIG_KNOBS if key in config}  # records of older code lack the newer knobs
    recipe = Recipe(**{f.name: config[f.name] for f in fields(Recipe) if f.name in config})
    att, train = recipe.attention_config(num_classes=2), recipe.train_config("image", seed=0)
    out["ConfigTauMin"], out["ConfigTauMax"] = f"{att.tau_min:g}", f"{att.tau_max:g}"
    out["ConfigContrastiveTemperature"] = f"{train.contrastive_temperature:g}"
    out["ConfigGradClip"] = f"{train.grad_clip:g}"
    out["ConfigValPercent"] = f"{100 * recipe.val_fraction:g}"
    out["ConfigEceBins"] = str(N_BINS)
    out["ConfigKnobCap"] = f"{NLL_K_MAX:,}"  # the most neighbours a search that holds every weight reads at once
    out.update({macro_name("prototype reported", k): v for k, v in PROTOTYPE_REPORTED.items()})
    return out


def render_macros(macros: dict[str, str]) -> str:
    """The text of ``results/macros.tex``: sorted, one ``\\newcommand`` per line, values escaped
    (paths marked with :data:`PATH_MARK` verbatim) and straight double quotes set as TeX's opening and
    closing quotes (a straight one prints as a closing quote)."""
    lines = ["% Generated by attnknn_lib.report.macros from the results JSON of one run. Do not edit."]
    for k, v in sorted(macros.items()):
        value = v[len(PATH_MARK):] if v.startswith(PATH_MARK) else re.sub(r'"([^"]*)"', r"``\1''", latex_escape(v))
        lines.append(f"\\newcommand{{\\{k}}}{{{value}}}")
    return "\n".join(lines) + "\n"


def write_macros(macros: dict[str, str], path: str | Path) -> Path:
    """Write ``path`` atomically (see :func:`render_macros`)."""
    return write_text(path, render_macros(macros))


def _first_word(name: str) -> str:
    return re.match(r"[A-Z][a-z]*", name).group(0) if re.match(r"[A-Z]", name) else name


def used_by(macros: dict[str, str], tex: str, strict: bool = True) -> dict[str, str]:
    """The ``macros`` a LaTeX source names (``\\Name``), in their order. A name the source uses that
    begins like a generated one (the first word of some generated name, ``Main``, ``Noise``...) but is
    neither generated nor given a default by the source itself (``\\providecommand``, ``\\newcommand``,
    the paper's ``\\dashesfor``) raises :class:`~attnknn_lib.base.errors.ConfigError` when ``strict``
    (the paper is built from them): it would print an undefined number."""
    used = set(re.findall(r"\\([A-Za-z]+)", tex))
    provided = set(re.findall(r"\\(?:providecommand|newcommand|renewcommand|dashesfor)\{?\\([A-Za-z]+)", tex))
    prefixes = {_first_word(n) for n in macros}
    undefined = sorted(n for n in used - set(macros) - provided if _first_word(n) in prefixes)
    if undefined and strict:
        raise ConfigError(f"the paper uses {len(undefined)} macro(s) that the records do not define, e.g. "
                          f"\\{undefined[0]}: measure what defines them, or give a default in the paper "
                          f"(\\providecommand)")
    return {n: v for n, v in macros.items() if n in used}

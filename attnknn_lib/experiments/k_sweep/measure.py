"""k_sweep: the training runs it needs and the analysis that writes its record."""

from __future__ import annotations

import math

import numpy as np

from attnknn_lib.base.errors import ConfigError
from attnknn_lib.base.paths import Paths
from attnknn_lib.base.progress import bar
from attnknn_lib.base.runtime import seed_everything
from attnknn_lib.data.spec import prepare
from attnknn_lib.evaluation.bootstrap import paired_bootstrap_diff
from attnknn_lib.evaluation.calibration import Calibrator
from attnknn_lib.evaluation.methods import MethodProbs, attnknn_method, best_baseline, score
from attnknn_lib.evaluation.verdicts import VERDICTS, seed_difference
from attnknn_lib.experiments.common import record_verdicts
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.experiments.framework.declaration import Measurement
from attnknn_lib.experiments.framework.parts import part_result, part_seconds
from attnknn_lib.experiments.k_sweep.config import ARTIFACTS, COMPARED, LABELS, NAME, Config
from attnknn_lib.models import MultiHeadNeighbourAttention
from attnknn_lib.training.loops import train_attention_head


def runs(cfg: Config):
    """Main's Attn-KNN runs of the dataset (shared with main: trained once)."""
    return core.model_runs(cfg, core.data_spec(cfg, cfg.dataset), cfg.seeds, kinds=("attnknn",))


def k_grid(cfg: Config, n_train: int) -> tuple[list[int], int | None]:
    """The sorted k values (with round(sqrt(n)) when asked) and that k; one line if one is too big
    for the memory (a training query's neighbours exclude itself: k <= n - 2)."""
    k_sqrt = int(round(math.sqrt(n_train))) if cfg.sqrt_k else None
    ks = sorted(set(cfg.k_values) | ({k_sqrt} if k_sqrt else set()))
    if ks[-1] > n_train - 2:
        raise ConfigError(f"k_values: k={ks[-1]} is out of range; allowed: 1..{n_train - 2} for {n_train} training rows")
    return ks, k_sqrt


def _retrained(cfg: Config, emb, val, val_y, k: int, num_classes: int, seed: int, train_nb) -> tuple[MethodProbs, dict]:
    """A fresh attention trained at k on the frozen embedding (the training queries' neighbours
    exclude themselves) to a plateau of its validation score, evaluated at k."""
    seed_everything(seed)
    head = MultiHeadNeighbourAttention(cfg.attention_config(num_classes))
    res = train_attention_head(head, emb.bank, val, val_y, k, epochs=cfg.head_epochs, seed=seed,
                               train_neighbours=train_nb, val_neighbours=emb.neighbours[("val", "original")],
                               progress=False, patience=cfg.head_patience)
    info = {"history": res.history, "best_epoch": res.best_epoch, "seconds": round(res.seconds, 2),
            "temperatures": res.model.temperatures().tolist(),
            "plateau": len(res.history) - res.best_epoch >= cfg.head_patience}
    return attnknn_method(res.model, emb, k), info


def parts(cfg: Config) -> list[str]:
    """One part per seed (:mod:`~attnknn_lib.experiments.framework.parts`): the workflow runs them as jobs."""
    return [f"seed{seed}" for seed in cfg.seeds]


def measure_seed(cfg: Config, paths: Paths, seed: int) -> dict:
    """One seed at every k: its scored methods (``by_k``) and, per k, the test probabilities (raw,
    calibrated) of the best baseline and the compared methods, for the paired differences."""
    device = core.start(cfg)
    prepared = prepare(core.data_spec(cfg, cfg.dataset))
    ds = prepared.dataset
    ks, _ = k_grid(cfg, len(ds.train))
    run_ = core.model_runs(cfg, prepared.spec, (seed,), kinds=("attnknn",))[0]
    result, cached = core.trained(run_, paths, prepared)
    model = result.model.to(device)
    frozen = core.frozen_embeddings(run_, model, prepared, paths, device)
    emb = core.bank_of(frozen, ds.train.y, max(ks))
    retrain = cfg.retrain and cfg.seeds.index(seed) < cfg.retrain_seeds
    train_nb = emb.bank.search_excluding(frozen.train, max(ks), np.arange(len(ds.train))) if retrain else None
    out = {"loaded_from_cache": cached, "by_k": {}, "test_probs": {}}
    for k in bar(ks, desc=f"seed {seed}: k"):
        methods = core.vote_methods(emb, prepared, model.attention, k)
        head = None
        if retrain:
            methods["attnknn_retrained"], head = _retrained(cfg, emb, frozen.val, ds.val.y, k, ds.num_classes,
                                                            seed, train_nb)
        scored = score(methods, ds, n_boot=cfg.n_boot, seed=seed)
        for m in scored:
            scored[m]["label"] = LABELS[m]
        best = best_baseline(methods, ds.val.y, scored)
        out["by_k"][str(k)] = {"methods": scored, "best_baseline": best, "retrained_attention": head}
        out["test_probs"][k] = {("best baseline" if key == best else key):
                                (methods[key].test, Calibrator(**scored[key]["calibrator"]).apply(methods[key].test))
                                for key in (best, *COMPARED) if key in methods}
    return out


def run_part(cfg: Config, paths: Paths, part: str) -> dict:
    """Part ``seedN`` (see :func:`parts`), computed and stored unless stored under this config and code."""
    seed = int(part.removeprefix("seed"))
    return part_result(paths, cfg, NAME, part, lambda: measure_seed(cfg, paths, seed))


def run(cfg: Config, paths: Paths) -> dict:
    """Every seed (:func:`measure_seed`, stored by the workflow's part jobs or computed here), the
    summaries and paired differences; writes ``results/k_sweep_<dataset>.json`` and returns its record."""
    _, prov, clock = core.begin(cfg)
    prepared = prepare(core.data_spec(cfg, cfg.dataset))
    ds = prepared.dataset
    ks, k_sqrt = k_grid(cfg, len(ds.train))
    per_seed: dict[str, dict] = {}
    test_probs: dict[int, dict[str, list]] = {k: {} for k in ks}  # k -> key -> [(raw, calibrated) per seed]
    for seed in bar(cfg.seeds, desc="k-sweep (seed)"):
        part = part_result(paths, cfg, NAME, f"seed{seed}", lambda seed=seed: measure_seed(cfg, paths, seed))
        per_seed[str(seed)] = {"loaded_from_cache": part["loaded_from_cache"], "by_k": part["by_k"]}
        for k in ks:
            for name, probs in part["test_probs"][k].items():
                test_probs[k].setdefault(name, []).append(probs)
    summary = {str(k): core.aggregate_seeds({s: per_seed[s]["by_k"][str(k)]["methods"] for s in per_seed}) for k in ks}
    paired = {str(k): _paired(test_probs[k], ds.test.y, cfg.n_boot) for k in ks}
    results = {"dataset": ds.summary(), "seeds": list(cfg.seeds), "k_values": ks, "k_sqrt": k_sqrt,
               "training_k": cfg.k, "summary": summary, "paired": paired, "advantage": _advantage(paired),
               "per_seed": per_seed}
    results["verdicts"] = verdicts(results, cfg)
    # the record's wall time only reads the parts; what computing them took is kept beside it
    results["timings"] = {"seconds": clock(), "parts_seconds": part_seconds(paths, cfg, NAME, parts(cfg))}
    return core.write_record(paths, ARTIFACTS, cfg.dataset, cfg, prov, {cfg.dataset: prepared.fingerprint()}, results)[1]


def _paired(probs: dict[str, list], labels: np.ndarray, n_boot: int) -> dict:
    """Each compared method minus the best baseline, pooled over the seeds that have it."""
    out = {}
    base = probs["best baseline"]
    for m in COMPARED:
        if m not in probs:
            continue
        a = probs[m]
        out[m] = {split: paired_bootstrap_diff([p[j] for p in a], [p[j] for p in base[:len(a)]], labels,
                                               n_boot=n_boot, seed=0) for j, split in enumerate(("raw", "calibrated"))}
        out[m]["n_seeds"] = len(a)
    return out


def _advantage(paired: dict) -> dict:
    """For each compared method: the k where its accuracy gain over the best baseline is largest,
    and the k where its calibrated NLL gain is largest (differences pooled over seeds). k = 1 is
    left out: one neighbour gets all the weight under every rule, so the difference is 0 there."""
    out = {}
    for m in COMPARED:
        ks = [k for k in paired if m in paired[k] and int(k) > 1]
        if not ks:
            continue
        acc = {k: paired[k][m]["raw"]["accuracy"] for k in ks}
        nll = {k: paired[k][m]["calibrated"]["nll"] for k in ks}
        k_acc = max(ks, key=lambda k: acc[k]["value"])
        k_nll = min(ks, key=lambda k: nll[k]["value"])
        k_abs = max(ks, key=lambda k: abs(acc[k]["value"]))
        out[m] = {"accuracy": {"k": int(k_acc), **acc[k_acc]}, "nll_calibrated": {"k": int(k_nll), **nll[k_nll]},
                  "largest_accuracy_difference": {"k": int(k_abs), **acc[k_abs]}}
    return out


MEASUREMENT = Measurement(runs=runs, run=run, parts=parts, run_part=run_part)


JUDGED = {"raw": ("accuracy",), "calibrated": ("nll", "ece")}
"""The seed-level differences the record keeps, per split (test predictions as they are, after the
calibrator): accuracy as predicted, NLL and ECE (described, never judged) after calibration."""


def seed_verdicts(results: dict, method: str, metric: str = "accuracy", split: str = "raw",
                  margin: float | None = None) -> dict[str, dict]:
    """Per k: the seed-level verdict of ``method`` minus that seed's best baseline at k (chosen on
    validation), with the pooled paired bootstrap's standard error as the test points' share, against
    ``margin`` (None: the library's); k without the method are left out."""
    key = "test_raw" if split == "raw" else "test_calibrated"
    out = {}
    for k in map(str, results["k_values"]):
        seeds = [s for s in map(str, results["seeds"]) if method in results["per_seed"][s]["by_k"][k]["methods"]]
        if not seeds or method not in results["paired"][k]:
            continue
        cells = [results["per_seed"][s]["by_k"][k] for s in seeds]
        a = [c["methods"][method][key][metric]["value"] for c in cells]
        b = [c["methods"][c["best_baseline"]][key][metric]["value"] for c in cells]
        out[k] = seed_difference(a, b, metric, margin, test_se=results["paired"][k][method][split][metric]["se"])
    return out


def counted_words(verdicts: dict[str, dict]) -> list[str]:
    """The verdicts a count adds up, from :func:`seed_verdicts`: every k but k = 1, where one neighbour
    gets all the weight under every rule (the rules coincide), and no ``identical`` one."""
    return [d["verdict"] for k, d in verdicts.items() if int(k) > 1 and d["verdict"] in VERDICTS]


def seed_advantage(differences: dict) -> dict:
    """For each compared method, from its seed-level differences to the best baseline at each k > 1
    (``differences[method][split][metric][k]``; k = 1: one neighbour gets all the weight under every
    rule, so the difference is 0): the k of the largest accuracy gain, of the best calibrated NLL, and
    of the largest accuracy difference either way, each with its value and 95 % seed-level interval."""
    out = {}
    for m in COMPARED:
        acc = {k: d for k, d in differences[m]["raw"]["accuracy"].items() if int(k) > 1}
        nll = {k: d for k, d in differences[m]["calibrated"]["nll"].items() if int(k) > 1}
        if not acc:
            continue
        pick = {"accuracy": (acc, max(acc, key=lambda k: acc[k]["value"])),
                "nll_calibrated": (nll, min(nll, key=lambda k: nll[k]["value"])),
                "largest_accuracy_difference": (acc, max(acc, key=lambda k: abs(acc[k]["value"])))}
        out[m] = {what: {"k": int(k), **table[k]} for what, (table, k) in pick.items()}
    return out


def verdicts(results: dict, cfg: Config) -> dict:
    """Every verdict of the record, from its results and the config's margins:

    - ``differences[method][split][metric][k]``: each compared method minus the best baseline at k,
      seed-level (:func:`seed_verdicts`; the metrics of :data:`JUDGED`);
    - ``counted[method][metric]``: the verdicts its counts add up, accuracy and calibrated NLL
      (:func:`counted_words`);
    - ``seed_advantage[method]``: the k of its largest gain, best NLL and largest difference
      (:func:`seed_advantage`)."""
    differences = {m: {split: {metric: seed_verdicts(results, m, metric, split, cfg.margin(metric))
                               for metric in metrics} for split, metrics in JUDGED.items()} for m in COMPARED}
    counted = {m: {"accuracy": counted_words(d["raw"]["accuracy"]), "nll": counted_words(d["calibrated"]["nll"])}
               for m, d in differences.items()}
    return {"differences": differences, "counted": counted, "seed_advantage": seed_advantage(differences)}


def with_verdicts(record: dict) -> dict:
    """A k-sweep record measured before verdicts were stored, with them added and its config's margin
    knobs at their defaults (nothing is measured; see :mod:`~attnknn_lib.experiments.common.record_verdicts`)."""
    return record_verdicts.with_verdicts(record, Config, verdicts)

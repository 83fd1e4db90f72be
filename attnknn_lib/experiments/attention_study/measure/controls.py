"""The controls beside the frozen-memory study: the long-tailed memory, the end-to-end control and
the second dataset."""

from __future__ import annotations

import numpy as np
import torch

from attnknn_lib.base.paths import Paths
from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.data.spec import prepare
from attnknn_lib.evaluation.calibration import Calibrator
from attnknn_lib.evaluation.inference import attnknn_probs
from attnknn_lib.evaluation.methods import attnknn_method, best_baseline, knn_methods, score
from attnknn_lib.evaluation.verdicts import split_level
from attnknn_lib.experiments.attention_study.config import Config
from attnknn_lib.experiments.attention_study.measure.ceilings import (
    Knobs,
    ceilings,
    headroom_table,
    main_attention,
    reference_entry,
)
from attnknn_lib.experiments.attention_study.measure.learnable_headroom import LEARNERS, learners
from attnknn_lib.experiments.attention_study.measure.memory import _train_rows, memory_setting
from attnknn_lib.experiments.attention_study.measure.pairing import COMPARED, _paired
from attnknn_lib.experiments.attention_study.measure.training_runs import _end_to_end_run, runs, second_runs
from attnknn_lib.experiments.attention_study.measure.variants_at_k import setting_k
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.knn.bank import MemoryBank
from attnknn_lib.knn.votes import effective_neighbours

SECOND_METHODS = ("reference", "attnknn", "uniform", "learnable")  # the tuned vote, main's attention, the vote
# at k, and the better learner (of :data:`LEARNERS`, on its out-of-fold validation accuracy)
SECOND_DIFFS = ("attnknn", "uniform", "learnable")  # compared with the tuned vote, split-level


def second_dataset(cfg: Config, paths: Paths, name: str) -> dict:
    """The study's core comparison on a second dataset, so the conclusion does not rest on one image
    set: for each hold-out split, main's Attn-KNN (its attention at k on its own embedding), the
    uniform vote at k and the learnable headroom's learners (:data:`LEARNERS` at k, cross-fitted on
    the clean validation queries, the same budgets as on the first dataset) against the strongest
    rule that learns nothing, on the clean memory and with noise in the memory's labels (each split
    draws its own flips); validation and test labels clean. Verdicts are split-level (corrected
    resampled t: the splits share their data)."""
    cpu = torch.device("cpu")
    per_split, sizes = [], None
    for r, run_ in enumerate(second_runs(cfg, name)):
        prepared = prepare(run_.data)
        ds = prepared.dataset
        c = ds.num_classes
        sizes = (len(ds.test), len(ds.train))
        model = core.trained(run_, paths, prepared)[0].model.to(cpu)
        frozen = core.frozen_embeddings(run_, model, prepared, paths, cpu)
        clean = core.bank_of(frozen, ds.train.y, cfg.k, reference=True)
        k = min(cfg.k, len(ds.train) - 1)
        self_nb = clean.bank.search_excluding(frozen.train, max(k, cfg.loo_k + 1), np.arange(len(frozen.train)))
        val_nb, test_nb = (clean.neighbours[(split, "original")] for split in ("val", "test"))
        rows = _train_rows(len(frozen.train), cfg.train_queries, r)
        entry = {}
        for setting in cfg.settings:
            mem = memory_setting(frozen, ds.train.y, self_nb, val_nb, test_nb, ds.val.y, ds.test.y, rows, setting,
                                 c, cfg, r)
            emb = core.relabel(clean, mem.labels)
            ref = core.reference_of(emb, prepared)
            deeper = core.searcher(clean.bank, {"val": frozen.val, "test": frozen.test})
            methods = {"reference": ref, "attnknn": attnknn_method(model.attention, emb, cfg.k),
                       "uniform": knn_methods(emb, ds, cfg.k)["uniform"],
                       **learners(cfg, mem, k, ds, r, deeper, ref.info["choice"]["k"])}
            scored = score(methods, ds, n_boot=1, seed=r)  # split-level intervals: no test-point bootstrap
            best = max(LEARNERS, key=lambda n: scored[n]["val"]["accuracy"])
            entry[setting] = {m: {metric: scored[m][f"test_{split}"][metric]["value"] for metric, split in COMPARED}
                              for m in methods}
            entry[setting]["learnable"] = entry[setting][best]
            entry[setting]["learner"] = best
            entry[setting]["learner_val_accuracy"] = {n: scored[n]["val"]["accuracy"] for n in LEARNERS}
            entry[setting]["recall"] = float((mem.test.labels[:, :k] == ds.test.y[:, None]).any(1).mean())
            entry[setting]["reference_choice"] = ref.info["label"]
            entry[setting]["reference_k"] = ref.info["choice"]["k"]
            entry[setting]["reference_configs"] = ref.info["configs"]
            entry[setting]["budgets"] = methods["gbm"].info | methods["label_aware_heldout"].info
        per_split.append(entry)
    summary = {}
    for setting in cfg.settings:
        e = [p[setting] for p in per_split]
        summary[setting] = {
            "reference_k": [x["reference_k"] for x in e],
            "recall": float(np.mean([x["recall"] for x in e])),
            "learners": [x["learner"] for x in e],
            "mean": {m: {metric: float(np.mean([x[m][metric] for x in e])) for metric, _ in COMPARED}
                     for m in (*SECOND_METHODS, *LEARNERS)},
            **{f"{m}_vs_reference": {metric: split_level([x[m][metric] - x["reference"][metric] for x in e], *sizes,
                                                          metric, margin=cfg.margin(metric)) for metric, _ in COMPARED}
               for m in SECOND_DIFFS}}
    return {"dataset": name, "title": REGISTRY[name].title, "splits": len(per_split), "n_test": sizes[0],
            "n_train": sizes[1], "k": cfg.k, "per_split": per_split, "summary": summary}


def long_tail_entry(cfg: Config, paths: Paths, run_, seed: int) -> dict:
    """Headroom, ceilings and variants on the memory of a model retrained on the long-tailed subset
    (its own frozen embedding; clean labels; validation and test as in every setting)."""
    cpu = torch.device("cpu")
    prepared = prepare(run_.data)
    ds = prepared.dataset
    model = core.trained(run_, paths, prepared)[0].model.to(cpu)
    frozen = core.frozen_embeddings(run_, model, prepared, paths, cpu)
    k_max = min(cfg.k_max, len(frozen.train) - 1)
    bank = MemoryBank().build(frozen.train, ds.train.y)
    self_nb = bank.search_excluding(frozen.train, max(k_max, cfg.loo_k + 1), np.arange(len(frozen.train)))
    val_nb, test_nb = bank.search(frozen.val, k_max), bank.search(frozen.test, k_max)
    mem = memory_setting(frozen, ds.train.y, self_nb, val_nb, test_nb, ds.val.y, ds.test.y,
                         _train_rows(len(frozen.train), cfg.train_queries, seed), "clean", ds.num_classes, cfg, seed)
    ks = tuple(k for k in cfg.headroom_ks if k <= k_max)
    search = core.searcher(bank, {"val": frozen.val, "test": frozen.test})
    reference, ref_probs, nll_probs = reference_entry(cfg, mem, search, ds, seed)
    return {"headroom": headroom_table(mem, ks, ds.num_classes), "ceilings": ceilings(mem, ks, ds.num_classes),
            "flipped_share": 0.0, "memory_size": len(frozen.train), "run": run_.id, "reference": reference,
            "attnknn": main_attention(cfg, model.attention, bank, frozen, (val_nb, test_nb), ds, seed, ref_probs,
                                      reference_nll=nll_probs, knobs=Knobs(search, mem.loo, reference["k_searched"])),
            "variants": {str(k): setting_k(cfg, mem, k, ds, seed, with_adaptive=k == max(cfg.variant_ks),
                                           reference=ref_probs, reference_nll=nll_probs, search=search,
                                           k_ref=reference["choice"]["k"])
                         for k in cfg.variant_ks if k <= k_max}}


END_TO_END = {"prototype": "prototype recipe (entropy bonus, weight 0.01)", "no_bonus": "same, no entropy bonus"}


def end_to_end(cfg: Config, paths: Paths, prepared, models: dict, seed: int) -> dict:
    """Per jointly trained Attn-KNN (``models``: name -> (run, TrainResult); the prototype recipe
    and the same recipe without the entropy bonus): its own attention at k on its own embedding
    against the kNN rule tuned on that embedding (paired differences, accuracy raw, ECE and NLL
    after calibration), the effective k of its test weights, its temperatures and its per-epoch
    head entropy; and the no-bonus model minus the prototype on the same test points."""
    ds, cpu = prepared.dataset, torch.device("cpu")
    out: dict = {}
    probs = {}
    for name, (run_, res) in models.items():
        model = res.model.to(cpu)
        emb = core.bank_of(core.frozen_embeddings(run_, model, prepared, paths, cpu), ds.train.y, cfg.k)
        methods = core.vote_methods(emb, prepared, model.attention, cfg.k)
        scored = score(methods, ds, n_boot=cfg.n_boot, seed=seed)
        best = best_baseline(methods, ds.val.y, scored)
        _, w = attnknn_probs(model.attention, emb.bank, emb.test["original"], cfg.k,
                             neighbours=emb.neighbours[("test", "original")])
        cal = {m: Calibrator(**scored[m]["calibrator"]).apply(methods[m].test) for m in ("attnknn", best)}
        probs[name] = (methods["attnknn"].test, cal["attnknn"])
        out[name] = {
            "run": run_.id, "baseline_rule": best, "best_epoch": res.best_epoch, "epochs": len(res.history),
            "test_raw": scored["attnknn"]["test_raw"], "test_calibrated": scored["attnknn"]["test_calibrated"],
            "baseline_accuracy": scored[best]["test_raw"]["accuracy"]["value"],
            "effective_k": float(effective_neighbours(w).mean()),
            "temperatures": [row["temperatures"] for row in res.history],
            "head_entropy": [row.get("diag_head_entropy") for row in res.history],
            "diff": {"raw": _paired(cfg, methods["attnknn"].test, methods[best].test, ds.test.y, seed),
                     "calibrated": _paired(cfg, cal["attnknn"], cal[best], ds.test.y, seed)}}
    if len(probs) == 2:
        out["no_bonus_minus_prototype"] = {
            split: _paired(cfg, probs["no_bonus"][i], probs["prototype"][i], ds.test.y, seed)
            for i, split in enumerate(("raw", "calibrated"))}
    return out


def measure_end_to_end(cfg: Config, paths: Paths, seed: int) -> dict:
    """The end-to-end control of one seed (:func:`end_to_end`): main's Attn-KNN against the same
    recipe trained without the entropy bonus; a part of its own."""
    prepared = prepare(core.data_spec(cfg, cfg.dataset))
    run_ = runs(cfg)[cfg.seeds.index(seed)]
    control = _end_to_end_run(cfg, seed)
    return end_to_end(cfg, paths, prepared, {"prototype": (run_, core.trained(run_, paths, prepared)[0]),
                                             "no_bonus": (control, core.trained(control, paths, prepared)[0])}, seed)

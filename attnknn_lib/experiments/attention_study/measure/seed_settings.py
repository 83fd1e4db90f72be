"""One seed's part: its memory settings measured, with the gallery's cases and the seed's diagnostics.

Per setting: headroom, ceilings, references, main's Attn-KNN and the variants. The seed's first part
also gives its diagnostics and writes its neighbour lists."""

from __future__ import annotations

from attnknn_lib.base.files import write_npz
from attnknn_lib.base.paths import Paths
from attnknn_lib.base.progress import write
from attnknn_lib.base.timing import peak_memory_gb
from attnknn_lib.experiments.attention_study.config import NAME, Config
from attnknn_lib.experiments.attention_study.measure.ceilings import (
    Knobs,
    ceilings,
    headroom_table,
    main_attention,
    reference_entry,
)
from attnknn_lib.experiments.attention_study.measure.gallery import _gallery_k, gallery
from attnknn_lib.experiments.attention_study.measure.memory import seed_memory
from attnknn_lib.experiments.attention_study.measure.metric_learners import learned_metric_entry
from attnknn_lib.experiments.attention_study.measure.part_names import setting_chunks
from attnknn_lib.experiments.attention_study.measure.variants_at_k import setting_k
from attnknn_lib.knn.neighbourhood import Neighbourhood
from attnknn_lib.knn.votes import vote_has_gradient

DIAG_KEYS = ("diag_gradient_share", "train_entropy", "diag_head_entropy", "diag_score_spread",
             "diag_entropy_grad_ratio", "val_accuracy")


def diagnostics(history: list[dict], hoods: dict[str, Neighbourhood], k: int) -> dict:
    """Per epoch of main's Attn-KNN training: the :data:`DIAG_KEYS` and the temperatures; and the
    share of queries whose vote carries a gradient on each split of the trained embedding at k."""
    per_epoch = {key: [row.get(key) for row in history] for key in DIAG_KEYS}
    per_epoch["temperatures"] = [row["temperatures"] for row in history]
    shares = {s: float(vote_has_gradient(h.labels[:, :k], h.target).mean()) for s, h in hoods.items()}
    return {"per_epoch": per_epoch, "gradient_share": shares}


def measure_seed(cfg: Config, paths: Paths, seed: int, chunk: int = 0) -> dict:
    """One seed's memory settings of chunk ``chunk`` (:func:`setting_chunks`; the collapse sweep,
    long-tailed memory and end-to-end control are parts of their own): each setting's headroom,
    ceilings, references, main's Attn-KNN and variants; the gallery's cases on the first seed. The
    first chunk also gives the seed's diagnostics and writes its neighbour lists (with every setting's
    memory labels) under the artifacts."""
    sm = seed_memory(cfg, paths, seed)
    prepared, trained, frozen, bank = sm.prepared, sm.trained, sm.frozen, sm.bank
    val_nb, test_nb, search = sm.val_nb, sm.test_nb, sm.search
    ds = prepared.dataset
    c = ds.num_classes
    k_max = min(cfg.k_max, len(ds.train) - 1)
    k_gallery = _gallery_k(cfg)
    gallery_cases: dict = {}
    settings = {}
    scores_cache: dict = {}  # the attention's scores on this embedding: the settings differ only in labels
    for setting in setting_chunks(cfg)[chunk]:
        mem = sm.setting(cfg, setting, seed)
        entry = {"headroom": headroom_table(mem, tuple(k for k in cfg.headroom_ks if k <= k_max), c),
                 "ceilings": ceilings(mem, tuple(k for k in cfg.headroom_ks if k <= k_max), c),
                 "flipped_share": float(mem.flipped.mean())}
        entry["reference"], ref_probs, nll_probs = reference_entry(cfg, mem, search, ds, seed)
        # main's Attn-KNN (trained end to end on clean labels), voting over this memory's labels
        # and with the tuned vote's knobs (k, filter, prior chosen on validation); its scores shared by the settings
        knobs = Knobs(search, mem.loo, entry["reference"]["k_searched"], scores_cache)
        tuned: dict = {}
        entry["attnknn"] = main_attention(cfg, trained.model.attention, bank, frozen, (val_nb, test_nb), ds,
                                          seed, ref_probs, labels=mem.labels, reference_nll=nll_probs, knobs=knobs,
                                          keep=tuned)
        if cfg.learned_metrics:  # NCA and the linear probe on this memory, and the tuned attention against NCA
            entry["learned_metric"] = learned_metric_entry(cfg, sm, mem, seed, ref_probs, nll_probs, tuned.get("test"))
        if setting in cfg.variant_settings:
            kept: dict = {}
            entry["variants"] = {str(k): setting_k(cfg, mem, k, ds, seed, with_adaptive=k == max(cfg.variant_ks),
                                                   keep=kept if k == k_gallery and seed == cfg.seeds[0] else None,
                                                   reference=ref_probs, reference_nll=nll_probs,
                                                   search=search, k_ref=entry["reference"]["choice"]["k"])
                                 for k in cfg.variant_ks if k <= k_max}
            if kept:
                gallery_cases.update(gallery(mem, kept, setting, k_gallery, ds))
        settings[setting] = entry
        # one line per setting in the part job's log: where its time and memory go
        write(f"[attention_study] seed {seed}, {setting}: done, peak memory {peak_memory_gb():.1f} GB")
    out = {"per_seed": {"settings": settings}, "gallery_cases": gallery_cases}
    if chunk == 0:
        arrays = {}
        for setting in cfg.settings:  # every setting's labels: cheap beside its measurement
            mem = sm.setting(cfg, setting, seed)
            key = setting.replace("/", "_")
            arrays[f"memory_labels_{key}"] = mem.labels
            arrays[f"flipped_{key}"] = mem.flipped
        clean = sm.setting(cfg, "clean", seed)
        hoods = {"train": clean.train, "val": clean.val, "test": clean.test}
        out["per_seed"].update({"diagnostics": diagnostics(trained.history, hoods, cfg.k),
                                "best_epoch": trained.best_epoch})
        write_npz(paths.artifacts / f"{NAME}_{cfg.dataset}_s{seed}_neighbours.npz", test_labels=ds.test.y,
                  test_neighbour_rows=test_nb.rows, test_neighbour_sq_dist=test_nb.sq_dist,
                  test_neighbour_labels=ds.train.y[test_nb.rows], memory_ids=ds.train.ids, **arrays)
    return out

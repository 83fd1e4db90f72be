"""noise: the training runs it needs and the analysis that writes its record."""

from __future__ import annotations

import numpy as np

from attnknn_lib.base.paths import Paths
from attnknn_lib.data.spec import load_base, prepare
from attnknn_lib.evaluation.inference import attnknn_probs
from attnknn_lib.evaluation.methods import MethodProbs, best_baseline, score
from attnknn_lib.experiments.common import record_verdicts
from attnknn_lib.experiments.common import shared as core
from attnknn_lib.experiments.common.robustness import (
    run_settings,
    settings_verdicts,
)
from attnknn_lib.experiments.framework.declaration import Measurement
from attnknn_lib.experiments.noise.config import ARTIFACTS, LABELS, SETTINGS, WEIGHTED, Config
from attnknn_lib.knn.votes import (
    cosine_from_sq_dist,
    cosine_weights,
    distance_weights,
    effective_neighbours,
    uniform_weights,
)


def runs(cfg: Config):
    """Main's Attn-KNN and CNN (setting bank) and the models retrained on noisy labels."""
    return cfg.runs_for(cfg.conditions(cfg.retrain_spec(), cfg.retrain_rates))


def flipped_weight_ratio(weights: np.ndarray, flipped: np.ndarray) -> dict:
    """Mean weight of flipped vs clean neighbours. weights, flipped: (B, k) (a weight per
    neighbour; whether that neighbour's memory label was flipped). Returns the ratio of the two
    means, the share of the total weight on flipped neighbours, the share of flipped neighbours,
    and the mean effective number of neighbours exp(H(w)) (k for uniform weights)."""
    w, f = np.asarray(weights, dtype=np.float64), np.asarray(flipped, dtype=bool)
    out = {"flipped_share_of_neighbours": float(f.mean()), "weight_share_on_flipped": float(w[f].sum() / w.sum()),
           "effective_neighbours": float(effective_neighbours(w).mean())}
    out["ratio"] = float(w[f].mean() / w[~f].mean()) if f.any() and (~f).any() else float("nan")
    return out


def _weights(methods: dict[str, MethodProbs], attention, emb, k: int) -> dict[str, np.ndarray]:
    """Each rule's (N_test, k) neighbour weights on the test queries, with its tuned knob."""
    nb = emb.neighbours[("test", "original")]
    d = nb.sq_dist[:, :k]
    return {"attnknn": attnknn_probs(attention, emb.bank, emb.test["original"], k, neighbours=nb)[1],
            "distance": distance_weights(np.sqrt(np.maximum(d, 0.0)), methods["distance"].info["param"]),
            "cosine": cosine_weights(cosine_from_sq_dist(d), methods["cosine"].info["param"]),
            "uniform": uniform_weights(d.shape)}


def evaluate(cfg: Config, emb, prepared, attention, cnn: MethodProbs, seed: int) -> dict:
    """Every method on one (possibly noisy) bank: scored, the best baseline, the weight ratios."""
    ds = prepared.dataset
    methods = core.vote_methods(emb, prepared, attention, cfg.k, cnn, reference=True)
    # calibrators see clean labels only (a slice of validation); the knobs were tuned on the noisy ones
    scored = score(methods, ds, n_boot=cfg.n_boot, seed=seed,
                   calibration=cfg.calibration_slice(prepared.clean_val_y, seed))
    best = best_baseline(methods, ds.val.y, scored)
    scored["best_baseline"] = {**scored[best], "info": {"rule": best}}
    for m in scored:
        scored[m]["label"] = LABELS[m]
    flipped = prepared.flipped[emb.neighbours[("test", "original")].rows[:, :cfg.k]]  # (N_test, k)
    ratios = {m: flipped_weight_ratio(w, flipped) for m, w in _weights(methods, attention, emb, cfg.k).items()}
    return {"methods": scored, "best_baseline": best, "weights": ratios}


def _summarise(per_seed: dict[str, dict]) -> dict:
    """Means over seeds of one (setting, kind, rate) cell."""
    seeds = list(per_seed)
    ratios = {m: [per_seed[s]["weights"][m]["ratio"] for s in seeds] for m in WEIGHTED}
    eff = {m: float(np.mean([per_seed[s]["weights"][m]["effective_neighbours"] for s in seeds])) for m in WEIGHTED}
    return {"summary": core.aggregate_seeds({s: per_seed[s]["methods"] for s in seeds}),
            "best_baseline": [per_seed[s]["best_baseline"] for s in seeds],
            # the tuned vote's chosen k and any grid edge it still sits on, per seed
            "reference_k": [per_seed[s]["methods"]["reference"]["info"]["choice"]["k"] for s in seeds],
            "reference_edges": [per_seed[s]["methods"]["reference"]["info"]["edges"] for s in seeds],
            "weight_ratio": {m: {"mean": float(np.mean(v)), "values": v} for m, v in ratios.items()},
            "effective_neighbours": eff,
            "flipped_share_of_neighbours": float(np.mean([per_seed[s]["weights"]["uniform"]
                                                          ["flipped_share_of_neighbours"] for s in seeds]))}


COMPARED = (("attnknn", "reference"), ("attnknn", "best_baseline"))
"""The verdicts of every cell: Attn-KNN minus the tuned vote (the reference of every claim) and minus
the vote at k chosen on validation (the fixed-k vote)."""


def verdicts(results: dict, cfg: Config) -> dict:
    """Every verdict of the record, from its results and the config's margins: for each setting and
    condition, the method its claims read against (``reference``: the tuned vote, or in a record from
    before it the best kNN vote) and Attn-KNN minus it and minus the fixed-k vote, accuracy and
    calibrated ECE (:func:`~attnknn_lib.experiments.common.robustness.settings_verdicts`)."""
    return settings_verdicts(results, cfg, COMPARED)


def with_verdicts(record: dict) -> dict:
    """A noise record measured before verdicts were stored, with them added and its config's margin
    knobs at their defaults (nothing is measured; see :mod:`~attnknn_lib.experiments.common.record_verdicts`)."""
    return record_verdicts.with_verdicts(record, Config, verdicts)


class _RelabelledBank:
    """Noise changes labels only: search main's memory once per seed, then relabel it per condition."""

    def __init__(self, cfg: Config):
        self.k, self.labels = cfg.k, prepare(cfg.main_spec(), load_base(cfg.main_spec())).dataset.train.y
        self.frozen, self.bank = None, None

    def __call__(self, frozen, noisy):
        if frozen is not self.frozen:
            self.frozen, self.bank = frozen, core.bank_of(frozen, self.labels, self.k, reference=True)
        return core.relabel(self.bank, noisy.dataset.train.y)


def run(cfg: Config, paths: Paths) -> dict:
    """Both settings; writes ``results/noise_<dataset>.json`` and returns its record."""
    return run_settings(
        cfg, paths, ARTIFACTS, bank_specs=cfg.conditions(cfg.main_spec(), cfg.rates),
        memory=_RelabelledBank(cfg), evaluate=evaluate, summarise=_summarise, verdicts=verdicts,
        trained_specs=cfg.conditions(cfg.retrain_spec(), cfg.retrain_rates),
        about={"bank": {"description": SETTINGS["bank"], "rates": list(cfg.rates)},
               "trained": {"description": SETTINGS["trained"], "rates": list(cfg.retrain_rates)}},
        kinds=list(cfg.kinds),
        calibration={"fitted_on": "clean labels of a seeded slice of the validation rows (the knobs are tuned on "
                                  "the noisy validation labels)", "share": cfg.calibration_share})


MEASUREMENT = Measurement(runs=runs, run=run)

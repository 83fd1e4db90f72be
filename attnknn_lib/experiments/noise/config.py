"""noise: its name, notebook, config and output names (the declaration reads them)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from attnknn_lib.base.errors import ConfigError, check_choice, check_range
from attnknn_lib.base.knobs import csv, float_csv, knob
from attnknn_lib.data.label_noise import NOISE_KINDS
from attnknn_lib.data.spec import DataSpec
from attnknn_lib.evaluation.methods import method_labels
from attnknn_lib.evaluation.verdicts import MARGINS
from attnknn_lib.experiments.common.robustness import (
    RobustnessConfig,
)
from attnknn_lib.experiments.framework.declaration import Artifacts, figure, record, table

NAME = "noise"
NOTEBOOK = "03_noise.ipynb"
SETTINGS = {"bank": "noise in the memory bank only (models trained on clean labels)",
            "trained": "models retrained on the noisy labels"}
LABELS = method_labels("uniform", "distance", "cosine", "best_baseline", "reference", "attnknn", "cnn")
WEIGHTED = ("attnknn", "distance", "cosine", "uniform")  # rules whose neighbour weights are compared
ARTIFACTS = Artifacts(NAME, (record(), table("table"), table("weights", "_weights"), figure("figure")))
# no weights figure: every flipped / clean weight ratio sits within a fraction of a percent of 1 (the table shows it)


def _grid(cfg: Config, rates: tuple[float, ...]) -> list[tuple[str, float]]:
    """(kind, rate) pairs; rate 0 once (kind 'none'), whatever the kinds."""
    out = [("none", 0.0)] if 0.0 in rates else []
    return out + [(kind, r) for kind in cfg.kinds for r in rates if r > 0]


@dataclass(frozen=True)
class Config(RobustnessConfig):
    """Label-noise knobs on top of the shared recipe and the robustness settings."""

    kinds: tuple[str, ...] = knob(NOISE_KINDS, "noise kinds: symmetric, asymmetric (c to c+1)")
    rates: tuple[float, ...] = knob((0.0, 0.1, 0.2, 0.3, 0.4), "noise rates of setting bank")
    retrain_rates: tuple[float, ...] = knob((0.0, 0.4), "noise rates of setting trained (each costs 5 seeds x 2 kinds x 2 "
                                                        "models; rate 0 is main's models when trained like them)")
    # setting trained: the full training set and main's recipe (the embedding itself learns from
    # the noisy labels, where attention could pay off), not the robustness default's short subset
    retrain_max_train: int = knob(0, "training rows of setting trained before the noise (0 keeps the recipe's)")
    retrain_epochs: int = knob(0, "epochs of setting trained (0 keeps the recipe's)")
    noise_seed: int = knob(0, "seed offset of the noise draw: seed s flips the labels drawn with offset + s "
                              "(the same flips for both models of a seed)")
    calibration_share: float = knob(0.2, "share of the validation rows whose clean labels fit every calibrator (a "
                                         "small trusted set; the knobs are tuned on the noisy labels)")
    margin_accuracy: float = knob(MARGINS["accuracy"], "equivalence margin of accuracy differences (0.0025 is 0.25 pp)")

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "kinds", csv(self.kinds, "noise kinds, e.g. symmetric,asymmetric"))
        object.__setattr__(self, "rates", float_csv("rates", self.rates, 0.0, 0.95))
        object.__setattr__(self, "retrain_rates", float_csv("retrain_rates", self.retrain_rates, 0.0, 0.95))
        if not self.kinds:
            raise ConfigError(f"kinds='' is empty; give one or both of: {', '.join(NOISE_KINDS)}")
        for kind in self.kinds:
            check_choice("kinds", kind, NOISE_KINDS)
        check_range("noise_seed", self.noise_seed, 0, None)
        check_range("calibration_share", self.calibration_share, 0.0, 1.0, low_inclusive=False)

    def conditions(self, spec: DataSpec, rates: tuple[float, ...]):
        """seed -> {"kind/rate": the noisy ``spec``}: each seed draws its own flips, shared by its models."""
        return lambda seed: {f"{kind}/{rate:g}": self.noisy(spec, kind, rate, seed) for kind, rate in _grid(self, rates)}

    def calibration_slice(self, clean_val_y: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, clean labels) of the validation slice the calibrators are fitted on: a seeded
        ``calibration_share`` of the rows (at least one), the same at every rate of a seed."""
        n = len(clean_val_y)
        rows = np.sort(np.random.default_rng(self.noise_seed + seed).permutation(n)[:max(1, round(self.calibration_share * n))])
        return rows, clean_val_y[rows]

    def noisy(self, spec: DataSpec, kind: str, rate: float, seed: int) -> DataSpec:
        """``spec`` with this noise in the training and validation labels (rate 0: unchanged)."""
        if rate == 0:
            return spec
        return replace(spec, noise=kind, noise_rate=rate, noisy_val=True, prep_seed=self.noise_seed + seed)

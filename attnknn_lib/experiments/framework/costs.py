"""What training a missing model costs, from the committed records: each model is costed by its
own kind (dataset and model kind) at the seconds per epoch its kind took in main's committed run,
times the epochs it is set to train. Tabular and image models differ by a factor of a hundred, so a
mean over every training job misleads."""

from __future__ import annotations

import functools

import numpy as np

from attnknn_lib.base.errors import CorruptFileError
from attnknn_lib.base.files import read_json
from attnknn_lib.base.paths import REPO_ROOT


@functools.lru_cache(maxsize=1)
def epoch_seconds() -> dict[tuple[str, str], float]:
    """{(dataset, model kind): mean seconds per training epoch} over main's committed records."""
    got: dict[tuple[str, str], list[float]] = {}
    for path in sorted((REPO_ROOT / "results").glob("main_*.json")):
        try:
            record = read_json(path)
        except CorruptFileError:
            continue
        dataset = record.get("dataset")
        for seed in (record.get("results") or {}).get("per_seed", {}).values():
            for kind, t in (seed.get("training") or {}).items():
                if t.get("seconds") and t.get("history"):
                    got.setdefault((dataset, "attnknn" if kind == "fixed_vote" else kind), []).append(
                        t["seconds"] / len(t["history"]))
    return {key: float(np.mean(v)) for key, v in got.items()}


def model_seconds(run) -> float | None:
    """Seconds to train ``run`` (a :class:`~attnknn_lib.training.runs.TrainingRun`) by its kind, None
    when no committed run of that kind says."""
    per_epoch = epoch_seconds().get((run.data.name, run.kind))
    epochs = run.train.get("epochs")
    return per_epoch * epochs if per_epoch and epochs else None


def training_text(runs: list, cache) -> str:
    """'6 models to train, about 40 min' for the runs of ``runs`` missing from the model cache folder
    ``cache`` (empty when none is missing)."""
    missing = [r for r in runs if not (cache / r.id / "train.json").exists()]
    if not missing:
        return ""
    known = [s for r in missing if (s := model_seconds(r)) is not None]
    cost = f", about {sum(known) / 60:.0f} min" if known else ""
    return f"{len(missing)} model{'s' if len(missing) > 1 else ''} to train{cost}"

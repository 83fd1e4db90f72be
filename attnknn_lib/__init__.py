"""Attn-KNN paper library: learned attention over k nearest neighbours, fair kNN baselines, the
experiments of the paper and the workflow that runs them.

The folders are layers. A module imports from its own layer and the layers below it, never from
one above (``import-linter`` checks this in ``./run_all.sh test``; the contracts are in
``pyproject.toml``). Highest first:

- ``tooling``: what times and checks a run: the bench, the profiler, the GPU checks, the reproducibility view
- ``workflow``: the command line behind ./run_all.sh, profiles, the plan and the jobs Snakemake runs
- ``experiments``: one module per experiment (config, runs, analysis, figures, tables, macros)
- ``report``: generic tables, figures, macros and the README block; names no experiment
- ``training``: training loops, the shared recipe, training runs, the model cache, the one-run job
- ``evaluation``: metrics, calibration, inference with trained models, the compared methods
- ``knn``: the FAISS memory, voting rules, top-k attention, index costs
- ``models``: backbones, embedder, neighbour attention, Attn-KNN, the CNN baseline, losses
- ``data``: datasets, tensors and augmentation, label noise, imbalance, the data spec
- ``base``: errors, atomic files, paths, provenance, seeds / threads / device, progress, timing

Why this order: the tooling times and checks what the workflow runs (with its profiles and plan),
and nothing but the tests imports it, so it sits on top; training selects checkpoints with
evaluation's metrics and votes with its inference helpers, so evaluation sits below training; the
experiments build their tables and figures with the report's generic helpers, so the report sits
below the experiments. Notebooks hold the narrative and call into ``attnknn_lib.experiments``;
every number is computed here.
"""

__version__ = "0.1.0"

LAYERS = ("tooling", "workflow", "experiments", "report", "training", "evaluation", "knn", "models", "data", "base")
"""The subpackages, highest layer first (the order of the import-linter ``layers`` contract)."""

"""Efficiency (notebook ``05_efficiency``): what the memory and the vote cost.

* FAISS indexes (Flat L2, Flat IP, HNSW over efConstruction x efSearch, IVF-Flat over nprobe) on
  the real embeddings of main's model: build time, search time per query batched and one query
  at a time, recall@k against exact search, bytes per stored vector and the memory size at which
  each stops fitting in this machine's RAM (computed, not run).
* The same indexes on synthetic unit vectors from n = 10^3 up to the profile's largest n, with
  power-law slopes fitted on log-log axes.
* This machine's fp32 GEMM throughput, measured in the same run: exact batched search is a GEMM
  plus a top-k, so its achieved FLOP rate over the GEMM's is the yardstick (``flat_search_over_gemm``).
  FAISS Flat against the torch matmul + top-k the training step uses, at the sizes each serves.
* Where one prediction's time goes: embedding forward pass, search, attention vote, against the
  distance vote (and the CNN's forward pass as a reference); training seconds per epoch of
  Attn-KNN and of the CNN from main's training histories.
"""

from attnknn_lib.experiments.efficiency import measure, views
from attnknn_lib.experiments.efficiency.config import ARTIFACTS, NAME, NOTEBOOK, Config
from attnknn_lib.experiments.framework.declaration import Experiment, Views

EXPERIMENT = Experiment(
    name=NAME, notebook=NOTEBOOK, Config=Config, measurement=measure.MEASUREMENT, artifacts=ARTIFACTS, views=Views(macros=views.macros, readme_lines=views.readme_lines, readme_section="Cost and theory"),
    question="FAISS Flat / HNSW / IVF on the real embeddings and on synthetic unit vectors up to n = 10^5 (build, search "
             "batched and one query at a time, recall@10, bytes per vector, log-log slopes); exact search against this "
             "machine's GEMM; where one prediction's time goes; training s/epoch",
    models="main's",
)

"""efficiency: its name, notebook, config and output names (the declaration reads them)."""

from __future__ import annotations

from dataclasses import dataclass

from attnknn_lib.base.errors import ConfigError, check_choice, check_range
from attnknn_lib.base.knobs import int_csv, knob
from attnknn_lib.data.registry import DATASET_NAMES
from attnknn_lib.experiments.common.shared import ExperimentConfig
from attnknn_lib.experiments.framework.declaration import Artifacts, figure, record, table
from attnknn_lib.knn.index_costs import (
    IndexSetting,
)

NAME = "efficiency"
NOTEBOOK = "05_efficiency.ipynb"

TIMED = ("results.gemm", "results.search_engines", "results.prediction", "results.training",
         "results.synthetic.by_index.*.fit", "results.default_hnsw.speedup_over_flat_single")

ARTIFACTS = Artifacts(NAME, (record(), table("indexes", "_indexes"), table("costs", "_costs"),
                             table("throughput", "_throughput"), figure("figure"), figure("scaling", "_scaling")))


@dataclass(frozen=True)
class Config(ExperimentConfig):
    """The efficiency experiment's own knobs on top of the shared recipe (which names main's models)."""

    dataset: str = knob("fashion_mnist", "dataset whose trained main models are measured")
    seeds: tuple[int, ...] = knob((0, 1, 2), "seeds of main's models: the first one's embeddings are indexed, all give training times")
    recall_k: int = knob(10, "neighbours per query for recall@k and the index timings")
    hnsw_m: int = knob(32, "HNSW graph degree M")
    ef_construction: tuple[int, ...] = knob((40, 200), "HNSW efConstruction values (comma-separated)")
    ef_search: tuple[int, ...] = knob((16, 32, 64, 128, 256), "HNSW efSearch values (comma-separated)")
    nprobe: tuple[int, ...] = knob((1, 2, 4, 8, 16, 32, 64), "IVF-Flat nprobe values (comma-separated)")
    queries: int = knob(2000, "test queries for the batched timings and recall")
    single_queries: int = knob(200, "queries timed one at a time")
    synthetic_sizes: tuple[int, ...] = knob((1000, 3000, 10000, 30000, 100000), "bank sizes n of the synthetic unit vectors")
    synthetic_queries: int = knob(1000, "queries on the synthetic banks")
    repeats: int = knob(3, "timed repeats (the median is reported)")
    gemm_size: int = knob(2048, "side of the square fp32 GEMM that measures this machine's throughput")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("seeds", "ef_construction", "ef_search", "nprobe", "synthetic_sizes"):
            object.__setattr__(self, name, int_csv(name, getattr(self, name)))
        check_choice("dataset", self.dataset, DATASET_NAMES)
        for name in ("recall_k", "hnsw_m", "queries", "single_queries", "synthetic_queries", "repeats", "gemm_size"):
            check_range(name, getattr(self, name), 1, None)
        for name in ("ef_construction", "ef_search", "nprobe"):
            if min(getattr(self, name)) < 1:
                raise ConfigError(f"{name}={','.join(map(str, getattr(self, name)))} is not allowed; every value must be >= 1")
        if min(self.synthetic_sizes) < 2 * max(self.recall_k, 39):
            raise ConfigError(f"synthetic_sizes={','.join(map(str, self.synthetic_sizes))} is not allowed; every n must "
                              f"be >= {2 * max(self.recall_k, 39)} (twice recall_k and IVF's 39 points per list)")

    def default_hnsw(self) -> IndexSetting:
        """The memory's HNSW setting (MemoryBank's defaults with this M)."""
        return IndexSetting("hnsw", m=self.hnsw_m)

    def settings(self) -> list[IndexSetting]:
        """Every index setting measured on the real embeddings."""
        out = [IndexSetting("flat_l2"), IndexSetting("flat_ip")]
        out += [IndexSetting("hnsw", m=self.hnsw_m, ef_construction=c, ef_search=s)
                for c in self.ef_construction for s in self.ef_search]
        out += [IndexSetting("ivf_flat", nprobe=p) for p in self.nprobe]
        return out

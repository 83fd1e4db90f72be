"""The bench's micro-benchmarks: search, votes and training steps on synthetic data, as ratios to this machine's GEMM."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnknn_lib.base.errors import AttnKNNError, check_range
from attnknn_lib.base.runtime import channels_last, to_device
from attnknn_lib.base.timing import median_seconds
from attnknn_lib.data.transforms import BatchAugment
from attnknn_lib.evaluation.inference import embed
from attnknn_lib.experiments.efficiency.config import Config as EfficiencyConfig
from attnknn_lib.experiments.efficiency.measure import gemm_yardstick
from attnknn_lib.knn.index_costs import unit_vectors
from attnknn_lib.knn.votes import distance_weights, vote
from attnknn_lib.models import AttentionConfig, MultiHeadNeighbourAttention, attend, build_attnknn, build_cnn
from attnknn_lib.models.losses import supervised_contrastive, vote_nll
from attnknn_lib.training.loops import TrainConfig, cpu_has_bf16, training_neighbours
from attnknn_lib.training.recipe import Recipe


@dataclass(frozen=True)
class BenchConfig:
    bank: int = 54_000  # the cpu profile's Fashion-MNIST memory
    dim: int = 128
    queries: int = 2_000
    single_queries: int = 100  # one-at-a-time calls timed per repeat
    k: int = 16
    num_classes: int = 10
    gemm_size: int = 2048
    repeats: int = 5
    smoke: bool = True  # run the smoke workflow (about 5 minutes here)

    def __post_init__(self) -> None:
        for name in ("bank", "dim", "queries", "single_queries", "k", "gemm_size", "repeats"):
            check_range(name, getattr(self, name), 1, None)
        check_range("num_classes", self.num_classes, 2, None)
        check_range("k", self.k, 1, self.bank)


def naive_vote(weights: np.ndarray, labels: np.ndarray, num_classes: int) -> np.ndarray:
    """The vote as a per-row, per-neighbour Python loop: p[i, y_ij] += w_ij (the yardstick)."""
    probs = np.zeros((len(weights), num_classes))
    for i in range(len(weights)):
        for j in range(weights.shape[1]):
            probs[i, labels[i, j]] += weights[i, j]
    return probs


def search_vs_gemm(cfg: BenchConfig) -> dict:
    """Exact batched search (FAISS Flat L2 and IP) in GFLOP/s against a square fp32 GEMM."""

    bank, queries = unit_vectors(cfg.bank, cfg.dim, seed=0), unit_vectors(cfg.queries, cfg.dim, seed=1)
    eff = EfficiencyConfig(gemm_size=cfg.gemm_size, repeats=cfg.repeats, recall_k=10)
    return gemm_yardstick(eff, bank, queries)


def votes(cfg: BenchConfig) -> dict:
    """µs per query: attention vote vs distance vote (batched and single), vectorised vs naive vote."""

    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    b, k, d, c = cfg.queries, cfg.k, cfg.dim, cfg.num_classes
    q = torch.nn.functional.normalize(torch.randn(b, d), dim=1)  # (B, D)
    nb = torch.nn.functional.normalize(q[:, None, :] + 0.3 * torch.randn(b, k, d), dim=2)  # (B, k, D)
    sq = ((nb - q[:, None, :]) ** 2).sum(-1).sort(dim=1).values.numpy()  # (B, k), nearest first
    labels = rng.integers(0, c, size=(b, k))
    y = torch.from_numpy(labels)
    att = MultiHeadNeighbourAttention(AttentionConfig(num_classes=c, embed_dim=d)).eval()

    def attention(s: slice) -> np.ndarray:
        with torch.no_grad():
            return attend(att, q[s], nb[s], y[s]).probs.numpy()

    def distance(s: slice) -> np.ndarray:
        return vote(distance_weights(np.sqrt(sq[s]), 0.1), labels[s], c)

    ones = [slice(i, i + 1) for i in range(min(cfg.single_queries, b))]
    us = {}
    for name, fn in (("attention", attention), ("distance", distance)):
        us[f"{name}_batched"] = 1e6 * median_seconds(lambda: fn(slice(None)), cfg.repeats) / b
        us[f"{name}_single"] = 1e6 * median_seconds(lambda: [fn(s) for s in ones], cfg.repeats) / len(ones)
    w = distance_weights(np.sqrt(sq), 0.1)
    us["vote_vectorised"] = 1e6 * median_seconds(lambda: vote(w, labels, c), cfg.repeats) / b
    us["vote_naive_loop"] = 1e6 * median_seconds(lambda: naive_vote(w, labels, c), max(1, cfg.repeats // 2)) / b
    if not np.allclose(vote(w, labels, c), naive_vote(w, labels, c)):
        raise AttnKNNError("the vectorised vote and the per-row loop disagree")  # a benchmark of a wrong result is void
    return {"us_per_query": us, "k": k, "queries": b,
            "attention_over_distance_batched": us["attention_batched"] / us["distance_batched"],
            "attention_over_distance_single": us["attention_single"] / us["distance_single"],
            "naive_over_vectorised": us["vote_naive_loop"] / us["vote_vectorised"]}


def _median_ms(fn, repeats: int) -> float:
    return 1e3 * median_seconds(fn, repeats)


def training_throughput(cfg: BenchConfig, gemm_gflops: float) -> dict:
    """One training step of each model, the augmentation and the clean-memory embedding, on synthetic
    Fashion-MNIST-shaped batches in the training loops' memory format (see the module docstring)."""
    from types import SimpleNamespace

    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    b = 256
    recipe = Recipe()
    x = to_device(torch.randn(b, 1, 28, 28), "cpu")
    y = torch.randint(0, cfg.num_classes, (b,))
    image = SimpleNamespace(kind="image", name="synthetic", input_shape=(1, 28, 28), mean=(0.286,), std=(0.353,))
    augment = BatchAugment(image)
    gen = torch.Generator().manual_seed(0)
    cnn = channels_last(build_cnn("small_cnn", (1, 28, 28), cfg.num_classes, widths=list(recipe.widths())))
    attn = channels_last(build_attnknn("small_cnn", (1, 28, 28), recipe.attention_config(cfg.num_classes),
                                       widths=list(recipe.widths())))
    bank = torch.from_numpy(unit_vectors(cfg.bank, recipe.embed_dim, seed=0))
    bank_labels = torch.randint(0, cfg.num_classes, (cfg.bank,))
    opts = {"cnn": torch.optim.AdamW(cnn.parameters()), "attnknn": torch.optim.AdamW(attn.parameters())}

    bank_bf16 = bank.to(torch.bfloat16)
    own = torch.arange(b)[:, None]

    def cnn_step(amp: bool = False):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            loss = torch.nn.functional.cross_entropy(cnn(x).float(), y)
        opts["cnn"].zero_grad()
        loss.backward()
        opts["cnn"].step()

    def attnknn_step(scan_bf16: bool = False, amp: bool = False):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            q = attn.embedder(x).float()
            rows = training_neighbours(q.detach(), bank, own, recipe.k, bank_bf16 if scan_bf16 else None)
            out = attn.attend(q, bank[rows], bank_labels[rows])
            loss = vote_nll(out.probs, y) + 0.5 * supervised_contrastive(q, y, 0.07)
        opts["attnknn"].zero_grad()
        loss.backward()
        opts["attnknn"].step()

    # fp32 with the exact scan; then the levers the recipe uses: the bf16 scan re-ranked in fp32, and
    # bf16 autocast (amp) where this CPU has native bf16
    native = cpu_has_bf16()
    steps = {"cnn_step": cnn_step, "attnknn_step": attnknn_step,
             "attnknn_step_bf16_scan": lambda: attnknn_step(scan_bf16=True)}
    if native:
        steps |= {"cnn_step_amp": lambda: cnn_step(amp=True),
                  "attnknn_step_amp": lambda: attnknn_step(scan_bf16=True, amp=True)}
    out = {"batch": b, "gemm_gflops": gemm_gflops, "native_bf16": native}
    for name, step in steps.items():
        with FlopCounterMode(display=False) as counter:
            step()
        ms = _median_ms(step, cfg.repeats)
        gflops = counter.get_total_flops() / 1e9 / (ms / 1e3)
        out[name] = {"ms": ms, "images_per_s": b / (ms / 1e3), "gflop_per_step": counter.get_total_flops() / 1e9,
                     "gflops": gflops, "over_gemm": gflops / gemm_gflops}
    ms = _median_ms(lambda: augment(x, gen), cfg.repeats)
    out["augment"] = {"ms": ms, "images_per_s": b / (ms / 1e3)}
    xe = torch.randn(4096, 1, 28, 28)
    for key, size in (("bank_embedding_1024", 1024), ("bank_embedding", TrainConfig.eval_batch_size)):
        ms = _median_ms(lambda size=size: embed(attn.embedder, xe, size), cfg.repeats)
        out[key] = {"batch": size, "ms_per_4096": ms, "images_per_s": 4096 / (ms / 1e3)}
    return out


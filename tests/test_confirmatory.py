"""The confirmatory experiment (docs/confirmatory_declaration.md): its families, its test term on
shared test rows, its place outside the default run, and one tiny run read by its views."""

from __future__ import annotations

import numpy as np
import pytest

from attnknn_lib.base.paths import Paths
from attnknn_lib.evaluation.bootstrap import paired_bootstrap_diff, resample_counts, resampled_endpoints
from attnknn_lib.evaluation.verdicts import CONFIRMATORY_VERDICTS, IDENTICAL, seed_level
from attnknn_lib.experiments.common.fixed_embedding import paired_test_errors
from attnknn_lib.experiments.confirmatory import EXPERIMENT, measure, views
from attnknn_lib.experiments.framework import catalog
from attnknn_lib.report.compose import experiments_table
from attnknn_lib.workflow.profiles import resolve


def test_each_endpoint_holds_the_fifteen_declared_comparisons():
    for metric in ("accuracy", "nll", "brier"):
        fam = measure.family(metric)
        s = "" if metric == "accuracy" else "_nll"
        assert len(fam) == len(set(fam)) == 15
        against_vote = [m for m, r in fam if r == f"reference{s}"]
        assert len(against_vote) == 11 and {"linear_probe", "learner", "query_only", f"mlp_metric{s}"} <= set(against_vote)
        assert sorted((m, r) for m, r in fam if r != f"reference{s}") == sorted(
            (a, r) for a in (f"attnknn_tuned{s}", f"attnknn_wide_tuned{s}") for r in (f"nca{s}", f"mlp_metric{s}"))


def test_the_resampled_endpoints_pair_methods_and_seeds_as_the_paired_bootstrap_does():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 300)
    seeds = {str(s): {"resampled": {m: resampled_endpoints(rng.dirichlet(np.ones(3), 300), y,
                                                            resample_counts(300, 200, 5)) for m in "ab"}}
             for s in range(3)}
    se = paired_test_errors(seeds)("a", "b", "accuracy")
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 300)
    probs = [[rng.dirichlet(np.ones(3), 300) for _ in "ab"] for _ in range(3)]
    ref = paired_bootstrap_diff([p[0] for p in probs], [p[1] for p in probs], y, n_boot=200, seed=5)
    assert se == pytest.approx(ref["accuracy"]["se"], rel=1e-9) and se > 0
    # the test term widens the seed-level interval; it never narrows it
    d = [0.01, 0.012, 0.008]
    assert seed_level(d, se, "accuracy")["high"] > seed_level(d, 0.0, "accuracy")["high"]


def test_the_linear_probe_on_the_heads_budget_reads_the_standardised_query_and_no_neighbour():
    import torch

    from attnknn_lib.models.neighbour_heads import LinearProbe, NeighbourBatch

    memory = torch.tensor([[0.0, 1.0], [2.0, 1.0], [4.0, 1.0]])
    probe = LinearProbe(3, 2, memory)
    assert torch.allclose(probe.mean, torch.tensor([2.0, 1.0])) and torch.allclose(probe.sd, torch.tensor([1.633, 1.0]), atol=1e-3)
    nb = NeighbourBatch(memory[:2], memory[None, :2].expand(2, 2, 2), torch.rand(2, 2), torch.zeros(2, 2, dtype=torch.long),
                        torch.ones(2, 2))
    other = nb._replace(labels=torch.ones(2, 2, dtype=torch.long), sq_dist=torch.rand(2, 2))
    (p, w), (p2, _) = probe(nb), probe(other)
    assert torch.allclose(p, p2) and torch.allclose(w, torch.full((2, 2), 0.5))  # neighbours change nothing
    assert torch.allclose(p.sum(1), torch.ones(2))


def _diff(value: float, low: float, high: float) -> dict:
    return {"value": value, "low": low, "high": high, "seed_sd": 0.01, "n_seeds": 12, "margin": 0.0025,
            "verdict": "better" if low > 0 else "inconclusive", "test_se": 0.001}


def test_holm_puts_passing_candidates_in_one_family_and_failing_ones_in_an_exploratory_one():
    def cand(passed: bool) -> dict:
        diff: dict = {}
        for metric in ("accuracy", "nll", "brier"):
            for m, r in measure.family(metric):
                diff.setdefault(m, {}).setdefault(r, {})[metric] = _diff(0.02, 0.01, 0.03)
        return {"gate": {"passed": passed}, "summary": {"diff": diff}}

    cands = {"random_projection": cand(True), "autoencoder": cand(True), "early_cnn": cand(False)}
    sizes = measure.holm_correct(cands)
    assert sizes == {"confirmatory": {"accuracy": 30, "nll": 30, "brier": 30},
                     "exploratory": {"accuracy": 15, "nll": 15, "brier": 15}}
    d = cands["early_cnn"]["summary"]["diff"]["nca"]["reference"]["accuracy"]
    assert d["family_size"] == 15 and d["verdict"] in CONFIRMATORY_VERDICTS
    assert cands["autoencoder"]["summary"]["diff"]["nca"]["reference"]["accuracy"]["family_size"] == 30


def test_the_default_run_leaves_the_awaiting_experiment_out_and_names_it_when_asked():
    assert EXPERIMENT.awaiting and "confirmatory" in catalog.names()
    assert "confirmatory" not in resolve("cpu", None, [])
    assert list(resolve("cpu", ["confirmatory"], [])) == ["confirmatory"]
    row = next(r for r in experiments_table(catalog.experiments().values(), []).splitlines() if "10_confirmatory" in r)
    assert row.endswith("| not run yet (declared, awaiting its run) |")


@pytest.mark.slow
def test_a_tiny_run_writes_a_record_its_views_read(tmp_path):
    cfg = EXPERIMENT.Config(seeds=(0, 1), candidates=("random_projection",), max_train=300, max_val=200, max_test=200,
                            nca_epochs=1, nca_lrs=(0.01,), nca_batch_size=64, nca_candidates=128, mlp_hidden=16,
                            head_epochs=1, head_lrs=(0.01,), heads=("attnknn",), wide_heads=("attnknn",),
                            wide_k_min=20, wide_k_max=20, reference_k=16, bootstrap=20, threads=1)
    paths = Paths.at(tmp_path)
    record = EXPERIMENT.run(cfg, paths)
    res = record["results"]
    cand = res["candidates"]["random_projection"]
    assert set(cand["gate"]["room"]) == {"geometry", "learner", "nca", "mlp_metric"}
    assert all("resampled" not in p for p in cand["per_seed"].values())
    methods = cand["per_seed"]["0"]["methods"]  # the probe on the heads' budget; lbfgs's beside it, a diagnostic
    assert methods["linear_probe"]["info"]["lrs"] == [0.01] and "C" in methods["linear_probe_lbfgs"]["info"]
    fam = [tuple(c) for c in res["families"]["accuracy"]]
    present = [cand["summary"]["diff"][m][r]["accuracy"] for m, r in fam if m in cand["summary"]["diff"]]
    assert present and all(d["verdict"] in (*CONFIRMATORY_VERDICTS, IDENTICAL) for d in present)
    assert all(d["test_se"] > 0 for d in present if d["verdict"] != IDENTICAL)  # the shared test rows' term
    kind = "confirmatory" if cand["gate"]["passed"] else "exploratory"
    assert res["multiplicity"]["family_sizes"][kind]["accuracy"] == len(
        [d for d in present if d["verdict"] != IDENTICAL])
    written = views.write_outputs(record, paths)
    assert set(written) == {"gate", "verdicts", "forest"}
    assert views.gate_frame(record).loc["random projection of pixels", "passes"] in ("yes", "no")
    assert len(views.verdict_frame(record)) == 15
    text = views.findings(record)
    assert "random projection of pixels" in text and "nan" not in text.lower().split()

"""Issue 68: the detectable differences (evaluation.verdicts.detectable and each experiment's block of the
paper's table) and the forest plot of the fixed-embedding experiments, drawn from committed records."""

import json
import math
from pathlib import Path

import pytest

from attnknn_lib.base.paths import Paths
from attnknn_lib.evaluation.verdicts import detectable, resolvable
from attnknn_lib.experiments.common.fixed_embedding_views import forest_figure, forest_learners
from attnknn_lib.experiments.headroom_regimes import views as regimes
from attnknn_lib.report.figures import plt

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _record(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def test_detectable_is_the_t_quantile_times_the_standard_error():
    # t_{4, 0.975} = 2.776445: one family of one test at 5 seeds is the 95 % interval's half-width
    assert detectable(1.0, 5) == pytest.approx(2.776445 / math.sqrt(5), rel=1e-6)
    assert detectable(1.0, 5) == pytest.approx(resolvable(1.0, 0.0, 5))
    # Bonferroni at alpha / m: m = 10 at 5 seeds is t_{4, 0.9975} = 5.597568
    assert detectable(1.0, 5, m=10) == pytest.approx(5.597568 / math.sqrt(5), rel=1e-5)
    assert detectable(0.0, 5, test_se=0.5) == pytest.approx(2.776445 * 0.5, rel=1e-6)


def test_weaker_embeddings_block_has_one_row_per_endpoint_with_the_holm_family_size(tmp_path):
    record = _record("headroom_regimes_fashion_mnist.json")
    out = regimes.write_outputs(record, Paths(tmp_path))
    rows = [r for r in out["detectable"].read_text().splitlines() if r.endswith("\\\\")][1:]  # after the header
    sizes = regimes.one_family(record)["results"]["multiplicity"]["family_sizes"]  # every learner, one family
    assert [r.split(" & ")[1] for r in rows] == ["accuracy (pp)", "calibrated NLL", "Brier"]
    assert [r.split(" & ")[3] for r in rows] == [str(sizes[m]) for m in ("accuracy", "nll", "brier")]
    assert out["forest"].with_suffix(".png").exists()


def test_forest_plot_has_one_row_per_learner_and_one_panel_per_scale():
    record = _record("positive_control_clusters.json")
    fig = forest_figure([(f"s = {s}", lv) for s, lv in record["results"]["levels"].items()],
                        forest_learners(record["results"]["heads"], True), "")
    axes = [ax for ax in fig.get_axes() if ax.get_visible()]
    learners = [t.get_text() for t in axes[0].get_yticklabels()]
    assert len(axes) == len(record["results"]["levels"])
    # printed at the text width (6.8 in), its 8-9 pt fonts stay near the body's: six panels wrap
    assert fig.get_size_inches()[0] <= 6.9
    assert learners[0] == "attention head, tuned" and "NCA" in learners and len(learners) == len(set(learners)) == 7
    plt.close(fig)

"""The redrawn figures (issue 20) draw from the committed records and from reduced, smoke-like ones
(one seed, one setting), with every panel used and no offset notation on the y axes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from experiment_api import api

from attnknn_lib.experiments.efficiency import views as efficiency
from attnknn_lib.experiments.theory import views as theory
from attnknn_lib.report.figures import plt

long_tail = api("long_tail")
noise = api("noise")

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _record(name: str) -> dict:
    path = RESULTS / f"{name}_fashion_mnist.json"
    if not path.exists():
        pytest.skip(f"{path.name} is not committed")
    return json.loads(path.read_text())


def _one_seed_robustness(record: dict) -> dict:
    """Keep the bank setting only, with its first seed's values."""
    r = copy.deepcopy(record)
    settings = r["results"]["settings"]
    for name in [s for s in settings if s != "bank"]:
        del settings[name]
    bank = settings["bank"]
    bank["seeds"] = bank["seeds"][:1]
    for cell in bank["curves"].values():
        if "class_order" in cell:
            first = next(iter(cell["class_order"]))
            cell["class_order"] = {first: cell["class_order"][first]}
        for ratio in cell.get("weight_ratio", {}).values():
            ratio["values"] = ratio["values"][:1]
    return r


def _check(fig) -> None:
    for ax in fig.axes:
        if ax.axison:
            assert ax.has_data(), "an empty panel"
            assert not ax.yaxis.get_major_formatter().get_offset(), "offset notation"
    fig.canvas.draw()
    plt.close(fig)


@pytest.mark.parametrize("reduce", [False, True])
def test_robustness_figures(reduce):
    for rec, draw in ((_record("noise"), noise.figure), (_record("long_tail"), long_tail.figure)):
        _check(draw(_one_seed_robustness(rec) if reduce else rec))


def test_long_tail_titles_count_seeds():
    fig = long_tail.figure(_one_seed_robustness(_record("long_tail")))
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles and all("mean of 1 seed)" in t for t in titles)
    plt.close(fig)


@pytest.mark.parametrize("n_seeds", [None, 1])
def test_theory_figures(n_seeds):
    r = _record("theory")
    if n_seeds:
        res = r["results"]
        res["geometry"]["per_seed"] = dict(list(res["geometry"]["per_seed"].items())[:n_seeds])
        att = res["truncation"]["attnknn"]
        att["per_seed"] = dict(list(att["per_seed"].items())[:n_seeds])
    _check(theory.geometry_figure(r))
    _check(theory.topk_figure(r))
    fig = theory.geometry_figure(r)
    low, high = fig.axes[2].get_ylim()
    assert low == 0 and high >= r["results"]["training_k"]  # effective k from 0 to k
    plt.close(fig)


def test_efficiency_figure():
    r = _record("efficiency")
    _check(efficiency.figure(r))
    exact = copy.deepcopy(r)
    exact["results"]["indexes"] = [x for x in exact["results"]["indexes"] if x["recall"] == 1]  # no miss at all
    _check(efficiency.figure(exact))

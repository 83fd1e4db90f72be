"""The study's figures: headroom per k, main's training diagnostics, the variants against the tuned vote."""

from __future__ import annotations

import numpy as np

from attnknn_lib.experiments.attention_study.config import VARIANTS
from attnknn_lib.experiments.attention_study.views.frames import gradient_shares
from attnknn_lib.experiments.attention_study.views.labels import setting_title, variant_label
from attnknn_lib.report.figures import plt


def _seeds(res: dict) -> str:
    n = len(res["seeds"])
    return f"{n} seed{'s' if n != 1 else ''}"


def _panel_seeds(res: dict, s: dict) -> str:
    """' (3 seeds)' for a setting run on fewer seeds than the study (the figure's title gives the rest)."""
    n = len(s["seeds"])
    return f" ({n} seed{'s' if n != 1 else ''})" if n < len(res["seeds"]) else ""


def headroom_figure(record: dict):
    """Per memory setting: recall@k (the ceiling), the uniform vote and the two tuned ceilings, against k."""
    res = record["results"]
    settings = res["summary"]["settings"]
    fig, axes = plt.subplots(1, len(settings), figsize=(7.4, 2.5), sharey=True, squeeze=False)
    for ax, (setting, s) in zip(axes[0], settings.items()):
        ks = [int(k) for k in s["headroom"]]
        h = list(s["headroom"].values())
        ax.plot(ks, [100 * x["recall"] for x in h], "o-", ms=3, label="recall@k (ceiling)")
        ax.plot(ks, [100 * x["uniform_accuracy"] for x in h], "s-", ms=3, label="uniform vote")
        for fam, style in (("geometry", ":"), ("label_aware", "--")):
            ax.axhline(100 * s["ceilings"][fam]["test_accuracy"]["mean"], ls=style, lw=1, color="grey" if fam ==
                       "geometry" else "black", label=f"best {fam.replace('_', '-')} rule (tuned)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks)
        # every other k named: 10 and 16 sit too close on a log axis to print both
        ax.set_xticklabels([str(k) if i % 2 == 0 or k == ks[-1] else "" for i, k in enumerate(ks)], fontsize=7)
        ax.set_title(setting_title(setting).replace(" (", "\n(") + _panel_seeds(res, s).replace(" (", "\n("),
                     fontsize=8)  # narrow panels: the long tail's name and seeds on lines of their own
        ax.set_xlabel("k", fontsize=8)
    axes[0][0].set_ylabel("test queries (%)", fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.suptitle(f"Headroom of any reweighting of the k neighbours (mean over {_seeds(res)})", fontsize=9)
    fig.tight_layout(rect=(0, 0.1, 1, 0.95))
    return fig


def diagnostics_figure(record: dict):
    """Over main's training epochs (one line per seed): the share of training queries whose vote
    carries a gradient (validation / test shares of the trained embedding as dashed lines), the
    effective k (exp of the entropy) of the averaged and per-head weights on an axis from 0 to k,
    so a drift reads at its true size, and the entropy term's gradient over the NLL's."""
    res = record["results"]
    per = {s: d["diagnostics"] for s, d in res["per_seed"].items()}
    fig, axes = plt.subplots(1, 3, figsize=(7.4, 2.4))
    shares = gradient_shares(record)
    for d in per.values():
        e = d["per_epoch"]
        epochs = range(1, len(e["val_accuracy"]) + 1)
        if all(v is not None for v in e["diag_gradient_share"]):
            axes[0].plot(epochs, [100 * v for v in e["diag_gradient_share"]], color="C0", lw=1, alpha=0.7)
            axes[1].plot(epochs, np.exp(e["diag_head_entropy"]), color="C1", lw=1, alpha=0.7)
            axes[2].plot(epochs, e["diag_entropy_grad_ratio"], color="C2", lw=1, alpha=0.7)
        axes[1].plot(epochs, np.exp(e["train_entropy"]), color="C0", lw=1, alpha=0.7)
    for split, style in (("val", "--"), ("test", ":")):
        axes[0].axhline(100 * shares[split], ls=style, color="black", lw=1, label=f"{split} (trained)")
    axes[0].plot([], [], color="C0", label="training batches")
    axes[0].set_ylabel("queries with a gradient (%)", fontsize=8)
    k = record["config"]["k"]
    axes[1].axhline(k, color="grey", ls=":", lw=1, label=f"k = {k} (uniform)")
    axes[1].plot([], [], color="C0", label="averaged weights")
    axes[1].plot([], [], color="C1", label="per head (mean)")
    axes[1].set_ylim(0, k * 1.15)  # from one neighbour taking all the weight (1) to uniform (k)
    axes[1].set_ylabel("effective k = exp(entropy)", fontsize=8)
    axes[2].set_ylabel("|grad H| / |grad NLL|", fontsize=8)
    axes[2].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("epoch", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.get_major_locator().set_params(integer=True)
    axes[0].legend(fontsize=6.5, frameon=False)
    axes[1].legend(fontsize=6.5, frameon=False, loc="lower right")
    fig.suptitle(f"Attn-KNN's attention during its training ({_seeds(res)}, one line each)", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return fig


def curves_figure(record: dict):
    """The heads' learning curves at the experiment's k: one panel per memory setting, one line per
    variant, its validation accuracy per epoch (the first seed; a held-out variant's first fold, scored
    on its selection queries), the selected epoch marked; the collapse sweep's heads, where there is a
    sweep, in a last panel."""
    res, k = record["results"], str(record["config"]["k"])
    first = res["per_seed"][str(res["seeds"][0])]["settings"]
    panels = [(setting_title(st), s["variants"][k]["methods"]) for st, s in first.items()
              if k in (s.get("variants") or {})]
    sweep = (first.get("clean") or {}).get("collapse")
    if sweep and any("val_accuracy_curve" in e for e in sweep.values()):
        panels.append(("collapse sweep (clean)", {n: {"history": [[{"val_accuracy": a} for a in e["val_accuracy_curve"]]],
                                                      "best_epoch": [e["best_epoch"]]}
                                                  for n, e in sweep.items() if "val_accuracy_curve" in e}))
    if not panels:
        fig, ax = plt.subplots(figsize=(3.5, 1.5))
        ax.text(0.5, 0.5, "no heads were trained", ha="center", va="center")
        ax.axis("off")
        return fig
    cols = min(len(panels), 3)
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7.4, 2.3 * rows + 0.6), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (title, methods) in zip(axes.flat, panels):
        for i, (name, m) in enumerate(n_m for n_m in methods.items() if n_m[0] != "baseline"):
            curve = [100 * row["val_accuracy"] for row in m["history"][0]]
            label = variant_label(name) if name in VARIANTS else name
            ax.plot(range(1, len(curve) + 1), curve, lw=1, color=f"C{i % 10}", label=label)
            best = m["best_epoch"][0]
            ax.plot([best], [curve[best - 1]], "o", ms=3, color=f"C{i % 10}")
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("epoch", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=5, frameon=False, ncol=1)
    for row in axes:
        row[0].set_ylabel("validation accuracy (%)", fontsize=8)
    cfg = record["config"]
    fig.suptitle(f"The heads' learning curves at k = {k} (seed {res['seeds'][0]}; at most {cfg['head_epochs']} "
                 f"epochs, patience {cfg['head_patience']}; dot: the selected epoch)", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    return fig


def variants_figure(record: dict, margin: float | None = None):
    """At the experiment's k, one panel per memory setting on one shared axis: each variant's accuracy
    difference to the tuned vote (points, seed-level 95 % interval), the
    equivalence margin shaded, the variant chosen on validation in red."""
    res = record["results"]
    k = str(record["config"]["k"])
    margin = 100 * (margin if margin is not None else record["config"]["margin_accuracy"])
    panels = [(st, e["variants"][k]) for st, e in res["summary"]["settings"].items() if k in (e.get("variants") or {})]
    if not panels:
        fig, ax = plt.subplots(figsize=(3.5, 1.5))
        ax.text(0.5, 0.5, "no variants were trained", ha="center", va="center")
        ax.axis("off")
        return fig
    names = [n for n in VARIANTS if any(n in kv["methods"] for _, kv in panels)]
    cols = min(len(panels), 3)
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7.4, rows * (0.22 * len(names) + 0.7) + 0.9), sharex=True,
                             sharey=True, squeeze=False)
    for ax in axes.flat:
        ax.set_visible(False)
    for j, (setting, kv) in enumerate(panels):
        ax = axes.flat[j]
        ax.set_visible(True)
        for i, n in enumerate(names):
            if n not in kv["methods"]:
                continue
            v = kv["methods"][n]["verdicts_reference"]["accuracy"]
            lo = v["low"] if v["low"] is not None and v["low"] == v["low"] else v["value"]
            hi = v["high"] if v["high"] is not None and v["high"] == v["high"] else v["value"]
            ax.errorbar(100 * v["value"], i, xerr=[[100 * (v["value"] - lo)], [100 * (hi - v["value"])]], fmt="o",
                        ms=3, color="C3" if n == kv["chosen"] else "C0", capsize=2)
        ax.axvspan(-margin, margin, color="grey", alpha=0.25, lw=0)
        ax.axvline(0, color="black", lw=0.8)
        ax.set_title(setting_title(setting) + _panel_seeds(res, res["summary"]["settings"][setting]), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(axis="x", lw=0.3, alpha=0.5)
    axes[0][0].set_yticks(range(len(names)))
    axes[0][0].set_yticklabels([variant_label(n) for n in names], fontsize=7)
    axes[0][0].invert_yaxis()
    rule = "the tuned vote"
    fig.supxlabel(f"accuracy difference to {rule} (percentage points; one axis for every panel)", fontsize=8)
    fig.suptitle(f"Variants at k = {k} minus {rule}\n({_seeds(res)}, 95 % seed-level intervals; grey: "
                 f"±{margin:g} pp margin; red: chosen on validation)", fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_figheight()))  # about 0.5 inch for the title, any height
    return fig

"""Figures for the paper (PDF) and the README/notebooks (PNG), readable in print."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use(os.environ.get("MPLBACKEND", "Agg"))  # headless; Jupyter's inline backend still works
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from attnknn_lib.base.files import atomic_write  # noqa: E402

# Widest figure in inches: the paper's text width, so fonts print at their size (7-9 pt), not shrunk.
MAX_WIDTH = 7.4

plt.rcParams.update({"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "legend.fontsize": 8,
                     "figure.dpi": 110, "savefig.dpi": 200, "savefig.bbox": "tight"})


def save_figure(fig: plt.Figure, figures_dir: str | Path, name: str) -> list[Path]:
    """Write ``name``.pdf and ``name``.png atomically, then close the figure (an experiment writes
    many; open figures accumulate in memory); return the paths."""
    # no creation date in the PDF: a figure drawn again from the same record keeps its bytes
    meta = {"pdf": {"CreationDate": None}, "png": {}}
    paths = [atomic_write(Path(figures_dir) / f"{name}.{ext}",
                          lambda f, ext=ext: fig.savefig(f, format=ext, metadata=meta[ext]))
             for ext in ("pdf", "png")]
    plt.close(fig)
    return paths


def save_output_figure(artifacts, paths, key: str, dataset: str | None, fig: plt.Figure) -> Path:
    """Write an experiment's declared figure ``key`` (its ``artifacts``, a
    :class:`~attnknn_lib.experiments.framework.declaration.Artifacts`) as PDF and PNG atomically and
    close it; returns the PDF's path."""
    if artifacts.output(key).kind != "figure":
        raise ValueError(f"output {key!r} of {artifacts.name} is not a figure")
    return save_figure(fig, paths.figures, artifacts.stem(key, dataset))[0]


def reliability_diagrams(bins_by_method: dict[str, dict[str, np.ndarray]], ece_by_method: dict[str, float],
                         title: str = "") -> plt.Figure:
    """One panel per method: accuracy per confidence bin (bars) against the diagonal, with the
    share of test samples per bin underneath."""
    n = len(bins_by_method)
    fig, axes = plt.subplots(2, n, figsize=(min(2.1 * n, MAX_WIDTH), 3.6), sharex=True, sharey="row",
                             gridspec_kw={"height_ratios": [3, 1]}, squeeze=False)
    for j, (name, b) in enumerate(bins_by_method.items()):
        ax, hx = axes[0, j], axes[1, j]
        width = b["upper"] - b["lower"]
        acc = np.nan_to_num(b["accuracy"])
        conf = np.nan_to_num(b["confidence"])
        ax.bar(b["lower"], acc, width=width, align="edge", color="#4C72B0", edgecolor="white", label="accuracy")
        ax.bar(b["lower"], np.abs(conf - acc), bottom=np.minimum(acc, conf), width=width, align="edge",
               color="#DD8452", alpha=0.6, edgecolor="none", label="gap to mean confidence")
        ax.plot([0, 1], [0, 1], "k--", lw=0.8)
        ax.set_title(f"{name}\nECE {ece_by_method[name]:.3f}", fontsize=8)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        hx.bar(b["lower"], b["count"] / max(1, b["count"].sum()), width=width, align="edge", color="grey")
        hx.set_xlabel("confidence")
        hx.set_xticks([0, 0.5, 1], ["0", "0.5", "1"])  # full "0.0"/"1.0" labels collide between panels
        if j == 0:
            ax.set_ylabel("accuracy")
            hx.set_ylabel("share")
            handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, frameon=False, fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def training_curves(histories: dict[str, list[dict]], title: str = "") -> plt.Figure:
    """Training loss and validation accuracy / ECE per epoch for each trained model. Each model's loss
    is its own objective (Attn-KNN's adds a contrastive term to the vote's NLL), so the left panel
    divides it by its first epoch's: the panel compares how far each fell, not their levels."""
    fig, axes = plt.subplots(1, 3, figsize=(7.5, 2.4))
    for name, hist in histories.items():
        ep = [h["epoch"] for h in hist]
        first = hist[0]["train_loss"] if hist and hist[0]["train_loss"] else 1.0
        axes[0].plot(ep, [h["train_loss"] / first for h in hist], marker="o", ms=3, label=name)
        axes[1].plot(ep, [100 * h["val_accuracy"] for h in hist], marker="o", ms=3, label=name)
        axes[2].plot(ep, [h["val_ece"] for h in hist], marker="o", ms=3, label=name)
    for ax, lab in zip(axes, ("training loss / epoch 1's", "validation accuracy (%)", "validation ECE")):
        ax.set_xlabel("epoch")
        ax.set_ylabel(lab)
        ax.grid(alpha=0.3)
    axes[0].legend(frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def confusion_matrix_plot(cm: np.ndarray, class_names: tuple[str, ...] | list[str], title: str = "") -> plt.Figure:
    """Row-normalised confusion matrix (true class rows) with percentages in the cells."""
    share = cm / np.maximum(cm.sum(1, keepdims=True), 1)
    c = len(class_names)
    fig, ax = plt.subplots(figsize=(0.45 * c + 2.2, 0.45 * c + 1.6))
    im = ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
    for i in range(c):
        for j in range(c):
            if cm[i, j]:
                ax.text(j, i, f"{100 * share[i, j]:.0f}", ha="center", va="center", fontsize=7,
                        color="white" if share[i, j] > 0.5 else "black")
    ax.set_xticks(range(c), class_names, rotation=45, ha="right")
    ax.set_yticks(range(c), class_names)
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")
    fig.colorbar(im, ax=ax, fraction=0.046, label="share of true class")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


Series = tuple  # (x, y, sd or None): one line of a panel; sd draws a shaded mean +- s.d. band


def curve_panels(panels: dict, xlabel: str, ncols: int = 4, logx: bool = False, xticks: list | None = None,
                 vline: tuple[float, str] | None = None, hlines: dict | None = None, title: str = "",
                 styles: dict[str, dict] | None = None, panel_width: float = 1.95, logy: tuple = ()) -> plt.Figure:
    """One panel per entry of ``panels`` ({key: {series label: (x, y, sd)}}; a key is the y label,
    or a (panel title, y label) pair), one legend for all. Each series keeps its colour and marker
    in every panel (``styles`` may fix them); ``xticks`` labels those x values; ``vline`` = (x,
    label) marks one x value in every panel; ``hlines`` = {key: y} draws a reference line (0 for
    a difference, 1 for a ratio); panels whose key is in ``logy`` get a log y axis."""
    names = list(dict.fromkeys(s for series in panels.values() for s in series))
    markers = "osD^v<>ph*"
    style = {n: {"color": f"C{i % 10}", "marker": markers[i % len(markers)]} for i, n in enumerate(names)}
    style.update(styles or {})
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_width * ncols, 1.9 * nrows + 0.5), squeeze=False)
    for ax, (key, series) in zip(axes.flat, panels.items()):
        panel_title, ylabel = key if isinstance(key, tuple) else ("", key)
        for name, (x, y, sd) in series.items():
            x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
            ax.plot(x, y, ms=3.5, lw=1.2, label=name, **style[name])
            if sd is not None:
                sd = np.asarray(sd, dtype=float)
                ax.fill_between(x, y - sd, y + sd, color=style[name]["color"], alpha=0.15, lw=0)
        if logx:
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # no crowded 2x10^1 labels
        if key in logy:
            ax.set_yscale("log")
        if xticks is not None:
            ax.set_xticks(xticks, [f"{t:g}" for t in xticks])
            ax.minorticks_off()
        if vline is not None:
            ax.axvline(vline[0], color="grey", ls=":", lw=1)
        if hlines and key in hlines:
            ax.axhline(hlines[key], color="black", lw=0.7)
        if panel_title:
            ax.set_title(panel_title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    handles = [plt.Line2D([], [], ms=4, **style[n]) for n in names]
    labels = list(names)
    if vline is not None:
        handles.append(plt.Line2D([], [], color="grey", ls=":"))
        labels.append(vline[1])
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), frameon=False,
               bbox_to_anchor=(0.5, 0.0))
    if title:
        fig.suptitle(title)
    legend_inches = 0.22 * (1 + (len(labels) - 1) // 4) + 0.1
    fig.tight_layout(rect=(0, legend_inches / fig.get_figheight(), 1, 1))
    return fig

"""Theory views: figures, tables, macros and README lines from a theory record (no measuring)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnknn_lib.base.files import write_text
from attnknn_lib.base.paths import Paths
from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.experiments.shared import output_context
from attnknn_lib.experiments.theory.measure import METHODS, NAME, NOTEBOOK
from attnknn_lib.report import figures
from attnknn_lib.report.figures import plt
from attnknn_lib.report.macros import macro_name, pct, record_macros
from attnknn_lib.report.readme import per_dataset
from attnknn_lib.report.tables import booktabs, sd_text


def _mark_sqrt(ax, res: dict) -> None:
    ax.axvline(res["k_sqrt"], color="grey", ls=":", lw=1)


def k_figure(record: dict):
    """Test error and NLL against k, k = round(sqrt(n)) marked; the CNN-ensemble error and the
    Cover-Hart bound computed from it as reference lines."""

    res = record["results"]
    ks, summ, bp = res["k_values"], res["curves"]["summary"], res["bayes_proxy"]
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 2.9))
    for i, (m, label) in enumerate(METHODS.items()):
        for ax, key, scale in ((axes[0], "error", 100), (axes[1], "nll", 1)):
            mean = scale * np.array(summ[m][key]["mean"])
            sd = 0 * mean if summ[m][key]["std"] is None else scale * np.array(summ[m][key]["std"])  # one seed
            ax.plot(ks, mean, marker="os"[i], ms=3.5, lw=1.2, color=f"C{i}", label=label)
            ax.fill_between(ks, mean - sd, mean + sd, color=f"C{i}", alpha=0.15, lw=0)
    axes[0].axhline(100 * bp["cnn_ensemble_error"], color="C3", ls="--", lw=1,
                    label=f"CNN ensemble ({bp['models']} seeds): Bayes-error proxy")
    axes[0].axhline(100 * bp["cover_hart_bound"], color="C4", ls="-.", lw=1, label="Cover-Hart 1-NN bound from the proxy")
    for ax, ylabel in zip(axes, ("test error (%)", "test NLL")):
        _mark_sqrt(ax, res)
        ax.set_xscale("log")
        ax.set_xlabel("k (neighbours, log scale)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    handles.append(plt.Line2D([], [], color="grey", ls=":"))
    labels.append(f"k = round(sqrt(n)) = {res['k_sqrt']}")
    fig.legend(handles, labels, loc="lower center", ncol=2, frameon=False, bbox_to_anchor=(0.5, 0.0))
    seeds = ", ".join(map(str, res["seeds"]))
    fig.suptitle(f"{REGISTRY[record['dataset']].title}: error and NLL against k (mean $\\pm$ s.d. over seeds {seeds})")
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    return fig


def geometry_figure(record: dict):
    """Per epoch: embedding norms before normalisation, per-head temperatures, effective number of
    neighbours of the attention (training batches), one line per seed."""

    res = record["results"]
    geo = res["geometry"]["per_seed"]
    k = res["training_k"]
    fig, axes = plt.subplots(1, 3, figsize=(7.4, 2.8))
    for i, (seed, g) in enumerate(geo.items()):
        ep = g["epoch"]
        axes[0].errorbar(np.array(ep) + 0.06 * (i - 1), g["norm_mean"], yerr=g["norm_std"], marker="o", ms=3, lw=1.2, capsize=2, color=f"C{i}",
                         label=f"seed {seed}")
        temps = np.array(g["temperatures"])  # (epochs, heads)
        for h in range(temps.shape[1]):
            axes[1].plot(ep, temps[:, h], marker="osD^v"[h % 5], ms=3, lw=1, color=f"C{i}",
                         label=f"seed {seed}" if h == 0 else None)
        axes[2].plot(ep, g["effective_k"], marker="o", ms=3, lw=1.2, color=f"C{i}", label=f"seed {seed}")
    axes[2].axhline(k, color="black", lw=0.7)
    axes[2].set_ylim(top=k + 0.1 * (k - axes[2].get_ylim()[0]))  # keep the uniform line in view
    axes[2].annotate(f"uniform = {k}", (geo[next(iter(geo))]["epoch"][-1], k), fontsize=7, xytext=(-40, 3),
                     textcoords="offset points")
    for ax, ylabel in zip(axes, ("norm before normalisation\n(validation, mean $\\pm$ s.d.)",
                                 "temperature per head (markers)", "effective neighbours exp(H)\n(training batches)")):
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.ticklabel_format(axis="y", useOffset=False)
    axes[0].legend(frameon=False, fontsize=7)
    fig.suptitle(f"{REGISTRY[record['dataset']].title}: embedding and attention across training (main's Attn-KNN runs)")
    fig.tight_layout()
    return fig


def topk_figure(record: dict):
    """Top-k truncation error against k (plain softmax attention at several T; Attn-KNN's own
    scores), and the cost of dense and top-k attention against n."""

    res = record["results"]
    tr, cost = res["truncation"], res["cost"]
    ks = tr["ks"]
    fig = plt.figure(figsize=(7.4, 6.2))  # the two truncation panels above, the cost panel below
    grid = fig.add_gridspec(2, 2)
    axes = [fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, 0])]
    ax = axes[0]
    for i, (t, e) in enumerate(tr["softmax"].items()):
        ax.plot(ks, e["error"], marker="o", ms=3, lw=1.2, color=f"C{i}",
                label=f"T = {t}: top-k (slope {e['fit']['slope']:.2f})")
        ax.plot(ks, 2 * np.array(e["tail_mass"]), ls="--", lw=0.9, color=f"C{i}")
        ax.plot(e["sampled_ks"], e["sampled_error"], ls=":", marker="x", ms=3, lw=1, color=f"C{i}")
    ax.plot([], [], ls="--", color="grey", label="bound 2 x dropped mass")
    ax.plot([], [], ls=":", marker="x", color="grey", label="top-k + k sampled tail rows")
    ax.set_title(f"softmax attention over the memory (seed {tr['softmax_seed']})")
    att = tr["attnknn"]
    axes[1].plot(ks, att["error"], marker="o", ms=3, lw=1.2, color="C5",
                 label=f"Attn-KNN scores (slope {att['fit']['slope']:.2f})")
    for _s, e in att["per_seed"].items():
        axes[1].plot(ks, e["error"], lw=0.6, color="C5", alpha=0.4)
    axes[1].axvline(res["training_k"], color="C5", ls="--", lw=0.8)
    i16 = ks.index(res["training_k"])
    axes[1].set_title(f"Attn-KNN: nearest k vs all rows (acc. {100 * att['accuracy'][i16]:.2f} vs "
                      f"{100 * att['accuracy'][-1]:.2f} %)")
    axes[0].set_yscale("log")
    axes[0].set_ylim(bottom=max(axes[0].get_ylim()[0], 1e-5))  # the error is exactly 0 at k = n
    axes[1].set_ylim(bottom=0)  # a narrow range: linear
    for ax in axes[:2]:
        _mark_sqrt(ax, res)
        ax.set_xscale("log")
        ax.set_xlabel(f"k of n = {tr['n']:,} (log)")
        ax.set_ylabel("mean L1 error to dense attention")
        ax.grid(alpha=0.3)
        ax.legend(frameon=False, fontsize=6.5, loc="lower left")
    ax = axes[2]
    for i, (key, label) in enumerate((("dense_us", "dense softmax"), ("topk_exact_us", "top-k, exact top-k"),
                                      ("topk_hnsw_us", "top-k over HNSW"))):
        ax.plot(cost["n"], cost[key], marker="osD"[i], ms=3.5, lw=1.2, color=f"C{i + 6}",
                label=f"{label} (slope {cost['fit'][key]['slope']:.2f})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memory size n (log; k = round(sqrt(n)))")
    ax.set_ylabel("µs per query (log)")
    ax.set_title("cost against n (synthetic unit vectors)")
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=6.5)
    fig.suptitle(f"{REGISTRY[record['dataset']].title}: top-k attention against dense attention\n"
                 f"({tr['queries']} test queries; dotted grey line: k = round(sqrt(n)) = {res['k_sqrt']})")
    fig.tight_layout()
    return fig


def _at(values: list, ks: list, k: int):
    return values[ks.index(k)]


def table_frame(record: dict) -> pd.DataFrame:
    """The notebook's headline numbers, one per row."""
    res = record["results"]
    ks, summ, bp = res["k_values"], res["curves"]["summary"], res["bayes_proxy"]
    tr, final = res["truncation"], res["geometry"]["final"]
    kq, k = res["k_sqrt"], res["training_k"]
    rows = {}

    def pct(m, kk):
        e = summ[m]["error"]
        sd = None if e["std"] is None else _at(e["std"], ks, kk)
        return f"{100 * _at(e['mean'], ks, kk):.2f} $\\pm$ {sd_text(sd, 100, 2)}"

    if 1 in ks:
        rows["Uniform 1-NN test error (\\%)"] = pct("uniform", 1)
    rows[f"Uniform kNN error at $k = \\sqrt{{n}} = {kq}$ (\\%)"] = pct("uniform", kq)
    rows[f"Attn-KNN error at $k = {kq}$ (\\%)"] = pct("attnknn", kq)
    rows["CNN-ensemble error, Bayes proxy (\\%)"] = f"{100 * bp['cnn_ensemble_error']:.2f}"
    rows["Cover-Hart bound from the proxy (\\%)"] = f"{100 * bp['cover_hart_bound']:.2f}"
    eff = np.array([f["effective_k"] for f in final.values()])
    kl = np.array([f["kl_uniform"] for f in final.values()])
    rows[f"Attn-KNN effective neighbours on test (of {k})"] = f"{eff.mean():.3f} $\\pm$ {eff.std(ddof=1) if len(eff) > 1 else 0:.3f}"
    rows["Attn-KNN KL to uniform on test (nats)"] = f"{kl.mean():.2g}"
    for t, e in tr["softmax"].items():
        rows[f"Softmax $T = {t}$: L1 error at $k = {kq}$; slope"] = (f"{_at(e['error'], tr['ks'], kq):.3g}; "
                                                                 f"{e['fit']['slope']:.2f}")
    att = tr["attnknn"]
    rows[f"Attn-KNN: L1 error at $k = {k}$; slope"] = f"{_at(att['error'], tr['ks'], k):.3g}; {att['fit']['slope']:.2f}"
    rows[f"Attn-KNN accuracy, nearest {k} vs all rows (\\%)"] = (f"{100 * _at(att['accuracy'], tr['ks'], k):.2f} vs "
                                                                f"{100 * att['accuracy'][-1]:.2f}")
    for key, label in (("dense_us", "dense"), ("topk_exact_us", "top-k (exact)"), ("topk_hnsw_us", "top-k (HNSW)")):
        rows[f"Cost slope against $n$, {label}"] = f"{res['cost']['fit'][key]['slope']:.2f}"
    df = pd.DataFrame({"Value": rows})
    df.index.name = "Quantity"
    return df


def write_outputs(record: dict, paths: Paths) -> dict:
    res, d, title, src = output_context(record, NOTEBOOK, NAME)
    seeds = ", ".join(map(str, res["seeds"]))
    out = {"table": write_text(paths.tables / f"{NAME}_{d}.tex", booktabs(
        table_frame(record), f"{title}: the theory notebook's numbers (main's models, seeds {seeds}; profile "
        f"\\texttt{{{record['profile']}}}). The Bayes proxy is the error of the ensemble of main's CNNs, an upper "
        f"estimate of the Bayes error. L1 errors: mean over {res['truncation']['queries']} test queries of the "
        f"distance between the top-$k$ and the dense output (class distributions); slopes: log-log fits against "
        f"$k$ or $n$. {src}.", f"tab:{NAME}", column_format="lr", escape_index=False))}
    for suffix, fig in (("k", k_figure(record)), ("geometry", geometry_figure(record)), ("topk", topk_figure(record))):
        out[suffix] = figures.save_figure(fig, paths.figures, f"{NAME}_{d}_{suffix}")[0]
    return out


def summary_frame(record: dict) -> pd.DataFrame:
    """Plain numbers: error and NLL per k and method (means over seeds)."""
    res = record["results"]
    summ = res["curves"]["summary"]
    rows = {}
    for i, k in enumerate(res["k_values"]):
        for m, label in METHODS.items():
            rows[(k, label)] = {"error (%)": 100 * summ[m]["error"]["mean"][i], "NLL": summ[m]["nll"]["mean"][i]}
    return pd.DataFrame.from_dict(rows, orient="index").round(4)


def theory_macros(record: dict) -> dict[str, str]:
    """Theory: errors against k, the Bayes proxy and Cover-Hart line, how uniform the attention is,
    the truncation errors and slopes (TheoryFashionMnist...)."""
    ds, res = record["dataset"], record["results"]
    pre = ("theory", ds)
    ks, summ, bp = res["k_values"], res["curves"]["summary"], res["bayes_proxy"]
    tr, final = res["truncation"], res["geometry"]["final"]
    out = {macro_name(*pre, "K sqrt"): str(res["k_sqrt"]),
           macro_name(*pre, "Cnn Ensemble Error"): pct(bp["cnn_ensemble_error"]),
           macro_name(*pre, "Cover Hart Bound"): pct(bp["cover_hart_bound"])}
    for m in ("uniform", "attnknn"):
        for k in (1, res["k_sqrt"], res["training_k"]):
            if k in ks:
                out[macro_name(*pre, m, "Error K", str(k))] = pct(summ[m]["error"]["mean"][ks.index(k)])
        if res["k_sqrt"] in ks:
            out[macro_name(*pre, m, "Error K Sqrt")] = pct(summ[m]["error"]["mean"][ks.index(res["k_sqrt"])])
    eff = [f["effective_k"] for f in final.values()]
    out[macro_name(*pre, "Effective K")] = f"{sum(eff) / len(eff):.3f}"
    out[macro_name(*pre, "Kl Uniform")] = f"{sum(f['kl_uniform'] for f in final.values()) / len(final):.2g}"
    temps = sorted(tr["softmax"], key=float)
    for t, e in tr["softmax"].items():
        tags = [("Softmax T", t.replace(".", ""))]
        tags += [("Softmax T Low",)] if t == temps[0] else []  # the grid's lowest and highest T, any grid
        tags += [("Softmax T High",)] if t == temps[-1] else []
        for tag in tags:
            out[macro_name(*pre, *tag, "Slope")] = f"{e['fit']['slope']:.2f}"
            if res["k_sqrt"] in tr["ks"]:
                out[macro_name(*pre, *tag, "Error Sqrt")] = f"{e['error'][tr['ks'].index(res['k_sqrt'])]:.3g}"
    out[macro_name(*pre, "Softmax T Low")], out[macro_name(*pre, "Softmax T High")] = temps[0], temps[-1]
    att = tr["attnknn"]
    i = tr["ks"].index(res["training_k"])
    out[macro_name(*pre, "Attnknn Trunc Slope")] = f"{att['fit']['slope']:.2f}"
    out[macro_name(*pre, "Attnknn Trunc Error")] = f"{att['error'][i]:.3g}"
    out[macro_name(*pre, "Attnknn Trunc Acc")] = pct(att["accuracy"][i])
    out[macro_name(*pre, "Attnknn Dense Acc")] = pct(att["accuracy"][-1])
    for key, tag in (("dense_us", "Dense"), ("topk_exact_us", "Topk Exact"), ("topk_hnsw_us", "Topk Hnsw")):
        out[macro_name(*pre, "Cost Slope", tag)] = f"{res['cost']['fit'][key]['slope']:.2f}"
    return out


README_SECTION = "Cost and theory"


def macros(records: list[dict]) -> dict[str, str]:
    """Every macro of this experiment, with caption sources and dataset-free aliases."""
    return record_macros(records, theory_macros, NOTEBOOK)


def readme_lines(records: list[dict]) -> list[str]:
    """One README bullet per dataset: truncation slopes and errors, effective neighbours."""
    def bullet(res: dict, title: str) -> str:
        tr = res["truncation"]
        fits = ", ".join(f"T = {t}: {e['fit']['slope']:.2f}" for t, e in tr["softmax"].items())
        att = tr["attnknn"]
        i = tr["ks"].index(res["training_k"])
        eff = [f["effective_k"] for f in res["geometry"]["final"].values()]
        return (f"- theory ({title}): top-k softmax attention error against k, log-log slopes {fits}; "
                f"Attn-KNN truncated to its {res['training_k']} nearest neighbours vs the same scores over all "
                f"{tr['n']:,} rows: L1 {att['error'][i]:.3g}, accuracy {100 * att['accuracy'][i]:.2f} % vs "
                f"{100 * att['accuracy'][-1]:.2f} %; effective neighbours of the trained attention "
                f"{sum(eff) / len(eff):.3f} of {res['training_k']}.")

    return per_dataset(records, bullet)

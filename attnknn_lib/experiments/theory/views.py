"""Theory views: figures, tables, macros and README lines from a theory record (no measuring)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnknn_lib.base.paths import Paths
from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.experiments.common.views import output_context
from attnknn_lib.experiments.theory.config import ARTIFACTS, NAME, NOTEBOOK
from attnknn_lib.experiments.theory.measure import METHODS
from attnknn_lib.report.figures import plt, save_output_figure
from attnknn_lib.report.findings import markdown_lists
from attnknn_lib.report.macros import macro_name, pct, record_macros
from attnknn_lib.report.readme import per_dataset
from attnknn_lib.report.tables import booktabs, num, sd_text


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
    fig, axes = plt.subplots(1, 3, figsize=(6.5, 2.9), layout="constrained")
    n_heads = 0
    for i, g in enumerate(geo.values()):
        ep = np.asarray(g["epoch"])
        axes[0].errorbar(ep + 0.1 * (i - (len(geo) - 1) / 2), g["norm_mean"], yerr=g["norm_std"], marker="o", ms=3,
                         lw=1.2, capsize=2, color=f"C{i}")
        temps = np.array(g["temperatures"])  # (epochs, heads)
        n_heads = max(n_heads, temps.shape[1])
        for h in range(temps.shape[1]):
            axes[1].plot(ep, temps[:, h], marker="osD^v"[h % 5], ms=3, lw=0.8, color=f"C{i}")
        axes[2].plot(ep, g["effective_k"], marker="o", ms=3, lw=1.2, color=f"C{i}")
    axes[2].axhline(k, color="black", lw=0.8, ls="--")
    axes[2].set_ylim(0, 1.08 * k)  # from 0 to k: a change of 0.01 neighbour looks like what it is
    low = min(min(g["effective_k"]) for g in geo.values())
    axes[2].text(0.5, 0.45, f"lowest: {low:.2f} of {k}", transform=axes[2].transAxes, ha="center", fontsize=8)
    for ax, ylabel in zip(axes, ("norm before normalisation\n(validation, mean $\\pm$ s.d.)",
                                 "learned temperature", f"effective neighbours exp(H)\n(training batches; of k = {k})")):
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.ticklabel_format(axis="y", useOffset=False)
    axes[1].set_title("one line per seed and head", fontsize=8)
    rows = [[(plt.Line2D([], [], color=f"C{i}", lw=1.2), f"seed {seed}") for i, seed in enumerate(geo)]
            + [(plt.Line2D([], [], color="black", lw=0.8, ls="--"), f"uniform vote (k = {k})")],
            [(plt.Line2D([], [], color="grey", marker="osD^v"[h % 5], ms=3.5, ls="none"), f"head {h + 1}")
             for h in range(n_heads)]]  # seeds (colour) on one legend row, heads (marker) on the next
    ncol = max(map(len, rows))
    blank = (plt.Line2D([], [], ls="none"), "")
    cols = [entry for j in range(ncol) for entry in (r[j] if j < len(r) else blank for r in rows)]  # filled by column
    fig.legend(*zip(*cols), loc="outside lower center", ncol=ncol, frameon=False)
    fig.suptitle(f"{REGISTRY[record['dataset']].title}: embedding and attention across training "
                 f"(main's Attn-KNN, {len(geo)} seed{'s' if len(geo) != 1 else ''})")
    return fig


def topk_figure(record: dict):
    """Top-k truncation error against k (plain softmax attention at several T; Attn-KNN's own
    scores), and the cost of dense and top-k attention against n."""

    res = record["results"]
    tr, cost = res["truncation"], res["cost"]
    ks = np.asarray(tr["ks"], dtype=float)
    sqrt_label = f"k = round(sqrt(n)) = {res['k_sqrt']}"

    def positive(values) -> np.ndarray:  # log axes: an error of (numerically) 0, as at k = n, is left out
        v = np.asarray(values, dtype=float)
        return np.where(v > 1e-12, v, np.nan)

    fig = plt.figure(figsize=(6.0, 5.2), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1, 1.1])
    soft = top.subplots(1, len(tr["softmax"]), squeeze=False)[0]
    for ax, (t, e) in zip(soft, tr["softmax"].items()):
        curves = ((ks, positive(e["error"]), dict(color="C0", marker="o", ms=3, lw=1.2)),
                  (ks, positive(2 * np.asarray(e["tail_mass"])), dict(color="C1", ls="--", lw=1.1)),
                  (np.asarray(e["sampled_ks"], dtype=float), positive(e["sampled_error"]),
                   dict(color="C2", ls=":", marker="x", ms=3, lw=1.1)))
        for x, y, style in curves:
            ax.plot(x, y, **style)
        low = np.nanmin(np.concatenate([y for _, y, _ in curves]))
        ax.set_ylim(10 ** np.floor(np.log10(low)), None)  # the floor is the smallest error drawn
        ax.set_yscale("log")
        ax.set_title(f"softmax, T = {t}")
        ax.set_xlabel("k (log)")
    soft[0].set_ylabel("mean L1 error to dense")
    top.legend([plt.Line2D([], [], color="C0", marker="o", ms=3), plt.Line2D([], [], color="C1", ls="--"),
                plt.Line2D([], [], color="C2", ls=":", marker="x", ms=3), plt.Line2D([], [], color="grey", ls=":")],
               ["top-k", "bound: 2 x dropped mass", "top-k + k sampled tail rows", sqrt_label],
               loc="outside lower center", ncol=2, frameon=False)
    top.suptitle(f"Plain softmax attention over the memory (seed {tr['softmax_seed']} of the embeddings)", fontsize=9)
    ax_att, ax_cost = bottom.subplots(1, 2)
    att = tr["attnknn"]
    for e in att["per_seed"].values():
        ax_att.plot(ks, e["error"], lw=0.7, color="C5", alpha=0.45)
    ax_att.plot(ks, att["error"], marker="o", ms=3, lw=1.2, color="C5")
    ax_att.axvline(res["training_k"], color="C5", ls="--", lw=0.9)
    i_train = tr["ks"].index(res["training_k"])
    ax_att.text(0.03, 0.05, f"accuracy: {100 * att['accuracy'][i_train]:.1f} % at k = {res['training_k']},\n"
                f"{100 * att['accuracy'][-1]:.1f} % with all {tr['n']:,} rows", transform=ax_att.transAxes, fontsize=8)
    ax_att.set_ylim(bottom=0)  # linear: flat, then a cliff near k = n; no power law to fit
    ax_att.set_title(f"Attn-KNN's scores ({len(att['per_seed'])} seeds)")
    ax_att.set_ylabel("mean L1 error to dense")
    ax_att.set_xlabel("k (log)")
    ax_att.legend([plt.Line2D([], [], color="C5", marker="o", ms=3), plt.Line2D([], [], color="C5", lw=0.7, alpha=0.45),
                   plt.Line2D([], [], color="C5", ls="--")],
                  ["mean over seeds", "one seed", f"training k = {res['training_k']}"], frameon=False, fontsize=7,
                  loc="center left")
    for ax in [*soft, ax_att]:
        _mark_sqrt(ax, res)
        ax.set_xscale("log")
        ax.set_xlim(ks[0] / 1.5, ks[-1] * 1.5)
        ax.set_xticks([10 ** p for p in range(0, int(np.log10(ks[-1])) + 1, 2)])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    for i, (key, label) in enumerate((("dense_us", "dense softmax"), ("topk_exact_us", "top-k, exact search"),
                                      ("topk_hnsw_us", "top-k over HNSW"))):
        fit = cost["fit"][key]
        slope = f" (slope {fit['slope']:.2f})" if fit.get("r2", 0) >= 0.95 else ""  # only where a power law fits
        ax_cost.plot(cost["n"], cost[key], marker="osD"[i], ms=3.5, lw=1.2, color=f"C{i + 6}", label=label + slope)
    ax_cost.set_xscale("log")
    ax_cost.set_yscale("log")
    ax_cost.set_xlabel("memory size n (log; k = round(sqrt(n)))")
    ax_cost.set_ylabel("µs per query (log)")
    ax_cost.set_title("cost (synthetic unit vectors)")
    ax_cost.grid(alpha=0.3)
    top_us = max(max(cost[key]) for key in ("dense_us", "topk_exact_us", "topk_hnsw_us"))
    ax_cost.set_ylim(top=8 * top_us)  # room for the legend above the lines
    ax_cost.legend(frameon=False, fontsize=7, loc="upper left")
    bottom.suptitle(f"Attn-KNN's own scores, and the cost against n ({tr['queries']} test queries; n = {tr['n']:,} "
                    f"for the truncation)", fontsize=9)
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
    rows["Attn-KNN KL to uniform on test (nats)"] = f"{kl.mean():.4f}"
    q = tr["queries"]  # the truncation rows run on a subset of the test queries
    for t, e in tr["softmax"].items():
        rows[f"Softmax $T = {t}$: L1 error at $k = {kq}$; slope ({q} queries)"] = (
            f"{_at(e['error'], tr['ks'], kq):.3f}; {e['fit']['slope']:+.2f}")
    att = tr["attnknn"]
    rows[f"Attn-KNN: L1 error at $k = {k}$; slope ({q} queries)"] = (f"{_at(att['error'], tr['ks'], k):.3f}; "
                                                                   f"{att['fit']['slope']:+.2f}")
    rows[f"Attn-KNN accuracy on {q} test queries, nearest {k} vs all rows (\\%)"] = (
        f"{100 * _at(att['accuracy'], tr['ks'], k):.2f} vs {100 * att['accuracy'][-1]:.2f}")
    for key, label in (("dense_us", "dense"), ("topk_exact_us", "top-k (exact)"), ("topk_hnsw_us", "top-k (HNSW)")):
        rows[f"Cost slope against $n$, {label}"] = f"{res['cost']['fit'][key]['slope']:.2f}"
    df = pd.DataFrame({"Value": rows})
    df.index.name = "Quantity"
    return df


def write_outputs(record: dict, paths: Paths) -> dict:
    res, d, title, src = output_context(record, NOTEBOOK, ARTIFACTS)
    seeds = ", ".join(map(str, res["seeds"]))
    out = {"table": ARTIFACTS.write_table(paths, "table", d, booktabs(
        table_frame(record), f"{title}: the theory notebook's numbers (main's models, seeds {seeds}; profile "
        f"\\texttt{{{record['profile']}}}). The Bayes proxy is the error of the ensemble of main's CNNs, an upper "
        f"estimate of the Bayes error. L1 errors: mean over {res['truncation']['queries']} test queries of the "
        f"distance between the top-$k$ and the dense output (class distributions); slopes: log-log fits against "
        f"$k$ or $n$. {src}.", f"tab:{NAME}", column_format="lr", escape_index=False))}
    for suffix, fig in (("k", k_figure(record)), ("geometry", geometry_figure(record)), ("topk", topk_figure(record))):
        out[suffix] = save_output_figure(ARTIFACTS, paths, suffix, d, fig)
    return out


def summary_frame(record: dict) -> pd.DataFrame:
    """Plain numbers, one row per k (integer): test error (%) and NLL of each method (means over seeds,
    on every test query)."""
    res = record["results"]
    summ = res["curves"]["summary"]
    rows = {}
    for i, k in enumerate(res["k_values"]):
        row = {("test error (%)", label): num(summ[m]["error"]["mean"][i], 2, 100) for m, label in METHODS.items()}
        row.update({("test NLL", label): num(summ[m]["nll"]["mean"][i], 4) for m, label in METHODS.items()})
        rows[int(k)] = row
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    df.index.name = "k"
    return df


def geometry_frame(record: dict) -> pd.DataFrame:
    """Per seed: the test embeddings' norm and Attn-KNN's attention on test at its training k
    (entropy, KL to uniform, effective neighbours)."""
    rows = {}
    for seed, f in record["results"]["geometry"]["final"].items():
        rows[int(seed)] = {"embedding norm, mean": num(f["test_norm_mean"], 2), "embedding norm, s.d.": num(f["test_norm_std"], 2),
                           "attention entropy (nats)": num(f["entropy"], 4), "KL to uniform (nats)": num(f["kl_uniform"], 4),
                           "effective neighbours": num(f["effective_k"], 2), "k": int(f["k"])}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "seed"
    return df


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
    out[macro_name(*pre, "Effective K Seeds")] = str(len(eff))  # the trained models it is averaged over
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
    out[macro_name(*pre, "Truncation Queries")] = str(record["config"]["truncation_queries"])
    out[macro_name(*pre, "Truncation Seeds")] = str(len(att["per_seed"]))  # the accuracies are means over these models
    for key, tag in (("dense_us", "Dense"), ("topk_exact_us", "Topk Exact"), ("topk_hnsw_us", "Topk Hnsw")):
        out[macro_name(*pre, "Cost Slope", tag)] = f"{res['cost']['fit'][key]['slope']:.2f}"
    return out




def macros(records: list[dict]) -> dict[str, str]:
    """Every macro of this experiment, with caption sources and dataset-free aliases."""
    return record_macros(records, theory_macros, NOTEBOOK, ARTIFACTS.record_file)


def _bullet(res: dict, title: str) -> str:
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


def readme_lines(records: list[dict]) -> list[str]:
    """One README bullet per dataset: truncation slopes and errors, effective neighbours."""
    return per_dataset(records, _bullet)


def reading(res: dict) -> list[str]:
    """What the numbers mean, one sentence each: how fast a softmax attention's truncation error
    falls with k, what the top-k truncation does to Attn-KNN's own scores, and how far from uniform
    its trained weights are."""
    tr = res["truncation"]
    slopes = {float(t): e["fit"]["slope"] for t, e in tr["softmax"].items()}
    cold, hot = min(slopes), max(slopes)
    att, k = tr["attnknn"], res["training_k"]
    i = tr["ks"].index(k)
    eff = [f["effective_k"] for f in res["geometry"]["final"].values()]
    mean_eff = sum(eff) / len(eff)
    return [f"A softmax attention over the memory is close to its top-k truncation only when it is sharp: the "
            f"truncation error falls with slope {slopes[cold]:.2f} at T = {cold:g} but {slopes[hot]:.2f} at "
            f"T = {hot:g}, where far rows keep real weight.",
            f"Attn-KNN's trained scores are of the second kind: over all {tr['n']:,} rows they give "
            f"{100 * att['accuracy'][-1]:.2f} % accuracy against {100 * att['accuracy'][i]:.2f} % within its "
            f"{k} neighbours, so its accuracy comes from the retrieval's top-k, not from the scores.",
            f"Within the {k}, its weights are "
            + (f"uniform but for {k - mean_eff:.3f} of an effective neighbour (effective k {mean_eff:.3f} of {k}): it "
               f"votes like a uniform kNN over the same neighbours." if k - mean_eff < 0.05 else
               f"not uniform (effective k {mean_eff:.3f} of {k}).")]


def findings(record: dict) -> str:
    """The notebook's answer (the README's bullet of this record), then what it means."""
    res = record["results"]
    return markdown_lists([_bullet(res, REGISTRY[record["dataset"]].title)[2:], ""]
                          + [f"- {line}" for line in reading(res)])


def fits_frame(record: dict) -> pd.DataFrame:
    """The log-log fits of the truncation error and of the attention's cost against k or n: slope,
    intercept, R^2 (a low R^2 says the curve is not a power law)."""
    res = record["results"]
    fits = {f"softmax T = {t}": e["fit"] for t, e in res["truncation"]["softmax"].items()}
    fits["Attn-KNN scores"] = res["truncation"]["attnknn"]["fit"]
    fits.update({f"cost: {name}": fit for name, fit in res["cost"]["fit"].items()})
    rows = {name: {"slope": f"{f['slope']:+.3f}", "intercept": f"{f['intercept']:+.3f}", "R²": f"{f['r2']:.3f}"}
            for name, f in fits.items()}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("log-log fit")

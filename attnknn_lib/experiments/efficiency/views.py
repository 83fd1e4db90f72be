"""Efficiency views: figures, tables, macros and README lines from an efficiency record (no measuring)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnknn_lib.base.paths import Paths
from attnknn_lib.data.registry import REGISTRY
from attnknn_lib.experiments.common.views import output_context
from attnknn_lib.experiments.efficiency.config import ARTIFACTS, NAME, NOTEBOOK
from attnknn_lib.experiments.efficiency.measure import STAGES
from attnknn_lib.report import figures
from attnknn_lib.report.figures import plt, save_output_figure
from attnknn_lib.report.findings import markdown_lists
from attnknn_lib.report.macros import macro_name, record_macros
from attnknn_lib.report.readme import per_dataset
from attnknn_lib.report.tables import booktabs


def s_range(rows: list[dict], s: dict) -> str:
    """'16 to 256, left to right': the efSearch values of one built HNSW index."""
    ef = [r["setting"]["ef_search"] for r in rows if r["setting"]["kind"] == "hnsw"
          and r["setting"]["ef_construction"] == s["ef_construction"]]
    return f"{min(ef)} to {max(ef)}, left to right" if len(ef) > 1 else str(ef[0])


def _miss_floor(rows: list[dict]) -> float:
    """Where recall 1 sits on the 1 - recall log axis: a decade below the smallest miss measured."""
    misses = [1 - r["recall"] for r in rows if r["recall"] < 1]
    return 10 ** (np.floor(np.log10(min(misses))) - 1) if misses else 1e-4


def _tradeoff_panel(ax, rows: list[dict], time_key: str, xlabel: str, k: int) -> None:
    """recall@k against µs per query: one line per built index, along its search knob. The y axis is
    1 - recall on a log scale (upwards: closer to 1), so the settings near recall 1 stay apart."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        s = r["setting"]
        name = (f"HNSW M={s['m']}, efC={s['ef_construction']} (efSearch {s_range(rows, s)})" if s["kind"] == "hnsw"
                else "IVF-Flat (labels: nprobe)" if s["kind"] == "ivf_flat" else r["label"])
        groups.setdefault(name, []).append(r)
    floor = _miss_floor(rows)
    for i, (name, rs) in enumerate(groups.items()):
        x, y = [r[time_key] for r in rs], [max(1 - r["recall"], floor) for r in rs]
        ax.plot(x, y, marker="osD^v"[i % 5], ms=4, lw=1.1, color=f"C{i}", label=name, ls="-" if len(rs) > 1 else "none")
        if rs[0]["setting"]["kind"] == "ivf_flat":
            for r in rs:
                ax.annotate(str(r["setting"]["nprobe"]), (r[time_key], max(1 - r["recall"], floor)), fontsize=7,
                            textcoords="offset points", xytext=(3, 3), color=f"C{i}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = [t for t in (0.5, 0.1, 0.01, 1e-3, 1e-4, 1e-5) if t > floor]
    ax.set_yticks([*ticks, floor], [f"{1 - t:g}" for t in ticks] + ["1 (exact)"])
    ax.set_ylim(0.8, floor / 2.5)  # inverted: recall grows upwards
    ax.axhline(floor, color="grey", lw=0.6, ls=":")
    ax.minorticks_off()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"recall@{k} (log of 1 - recall)")
    ax.grid(alpha=0.3)


def figure(record: dict):
    """Top: recall against search time on the real bank, batched and one query at a time. Bottom:
    where the time of one prediction goes (dot plot on a log axis)."""

    res = record["results"]
    fig = plt.figure(figsize=(6.0, 6.0), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1.45, 1])
    axes = top.subplots(1, 2, sharey=True)
    _tradeoff_panel(axes[0], res["indexes"], "batched_us", f"µs per query (log; {res['queries']} per call)",
                    res["recall_k"])
    _tradeoff_panel(axes[1], res["indexes"], "single_us", "µs per query (log; one per call)", res["recall_k"])
    axes[1].set_ylabel("")
    axes[0].set_title("batched")
    axes[1].set_title("one query at a time")
    handles, labels = axes[0].get_legend_handles_labels()
    top.legend(handles, labels, loc="outside lower center", ncol=2, frameon=False, fontsize=7)
    top.suptitle(f"Recall against search time: FAISS on {res['n_bank']:,} embeddings (main's model, seed "
                 f"{res['seed']}; {res['threads']} threads)", fontsize=9)
    ax = bottom.subplots()
    stages = list(STAGES)
    y = np.arange(len(stages))
    for j, (mode, label, marker) in enumerate((("batched", "batched", "o"), ("single", "one at a time", "s"))):
        t = [res["prediction"][mode][s] for s in stages]
        ax.plot(t, y + (j - 0.5) * 0.2, marker=marker, ls="none", ms=5, color=f"C{j + 5}", label=label)
    ax.set_yticks(y, [STAGES[s] for s in stages])
    ax.set_ylim(len(stages) - 0.5, -0.5)
    ax.set_xscale("log")
    ax.set_xlabel("µs per query (log)")
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, loc="upper left", fontsize=8)
    share = res["prediction"]["single_shares"]["attention"]
    bottom.suptitle(f"Time per query of each stage (k = {res['k']}; one at a time, attention = "
                    f"{100 * share:.0f} % of Attn-KNN)", fontsize=9)
    return fig


def scaling_figure(record: dict):
    """Build time, search time per query (batched, single) and recall against n on synthetic unit
    vectors, log-log, with the fitted slope of each line in the legend."""

    syn = record["results"]["synthetic"]
    k = record["results"]["recall_k"]
    panels: dict = {"build time (s)": {}, "µs per query, batched": {}, "µs per query, one at a time": {},
                    f"recall@{k}": {}}
    for label, e in syn["by_index"].items():
        panels["build time (s)"][label] = (e["n"], e["build_s"], None)
        panels["µs per query, batched"][label] = (e["n"], e["batched_us"], None)
        panels["µs per query, one at a time"][label] = (e["n"], e["single_us"], None)
        panels[f"recall@{k}"][label] = (e["n"], e["recall"], None)
    fig = figures.curve_panels(panels, "bank size n (log)", ncols=2, logx=True, logy=tuple(list(panels)[:3]),
                             panel_width=3.6,
                             title=f"Synthetic unit vectors (d = {syn['dim']}, {syn['queries']} queries): cost "
                                   f"against n, with the slopes of log-log fits")
    for ax, key in zip(fig.axes, ("build_s", "batched_us", "single_us")):
        for i, e in enumerate(syn["by_index"].values()):  # slopes stacked in the top-left corner
            ax.text(0.03, 0.95 - 0.1 * i, f"slope {e['fit'][key]['slope']:.2f}", transform=ax.transAxes, fontsize=6.5,
                    color=f"C{i}", va="top")
    return fig


def index_frame(record: dict) -> pd.DataFrame:
    """One row per index setting on the real bank."""
    res = record["results"]
    rows = {}
    for r in res["indexes"]:
        rows[r["label"]] = {"build (s)": f"{r['build_s']:.2f}", "batched (µs/q)": f"{r['batched_us']:.1f}",
                            "single (µs/q)": f"{r['single_us']:.0f}", f"recall@{res['recall_k']}": f"{r['recall']:.3f}",
                            "bytes/vector": f"{r['bytes_per_vector']:.0f}",
                            "RAM limit (M)": f"{r['max_n_in_ram'] / 1e6:.0f}"}
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "Index"
    return df


def cost_frame(record: dict) -> pd.DataFrame:
    """µs per query of each stage of a prediction, batched and one at a time, with the shares of
    Attn-KNN's time (embedding + search + attention vote)."""
    p = record["results"]["prediction"]
    rows = {}
    for s, name in STAGES.items():
        name = name.replace(" (Flat L2)", "")  # the index's FAISS name says nothing to a reader of the table
        row = {"batched (µs)": f"{p['batched'][s]:.1f}", "one at a time (µs)": f"{p['single'][s]:.0f}"}
        for mode, col in (("batched", "share, batched"), ("single", "share, one at a time")):
            v = p[f"{mode}_shares"].get(s)
            row[col] = f"{100 * v:.1f}\\,\\%" if v is not None else "--"
        rows[name] = row
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "Stage"
    return df


def throughput_frame(record: dict) -> pd.DataFrame:
    """The GEMM yardstick and exact search by FAISS and by torch at the sizes each serves."""
    res = record["results"]
    g, d = res["gemm"], res["dim"]
    rows = {}

    def row(name, shape, seconds, gflops):
        rows[name] = {"$B \\times n \\times d$": " $\\times$ ".join(f"{v:,}" for v in shape),
                      "time (ms)": f"{1e3 * seconds:.1f}", "GFLOP/s": f"{gflops:.1f}",
                      "of GEMM": f"{100 * gflops / g['gemm_gflops']:.0f}\\,\\%"}

    m = g["gemm_shape"][0]
    row("fp32 GEMM (torch), square", g["gemm_shape"], 2.0 * m ** 3 / g["gemm_gflops"] / 1e9, g["gemm_gflops"])
    b, n, _ = g["same_shape"]
    row("fp32 GEMM (torch), search's shape", g["same_shape"], 2.0 * b * n * d / g["gemm_same_shape_gflops"] / 1e9,
        g["gemm_same_shape_gflops"])
    row("FAISS Flat L2 search", g["same_shape"], 2.0 * b * n * d / g["flat_search_gflops"] / 1e9, g["flat_search_gflops"])
    row("FAISS Flat IP search", g["same_shape"], 2.0 * b * n * d / g["flat_ip_search_gflops"] / 1e9,
        g["flat_ip_search_gflops"])
    for e in res["search_engines"]:
        flops = 2.0 * e["queries"] * e["n"] * d
        for eng, key in (("FAISS Flat IP", "faiss_ms"), ("torch matmul + top-k", "torch_ms")):
            row(f"{eng}, {e['use']}", [e["queries"], e["n"], d], e[key] / 1e3, flops / (e[key] / 1e3) / 1e9)
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "Operation"
    return df


def write_outputs(record: dict, paths: Paths) -> dict:
    res, d, title, src = output_context(record, NOTEBOOK, ARTIFACTS)
    tr = res["training"]
    where = (f"{res['threads']} CPU threads, memory of {res['n_bank']:,} embeddings ({res['dim']} dimensions) of the Attn-KNN model "
             f"(seed {res['seed']}), {res['queries']:,} test queries; medians of {record['config']['repeats']} timings")
    out = {"indexes": ARTIFACTS.write_table(paths, "indexes", d, booktabs(
        index_frame(record), f"{title}: FAISS indexes as memories. Recall against exact search; bytes of the "
        f"serialised index per vector; RAM limit: the largest bank (millions of vectors) that fits in this machine's "
        f"{res['ram_bytes'] / 2 ** 30:.0f} GiB of RAM with the bank's own copy of the vectors (computed, not run). "
        f"{where}. {src}.", f"tab:{NAME}-indexes"))}
    out["costs"] = ARTIFACTS.write_table(paths, "costs", d, booktabs(
        cost_frame(record), f"{title}: where the time of one prediction goes ($k = {res['k']}$), in µs per query; shares of Attn-KNN's "
        f"time (embedding + search + attention vote). Training seconds per epoch (median over "
        f"{tr['attnknn']['runs']} runs): Attn-KNN {tr['attnknn']['seconds_per_epoch']:.1f}, CNN "
        f"{tr['cnn']['seconds_per_epoch']:.1f} (ratio {tr['attnknn_over_cnn']:.2f}). {where}. {src}.",
        f"tab:{NAME}-costs"))
    out["throughput"] = ARTIFACTS.write_table(paths, "throughput", d, booktabs(
        throughput_frame(record), f"{title}: exact search against this machine's fp32 GEMM throughput, measured in the "
        f"same run (FLOPs $= 2Bnd$; the top-k is extra work). {where}. {src}.", f"tab:{NAME}-throughput"))
    out["figure"] = save_output_figure(ARTIFACTS, paths, "figure", d, figure(record))
    out["scaling"] = save_output_figure(ARTIFACTS, paths, "scaling", d, scaling_figure(record))
    return out


def slopes_frame(record: dict) -> pd.DataFrame:
    """Fitted log-log slopes against n on the synthetic banks (1: linear in n)."""
    syn = record["results"]["synthetic"]
    return pd.DataFrame({label: {"build": e["fit"]["build_s"]["slope"], "search, batched": e["fit"]["batched_us"]["slope"],
                                 "search, one at a time": e["fit"]["single_us"]["slope"],
                                 f"recall at n = {e['n'][-1]:,}": e["recall"][-1]}
                         for label, e in syn["by_index"].items()}).T.round(3).rename_axis("index (log-log slope against n)")


def summary_frame(record: dict) -> pd.DataFrame:
    """The headline measurements as text with their units: throughput and time ratios (x), recall,
    shares of a prediction's time (%)."""
    res = record["results"]
    p, g, h, tr = res["prediction"], res["gemm"], res["default_hnsw"], res["training"]

    def ratio(v: float) -> str:
        return f"{v:.2f}×"

    def share(v: float) -> str:
        return f"{100 * v:.1f} %"

    rows = {"flat search / GEMM throughput": ratio(g["flat_search_over_gemm"]),
            "flat IP search / GEMM throughput": ratio(g["flat_ip_search_over_gemm"]),
            "flat search / GEMM of the same shape": ratio(g["flat_search_over_gemm_same_shape"]),
            f"{h['label']}: recall@{res['recall_k']}": f"{h['recall']:.3f}",
            f"{h['label']}: speed-up over Flat, one query": ratio(h["speedup_over_flat_single"]),
            "attention share of one prediction (one at a time)": share(p["single_shares"]["attention"]),
            "attention share of one prediction (batched)": share(p["batched_shares"]["attention"]),
            "attention vote / distance vote (batched)": ratio(p["batched_shares"]["attention_over_distance"]),
            "Attn-KNN / CNN prediction time (batched)": ratio(p["batched_shares"]["attnknn_over_cnn"]),
            "Attn-KNN / CNN seconds per training epoch": ratio(tr["attnknn_over_cnn"])}
    return pd.DataFrame({"value": rows}).rename_axis("measurement")


def efficiency_macros(record: dict) -> dict[str, str]:
    """Efficiency: the GEMM yardstick, the default HNSW's recall, where a prediction's time goes,
    training time per epoch, and the fitted slopes against n (EfficiencyFashionMnist...)."""
    ds, res = record["dataset"], record["results"]
    p, g, h, tr = res["prediction"], res["gemm"], res["default_hnsw"], res["training"]
    pre = ("efficiency", ds)
    out = {macro_name(*pre, "Gemm Gflops"): f"{g['gemm_gflops']:.0f}",
           macro_name(*pre, "Flat Search Gflops"): f"{g['flat_search_gflops']:.0f}",
           macro_name(*pre, "Flat Search Over Gemm"): f"{g['flat_search_over_gemm']:.2f}",
           macro_name(*pre, "Flat Search Over Gemm Same Shape"): f"{g['flat_search_over_gemm_same_shape']:.2f}",
           macro_name(*pre, "Flat Ip Search Over Gemm"): f"{g['flat_ip_search_over_gemm']:.2f}",
           macro_name(*pre, "Hnsw Default Recall"): f"{h['recall']:.3f}",
           macro_name(*pre, "Hnsw Default Speedup"): f"{h['speedup_over_flat_single']:.1f}",
           macro_name(*pre, "N Bank"): f"{res['n_bank']:,}", macro_name(*pre, "Recall K"): str(res["recall_k"]),
           macro_name(*pre, "Threads"): str(res["threads"])}
    for mode, tag in (("batched", "Batched"), ("single", "Single")):
        sh = p[f"{mode}_shares"]
        out[macro_name(*pre, "Attention Share", tag)] = f"{100 * sh['attention']:.1f}"
        out[macro_name(*pre, "Attention Over Distance", tag)] = f"{sh['attention_over_distance']:.1f}"
        out[macro_name(*pre, "Attnknn Over Cnn", tag)] = f"{sh['attnknn_over_cnn']:.1f}"
        out[macro_name(*pre, "Attnknn Us", tag)] = f"{sh['attnknn_total_us']:.1f}"
    out[macro_name(*pre, "Train Epoch Attnknn")] = f"{tr['attnknn']['seconds_per_epoch']:.1f}"
    out[macro_name(*pre, "Train Epoch Cnn")] = f"{tr['cnn']['seconds_per_epoch']:.1f}"
    out[macro_name(*pre, "Train Epoch Ratio")] = f"{tr['attnknn_over_cnn']:.2f}"
    for e in res["search_engines"]:
        out[macro_name(*pre, e["use"], "Faiss Over Torch")] = f"{e['faiss_over_torch']:.2f}"
    for _label, e in res["synthetic"]["by_index"].items():
        kind = e["setting"]["kind"]
        for key, tag in (("batched_us", "Batched"), ("single_us", "Single"), ("build_s", "Build")):
            out[macro_name(*pre, "Slope", kind, tag)] = f"{e['fit'][key]['slope']:.2f}"
        out[macro_name(*pre, "Synthetic Recall", kind)] = f"{e['recall'][-1]:.3f}"
    out[macro_name(*pre, "Synthetic Max N")] = f"{res['synthetic']['sizes'][-1]:,}"
    return out




def macros(records: list[dict]) -> dict[str, str]:
    """Every macro of this experiment, with caption sources and dataset-free aliases."""
    return record_macros(records, efficiency_macros, NOTEBOOK, ARTIFACTS.record_file)


def _bullet(res: dict, title: str) -> str:
    g, h, p = res["gemm"], res["default_hnsw"], res["prediction"]
    return (f"- efficiency ({title}, bank of {res['n_bank']:,}, {res['threads']} threads): exact batched "
            f"search (Flat L2) runs at {g['flat_search_over_gemm']:.2f} x this machine's fp32 GEMM throughput "
            f"({g['flat_search_gflops']:.0f} of {g['gemm_gflops']:.0f} GFLOP/s; Flat IP "
            f"{g['flat_ip_search_over_gemm']:.2f}); {h['label']} recall@"
            f"{res['recall_k']} {h['recall']:.3f}; the attention vote takes "
            f"{100 * p['single_shares']['attention']:.1f} % of one prediction (one query at a time; "
            f"{100 * p['batched_shares']['attention']:.1f} % batched) and "
            f"{p['batched_shares']['attention_over_distance']:.0f} x the distance vote's time.")


def readme_lines(records: list[dict]) -> list[str]:
    """One README bullet per dataset: search against GEMM, HNSW recall, the attention's share of a prediction."""
    return per_dataset(records, _bullet)


def reading(res: dict) -> list[str]:
    """What the numbers mean, one sentence each: where one prediction's time goes, whether an
    approximate index pays at this bank size, and what training costs against the CNN."""
    p, h = res["prediction"], res["default_hnsw"]
    flat = next(e for e in res["indexes"] if e["label"] == "Flat L2")
    single = p["single_shares"]
    big = max(("embed", "search"), key=lambda part: single[part])
    out = [f"One query at a time, a prediction takes {single['attnknn_total_us'] / 1000:.1f} ms, "
           f"{100 * single[big]:.0f} % of it in the {'neighbour search' if big == 'search' else 'embedding'} and "
           f"{100 * single['attention']:.1f} % in the attention: the attention is "
           + ("a small part of the cost, so Attn-KNN predicts at about the cost of a plain kNN vote over the "
              "same embedding." if single["attention"] < 0.1 else "a noticeable part of a prediction's cost.")]
    gain = flat["single_us"] / h["single_us"]
    out.append(f"At {res['n_bank']:,} rows, {h['label']} answers one query {gain:.0f} x faster than exact search "
               f"({h['single_us']:.0f} against {flat['single_us']:.0f} µs) at recall@{res['recall_k']} "
               f"{h['recall']:.3f}; batched, exact search is {flat['batched_us']:.0f} µs per query, so an approximate "
               f"index pays for single queries, " + ("hardly for batches." if flat["batched_us"] < 2 * h["batched_us"]
                                                     else "and for batches too."))
    tr = res["training"]
    out.append(f"Training: an Attn-KNN epoch costs {tr['attnknn_over_cnn']:.1f} x a CNN epoch "
               f"({tr['attnknn']['seconds_per_epoch']:.0f} against {tr['cnn']['seconds_per_epoch']:.0f} s), for the "
               f"neighbour search in every step and the clean bank's rebuild each epoch.")
    return out


def findings(record: dict) -> str:
    """The notebook's answer (the README's bullet of this record), then what it means."""
    res = record["results"]
    return markdown_lists([_bullet(res, REGISTRY[record["dataset"]].title)[2:], ""]
                          + [f"- {line}" for line in reading(res)])


def training_frame(record: dict) -> pd.DataFrame:
    """Seconds per training epoch of Attn-KNN and the CNN (the loop alone, and with validation and
    the memory rebuild), over how many runs and epochs."""
    tr = record["results"]["training"]
    labels = {"attnknn": "Attn-KNN", "cnn": "CNN"}
    rows = {labels[m]: {"s per epoch (training loop)": f"{tr[m]['train_seconds_per_epoch']:.1f}",
                        "s per epoch (all)": f"{tr[m]['seconds_per_epoch']:.1f}",
                        "epochs": int(tr[m]["epochs"]), "runs": int(tr[m]["runs"])} for m in labels}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("model")

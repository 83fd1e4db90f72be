"""The bench record as text: its table of ratios and the generated block of docs/benchmarks.md."""

from __future__ import annotations

from attnknn_lib.report.readme import width_sentence
from attnknn_lib.tooling.profiling import OWNERS
from attnknn_lib.tooling.stage_times import NOTEBOOK_BUDGET_S

REST_BUDGET = 0.05  # training time outside the steps and the memory refresh, as a share of training time


def profile_lines(profiles: dict, n: int = 3, run_stages: dict | None = None) -> list[str]:
    """Where each profiled job's time goes: one row per notebook or training job with its largest
    library building block (the most cumulative time outside ``experiments/``, under 90 % of the
    whole) and its time split by owner (torch, FAISS, NumPy/SciPy, the library's own lines, the
    rest; shares of the profiled time), then its library functions with the most own time."""
    if not profiles:
        return []
    stages = run_stages or {}
    lines = ["", "Where each job's time goes (`python -m attnknn_lib.tooling.profiling NAME`, "
                 "`results/profile_NAME.json`): cProfile of a notebook's measurement on the run's cached models, or of "
                 "a training job trained afresh for a few epochs (`train_*`), on the threads its workflow job gets "
                 "(the run's job time where the profile used the run's parameters). The largest block is the "
                 "library call (outside `experiments/`, under 90 % of the whole) with the most time, callees "
                 "included; each owner's share is its own time over the profiled time:", "",
             "| job | profiled | run's job | largest block | " + " | ".join(c for c, _ in OWNERS.values()) + " |",
             "| --- | ---: | ---: | --- | " + " | ".join("---:" for _ in OWNERS) + " |"]
    notes = []
    for name, p in profiles.items():
        # the run's job only where the profile ran it as the run did (no -p overrides)
        job = None if p["overrides"] else (stages.get(f"notebook {name}") or {}).get("seconds")
        owners = p.get("by_owner") or {}
        total = sum(owners.values())
        cells = [f"{100 * owners.get(k, 0.0) / total:.0f} %" if total else "-" for k in OWNERS]
        block = largest_block(p)
        big = (f"`{_short(block['function'])}` {100 * block['cumulative_seconds'] / p['wall_seconds']:.0f} %"
               if block else "-")
        knobs = f", {', '.join(p['overrides'])}" if p["overrides"] else ""
        lines.append(f"| `{name}` | {p['wall_seconds']:,.0f} s ({p.get('threads', '?')} thr.{knobs}) | "
                     f"{f'{job:,.0f} s' if job else '-'} | {big} | " + " | ".join(cells) + " |")
        notes.append(f"- `{name}`: " + ", ".join(f"`{_short(r['function'])}` {r['own_seconds']:.1f} s"
                                                  for r in p["by_own_time"][:n]))
    lines += ["", "Owners: " + "; ".join(f"{c}: {d}" for c, d in OWNERS.values()) + ". The library functions "
              "with the most own time (their Python and the operator arithmetic in their lines):", "", *notes]
    return lines


def largest_block(profile: dict) -> dict | None:
    """A profile's largest library call: the first by cumulative time outside ``experiments/``
    that is under 90 % of the whole (the entry points above it hold everything)."""
    return next((r for r in profile["by_cumulative_time"] if not r["function"].startswith("attnknn_lib/experiments/")
                 and r["cumulative_seconds"] < 0.9 * profile["wall_seconds"]), None)


def _short(function: str) -> str:
    """``attnknn_lib/knn/votes.py:178(vote)`` -> ``knn/votes.py:178(vote)``."""
    return function.removeprefix("attnknn_lib/")


def table(bench: dict):
    """The benchmark as rows (what, measured, ratio, ratio means) in a pandas DataFrame."""
    import pandas as pd

    g, v = bench["search_vs_gemm"], bench["votes"]
    us = v["us_per_query"]
    rows = [("exact search (Flat L2) vs GEMM", f"{g['flat_search_gflops']:.0f} vs {g['gemm_gflops']:.0f} GFLOP/s",
             g["flat_search_over_gemm"], "share of GEMM speed"),
            ("exact search (Flat IP) vs GEMM", f"{g['flat_ip_search_gflops']:.0f} vs {g['gemm_gflops']:.0f} GFLOP/s",
             g["flat_ip_search_over_gemm"], "share of GEMM speed"),
            ("attention vote vs distance vote, batched", f"{us['attention_batched']:.2f} vs "
             f"{us['distance_batched']:.2f} µs/query", v["attention_over_distance_batched"], "times slower"),
            ("attention vote vs distance vote, one query", f"{us['attention_single']:.0f} vs "
             f"{us['distance_single']:.0f} µs/query", v["attention_over_distance_single"], "times slower"),
            ("vectorised vote vs per-row loop", f"{us['vote_vectorised']:.3f} vs {us['vote_naive_loop']:.2f} µs/query",
             v["naive_over_vectorised"], "times faster")]
    t = bench.get("training")
    if t:
        for key, what in (("cnn_step", "CNN"), ("attnknn_step", "Attn-KNN")):
            e = t[key]
            rows.append((f"{what} training step (batch {t['batch']}, fp32) vs GEMM",
                         f"{e['images_per_s']:,.0f} images/s, {e['gflops']:.0f} GFLOP/s", e["over_gemm"],
                         "share of GEMM speed"))
            for lever, how in (("_bf16_scan", "bf16 neighbour scan"), ("_amp", "bf16 scan and amp" if
                                                                         key == "attnknn_step" else "amp")):
                if key + lever in t:
                    e2 = t[key + lever]
                    rows.append((f"{what} training step, {how}, vs fp32", f"{e2['images_per_s']:,.0f} images/s",
                                 e2["images_per_s"] / e["images_per_s"], "times faster"))
        rows.append(("batch augmentation / bank embedding", f"{t['augment']['images_per_s']:,.0f} / "
                     f"{t['bank_embedding']['images_per_s']:,.0f} images/s", float("nan"), ""))
        if "bank_embedding_1024" in t:  # the refresh's batch against the earlier 1024 (same embeddings, bit for bit)
            b = t["bank_embedding"]
            rows.append((f"bank refresh embedding, batch {b['batch']} vs 1024", f"{b['images_per_s']:,.0f} vs "
                         f"{t['bank_embedding_1024']['images_per_s']:,.0f} images/s",
                         b["images_per_s"] / t["bank_embedding_1024"]["images_per_s"], "times faster"))
    for kind, e in (bench.get("training_in_cpu_run") or {}).items():
        rows.append((f"cpu run: {'Attn-KNN' if kind == 'attnknn' else 'CNN'} training epochs",
                     f"{e['images_per_s']:,.0f} images/s (one thread per job)", e["share_outside_steps"],
                     "share of epoch time outside the steps"))
    if "smoke" in bench:
        s = bench["smoke"]
        rows.append(("smoke workflow end to end (PDFs, paper)", f"{s['seconds']:.0f} s", s["over_budget"],
                     f"share of its {s['budget_seconds'] // 60} min budget"))
    cpu = bench["cpu_run"]
    for name, st in cpu["stages"].items():
        if st["seconds"] is None:
            rows.append((f"cpu run: {name}", "not recorded", float("nan"), ""))
            continue
        extra = f" ({st['jobs']} jobs{', ' + str(st['missing']) + ' not recorded' if st.get('missing') else ''})" \
            if "jobs" in st else ""
        notebook = name.startswith("notebook ")
        rows.append((f"cpu run: {name}", f"{st['seconds']:.0f} s{extra}",
                     st["seconds"] / NOTEBOOK_BUDGET_S if notebook else float("nan"),
                     "share of 15 min" if notebook else ""))
        if st.get("step_seconds") is not None:
            rows.append(("cpu run: training steps alone (forward, backward, optimiser)",
                         f"{st['step_seconds']:.0f} of {st['seconds']:.0f} s", st["step_seconds"] / st["seconds"],
                         "share of training time"))
        if st.get("rest_seconds") is not None:
            for key, what in (("refresh_seconds", "the clean bank's refresh each epoch"),
                              ("rest_seconds", "the rest (start-up, loading, validation, bookkeeping)")):
                rows.append((f"cpu run: training, {what}", f"{st[key]:.0f} of {st['seconds']:.0f} s",
                             st[key] / st["seconds"], "share of training time"))
        part_s = {p: x for p, x in (st.get("parts") or {}).items() if x is not None}
        if part_s:
            longest = max(part_s, key=part_s.get)
            rows.append((f"cpu run: {name}, its {len(part_s)} part jobs",
                         f"{sum(part_s.values()):.0f} s in all, longest {part_s[longest]:.0f} s ({longest})",
                         part_s[longest] / NOTEBOOK_BUDGET_S, "longest part's share of 15 min"))
    rows.append(("cpu run: sum of the job times" + ("" if cpu["complete"] else " (incomplete record)"),
                 f"{cpu['total_seconds'] / 60:.1f} min on {cpu.get('cores', 1)} cores",
                 cpu["busy_share"] if cpu.get("busy_share") is not None else float("nan"),
                 "cores' busy share over the wall time"))
    if cpu.get("wall_seconds") is not None:
        floor = cpu.get("floor_seconds")
        rows.append(("cpu run: wall time while jobs ran (side by side; pauses between sessions left out)", f"{cpu['wall_seconds'] / 60:.1f} min",
                     cpu["wall_seconds"] / floor if floor else float("nan"),
                     "times the training steps' floor" if floor else ""))
    return pd.DataFrame(rows, columns=["measurement", "measured", "ratio", "ratio means"])


def ratios(bench: dict) -> dict[str, float]:
    """The micro-benchmarks' ratios of one bench run (the cpu run's stage times are that run's, not
    the bench's, and are left out)."""
    return {r.measurement: float(r.ratio) for r in table(bench).itertuples(index=False)
            if r.ratio == r.ratio and not r.measurement.startswith(("cpu run", "smoke"))}



def largest_items(cpu: dict, profiles: dict | None = None, n: int = 3) -> list[tuple[str, float, str]]:
    """The ``n`` largest items of the cpu run's job time (the training steps, the memory refresh, the
    rest of training, each notebook with its part jobs, the PDF exports), each with what it would
    take to cut it; a notebook's answer names its profile's largest block where one is committed."""
    stages = cpu.get("stages") or {}
    train = stages.get("training") or {}
    items: list[tuple[str, float, str]] = []
    for key, what, cut in (
            ("step_seconds", "training steps", "a GPU (the training stage below) or fewer epochs; on this CPU "
             "they already run in bf16 at the speeds above"),
            ("refresh_seconds", "the clean bank's refresh", "refreshing the bank less often than every epoch, "
             "which changes the method's numbers"),
            ("rest_seconds", "training outside the steps and the refresh", "fewer, longer training processes "
             "(start-up and loading are paid per job)")):
        if train.get(key) is not None:
            items.append((what, train[key], cut))
    for name, st in stages.items():
        if not name.startswith("notebook ") or st.get("seconds") is None:
            continue
        seconds = st["seconds"] + sum(x for x in (st.get("parts") or {}).values() if x is not None)
        p = (profiles or {}).get(name.removeprefix("notebook "))
        block = largest_block(p) if p else None
        cut = (f"a faster `{_short(block['function'])}`, {100 * block['cumulative_seconds'] / p['wall_seconds']:.0f} % "
               "of its profile" if block else "faster part jobs (the longest one decides when the notebook can start)"
               if st.get("parts") else "splitting it into part jobs that run beside the others")
        items.append((name + (" and its part jobs" if st.get("parts") else ""), seconds, cut))
    if (stages.get("pdf") or {}).get("seconds") is not None:
        items.append(("PDF exports", stages["pdf"]["seconds"], "fewer pages"))
    return sorted(items, key=lambda it: -it[1])[:n]


def rest_split_sentence(train: dict) -> str:
    """Where the training time outside the steps and the refresh is paid: inside the epochs (the
    validation set embedded and scored every epoch, which picks the checkpoint, and bookkeeping) and
    once per job (start-up, loading, saving); and whether the part inside the epochs alone is over
    the goal. Empty without the split."""
    inside, outside = train.get("rest_in_epochs_seconds"), train.get("rest_outside_epochs_seconds")
    if inside is None or outside is None or not train.get("seconds"):
        return ""
    total = train["seconds"]
    said = (f" Of it, {inside:,.0f} s ({100 * inside / total:.1f} %) is paid inside the epochs (the validation set "
            f"embedded and scored every epoch, which picks the checkpoint, and bookkeeping) and {outside:,.0f} s "
            f"({100 * outside / total:.1f} %) once per job (start-up, loading, saving).")
    if inside / total > REST_BUDGET:
        said += (f" With no per-job cost at all, the part inside the epochs would still be above the "
                 f"{100 * REST_BUDGET:.0f} % goal: meeting it needs a cheaper validation each epoch, not fewer processes.")
    return said


def width_lines(cpu: dict) -> list[str]:
    """Where the cores stood idle, by stage, and what the same jobs would take on 8 and 16 cores and
    with the GPU's training (:mod:`.schedule`)."""
    lines = []
    idle = {k: v for k, v in (cpu.get("idle_by_stage") or {}).items() if v >= 1}
    if idle:
        parts = ", ".join(f"{stage} {seconds / 60:,.0f} min" for stage, seconds in sorted(idle.items(), key=lambda kv: -kv[1]))
        lines += ["", f"Idle core time, by the stage that ran while cores stood idle: {parts}."]
    if cpu.get("at_width"):
        lines += ["", width_sentence(cpu["at_width"])]
    return lines


def floor_lines(cpu: dict, profiles: dict | None = None) -> list[str]:
    """The cpu run against its floor: the training steps' job seconds spread over every core (no
    change that keeps the steps can end the run sooner), the wall time over that floor, the cores'
    busy share, and the three largest items left with what each would take to cut."""
    train = (cpu.get("stages") or {}).get("training") or {}
    if train.get("step_seconds") is None or not cpu.get("floor_seconds"):
        return []
    cores = cpu.get("cores", 1)
    said = (f"The training steps alone (forward, backward and optimiser passes of the {train['jobs']} training jobs, "
            f"one thread per job) took {train['step_seconds']:,.0f} s of job time: on {cores} core"
            f"{'s' * (cores > 1)} no run can end sooner than {cpu['floor_seconds'] / 60:,.0f} min, the floor.")
    if cpu.get("wall_seconds"):
        said += (f" The run took {cpu['wall_seconds'] / 60:,.0f} min of wall time, {cpu['wall_seconds'] / cpu['floor_seconds']:.2f} "
                 f"times the floor, with the cores busy {100 * cpu['busy_share']:.0f} % of it.")
    rest = train.get("rest_seconds")
    if rest is not None:
        share = rest / train["seconds"]
        said += (f" Training time outside the steps and the bank refresh is {100 * share:.1f} % of training time "
                 f"({'within' if share <= REST_BUDGET else 'above'} the {100 * REST_BUDGET:.0f} % goal).")
        said += rest_split_sentence(train)
    lines = ["", said] + width_lines(cpu)
    items = largest_items(cpu, profiles)
    if items:
        lines += ["", "The three largest items left, and what it would take to cut each:", ""]
        lines += [f"- {what}: {seconds:,.0f} s of job time; to cut it: {cut}." for what, seconds, cut in items]
    return lines


def markdown(bench: dict) -> str:
    """The generated block of docs/benchmarks.md: the table with the spread of each ratio over the
    recorded bench runs, and where and when it was measured."""
    frame = table(bench)
    history = bench.get("history", [])
    lines = ["| measurement | measured | ratio | | range over bench runs |", "| --- | --- | ---: | --- | --- |"]
    for r in frame.itertuples(index=False):
        ratio = "" if r.ratio != r.ratio else f"{r.ratio:.2f}"
        seen = [h["ratios"][r.measurement] for h in history if r.measurement in h["ratios"]]
        spread = (f"{min(seen + [r.ratio]):.2f} to {max(seen + [r.ratio]):.2f} ({len(seen) + 1} runs)"
                  if seen and r.ratio == r.ratio else "")
        lines.append(f"| {r.measurement} | {r.measured} | {ratio} | {r[3]} | {spread} |")
    m = bench["machine"]
    lines += ["", f"Measured by `./run_all.sh bench` on {bench['started'][:10]}: {m['cpu_model']} "
                  f"({m['torch_cpu_capability']}), {bench['threads']} threads; `results/benchmarks.json`. The "
                  "`cpu run` rows read the job records of the last `./run_all.sh` in this folder. Ratios vary between "
                  "runs on a shared machine (the last column); the efficiency notebook measures search and votes "
                  "again inside that run (the README's Results block), so the two blocks differ by this spread."]
    lines += floor_lines(bench.get("cpu_run") or {}, bench.get("profiles"))
    lines += profile_lines(bench.get("profiles") or {}, run_stages=(bench.get("cpu_run") or {}).get("stages"))
    gpu = bench.get("training_stage_cuda")
    if gpu:
        cpu_train = ((bench.get("cpu_run") or {}).get("stages") or {}).get("training") or {}
        here = f", against {cpu_train['seconds']:,.0f} s of job time here" if cpu_train.get("seconds") else ""
        lines += ["", f"On a GPU ({gpu['device']}; `python -m attnknn_lib.tooling.training_stage --device cuda`, "
                      f"{gpu['measured'].split(',')[0]}): the cpu profile's {gpu['jobs']} training runs took "
                      f"{gpu['wall_seconds']:,.0f} s of wall time in {gpu['workers']} processes and "
                      f"{gpu['job_seconds']:,.0f} s of job time{here} (`results/training_stage_cuda.json`, with each "
                      "group's validation accuracy)."]
    lines += device_check_lines(bench.get("device_check_cuda"), bench.get("device_check_cuda_repeats") or [])
    return "\n".join(lines)


def device_check_lines(check: dict | None, repeats: list[dict] = ()) -> list[str]:
    """Main's Fashion-MNIST comparison measured on a GPU machine (:mod:`.device_check`): its wall time
    and how many of its seed-level verdicts equal the committed cpu record's, naming those that differ;
    then each repeat on another GPU, with how many of its verdicts, and of their values and intervals,
    equal the first GPU's (what tells a GPU's kernels from chance)."""
    if not check:
        return []
    def said_of(v: dict) -> str:
        return f"{v['verdict']} [{v['low']:+.4f}, {v['high']:+.4f}]"

    differ = [f"{key.replace('_', ' ')}: {said_of(v['device'])} there, {said_of(v['committed'])} here"
              for key, v in check["verdicts"].items() if v["committed"] and v["device"]["verdict"] != v["committed"]["verdict"]]
    parts = sorted(check["part_seconds"].values())
    said = (f"Main's Fashion-MNIST comparison on a GPU ({check['device']}, {check['cpu_count']} CPU cores; "
            f"`python -m attnknn_lib.tooling.device_check --device cuda`, {check['measured'].split(',')[0]}): each of "
            f"its {len(parts)} seeds trains its Attn-KNN and CNN there and is measured as a part, "
            f"{len(parts)} side by side ({parts[0]:,.0f}-{parts[-1]:,.0f} s each), {check['wall_seconds']:,.0f} s of wall "
            f"time in all; {check['equal']} of its {check['of']} seed-level verdicts equal the cpu record's")
    said += (" (" + "; ".join(differ) + ")." if differ else ".")
    said += " (`results/device_check_cuda.json`; the ablation, the replay and the MixUp control left out.)"
    for again in repeats:
        keys = [k for k in again["verdicts"] if k in check["verdicts"]]
        verdict = sum(again["verdicts"][k]["device"]["verdict"] == check["verdicts"][k]["device"]["verdict"] for k in keys)
        exact = sum(again["verdicts"][k]["device"] == check["verdicts"][k]["device"] for k in keys)
        said += (f" Repeated on another GPU ({again['device']}, {again['wall_seconds']:,.0f} s of wall time, "
                 f"{again['measured'].split(',')[0]}): {again['equal']} of {again['of']} verdicts equal the cpu "
                 f"record's, and {verdict} of {len(keys)} equal the {check['device']}'s, with the same values and "
                 f"intervals in {exact} of {len(keys)}")
        said += (": the two GPUs compute the same numbers, so the verdicts that differ from the cpu record's follow "
                 "from GPU against CPU arithmetic, not from run-to-run variation." if exact == len(keys) else ".")
    return ["", said]


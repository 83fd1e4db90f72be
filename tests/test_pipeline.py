"""Pipeline and notebooks: bad input stops before any work; the smoke run produces every output."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from experiment_api import api

from attnknn_lib.base.paths import Paths
from attnknn_lib.experiments.framework import catalog
from attnknn_lib.workflow.cli import main as pipeline_main

EXPERIMENTS = catalog.experiments()
MEASURED = {n: e for n, e in EXPERIMENTS.items() if not e.awaiting}  # declared and run: a committed record each

REPO = Path(__file__).resolve().parent.parent


def _run_cli(*args: str, out: Path) -> tuple[int, str]:
    proc = subprocess.run(["bash", str(REPO / "run_all.sh"), *args, "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("args,message", [
    (["--profile", "gpu"], "profile='gpu' is not allowed; choose one of: cpu, paper, smoke"),
    (["--only", "mian"], "experiment 'mian' is not allowed; choose one of: main"),
    (["-p", "epoch=3"], "unknown parameter 'epoch'; allowed:"),
    (["-p", "epochs=three"], "epochs='three' has the wrong type; allowed: int"),
    (["-p", "k=0"], "k=0 is out of range"),
    (["-p", "datasets=fashion_mnist,cifar100"], "dataset='cifar100' is not allowed"),
    (["-p", "main.tta_views=9"], "tta_views=9 is out of range"),
    (["-p", "datasets=5"], "dataset='5' is not allowed"),
    (["-p", "seeds=a,b"], "seeds='a,b' is not allowed; give non-negative integers"),
    (["-p", "embed_dim=130"], "embed_dim=130 is not divisible by num_heads=4"),
    (["-p", "primary=no"], "primary='no' is not allowed; choose one of: fashion_mnist"),
    (["--jobs", "-1"], "--jobs -1 is out of range"),
    (["--executor", "pbs"], "--executor 'pbs' is not allowed; choose one of: local, cluster-generic, slurm"),
    (["--workflow-profile", "/nonexistent"], "--workflow-profile '/nonexistent': no config.yaml there"),
    (["-p", "datasets=cifar10", "-p", "primary=cifar10"], "dataset 'cifar10': none of"),
    (["-p", "noise.rates=0.1,abc"], "rates='0.1,abc' is not allowed; give comma-separated numbers in [0, 0.95]"),
    (["-p", "noise.kinds=gaussian"], "kinds='gaussian' is not allowed; choose one of: symmetric, asymmetric"),
    (["-p", "k_sweep.k_values=0,5"], "k_values=0,5 is not allowed; every k must be >= 1"),
    (["-p", "k_sweep.retrain_seeds=7"], "retrain_seeds=7 is out of range"),
    (["-p", "long_tail.ratios=2"], "ratios='2' is not allowed; give comma-separated numbers in [0.0001, 1]"),
    (["-p", "long_tail.retrain_max_train=-5"], "retrain_max_train=-5 is out of range"),
    (["-p", "efficiency.ef_search=0,16"], "ef_search=0,16 is not allowed; every value must be >= 1"),
    (["-p", "efficiency.synthetic_sizes=10"], "synthetic_sizes=10 is not allowed; every n must be >= 78"),
    (["-p", "theory.temperatures=0"], "temperatures='0' is not allowed; give comma-separated numbers in [0.001, 100]"),
    (["-p", "theory.truncation_queries=0"], "truncation_queries=0 is out of range"),
    (["--profile", "smoke", "--only", "k_sweep", "-p", "k_values=1,5000"],
     "k_values: k=5000 is out of range; allowed: 1..2998 for the 3000 training rows of fashion_mnist"),
    (["--profile", "smoke", "-p", "image_backbone=resnet18_cifar", "-p", "pretrained=true"],
     "pretrained=True needs the ImageNet ResNet18 weights at "),
    (["--only", "theory", "-p", "dataset=mnist"], "dataset 'mnist': none of"),
    (["-p", "noise.rates=0,1.5"], "rates='0,1.5' is not allowed; give comma-separated numbers in [0, 0.95]"),
    (["-p", "long_tail.ratios=0"], "ratios='0' is not allowed; give comma-separated numbers in [0.0001, 1]"),
    (["-p", "lr=fast"], "lr='fast' has the wrong type; allowed: float"),
])
def test_bad_input_stops_with_one_line_before_any_work(args, message, tmp_path, monkeypatch, capsys):
    """The check run_all.sh runs first (``cli --validate``), in this process: one case below goes
    through run_all.sh itself."""
    monkeypatch.setenv("ATTNKNN_DATA_ROOT", str(tmp_path / "empty"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))  # no cached ImageNet weights
    out = tmp_path / "out"
    assert pipeline_main(["--validate", *args, "--out", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    assert not out.exists()  # nothing was written


@pytest.mark.slow  # a run_all.sh and a Python start with the workflow's imports: about 6 s
@pytest.mark.parametrize("args,message", [
    # one case: the check itself is the test above's (k=0 among them); this one shows that run_all.sh
    # passes its line through, with the caller's environment (TORCH_HOME) reaching the check
    (["--profile", "smoke", "-p", "image_backbone=resnet18_cifar", "-p", "pretrained=true"],
     "pretrained=True needs the ImageNet ResNet18 weights at "),
])
def test_run_all_stops_on_bad_input_with_one_line_before_any_work(args, message, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNKNN_DATA_ROOT", str(tmp_path / "empty"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    out = tmp_path / "out"
    code, err = _run_cli(*args, out=out)
    assert code == 2
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("[run_all]")]
    assert len(lines) == 1 and message in lines[0], err
    assert not out.exists()


def test_list_prints_the_resolved_parameters_and_reads_numbers_and_booleans(capsys):
    assert pipeline_main(["--profile", "smoke", "--list", "-p", "k=8", "-p", "lr=1e-3", "-p", "ablation=no"]) == 0
    plan = yaml.safe_load(capsys.readouterr().out)
    main = plan["main"]
    assert main["k"] == 8 and main["epochs"] == 1 and main["profile"] == "smoke" and main["seeds"] == "0,1"
    assert main["lr"] == 0.001 and main["ablation"] is False


def test_the_cpu_profile_is_the_defaults_and_profiles_name_only_known_parameters():
    from dataclasses import fields

    from attnknn_lib.base.knobs import defaults
    from attnknn_lib.training.recipe import Recipe
    from attnknn_lib.workflow.profiles import available_profiles, load_profile, resolve

    cpu = load_profile("cpu")
    assert cpu == {"recipe": {}, "experiments": {}}  # one source of truth: the dataclass defaults
    for name in available_profiles():
        prof = load_profile(name)
        assert set(prof["recipe"]) <= {f.name for f in fields(Recipe)}, name
        for exp, params in prof["experiments"].items():
            assert set(params) <= {f.name for f in fields(EXPERIMENTS[exp].Config)}, (name, exp)
    assert load_profile("smoke")["experiments"]  # each experiment's smoke values, in the profile's file
    resolved = resolve("cpu", None, [])
    for exp, params in resolved.items():
        assert params == {**defaults(EXPERIMENTS[exp].Config), "profile": "cpu"}


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_committed_notebooks_are_clean_and_their_parameters_cell_is_generated_from_the_config(name):
    from attnknn_lib.base.knobs import parameters_cell

    nb = json.loads((REPO / "notebooks" / EXPERIMENTS[name].notebook).read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and not c.get("execution_count") for c in code), "committed with outputs"
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    tagged = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1 and code[0] is tagged[0]
    source = "".join(tagged[0]["source"])
    assert source == parameters_cell(EXPERIMENTS[name].Config)
    for line in source.splitlines():  # papermill cannot parse a line with a second '=' (in a comment)
        assert line.lstrip().startswith("#") or line.count("=") == 1, line


PDF_CODE_WIDTH = 78  # nbconvert's LaTeX wraps a code line after about 80 characters, with a marker


def _findings_cell(nb: dict) -> dict:
    """The notebook's last cell, which must display the experiment's generated findings."""
    last = nb["cells"][-1]
    assert last["cell_type"] == "code" and "findings(" in "".join(last["source"]), "the last cell is not findings"
    return last


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_notebooks_have_a_title_end_with_findings_and_keep_code_lines_inside_the_pdf(name):
    nb = json.loads((REPO / "notebooks" / EXPERIMENTS[name].notebook).read_text())
    assert nb["metadata"].get("title"), "the PDF would be titled with the file name"
    _findings_cell(nb)
    assert hasattr(api(name), "findings")
    for c in nb["cells"]:
        if c["cell_type"] == "code" and "parameters" not in c["metadata"].get("tags", []):
            for line in "".join(c["source"]).splitlines():
                assert len(line) <= PDF_CODE_WIDTH, f"wrapped in the PDF: {line!r}"


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_each_committed_executed_notebook_ends_with_its_generated_findings(name):
    executed = REPO / "results" / "notebooks" / EXPERIMENTS[name].notebook
    nb = json.loads(executed.read_text())
    outputs = _findings_cell(nb)["outputs"]
    text = "".join("".join(o.get("data", {}).get("text/markdown", "")) for o in outputs)
    assert len(text) > 100 and any(w in text for w in ("better", "worse", "equivalent", "inconclusive", "%")), text


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_findings_read_numbers_and_verdict_words_from_the_committed_records(name):
    import glob

    mod = api(name)
    records = [json.loads(Path(f).read_text()) for f in sorted(glob.glob(str(REPO / "results" / f"{name}_*.json")))]
    assert records
    text = mod.findings(records) if name == "main" else mod.findings(records[0])
    assert text.strip() and "nan" not in text.lower().split()
    if name in ("main", "k_sweep", "noise", "long_tail", "attention_study"):
        assert any(f"**{w}**" in text or f" {w}" in text for w in ("better", "worse", "equivalent", "inconclusive"))


def test_papermill_reads_every_parameter_of_the_cell():
    from papermill.translators import PythonTranslator

    nb = json.loads((REPO / "notebooks" / EXPERIMENTS["main"].notebook).read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    inferred = PythonTranslator.inspect({"source": "".join(cell["source"])})
    names = {p.name for p in inferred}
    from dataclasses import fields

    assert {f.name for f in fields(EXPERIMENTS["main"].Config)} | {"out_dir", "recompute"} == names


def test_local_runs_use_one_thread_per_job_and_jobs_inherit_their_threads(monkeypatch):
    from types import SimpleNamespace

    from attnknn_lib.base.runtime import set_threads
    from attnknn_lib.workflow.cli import train_threads

    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert train_threads(SimpleNamespace(executor=None, jobs=0)) == 1  # as many one-thread jobs as cores
    assert train_threads(SimpleNamespace(executor=None, jobs=2)) == 4
    assert train_threads(SimpleNamespace(executor="slurm", jobs=0)) == 8
    monkeypatch.setenv("ATTNKNN_THREADS", "1")
    before = __import__("torch").get_num_threads()
    try:
        assert set_threads() == 1
    finally:
        set_threads(before)


def test_the_mixup_control_cnn_is_declared_only_when_it_differs_from_the_recipe():
    cfg = EXPERIMENTS["main"].Config(seeds="0,1,2,3", control_seeds=2)
    control = cfg.control_runs()
    assert [(r.kind, r.seed, r.train["mixup_alpha"]) for r in control] == [("cnn", 0, 0.2), ("cnn", 1, 0.2)]
    assert all(r.id in {x.id for x in EXPERIMENTS["main"].runs(cfg)} for r in control)
    assert EXPERIMENTS["main"].Config(mixup_alpha=0.2).control_runs() == []


@pytest.mark.slow  # a notebook through nbconvert and xelatex: about 6 s
def test_notebook_pdfs_use_the_projects_template_at_ten_points(tmp_path):
    """export_pdf renders through attnknn_lib/workflow/pdf_template (10 pt, narrower margins), so
    a report's tables and figures take fewer pages than nbconvert's 11 pt default."""
    import nbformat
    import pymupdf

    from attnknn_lib.workflow.jobs import export_pdf

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A title\n\nSome words in the body.")])
    path = tmp_path / "note.ipynb"
    nbformat.write(nb, path)
    pdf = pymupdf.open(export_pdf(path))
    sizes = [round(span["size"]) for block in pdf[0].get_text("dict")["blocks"] for line in block.get("lines", [])
             for span in line["spans"] if span["text"].strip()]
    assert min(sizes) == 10  # the body text (the title is larger)
    left = min(b[0] for b in pdf[0].get_text("blocks"))
    assert left < 72 * 0.95  # the text starts inside nbconvert's 1 in margin


def test_part_jobs_run_side_by_side_only_as_far_as_memory_holds(tmp_path):
    from attnknn_lib.workflow.cli import RESERVED_MEMORY_GB, part_memory_budget_gb
    from attnknn_lib.workflow.plan import make_plan
    from attnknn_lib.workflow.profiles import resolve

    resolved = resolve("cpu", None, [])
    plan = make_plan({n: resolved[n] for n in ("attention_study", "k_sweep", "theory")}, Paths(tmp_path),
                     pdf=False, paper=False)
    study, sweep = (plan["experiments"][n]["part_memory_gb"] for n in ("attention_study", "k_sweep"))
    assert "part_memory_gb" not in plan["experiments"]["theory"]  # no parts
    gb = 2 ** 30
    # this 24 GB machine: two study parts at once, or one beside k-sweep parts, never three study parts
    budget = part_memory_budget_gb(plan, 24 * gb)
    assert budget == 24 - RESERVED_MEMORY_GB and 2 * study <= budget < 3 * study and study + 2 * sweep <= budget
    assert part_memory_budget_gb(plan, 4 * gb) == study  # the largest part can always run, alone
    assert part_memory_budget_gb(plan, 128 * gb) // study == 15


def test_a_jobs_peak_memory_counts_its_largest_child():
    """A notebook job's memory is its kernel's (a child process): the job's time record and log line
    report the larger of its own peak and its largest finished child's."""
    import subprocess
    import sys

    script = ("import subprocess, sys; from attnknn_lib.workflow.jobs import _peak_memory_gb; "
              "before = _peak_memory_gb(); "
              "subprocess.run([sys.executable, '-c', 'b = bytearray(1536 * 2 ** 20); b[::4096] = bytes(len(b[::4096]))']); "
              "print(before, _peak_memory_gb())")
    # a fresh process: this test process's own children (other tests' subprocesses) would count too;
    # started by a shell, which forks it: a process started by this one inherits its peak as its own
    # (Linux keeps the peak of the memory it replaces at exec), which, late in a worker's run, is over 1.4 GB
    probe = ["sh", "-c", '"$0" -c "$1"; exit $?', sys.executable, script]
    before, after = map(float, subprocess.run(probe, check=True, capture_output=True, text=True).stdout.split())
    assert before < 1.4 <= after  # the child held 1.5 GB; the job itself far less


def test_the_report_reads_the_other_experiments_in_the_order_a_full_plan_lists_them(tmp_path):
    """``--only attention_study`` reads main's records from disk: in main's dataset order, not the
    alphabet's (else the README's results table changed its row order)."""
    from attnknn_lib.workflow.plan import result_files

    datasets = ["fashion_mnist", "digits", "iris", "wine", "breast_cancer"]
    (tmp_path / "results").mkdir()
    for ds in ("breast_cancer", "fashion_mnist", "iris"):
        (tmp_path / "results" / f"main_{ds}.json").write_text(json.dumps(
            {"experiment": "main", "dataset": ds, "profile": "cpu", "config": {"datasets": datasets}}))
    (tmp_path / "results" / "noise_fashion_mnist.json").write_text(json.dumps(
        {"experiment": "noise", "dataset": "fashion_mnist", "profile": "cpu", "config": {}}))
    plan = {"root": str(tmp_path), "experiments": {"attention_study": {
        "params": {"profile": "cpu"}, "outputs": ["results/attention_study_fashion_mnist.json"]}}}
    assert [f.name for f in result_files(plan)] == [
        "attention_study_fashion_mnist.json", "main_fashion_mnist.json", "main_iris.json", "main_breast_cancer.json",
        "noise_fashion_mnist.json"]

"""Tables and macros are generated from results, with valid LaTeX names and escaping."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attnknn_lib.base.files import read_json, write_json
from attnknn_lib.experiments.framework import catalog
from attnknn_lib.report.compose import compose, write_report
from attnknn_lib.report.macros import macro_name
from attnknn_lib.report.records import read_records
from attnknn_lib.report.tables import booktabs, fmt

REPO = Path(__file__).resolve().parent.parent



def write_macros(files, path):
    """The report job's path: records of ``files``, composed from every declared experiment's views."""
    return write_report(compose(read_records(files), catalog.experiments().values()), path)

def _entry(acc: float) -> dict:
    m = {k: {"value": v, "low": v - 0.01, "high": v + 0.01} for k, v in
         {"accuracy": acc, "macro_f1": acc, "nll": 0.3, "ece": 0.02, "brier": 0.1}.items()}
    return {"label": "Attn-KNN", "info": {"param": 0.1}, "test_raw": m, "test_calibrated": m}


def _mean_entry(acc: float) -> dict:
    m = {k: {"mean": v, "std": 0.01, "values": [v - 0.01, v + 0.01]} for k, v in
         {"accuracy": acc, "macro_f1": acc, "nll": 0.3, "ece": 0.02, "brier": 0.1}.items()}
    return {"label": "Attn-KNN", "test_raw": m, "test_calibrated": m}


def _diff(verdict: str = "inconclusive") -> dict:
    d = {k: {"value": -0.002, "low": -0.01, "high": 0.006, "margin": 0.002, "verdict": verdict, "n_seeds": 2}
         for k in ("accuracy", "macro_f1", "nll", "ece", "brier")}
    return {"raw": d, "calibrated": d}


def _record(ds: str, primary: str, profile: str = "cpu") -> dict:
    methods = {m: _entry(0.9) for m in ("uniform", "distance", "cosine", "attnknn", "cnn")}
    hist = [{"epoch": 1, "precision": "fp32"}, {"epoch": 2, "precision": "fp32"}]
    seed = {"methods": methods, "best_baseline": "distance", "temperatures": [0.5, 0.25], "ablation": None,
            "training": {"attnknn": {"history": hist, "best_epoch": 2, "seconds": 60.0,
                                     "plateau": {"plateau": True, "tail_range": 0.001, "best_epoch": 2}},
                         "cnn": {"history": hist, "best_epoch": 1, "seconds": 30.0,
                                 "plateau": {"plateau": False, "tail_range": 0.004, "best_epoch": 1}}}}
    return {"experiment": "main", "dataset": ds, "profile": profile,
            "config": {"primary": primary, "datasets": [ds], "k": 16, "epochs": 8, "tabular_epochs": 30,
                       "n_boot": 1000, "embed_dim": 128, "num_heads": 4, "mixup_alpha": 0.2, "contrastive_weight": 0.5,
                       "entropy_weight": 0.01, "tta_views": 6, "val_fraction": 0.1},
            "results": {"seeds": [0, 1], "per_seed": {"0": seed, "1": seed},
                        "summary": {m: _mean_entry(0.9) for m in methods},
                        "paired": {"attnknn_vs_best_baseline": {"pooled": _diff(), "seed_level": _diff()},
                                   "attnknn_vs_cnn": {"pooled": _diff(), "seed_level": _diff()}},
                        "dataset": {"n_train": 10, "n_val": 2, "n_test": 5, "num_classes": 3},
                        "model_configs": {"attention": {"tau_min": 0.05, "tau_max": 2.0},
                                          "train": {"contrastive_temperature": 0.07, "grad_clip": 1.0}}},
            "provenance": {"commit": "0123456789abcdef"}}


def test_macro_names_are_letters_only():
    assert macro_name("main", "cifar10", "attnknn_tta", "Acc") == "MainCifarOneZeroAttnknnTtaAcc"
    assert re.fullmatch(r"[A-Za-z]+", macro_name("ablation", "wine_quality", "all_components", "EceCal"))


def test_macros_file_has_one_command_per_number_and_primary_aliases(tmp_path):
    files = [write_json(tmp_path / "main_fashion_mnist.json", _record("fashion_mnist", "fashion_mnist")),
             write_json(tmp_path / "main_iris.json", _record("iris", "fashion_mnist"))]
    write_json(tmp_path / "main_wine.json", _record("wine", "wine"))  # not named: must not be read
    text = write_macros(files, tmp_path / "macros.tex").read_text()
    assert "\\newcommand{\\MainFashionMnistAttnknnAcc}{90.00}" in text
    assert "\\newcommand{\\PrimaryAttnknnAcc}{90.00}" in text
    assert "\\newcommand{\\MainIrisCnnEceCal}{0.0200}" in text
    assert "\\newcommand{\\PrimaryReliabilityFigure}{../figures/main_fashion_mnist_reliability.pdf}" in text
    assert "\\newcommand{\\PrimaryName}{Fashion-MNIST}" in text
    assert "\\newcommand{\\PrimaryAttnknnAccSd}{1.00}" in text
    assert "\\newcommand{\\PrimaryDiffBaseAcc}{-0.20}" in text and "\\newcommand{\\PrimaryDiffCnnEceCalHigh}{+0.0060}" in text
    assert "Wine" not in text
    assert "\\newcommand{\\ConfigNBoot}{1,000}" in text and "\\newcommand{\\ConfigTauMax}{2}" in text
    names = re.findall(r"\\newcommand\{\\([^}]*)\}", text)
    assert len(names) == len(set(names)) and all(re.fullmatch(r"[A-Za-z]+", n) for n in names)


def test_booktabs_table_escapes_names_and_formats_intervals():
    df = pd.DataFrame({"Acc. (\\%)": [fmt({"value": 0.91234, "low": 0.9, "high": 0.92}, "accuracy")]},
                      index=["k_ensemble & more"])
    tex = booktabs(df, "cap", "tab:x")
    assert "\\toprule" in tex and "\\bottomrule" in tex and "k\\_ensemble \\& more" in tex
    assert "91.23\\,{\\scriptsize[90.00, 92.00]}" in tex
    df.index = ["232 ($\\sqrt{n}$)"]  # row labels that already are LaTeX stay as they are when asked
    assert "232 ($\\sqrt{n}$) &" in booktabs(df, "cap", "tab:x", escape_index=False)


def test_booktabs_leaves_out_a_column_of_dashes_and_its_column_spec():
    df = pd.DataFrame({"acc.": ["90.00", "91.00"], "capt.": ["--", ""], "chosen": ["--", "12"]}, index=["a", "b"])
    tex = booktabs(df, "cap", "tab:x", column_format="lp{2cm}rr")
    assert "capt." not in tex and "chosen" in tex
    assert "\\begin{tabular}{lp{2cm}r}" in tex  # the dropped column's spec goes with it
    assert "a & 90.00 & -- \\\\" in tex
    full = pd.DataFrame({"acc.": ["90.00"]}, index=["a"])
    assert "\\begin{tabular}{lr}" in booktabs(full, "cap", "tab:y")  # nothing to drop: as given


def test_column_specs_split_paragraph_columns_whole():
    from attnknn_lib.report.tables import column_specs, drop_empty_columns

    assert column_specs("lrrp{4.2cm}rlr") == ["l", "r", "r", "p{4.2cm}", "r", "l", "r"]
    df = pd.DataFrame({"x": ["1"], "y": ["--"]}, index=["a"])
    assert drop_empty_columns(df, "lrrr")[1] == "lrrr"  # specs that do not match the columns: as given
    assert list(drop_empty_columns(df)[0].columns) == ["x"]


def _metric(v: float) -> dict:
    return {"value": v, "low": v - 0.01, "high": v + 0.01, "mean": v, "std": 0.002}


@pytest.mark.skipif(shutil.which("xelatex") is None, reason="needs xelatex (./run_all.sh test installs it)")
def test_the_widest_tables_fit_the_papers_text_width_unscaled(tmp_path):
    """The main table (one row per method: accuracy and raw NLL, then three calibrated scores, mean
    +- s.d., under its longest method name, as the main views write it) and the ablation (intervals,
    calibrated metrics on a second row per method) fit unscaled: no \\resizebox, no overfull line."""
    from attnknn_lib.report.tables import CALIBRATED_COLUMNS, methods_frame, seed_frame

    metrics = ("accuracy", "macro_f1", "nll", "ece", "brier")
    methods = {m: {"label": m, "test_raw": {k: _metric(0.9123) for k in metrics},
                   "test_calibrated": {k: _metric(0.3012) for k in metrics}}
               for m in ("Attn-KNN, tuned for NLL", "b", "c")}
    seeds = seed_frame(methods)
    assert list(seeds.index) == ["Attn-KNN, tuned for NLL", "b", "c"]
    assert list(seeds.columns[2:]) == list(CALIBRATED_COLUMNS.values())
    assert seeds.iloc[0, 0].startswith("91.23") and seeds.iloc[0, 2].startswith("0.301")  # calibrated NLL
    tables = [booktabs(seeds, "cap", "tab:a", escape_index=False, colsep="3pt", size="footnotesize"),
              booktabs(methods_frame(methods), "cap", "tab:b", escape_index=False)]
    assert not any("resizebox" in t for t in tables)
    paper = (REPO / "paper" / "main.tex").read_text()
    preamble = paper[:paper.index("\\begin{document}")].split("\\input{")[0]
    (tmp_path / "t.tex").write_text(preamble + "\\begin{document}\n" + "\n".join(tables) + "\\end{document}\n")
    proc = subprocess.run(["xelatex", "-interaction=nonstopmode", "t.tex"], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "Overfull \\hbox" not in (tmp_path / "t.log").read_text()


def _readme_written(tmp_path, block: str, bench: dict | None = None) -> str:
    """A README holding only ``block`` (with 'old' in it) after the report of one iris record."""
    files = [write_json(tmp_path / "main_iris.json", _record("iris", "iris"))]
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n<!-- {block}:start -->\nold\n<!-- {block}:end -->\nrest\n")
    write_report(compose(read_records(files), catalog.experiments().values(), bench), tmp_path / "macros.tex", readme)
    return readme.read_text()


def test_readme_results_block_is_regenerated_from_json(tmp_path):
    text = _readme_written(tmp_path, "results")
    assert "old" not in text and text.startswith("intro\n") and text.endswith("rest\n")
    row = [ln for ln in text.splitlines() if ln.startswith("| Iris (")][0]  # "(N seeds)" or "(N splits)"
    assert row.count("90.00 ± 1.00 / 0.020 / 0.020") == 5 and row.count("--") == 1  # no TTA entry in the record
    header = [ln for ln in text.splitlines() if ln.startswith("| dataset |")][0]
    assert header.count("|") == row.count("|")
    assert "commit `01234567`" in text


def test_results_of_two_profiles_never_share_one_report(tmp_path):
    from attnknn_lib.base.errors import AttnKNNError

    files = [write_json(tmp_path / "main_iris.json", _record("iris", "iris", "cpu")),
             write_json(tmp_path / "main_wine.json", _record("wine", "iris", "smoke"))]
    with pytest.raises(AttnKNNError, match="different profiles"):
        write_macros(files, tmp_path / "macros.tex")
    assert not (tmp_path / "macros.tex").exists()


def test_booktabs_signed_differences_and_mean_sd():
    from attnknn_lib.report.tables import fmt_mean_sd

    assert fmt({"value": -0.0123, "low": -0.02, "high": 0.001}, "accuracy", signed=True) == \
        "-1.23\\,{\\scriptsize[-2.00, +0.10]}"
    assert fmt_mean_sd({"mean": 0.9, "std": 0.004}, "accuracy") == "90.00\\,{\\scriptsize$\\pm$0.40}"


def test_a_difference_that_rounds_to_zero_keeps_its_sign():
    """Table 4 printed -0.004 pp as +0.00: a value (a macro, a cell, a findings clause) that is not zero
    keeps its sign, with more decimals where its column's would round it to zero."""
    from attnknn_lib.report.macros import signed

    assert signed(-0.004, 2) == "-0.004" and signed(0.004, 2) == "+0.004" and signed(-0.00004, 4) == "-0.00004"
    assert signed(0.0, 2) == "+0.00" and signed(-0.0, 2) == "+0.00" and signed(-1.234, 2) == "-1.23"
    assert signed(None, 2) == "--" and signed(float("nan"), 2) == "--"
    assert fmt({"value": -0.00004, "low": -0.0002, "high": 0.0001}, "accuracy", signed=True).startswith("-0.004")


def test_latex_cells_read_as_plain_text_in_notebooks():
    from attnknn_lib.report.tables import plain_frame

    df = pd.DataFrame({"Acc. (\\%)": ["90.12\\,{\\scriptsize$\\pm$0.39}"]}, index=["$k = \\sqrt{n}$"])
    df.index.name = "$k$"
    out = plain_frame(df)
    assert out.iloc[0, 0] == "90.12 ±0.39" and list(out.columns) == ["Acc. (%)"]
    assert list(out.index) == ["k = √n"] and out.index.name == "k"


def test_verdict_words_follow_the_interval_the_margin_and_the_metrics_direction():
    from attnknn_lib.evaluation.verdicts import verdict

    assert verdict(0.003, 0.01, 0.0025, higher_is_better=True) == "better"  # accuracy up, beyond the margin
    assert verdict(-0.01, -0.003, 0.0025, higher_is_better=True) == "worse"
    assert verdict(-0.01, -0.003, 0.002, higher_is_better=False) == "better"  # ECE down
    assert verdict(0.001, 0.002, 0.0025, higher_is_better=True) == "equivalent"  # significant but inside the margin
    assert verdict(-0.002, 0.002, 0.0025, higher_is_better=True) == "equivalent"
    assert verdict(-0.01, 0.006, 0.0025, higher_is_better=True) == "inconclusive"
    assert verdict(0.001, 0.01, 0.0025, higher_is_better=True) == "better"  # excludes 0, not inside the margin
    assert verdict(0.003, 0.01, 0.0025, higher_is_better=True, n_seeds=1) == "inconclusive"


def test_seed_level_interval_counts_seed_spread_and_test_variance():
    from scipy import stats

    from attnknn_lib.evaluation.verdicts import seed_level

    # the headline: per-seed accuracy differences -0.13, -0.05, -0.11 pp
    d = seed_level([-0.0013, -0.0005, -0.0011], test_se=0.0004, metric="accuracy")
    sd = np.std([-0.0013, -0.0005, -0.0011], ddof=1)
    half = stats.t.ppf(0.975, 2) * np.sqrt(sd ** 2 / 3 + 0.0004 ** 2)
    assert d["value"] == pytest.approx(-0.0029 / 3)
    assert (d["low"], d["high"]) == pytest.approx((d["value"] - half, d["value"] + half))
    assert d["low"] < 0 < d["high"] and d["verdict"] == "inconclusive"
    # more seeds with the same spread narrow the interval; a test-set term alone widens it
    assert seed_level([0.004, 0.006] * 5, 0.0, "accuracy")["verdict"] == "better"
    assert seed_level([0.004, 0.006] * 5, 0.01, "accuracy")["verdict"] == "inconclusive"
    assert seed_level([0.0005, -0.0005, 0.0], 0.0001, "nll")["verdict"] == "equivalent"
    assert seed_level([0.01], 0.0, "accuracy")["verdict"] == "inconclusive"  # one seed: no seed variance


def test_split_level_interval_is_the_corrected_resampled_t():
    from scipy import stats

    from attnknn_lib.evaluation.verdicts import split_level

    d = [0.02, 0.03, 0.025, 0.02, 0.03]
    out = split_level(d, n_test=30, n_train=120, metric="accuracy")
    half = stats.t.ppf(0.975, 4) * np.std(d, ddof=1) * np.sqrt(1 / 5 + 30 / 120)
    assert (out["low"], out["high"]) == pytest.approx((0.025 - half, 0.025 + half))
    # the correction widens the naive interval (sd / sqrt(J)): overlapping splits are not independent
    assert out["high"] - out["low"] > 2 * stats.t.ppf(0.975, 4) * np.std(d, ddof=1) / np.sqrt(5)
    assert out["verdict"] == "better" and out["n_seeds"] == 5
    assert split_level([0.0] * 10, 30, 120, "nll")["verdict"] == "identical"  # the same predictions on every split


def test_macros_carry_verdicts_counts_and_caption_sources(tmp_path):
    worse = _record("iris", "fashion_mnist")
    d = {k: {"value": -0.02, "low": -0.03, "high": -0.01, "margin": 0.002, "n_seeds": 2,
             "verdict": "worse" if k in ("accuracy", "macro_f1") else "better"}
         for k in ("accuracy", "macro_f1", "nll", "ece", "brier")}
    d["ece"] = {k: v for k, v in d["ece"].items() if k not in ("verdict", "margin")}  # ECE is described only
    worse["results"]["paired"]["attnknn_vs_best_baseline"]["seed_level"] = {"raw": d, "calibrated": d}
    files = [write_json(tmp_path / "main_fashion_mnist.json", _record("fashion_mnist", "fashion_mnist")),
             write_json(tmp_path / "main_iris.json", worse)]
    text = write_macros(files, tmp_path / "macros.tex").read_text()
    assert "\\newcommand{\\PrimaryDiffBaseAccCalVerdict}{inconclusive against}" in text
    assert "\\newcommand{\\MainIrisDiffBaseAccVerdict}{worse than}" in text
    assert "\\newcommand{\\MainIrisDiffBaseNllCalVerdict}{better than}" in text  # lower NLL is better
    assert "MainIrisDiffBaseEceCalVerdict" not in text and "\\newcommand{\\MainIrisDiffBaseEceCalLow}{-0.0300}" in text
    assert "\\newcommand{\\MainBaseAccWorse}{1}" in text and "\\newcommand{\\MainBaseAccInconclusive}{1}" in text
    assert "MainBaseEceCalBetter" not in text and "\\newcommand{\\MainCnnAccBetter}{0}" in text  # ECE: no verdict
    assert ("\\newcommand{\\PrimarySource}{Notebook \\texttt{01\\_main}, "
            "\\texttt{results/main\\_fashion\\_mnist.json}}") in text
    assert "\\newcommand{\\MainIrisSource}{Notebook \\texttt{01\\_main}, \\texttt{results/main\\_iris.json}}" in text


def test_notebooks_list_the_tables_they_wrote_without_printing_latex(tmp_path):
    from attnknn_lib.report.tables import written_frame

    df = pd.DataFrame({"Acc.": ["90.1", "89.9"]}, index=["a", "b"])
    f = tmp_path / "t.tex"
    f.write_text(booktabs(df, "A caption.", "tab:t"))
    out = written_frame([f])
    assert list(out.index) == ["t.tex"] and out.loc["t.tex", "label"] == "tab:t" and out.loc["t.tex", "rows"] == 2


# A number in the paper's own text: a digit that is not part of a macro, label, reference, file
# name or LaTeX length. Everything the paper quotes comes from results/macros.tex or the tables.
_ALLOWED = [r"\\(?:label|ref|cite|citep|citet|eqref|input|inputif|figif|includegraphics|bibliography|"
            r"bibliographystyle|usepackage|documentclass|hypersetup|autoref|url|href)\s*(?:\[[^\]]*\])?\{[^}]*\}",
            r"\[[^\]]*(?:pt|cm|mm|in|em|ex)\]",  # options such as [10pt] or [margin=2.2cm]
            r"\{-?[0-9.]*\\(?:linewidth|textwidth|columnwidth)\}",  # widths
            r"\\(?:vspace|hspace|setlength|arraystretch|tabcolsep)[^\n]*",
            r"\\section\*?|\\subsection\*?|\\paragraph",
            r"(?<![A-Za-z])[A-Za-z]+[0-9]+[A-Za-z0-9]*",  # names such as ResNet18, CIFAR-10 are words (ResNet18)
            r"(?:CIFAR|MNIST|kNN|KNN|LM|top|Top)-[0-9]+",
            r"95\\pct",  # the confidence level of every interval: a convention, not a result
            r"\$[^$]*\$"]  # maths: symbols and indices, its digits are checked below


def hand_typed_numbers(tex: str) -> list[str]:
    """Numbers written into ``tex`` by hand (outside comments, macros' arguments and names)."""
    body = tex.split("\\begin{document}", 1)[-1]
    body = re.sub(r"(?<!\\)%.*", "", body)  # comments
    maths = re.findall(r"\$([^$]*)\$", body)
    for pattern in _ALLOWED:
        body = re.sub(pattern, " ", body)
    found = re.findall(r"(?<![A-Za-z\\])[0-9]+(?:[.,][0-9]+)?", body)
    for m in maths:  # in maths, allow single digits used as symbols (2k, x_1, 1/sqrt(d), 95 % is text)
        found += [n for n in re.findall(r"(?<![A-Za-z\\])[0-9]+(?:\.[0-9]+)?", re.sub(r"\\[A-Za-z]+", " ", m))
                  if len(n) > 1]
    return found


def test_hand_typed_number_detector_finds_numbers_and_spares_macros_and_names():
    assert hand_typed_numbers("\\begin{document} accuracy of 91.2\\,\\% on ResNet18\n") == ["91.2"]
    assert hand_typed_numbers("\\begin{document} \\PrimaryAttnknnAcc\\,\\% on CIFAR-10 with ResNet18 "
                              "(Table~\\ref{tab:main-1}, \\citet{cover1967}) $x_1 = 2k$ % 3 seeds\n") == []
    assert sorted(hand_typed_numbers("\\begin{document} $k = 16$ neighbours and 3 seeds")) == ["16", "3"]


def test_the_papers_text_types_no_number_by_hand():
    tex = (REPO / "paper" / "main.tex").read_text()
    assert hand_typed_numbers(tex) == [], "put the number in results/macros.tex (attnknn_lib.report.macros) instead"


def test_the_paper_has_a_bibliography_and_every_figure_caption_names_its_source():
    tex = (REPO / "paper" / "main.tex").read_text()
    bib = (REPO / "paper" / "references.bib").read_text()
    cited = {k.strip() for group in re.findall(r"\\cite[tp]?\{([^}]*)\}", tex) for k in group.split(",")}
    keys = set(re.findall(r"@\w+\{([^,]+),", bib))
    assert cited and cited <= keys, f"cited but not in references.bib: {sorted(cited - keys)}"
    figures = re.findall(r"\\begin\{figure\*?\}(.*?)\\end\{figure\*?\}", tex, flags=re.S)
    assert figures
    for fig in figures:
        caption = fig[fig.index("\\caption"):]
        assert re.search(r"\\[A-Za-z]+Source\b", caption), f"figure caption without its notebook/results: {caption[:80]}"


def test_every_committed_table_caption_names_an_existing_notebook_and_results_file():
    tables = sorted((REPO / "results" / "tables").glob("*.tex"))
    assert tables
    for f in tables:
        text = f.read_text()
        m = re.search(r"Notebook \\texttt\{([^}]*)\}, \\texttt\{(results/[^}]*\.json)\}", text)
        assert m, f"{f.name}: caption does not name its notebook and results file"
        notebook, results = m.group(1).replace("\\_", "_"), m.group(2).replace("\\_", "_")
        assert (REPO / "notebooks" / f"{notebook}.ipynb").exists(), f"{f.name}: no notebook {notebook}"
        assert list(REPO.glob(results)), f"{f.name}: no {results}"  # main_summary names results/main_*.json


def test_experiments_other_than_main_get_dataset_free_names_for_the_paper():
    from attnknn_lib.report.macros import dataset_free, record_macros

    made = {"NoiseCifarOneZeroTrainedSymmetricMaxAttnknnAcc": "80.00", "NoiseCifarOneZeroSource": "x"}
    out = dataset_free("noise", "cifar10", made, "noise_cifar10")
    assert out["NoiseTrainedSymmetricMaxAttnknnAcc"] == "80.00" and out["NoiseSource"] == "x"
    assert out["NoiseName"] == "CIFAR-10" and out["NoiseFile"].endswith("noise_cifar10")
    record = {"experiment": "main", "dataset": "iris"}
    file = "results/{}.json".format
    assert "MainAcc" not in record_macros([record], lambda r: {"MainIrisAcc": "1"}, "01_main.ipynb", file, aliases=False)
    assert "NoiseAcc" in record_macros([{"experiment": "noise", "dataset": "iris"}], lambda r: {"NoiseIrisAcc": "1"},
                                       "03_noise.ipynb", file)


def test_the_report_modules_name_no_experiment():
    """Adding an experiment never means editing the generic report: its views live with it."""
    for f in (REPO / "attnknn_lib" / "report").glob("*.py"):
        text = f.read_text()
        for name in catalog.names():
            assert f'"{name}"' not in text and f"'{name}'" not in text, f"{f.name} names the experiment {name!r}"


def test_a_one_seed_record_read_back_from_json_gives_dashes_not_a_crash(tmp_path):
    one = _record("fashion_mnist", "fashion_mnist")
    d = {k: {"value": -0.002, "low": float("nan"), "high": float("nan"), "margin": 0.002, "n_seeds": 1,
             "verdict": "inconclusive"} for k in ("accuracy", "macro_f1", "nll", "ece", "brier")}
    one["results"]["paired"]["attnknn_vs_best_baseline"]["seed_level"] = {"raw": d, "calibrated": d}
    files = [write_json(tmp_path / "main_fashion_mnist.json", one)]  # NaN is written as null
    text = write_macros(files, tmp_path / "macros.tex").read_text()
    assert "\\newcommand{\\PrimaryDiffBaseAccLow}{--}" in text
    assert "\\newcommand{\\PrimaryDiffBaseAcc}{-0.20}" in text
    assert "\\newcommand{\\PrimaryDiffBaseAccVerdict}{inconclusive against}" in text


def test_the_readme_results_block_keeps_summaries_and_names_each_notebooks_pdf():
    from attnknn_lib.report.compose import condensed

    lines = ["Fashion-MNIST:\n**The answer.**", "", "- **a setting**: detail", "  - nested detail"]
    assert condensed(lines, "07_attention_study.ipynb") == [
        "**The answer.**", "", "Details: [`results/notebooks/07_attention_study.pdf`]"
        "(results/notebooks/07_attention_study.pdf).", ""]
    plain = condensed(["- k-sweep: one line", "  - nested"], "02_k_sweep.ipynb")
    assert plain[0] == "- k-sweep: one line" and "nested" not in " ".join(plain)


def test_the_committed_readme_results_block_is_at_most_a_thousand_words():
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = text.split("<!-- results:start -->", 1)[1].split("<!-- results:end -->", 1)[0]
    assert len(block.split()) <= 1000, len(block.split())


def test_a_straight_double_quote_in_a_macro_prints_as_opening_and_closing_quotes():
    from attnknn_lib.report.macros import render_macros

    assert "(``all sharp'', 14.70)" in render_macros({"X": 'the lowest ("all sharp", 14.70)'})


def test_only_the_macros_the_paper_uses_are_written_and_an_undefined_one_stops_the_report():
    from attnknn_lib.base.errors import ConfigError
    from attnknn_lib.report.macros import used_by

    macros = {"MainFooAcc": "1", "MainBarAcc": "2"}
    assert used_by(macros, r"\MainFooAcc{} and \emph{x}") == {"MainFooAcc": "1"}
    assert used_by(macros, r"\providecommand{\MainBazAcc}{--}\MainBazAcc") == {}
    with pytest.raises(ConfigError, match="MainBazAcc"):
        used_by(macros, r"\MainFooAcc and \MainBazAcc")


def _provenance(experiment: str, commit: str, seconds: float, parts: float | None = None, dirty: bool = False,
                gpu: str | None = None) -> dict:
    machine = {"cpu_model": "AMD EPYC", **({"cuda": {"device": gpu}} if gpu else {})}
    return {"experiment": experiment, "dataset": "iris", "profile": "cpu", "config": {}, "results":
            {"timings": {"parts_seconds": parts}} if parts else {},
            "provenance": {"commit": commit, "dirty": dirty, "cpu_count": 2, "machine": machine, "wall_seconds": seconds}}


def test_the_provenance_paragraph_names_each_commit_with_its_experiments_the_machine_and_the_job_time():
    from attnknn_lib.report.readme import provenance_paragraph

    two = [_provenance("main", "abcdef0123", 600.0, parts=3000.0), _provenance("noise", "1234567890", 3600.0, dirty=True)]
    text = provenance_paragraph(two)
    assert text.startswith("The committed records come from the `cpu` profile, measured at commits ")
    assert "`1234567` for noise (with uncommitted changes)" in text and "`abcdef0` for main" in text
    assert "on a 2-core AMD EPYC, no GPU." in text and "took 2.0 h of job time" in text
    one = provenance_paragraph([_provenance("main", "abcdef0123", 0.0, gpu="NVIDIA H100")])
    assert "at commit `abcdef0` for main" in one and "GPU NVIDIA H100" in one and "job time" not in one
    assert provenance_paragraph([]) == "(no results yet: run ./run_all.sh)"


def test_the_report_writes_the_provenance_block_of_the_readme(tmp_path):
    text = _readme_written(tmp_path, "provenance")
    assert "old" not in text and "measured at commit `0123456` for main" in text


def test_the_run_time_paragraph_states_the_last_full_run_and_the_wider_schedules_from_the_bench():
    from attnknn_lib.report.readme import run_time_paragraph

    run = {"complete": True, "wall_seconds": 18000.0, "total_seconds": 34200.0, "cores": 2, "busy_share": 0.95}
    plain = run_time_paragraph({"cpu_run": run})
    assert plain.startswith("The last full run here took 5.0 h of wall time on 2 cores (9.5 h of job time, the "
                            "cores busy 95 % of it).") and "16" not in plain
    wide = run_time_paragraph({"cpu_run": {**run, "at_width": {
        "wall_seconds": {"2": 18000.0, "8": 5400.0, "16": 3000.0}, "critical_path_seconds": 2400.0,
        "gpu_training": {"device": "NVIDIA H100", "wall_seconds": {"16": 1800.0}}}}})
    assert "about 90 min on 8 cores and 50 min on 16" in wide and "longest chain, 40 min" in wide
    assert "one NVIDIA H100 and the rest on 16 cores: about 30 min" in wide
    for missing in (None, {}, {"cpu_run": {**run, "complete": False}}):  # no complete run timed: said so
        assert run_time_paragraph(missing).startswith("No complete run has been timed")


def test_the_report_writes_the_run_time_block_of_the_readme_from_the_bench(tmp_path):
    bench = {"cpu_run": {"complete": True, "wall_seconds": 600.0, "total_seconds": 1200.0, "cores": 2, "busy_share": 1.0}}
    text = _readme_written(tmp_path, "run-time", bench)
    assert "old" not in text and "took 10 min of wall time" in text


def test_verdict_counts_follow_the_verdict_order_and_report_identical_apart():
    from attnknn_lib.report.findings import table_link, verdict_counts

    assert verdict_counts(["inconclusive", "worse", "worse", "identical", "equivalent"]) == \
        "2 worse, 1 equivalent, 1 inconclusive, 1 identical"
    assert verdict_counts([]) == ""
    assert table_link("07_attention_study.ipynb") == "([table](results/notebooks/07_attention_study.pdf))"


def answer_bullets(records: list[dict]) -> list[str]:
    """The bullets of the README's answer that :func:`compose` writes for ``records``."""
    from attnknn_lib.report.compose import split_terms

    return split_terms(compose(records, catalog.experiments().values()).answer.splitlines())[0]


def committed_records() -> list[dict]:
    names = list(catalog.experiments())
    return read_records([f for n in names for f in sorted((REPO / "results").glob(f"{n}_*.json"))])


def test_the_committed_answer_has_at_most_six_bullets_of_at_most_300_characters_and_six_terms():
    from attnknn_lib.report.compose import split_terms
    from attnknn_lib.report.readme import ANSWER_BULLET_CHARS, ANSWER_BULLETS

    records = committed_records()
    bullets = answer_bullets(records)
    assert 1 <= len(bullets) <= ANSWER_BULLETS and ANSWER_BULLETS == 6
    assert all(len(b) <= ANSWER_BULLET_CHARS == 300 for b in bullets), [len(b) for b in bullets]
    assert all("[table](results/notebooks/" in b for b in bullets)
    terms = split_terms(compose(records, catalog.experiments().values()).answer.splitlines())[1]
    assert len(terms) <= 6


def test_the_committed_readme_shows_the_answer_and_the_provenance_of_the_committed_records():
    records = committed_records()
    bench = REPO / "results" / "benchmarks.json"
    report = compose(records, catalog.experiments().values(), read_json(bench) if bench.exists() else None)
    text = (REPO / "README.md").read_text()
    for start, body in (("answer", report.answer), ("provenance", report.provenance), ("run-time", report.run_time)):
        block = text.split(f"<!-- {start}:start -->\n", 1)[1].split(f"\n<!-- {start}:end -->", 1)[0]
        assert block == body, f"README's {start} block is stale: regenerate it from the records"


def test_a_count_in_words_names_none_all_and_a_share_and_falls_back_to_digits():
    from attnknn_lib.report.macros import count_phrase

    assert count_phrase(0, 6) == "none of the six" and count_phrase(3, 3) == "all three"
    assert count_phrase(4, 6) == "four of six" and count_phrase(2, 20) == "two of 20"


def test_count_macros_give_a_number_and_its_words_and_dash_what_a_record_cannot_say():
    from attnknn_lib.report.macros import count_macros

    m = count_macros(("Exp",), {"Nca Wins": ["a", "b", "c"], "Attnknn Wins": [], "Probe Wins": None}, 3)
    assert m == {"ExpNcaWins": "3", "ExpNcaWinsWords": "all three", "ExpAttnknnWins": "0",
                 "ExpAttnknnWinsWords": "none of the three", "ExpProbeWins": "--", "ExpProbeWinsWords": "--"}


def test_the_committed_papers_abstract_answers_in_a_plain_word_within_200_words_and_its_main_text_ends_by_page_12():
    """As printed: the abstract's words (between 'Abstract' and the first section) at most 200, its answer
    'No' or 'Yes' in its first two sentences, and the references start by page 13."""
    import pymupdf

    doc = pymupdf.open(Path(__file__).resolve().parent.parent / "paper" / "main.pdf")
    first = doc[0].get_text()
    abstract = first[first.index("Abstract") + len("Abstract"):first.index("\n1\n") if "\n1\n" in first
                     else first.index("Introduction")]
    words = abstract.split()
    assert len(words) <= 200, len(words)
    assert {"No.", "Yes.", "No:", "Yes:", "No,", "Yes,"} & set(words[:40])
    refs = next(i for i, page in enumerate(doc) if "References\n" in page.get_text())
    before = doc[refs].get_text().split("References\n")[0].strip()  # main text on the references' page
    assert refs + 1 <= 12 or (refs + 1 == 13 and not before), (refs + 1, before[-200:])


def test_the_papers_fixed_words_hold_in_the_committed_macros():
    """A clause the paper types in words, not macros, must agree with the numbers the records give:
    'the attention ... is never shown to beat the learned metric' needs the attention head better than NCA
    at no scale and on no weaker embedding; 'much of the room needs no neighbour' needs the query-only
    control better than the tuned vote somewhere and above it at the largest scale."""
    import re

    root = Path(__file__).resolve().parent.parent
    tex = re.sub(r"\s+", " ", (root / "paper" / "main.tex").read_text())
    macros = dict(re.findall(r"\\newcommand\{\\(\w+)\}\{(.*)\}", (root / "results" / "macros.tex").read_text()))
    if "never shown to beat the learned metric" in tex:
        assert macros["PositiveControlAttnknnThanNcaFirstBetter"] == "at no scale"
        assert macros["HeadroomRegimesAttnknnBeatsNcaWords"].startswith("none")
    if "much of the room needs no neighbour" in tex:
        assert macros["PositiveControlQueryOnlyFirstBetter"] != "at no scale"
        assert float(macros["PositiveControlMaxQueryOnlyAcc"]) > float(macros["PositiveControlMaxReferenceAcc"])

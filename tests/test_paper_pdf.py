"""The paper PDF: stage 07 typesets main.pdf, and the PDF is read back against the run's own files
(every table's numbers equal its CSV twin, every figure embedded, no "??", nothing wider than the text).

The fast tests check the pieces (log parsing, the read-back's matching, the toolchain step of `make setup`,
the prose macros); the slow ones build the PDF from the fixture run of tests/paper_fixtures.py and break
it on purpose. They need the TeX toolchain: where `make setup` installs it (Debian/Ubuntu as root) a
missing toolchain fails them; elsewhere they skip, naming the command that installs it.
"""
import re
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))

from conftest import require_paper_toolchain  # noqa: E402
from paper_fixtures import make_run  # noqa: E402

from echo_lib.report import latex, paper_tables, readback, toolchain  # noqa: E402
from echo_lib.report.tables import to_latex  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


# ---- the pieces -------------------------------------------------------------------------------------------

LOG = r"""This is pdfTeX, Version 3.141592653-2.6-1.40.24
<figures/rm_accuracy.pdf, id=42, 300pt x 200pt>
<use figures/rm_accuracy.pdf>
LaTeX Warning: Reference `tab:nope' on page 2 undefined on input line 80.
Overfull \hbox (12.5pt too wide) in paragraph at lines 3--3
[]|\T1/lmr/m/n/9 Composite
Overfull \hbox (0.3pt too wide) in paragraph at lines 9--9
! LaTeX Error: File `tables/main_result.tex' not found.

Type X to quit or <RETURN> to proceed,
or enter new name. (Default extension: tex)

Enter file name: 
! Emergency stop.
<read *> 
         
l.212 \fittable{\input{tables/main_result.tex}}
!  ==> Fatal error occurred, no output PDF file produced!

Output written on main.pdf (9 pages, 396288 bytes).
"""


def test_the_log_parser_finds_errors_references_boxes_figures_and_pages():
    log = latex.parse_log(LOG)
    assert log.errors == ["! LaTeX Error: File `tables/main_result.tex' not found.\n"
                          r"l.212 \fittable{\input{tables/main_result.tex}}"]   # the message and its line, no prompt
    assert log.undefined == ["LaTeX Warning: Reference `tab:nope' on page 2 undefined on input line 80."]
    assert [pt for pt, _ in log.overfull] == [12.5, 0.3] and "Composite" in log.overfull[0][1]
    assert "figures/rm_accuracy.pdf" in log.included
    assert (log.pages, log.size) == (9, 396288)


def test_numbers_are_read_as_printed_and_alone():
    text = "Qwen3-32B and 135M hold none; [0.25, 0.85], -3.5 and 46.7. 95% CI >= 0.8 -- n/a"
    assert readback.number_tokens(text) == ["0.25", "0.85", "-3.5", "46.7", "95", "0.8"]


def test_a_table_matches_only_where_every_number_agrees_as_printed():
    table = pd.DataFrame({"Model": ["echo", "base"], "EPM-Q": [61.754, 21.25], "95% CI": ["[60.5, 62.1]", None]})
    expected = readback.expected_numbers(table)
    assert [str(e) for e in expected] == ["95", "61.754", "60.5", "62.1", "21.25"]
    pdf = readback.number_tokens("Model EPM-Q 95% CI echo 61.75 [60.5, 62.1] base 21.25 --")
    assert readback.find_run(pdf, expected) == (True, "")
    wrong = readback.number_tokens("Model EPM-Q 95% CI echo 61.85 [60.5, 62.1] base 21.25 --")
    ok, why = readback.find_run(wrong, expected)
    assert not ok and "shows 61.85 where the CSV has 61.754" in why


def test_wrapped_headers_and_full_width_tables():
    df = pd.DataFrame({"Model": ["echo"], "Success 95% CI": ["[0.0, 100.0]"], "n": [3]})
    tex = to_latex(df, wrap_headers=True).splitlines()
    assert tex[2] == r"Model & \begin{tabular}[b]{@{}l@{}}Success\\95\% CI\end{tabular} & n \\"
    wide = to_latex(df, column_format="SWr", full_width=True).splitlines()
    assert wide[0] == r"\begin{tabularx}{\linewidth}{SWr}" and wide[-1] == r"\end{tabularx}"


def test_the_prose_macros_are_the_tables_cells_as_printed(tmp_path):
    from echo_lib.report import inputs
    run = make_run(tmp_path / "run")
    epm = inputs.read_csv(run / "epm" / "summary.csv", inputs.EPM_SUMMARY)
    nee = inputs.read_csv(run / "nee" / "summary.csv", inputs.NEE_SUMMARY)
    main = paper_tables.main_results(epm, nee, inputs.read_csv(run / "epm" / "intervals.csv", inputs.EPM_INTERVALS))
    diffs = paper_tables.sandbox_differences(inputs.read_csv(run / "epm" / "paired.csv", inputs.PAIRED),
                                             inputs.read_csv(run / "nee" / "paired.csv", inputs.PAIRED))
    rm = paper_tables.rm_accuracy({k: inputs.read_rm_metrics(run / "rm" / k / "metrics.json")
                                   for k in ("humanlike", "empathy", "scalar")})
    wins = paper_tables.winrates({v: pd.read_csv(run / "policy" / v / "winrate.csv") for v in ("echo", "scalar")})
    sens = paper_tables.judge_sensitivity(inputs.read_json(run / "judges" / "sensitivity.json"))
    macros = paper_tables.result_macros(main, diffs, rm, wins, sens, base="base")
    assert macros["EchoSuccess"] == "66.7" and macros["BaseSuccess"] == "0.0"    # 2 and 0 of 3 cases
    assert macros["EchoEPMQ"] == "61.75" and macros["EchoEPMQCI"] == main.loc[0, "EPM-Q 95% CI"]
    d = diffs.set_index(["Comparison", "Metric"])
    assert macros["DiffEchoBaseEPMQ"] == f"{d.loc[('echo - base', 'EPM-Q'), 'Difference']:.2f}"
    # three cases: the macros say so instead of an interval and a verdict
    assert macros["DiffEchoBaseEPMQVerdict"] == "n too small" and macros["DiffEchoBaseEPMQN"] == "3"
    assert macros["DiffEchoBaseEPMQCI"] == "n too small (n = 3)"
    assert macros["DiffEchoBaseNEEVerdict"] == "n too small" and macros["DiffEchoScalarCompositeN"] == "3"
    assert macros["RMEmpathyTrained"] == "0.64" and macros["RMEmpathyBase"] == "0.38"
    assert macros["WinEchoIndependentCI"] == "[0.25, 0.85]" and macros["WinPrompts"] == "8"
    assert macros["JudgeAccuracy"] == "0.86" and macros["JudgeTarget"] == ">= 0.8"
    none = paper_tables.result_macros(main[main.Model != "scalar"], diffs, rm, wins, sens, base="base")
    assert none["ScalarEPMQ"] == "n/a"        # a model the run did not test: main.tex still compiles
    assert all(name.isalpha() for name in macros)


def test_main_tex_types_no_result_into_its_prose():
    """Numbers of the text come from tables/macros.tex; main.tex holds only the method's constants."""
    text = re.sub(r"(?<!\\)%.*", "", (ROOT / "paper" / "main.tex").read_text())
    text = re.sub(r"\\(?:hsize|tabcolsep|emergencystretch)[^}]*|\[[^\]]*\]|\{[\d.]+\\?[a-z]*\}", "", text)
    decimals = set(re.findall(r"(?<![\w.])\d+\.\d+", text))
    # EPM-Q's weights, chance (0.5), Gemini 2.5, Doubao 1.5: any other decimal is a result and a macro's job
    assert decimals <= {"0.4", "0.2", "0.5", "2.5", "1.5"}, decimals
    claims = yaml.safe_load((ROOT / "data" / "reported_claims.yaml").read_text())["claims"]
    for value in {v for c in claims for v in c["reported"].values()} - {0.0}:
        assert not re.search(rf"(?<![\d.]){re.escape(str(value))}(?!\d)", text), value


def test_without_an_engine_the_build_fails_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(latex, "find_engine", lambda: None)
    with pytest.raises(latex.PaperBuildError, match=r"(?s)make setup.*(apt-get install|conda install).*build_pdf: false"):
        latex.build_pdf(tmp_path)


def test_setup_installs_with_apt_as_root_and_otherwise_prints_the_command(monkeypatch, capsys):
    calls = []
    state = {"installed": False}
    monkeypatch.setattr(toolchain, "present", lambda: {k: state["installed"] for k in
                                                        [*toolchain.COMMANDS, "lmodern", "tectonic"]})
    monkeypatch.setattr(toolchain, "apt_install", lambda: calls.append("apt") or state.update(installed=True) or 0)
    monkeypatch.setattr(toolchain, "can_apt_install", lambda: True)
    assert toolchain.install() == 0 and calls == ["apt"]
    assert toolchain.install() == 0 and calls == ["apt"]          # everything there: skipped
    assert "nothing to install" in capsys.readouterr().out
    state["installed"] = False
    monkeypatch.setattr(toolchain, "can_apt_install", lambda: False)
    assert toolchain.install() == 0 and calls == ["apt"]          # not root: the command, no install
    assert toolchain.install_hint() in capsys.readouterr().out
    assert toolchain.apt_install_command()[:4] == ["apt-get", "install", "-y", "-q"]
    assert "--no-install-recommends" in toolchain.apt_install_command() and "lmodern" in toolchain.APT_PACKAGES


def test_apt_install_refreshes_empty_package_lists_once(monkeypatch):
    runs = []
    def run(cmd, env):
        runs.append(cmd[:2])
        return type("P", (), {"returncode": 100 if len(runs) == 1 else 0})()
    assert toolchain.apt_install(run=run) == 0
    assert runs == [["apt-get", "install"], ["apt-get", "update"], ["apt-get", "install"]]


# ---- the PDF of the fixture run ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def built_paper(tmp_path_factory):
    """Stage 07's notebook on the fixture run, with main.pdf: (paper folder, its log report)."""
    require_paper_toolchain()
    from echo_lib.config import validate
    from echo_lib.notebook import run_notebook

    tmp = tmp_path_factory.mktemp("paper_pdf")
    make_run(tmp / "ci", sycophancy=True)   # the guard's section and tables too (the ci DAG's paper: without)
    paper = tmp / "paper"
    config = validate({**yaml.safe_load((ROOT / "config" / "ci.yaml").read_text()), "results_dir": str(tmp),
                       "sandbox": {"models": ["base", "echo", "scalar"], "case_set": "own", "max_cases": 2},
                       "sycophancy": {"enabled": True}, "paper": {"dir": str(paper), "build_pdf": True}})
    run_notebook("notebooks/07_paper.py", tmp / "07.ipynb", {"config": config, "paper_dir": str(paper)})
    return paper, latex.read_log(paper)


def broken_copy(paper: Path, dest: Path) -> Path:
    shutil.copytree(paper, dest)
    return dest


@pytest.mark.slow
def test_the_pdf_reads_back_as_the_runs_tables_figures_and_macros(built_paper):
    paper, log = built_paper
    assert readback.check_paper(paper) == []
    assert log.pages and log.pages >= 6 and not log.errors
    text = readback.pdf_text(paper / "main.pdf")
    for heading in ("Abstract", "Introduction", "Method", "Experimental set-up", "Results", "The sycophancy guard",
                    "EMPA (reported)", "Reported beside measured", "Limitations", "References"):
        assert heading in text, heading
    assert "Reported" in text and "(published)" in text and "135M" in text    # the tiny scale is said plainly


@pytest.mark.slow
def test_a_wrong_number_in_a_table_fails_the_read_back(built_paper, tmp_path):
    paper = broken_copy(built_paper[0], tmp_path / "paper")
    csv = paper / "tables" / "main_results.csv"
    table = pd.read_csv(csv)
    table.loc[0, "EPM-Q"] += 1.0                                   # the PDF now disagrees with its twin
    table.to_csv(csv, index=False)
    problems = readback.check_paper(paper)
    assert len(problems) == 1 and problems[0].startswith("table main_results") and "where the CSV has" in problems[0]


@pytest.mark.slow
def test_a_wrong_prose_macro_fails_the_read_back(built_paper, tmp_path):
    paper = broken_copy(built_paper[0], tmp_path / "paper")
    macros = pd.read_csv(paper / "tables" / "macros.csv", keep_default_na=False, dtype=str)
    macros.loc[macros.macro == "EchoEPMQ", "value"] = "99.99"
    macros.to_csv(paper / "tables" / "macros.csv", index=False)
    assert any(r"\EchoEPMQ = '99.99'" in p for p in readback.check_paper(paper))


@pytest.mark.slow
def test_a_broken_input_fails_the_build_with_the_log_line(built_paper, tmp_path):
    paper = broken_copy(built_paper[0], tmp_path / "paper")
    tex = paper / "main.tex"
    tex.write_text(tex.read_text().replace(r"\input{tables/main_results.tex}", r"\input{tables/main_result.tex}"))
    with pytest.raises(latex.PaperBuildError, match=r"(?s)File `tables/main_result.tex' not found.*l\.\d+"):
        latex.build_pdf(paper)
    assert not (paper / "main.pdf").exists(), "the stale PDF of the copy must not survive a failed build"


@pytest.mark.slow
def test_an_unresolved_reference_and_a_missing_figure_fail_the_read_back(built_paper, tmp_path):
    paper = broken_copy(built_paper[0], tmp_path / "paper")
    tex = paper / "main.tex"
    text = tex.read_text().replace(r"Table~\ref{tab:rm}", r"Table~\ref{tab:nowhere}")
    tex.write_text(re.sub(r"\\includegraphics\[[^\]]*\]\{figures/rl_curves.pdf\}", "", text))
    latex.build_pdf(paper)
    problems = readback.check_paper(paper)
    assert any("'??'" in p for p in problems) and any("tab:nowhere" in p for p in problems)
    assert any("figures/rl_curves.pdf is not embedded" in p for p in problems)


def test_a_sentence_across_a_page_break_reads_as_one():
    """pdftotext ends each page with its number and a form feed: a macro's value that LaTeX broke across
    pages ("0 of" / page 10 / "6 reached 1", the ci run's \\EnergyReached) must still be found; a number
    inside a line before the break stays."""
    from echo_lib.report.readback import _plain, running_text
    text = "maximum 0.17 (0 of\n10\n\f6 reached 1). The end\nof page 12 is\n11\n\fnext"
    flat = _plain(running_text(text))
    assert "(0 of 6 reached 1)" in flat and "of page 12 is next" in flat
    assert "10" not in flat and "11" not in flat


@pytest.mark.slow
def test_the_multiturn_overlays_paper_sets_the_epm_variant_and_the_guard_beside_the_others(tmp_path):
    """config/multiturn.yaml's run: four models, the epm variant's per-turn log, the guard; the PDF reads back."""
    require_paper_toolchain()
    from echo_lib.config import validate
    from echo_lib.notebook import run_notebook

    models, variants = ("base", "echo", "scalar", "epm"), ("echo", "scalar", "epm")
    make_run(tmp_path / "ci", models=models, variants=variants, sycophancy=True)
    paper = tmp_path / "paper"
    config = validate({**yaml.safe_load((ROOT / "config" / "ci.yaml").read_text()), "results_dir": str(tmp_path),
                       "policy": {"variants": list(variants)},
                       "sandbox": {"models": list(models), "case_set": "own", "max_cases": 2},
                       "sycophancy": {"enabled": True}, "paper": {"dir": str(paper), "build_pdf": True}})
    run_notebook("notebooks/07_paper.py", tmp_path / "07.ipynb", {"config": config, "paper_dir": str(paper)})
    assert readback.check_paper(paper) == []
    main = pd.read_csv(paper / "tables" / "main_results.csv")
    assert set(main["Model"]) == set(models)
    pairs = set(pd.read_csv(paper / "tables" / "sandbox_differences.csv")["Comparison"])
    assert {"epm - base", "echo - epm", "scalar - epm"} <= pairs
    assert set(pd.read_csv(paper / "tables" / "rl_winrate.csv")["Variant"]) == set(variants)
    assert set(pd.read_csv(paper / "tables" / "sycophancy_guard.csv")["Model"]) == set(models)
    text = readback.pdf_text(paper / "main.pdf")
    assert "A third variant, epm" in text and "The sycophancy guard" in text

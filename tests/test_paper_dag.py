"""End to end: the ci DAG's stage 07 writes the paper's tables, figures and claims under <run>/paper."""
import re
from pathlib import Path

import pandas as pd
import pytest

from echo_lib.report.params import paper_outputs

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def test_stage_07_writes_every_table_figure_and_the_claims(ci_run):
    from conftest import ci_builds_pdf
    run_dir, _ = ci_run
    paper = run_dir / "paper"
    for files in paper_outputs(str(paper), pdf=ci_builds_pdf()).values():
        for f in files:
            assert Path(f).is_file() and Path(f).stat().st_size > 0, f
    for tex in (paper / "tables").glob("*.tex"):
        if tex.stem != "macros":
            assert r"\toprule" in tex.read_text() and (paper / "tables" / f"{tex.stem}.csv").is_file()
    assert (run_dir / "notebooks" / "07_paper.ipynb").is_file()
    assert (paper / "main.tex").is_file(), "main.tex is copied beside the generated files"


def test_stage_07_builds_main_pdf_and_it_reads_back_as_this_runs_files(ci_run):
    """The ci run's main.pdf: every table's numbers equal its CSV twin, every figure is embedded, no "??",
    nothing wider than the text (echo_lib.report.readback)."""
    from conftest import require_paper_toolchain

    from echo_lib.report import latex, readback
    require_paper_toolchain()
    run_dir, _ = ci_run
    paper = run_dir / "paper"
    assert (paper / "main.pdf").is_file(), "rule paper must write main.pdf (paper.build_pdf is on by default)"
    assert readback.check_paper(paper) == []
    log = latex.read_log(paper)
    assert log.pages and log.pages >= 6 and not log.errors
    assert "replayed by this package" in readback.pdf_text(paper / "main.pdf")   # the ci run has EMPA's runs


def test_stage_07_main_results_are_this_runs_models(ci_run):
    run_dir, _ = ci_run
    main = pd.read_csv(run_dir / "paper" / "tables" / "main_results.csv")
    epm = pd.read_csv(run_dir / "epm" / "summary.csv")
    assert set(main["Model"]) == set(epm["Model"])
    assert r"\newcommand{\RunName}{ci}" in (run_dir / "paper" / "tables" / "macros.tex").read_text()


def test_stage_07_claims_label_reported_numbers_and_name_the_scale(ci_run):
    run_dir, _ = ci_run
    claims = pd.read_csv(run_dir / "paper" / "claims.csv")
    assert set(claims["Reported (published)"]) == {46.7, 13.3, 0.0, 73.54, 42.95, 29.66}
    assert claims["Measured under"].str.contains("tiny scale").all()
    doubao = claims[claims["Published model"] == "Doubao 1.5 Character"]
    assert (doubao["Measured (this run)"] == "not run").all()
    # empa_replay.tex is exempt: it is our replay of EMPA's published result files, which reproduces
    # Doubao's 4/30 = 13.3 % by computation (that agreement is the point of the table)
    text = "\n".join(p.read_text() for p in (run_dir / "paper" / "tables").glob("*.tex") if p.stem != "empa_replay")
    for published in ("46.7", "13.3", "73.54", "42.95", "29.66"):   # nowhere but the claims table
        assert not re.search(rf"(?<![\d.]){re.escape(published)}(?![\d])", text), published


def test_editing_only_the_paper_notebook_reruns_only_the_paper(ci_run):
    """An author edits notebook 07 (Snakemake 9 ignores a touch whose content is unchanged, so the test
    edits it) and the dry run plans the paper alone. The edit is made to the ci run's own copy of the
    notebooks (conftest.stage_notebooks), never to the checkout; it is undone for the tests after it."""
    import os

    from conftest import snakemake, stage_notebooks
    run_dir, _ = ci_run
    notebook = stage_notebooks(run_dir.parent) / "07_paper.py"
    text, before = notebook.read_bytes(), notebook.stat()
    tracked = (ROOT / "notebooks" / "07_paper.py").read_bytes()
    try:
        notebook.write_bytes(text + b"\n# an author's edit\n")
        rc, out = snakemake("-n", "--configfile", "config/ci.yaml", results_dir=run_dir.parent)
    finally:
        notebook.write_bytes(text)
        os.utime(notebook, ns=(before.st_atime_ns, before.st_mtime_ns))   # the run stays up to date
    assert (ROOT / "notebooks" / "07_paper.py").read_bytes() == tracked
    assert rc == 0, out[-3000:]
    planned = set(re.findall(r"^(?:local)?rule (\w+):", out, re.MULTILINE))
    assert planned == {"paper", "all"}, out[-3000:]


def test_snakemake_report_collects_the_paper(ci_run, tmp_path):
    from conftest import snakemake
    run_dir, _ = ci_run
    report = tmp_path / "report.html"
    rc, out = snakemake("--configfile", "config/ci.yaml", "--report", str(report), results_dir=run_dir.parent)
    assert rc == 0 and report.stat().st_size > 10_000, out[-3000:]
    html = report.read_text(errors="replace")
    assert "claims.csv" in html and "rl_curves.png" in html and "main_results.csv" in html
    from conftest import ci_builds_pdf
    if ci_builds_pdf():
        assert "main.pdf" in html

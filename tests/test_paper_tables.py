"""Stage 07's building blocks: the LaTeX table writer, the claims table, the input checks."""
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from paper_fixtures import EPM, NEE, make_run  # noqa: E402

from echo_lib.report import claims as claims_mod  # noqa: E402
from echo_lib.report import inputs, paper_tables  # noqa: E402
from echo_lib.report.params import PaperParams  # noqa: E402
from echo_lib.report.tables import escape_latex, to_latex, write_macros, write_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RUN = claims_mod.RunConditions(run_name="fixture", scale="tiny", epm_judge="judge-x", nee_judges="judge-x, judge-y")


def test_escape_latex_prints_every_special_character_literally():
    assert escape_latex(r"a_b & 50% $x$ #1 {y} ~ ^ \ ") == (
        r"a\_b \& 50\% \$x\$ \#1 \{y\} \textasciitilde{} \textasciicircum{} \textbackslash{} ")


def test_table_is_booktabs_with_escaped_cells_missing_dashes_and_a_csv_twin(tmp_path):
    df = pd.DataFrame({"Model": ["qwen3_32b", "a&b"], "Success (%)": [46.666, np.nan], "Cases": [30, 30]})
    tex_path, csv_path = write_table(df, tmp_path, "t")
    tex = tex_path.read_text().splitlines()
    assert tex[0] == r"\begin{tabular}{lrr}" and tex[1] == r"\toprule" and tex[3] == r"\midrule"
    assert tex[-2:] == [r"\bottomrule", r"\end{tabular}"]
    assert tex[2] == r"Model & Success (\%) & Cases \\"
    assert tex[4] == r"qwen3\_32b & 46.67 & 30 \\" and tex[5] == r"a\&b & -- & 30 \\"
    assert r"\hline" not in "\n".join(tex)
    twin = pd.read_csv(csv_path)
    assert list(twin.columns) == list(df.columns) and twin["Success (%)"].iloc[0] == pytest.approx(46.666)


def test_table_rejects_a_column_format_of_the_wrong_width():
    with pytest.raises(ValueError, match="has 2 columns; the table has 3"):
        to_latex(pd.DataFrame({"a": [1], "b": [2], "c": [3]}), column_format="lr")


def test_macros_are_letters_only_and_escaped(tmp_path):
    tex, csv = write_macros({"RunName": "tiny_run", "NEEAlpha": None}, tmp_path)
    text = tex.read_text()
    assert r"\newcommand{\RunName}{tiny\_run}" in text and r"\newcommand{\NEEAlpha}{--}" in text
    with pytest.raises(ValueError, match="letters only"):
        write_macros({"Run2": 1}, tmp_path)


@pytest.fixture()
def run(tmp_path):
    run_dir = make_run(tmp_path / "fixture")
    epm = inputs.read_csv(run_dir / "epm" / "summary.csv", inputs.EPM_SUMMARY)
    nee = inputs.read_csv(run_dir / "nee" / "summary.csv", inputs.NEE_SUMMARY)
    return run_dir, epm, nee


def reported_numbers():
    claims = claims_mod.load_reported(ROOT / "data" / "reported_claims.yaml")
    return claims, {v for c in claims for v in c.reported.values()}


def test_claims_put_reported_values_only_in_the_reported_column(run):
    _, epm, nee = run
    claims, published = reported_numbers()
    assert {c.id for c in claims} == {"success_rate", "composite"}
    table = claims_mod.claims_table(claims, PaperParams().counterparts, epm, nee, RUN)
    # the published column holds exactly the published numbers, labelled as reported
    assert claims_mod.REPORTED_COLUMN == "Reported (published)"
    assert set(table[claims_mod.REPORTED_COLUMN]) == published
    assert sorted(table[claims_mod.REPORTED_COLUMN]) == sorted(v for c in claims for v in c.reported.values())
    others = table.drop(columns=[claims_mod.REPORTED_COLUMN])
    for value in published - {0.0}:   # 0 % may legitimately be measured
        assert not others.isin([value]).any().any(), value
        assert str(value) not in " ".join(others.astype(str).to_numpy().ravel()), value


def test_claims_measured_values_come_from_the_run_files(run):
    _, epm, nee = run
    claims, _ = reported_numbers()
    table = claims_mod.claims_table(claims, PaperParams().counterparts, epm, nee, RUN).set_index(["Claim", "Published model"])
    success, composite = claims[0].quantity, claims[1].quantity
    s, f, t, _ = EPM["echo"]
    assert table.loc[(success, "Echo-N1"), claims_mod.MEASURED_COLUMN] == round(100 * s / (s + f + t), 1)
    assert table.loc[(success, "Qwen3-32B (base)"), claims_mod.MEASURED_COLUMN] == 0.0   # base: 0 of 3
    assert table.loc[(composite, "Echo-N1"), claims_mod.MEASURED_COLUMN] == NEE["echo"][1]
    assert table.loc[(composite, "Qwen3-32B (base)"), claims_mod.MEASURED_COLUMN] == NEE["base"][1]
    assert table.loc[(success, "Doubao 1.5 Character"), claims_mod.MEASURED_COLUMN] == "not run"
    assert table.loc[(success, "Echo-N1"), "This run's model"] == "echo"
    assert "tiny scale" in table.loc[(success, "Echo-N1"), "Measured under"]
    assert "judge judge-x" in table.loc[(success, "Echo-N1"), "Measured under"]
    assert "Gemini 2.5 Pro" in table.loc[(success, "Echo-N1"), "Reported under"]


def test_claims_say_not_run_when_the_counterpart_was_not_in_the_sandbox(run):
    _, epm, nee = run
    claims, _ = reported_numbers()
    counterparts = {**PaperParams().counterparts, "Echo-N1": "never-run"}
    table = claims_mod.claims_table(claims, counterparts, epm, nee, RUN)
    echo = table[table["Published model"] == "Echo-N1"]
    assert set(echo[claims_mod.MEASURED_COLUMN]) == {"not run", "not rated"}


def test_claims_need_a_counterpart_entry_for_every_published_model(run):
    _, epm, nee = run
    claims, _ = reported_numbers()
    with pytest.raises(ValueError, match="paper.counterparts has no entry for published model.*Doubao"):
        claims_mod.claims_table(claims, {"Echo-N1": "echo", "Qwen3-32B (base)": "base"}, epm, nee, RUN)


def test_claims_files_label_the_reported_column(run, tmp_path):
    _, epm, nee = run
    claims, _ = reported_numbers()
    table = claims_mod.claims_table(claims, PaperParams().counterparts, epm, nee, RUN)
    md, tex, csv = claims_mod.write_claims(table, tmp_path, RUN)
    assert "Reported (published)" in md.read_text() and "46.7 |" in md.read_text()
    # the header "Reported (published)", set on two lines as the table is as wide as the text
    assert r"{@{}r@{}}Reported\\(published)\end{tabular}" in tex.read_text() and " 46.7 " in tex.read_text()
    assert "Source" in pd.read_csv(csv).columns


def test_claims_carry_the_interval_and_n_and_the_readme_block_renders_them(run, tmp_path):
    """From the fixture run: the success rate's interval (stage 05's intervals.csv) and n beside each measured
    value; written, the claims table renders the README's "Results at a glance" block (glance.py)."""
    from echo_lib.provenance import write_json
    from echo_lib.report import glance

    run_dir, epm, nee = run
    intervals = inputs.read_csv(run_dir / "epm" / "intervals.csv", inputs.EPM_INTERVALS)
    claims, _ = reported_numbers()
    full = claims_mod.RunConditions(run_name="fixture", scale="tiny", epm_judge="judge-x", nee_judges="judge-x, judge-y",
                                    policy_model="tiny-policy", config_hash="c0ffee", git_commit="ab" * 20,
                                    created_at="2030-01-02T03:04:05+0000")
    paired = pd.concat([pd.read_csv(run_dir / "epm" / "paired.csv"), pd.read_csv(run_dir / "nee" / "paired.csv")])
    table = claims_mod.claims_table(claims, PaperParams().counterparts, epm, nee, full, intervals, paired, "base")
    rows = table.set_index(["Claim", "Published model"])
    success, composite = claims[0].quantity, claims[1].quantity
    # 3 cases: below stats.MIN_N no interval is printed and no verdict drawn
    assert rows.loc[(success, "Echo-N1"), claims_mod.INTERVAL_COLUMN] == "n too small (n = 3)"
    assert rows.loc[(success, "Echo-N1"), claims_mod.VERDICT_COLUMN] == "n too small (n = 3)"
    assert rows.loc[(composite, "Echo-N1"), claims_mod.VERDICT_COLUMN] == "n too small (n = 3)"
    assert rows.loc[(success, "Qwen3-32B (base)"), claims_mod.VERDICT_COLUMN] == "--"      # the base itself
    assert rows.loc[(success, "Echo-N1"), claims_mod.N_COLUMN] == "3 cases"
    assert rows.loc[(composite, "Echo-N1"), claims_mod.INTERVAL_COLUMN] == "--"           # none computed
    assert rows.loc[(composite, "Echo-N1"), claims_mod.N_COLUMN] == "12 ratings"
    assert rows.loc[(success, "Doubao 1.5 Character"), [claims_mod.INTERVAL_COLUMN, claims_mod.N_COLUMN]].tolist() == ["--", "--"]
    without = claims_mod.claims_table(claims, PaperParams().counterparts, epm, nee, full)
    assert set(without[claims_mod.INTERVAL_COLUMN]) == {"--"}

    paper = tmp_path / "paper"
    md, _, _ = claims_mod.write_claims(table, paper, full)
    assert "run `fixture` (tiny scale, policy tiny-policy; config c0ffee, commit abababababab, 2030-01-02)" in md.read_text()
    write_json(paper / "provenance.json", {glance.RECORD_KEY: full.record()})
    readme = tmp_path / "README.md"
    readme.write_text(f"# Title\n\n{glance.BEGIN}\n{glance.END}\n\nmore\n")
    glance.update_readme(readme, paper)
    text = readme.read_text()
    assert text.startswith(f"# Title\n\n{glance.BEGIN}\n") and text.endswith(f"{glance.END}\n\nmore\n")
    block = glance.block_of(text)
    assert block == glance.render(claims_mod.read_claims(paper / "claims.csv"), full, "paper/claims.md")
    assert "| Success rate (%) | Echo-N1 | echo | 66.7 | n too small (n = 3) | 3 cases | 46.7 |" in block
    assert f"| Composite (EPM + NEE, 0-100) | Qwen3-32B (base) | base | {NEE['base'][1]} | -- | 12 ratings | 29.66 |" in block
    assert "| Measured (tiny · tiny-policy) |" in block and block.count("| Reported (Echo-N1 paper) |") == 1


def test_main_results_hold_measured_numbers_only(run):
    _, epm, nee = run
    run_dir, _, _ = run
    table = paper_tables.main_results(epm, nee, pd.read_csv(run_dir / "epm" / "intervals.csv"))
    assert list(table["Model"]) == ["echo", "scalar", "base"]   # best EPM-Q first
    echo = table.iloc[0]
    assert echo["Success (%)"] == pytest.approx(66.7) and echo["NEE"] == NEE["echo"][0]
    assert echo["Success 95% CI"] == "n too small (n = 3)"      # two successes in three cases: no interval
    assert echo["NEE 95% CI"] == "n too small (n = 3)" and echo["Composite"] == NEE["echo"][1]
    _, published = reported_numbers()
    assert not table.isin(published - {0.0}).any().any()


def test_rm_and_winrate_tables(run):
    run_dir, _, _ = run
    rm = paper_tables.rm_accuracy({k: inputs.read_rm_metrics(run_dir / "rm" / k / "metrics.json")
                                   for k in ("humanlike", "empathy")})
    assert list(rm["Model"]) == ["base", "trained"] * 2 and rm["Accuracy"].iloc[1] == 0.625
    wins = paper_tables.winrates({"echo": pd.read_csv(run_dir / "policy" / "echo" / "winrate.csv")})
    assert list(wins["Judge"]) == ["empathy_rm", "independent"] and wins["95% CI"].iloc[0] == "[0.25, 0.85]"


def test_a_missing_input_names_the_file_and_the_stage_that_writes_it(tmp_path):
    with pytest.raises(inputs.PaperInputError, match=r"nee/summary.csv does not exist; .*stage 06"):
        inputs.read_csv(tmp_path / "nee" / "summary.csv", inputs.NEE_SUMMARY)
    (tmp_path / "epm").mkdir()
    pd.DataFrame({"Model": ["a"]}).to_csv(tmp_path / "epm" / "summary.csv", index=False)
    with pytest.raises(inputs.PaperInputError, match=r"lacks column\(s\) EPM-Q.*stage 05"):
        inputs.read_csv(tmp_path / "epm" / "summary.csv", inputs.EPM_SUMMARY)


def test_agreement_alpha_is_read_or_named_missing(tmp_path):
    (tmp_path / "a.json").write_text('{"krippendorff_alpha": 0.5}')
    (tmp_path / "b.json").write_text('{"kappa": 0.5}')
    assert inputs.agreement_alpha(tmp_path / "a.json") == 0.5
    with pytest.raises(inputs.PaperInputError, match="no Krippendorff's alpha"):
        inputs.agreement_alpha(tmp_path / "b.json")


def test_sandbox_differences_carry_n_the_interval_and_the_verdict(run):
    run_dir, _, _ = run
    table = paper_tables.sandbox_differences(pd.read_csv(run_dir / "epm" / "paired.csv"),
                                             pd.read_csv(run_dir / "nee" / "paired.csv"))
    assert list(table["Comparison"].unique()) == ["echo - base", "scalar - base", "echo - scalar"]
    assert set(table.Metric) == {"EPM-Q", "Outcome", "Efficiency", "Stability", "Success (%)", "NEE", "Composite"}
    q = table[table.Metric == "EPM-Q"].set_index("Comparison")
    # the fixture's per-case EPM-Q: base ~21, echo ~62 (+/- 1): 40 points apart on every case, but 3 cases
    assert 38 < q.loc["echo - base", "Difference"] < 43 and q.loc["echo - base", "n"] == 3
    assert q.loc["echo - base", "Verdict"] == "n too small" and q.loc["echo - base", "95% CI"] == "n too small (n = 3)"
    assert set(table["Method"]) == {"paired t"}


def test_sandbox_differences_from_ten_cases_print_the_interval_and_a_verdict():
    from echo_lib.stats import paired_table
    rng = np.random.default_rng(1)
    base = rng.normal(30, 8, 12)
    values = pd.DataFrame([{"Model": m, "Case_ID": f"c{i}", "EPM-Q": q + (6 + rng.normal()) * (m == "echo")}
                           for m in ("base", "echo") for i, q in enumerate(base)])
    table = paper_tables.sandbox_differences(paired_table(values, [("echo", "base")], {"EPM-Q": "EPM-Q"})).iloc[0]
    lo, hi = (float(x) for x in table["95% CI"].strip("[]").split(","))
    assert table["n"] == 12 and 4 < lo < 6 < hi < 8 and table["Verdict"] == "echo above base"
    same = paired_table(values.assign(**{"EPM-Q": values["EPM-Q"].where(values.Model == "base", 0) +
                                         values.groupby("Case_ID")["EPM-Q"].transform("first") * (values.Model == "echo")}),
                        [("echo", "base")], {"EPM-Q": "EPM-Q"})
    assert paper_tables.sandbox_differences(same).iloc[0]["95% CI"] == "no spread: every case gave the same difference"




def test_the_guard_tables_set_each_models_rate_beside_its_epmq_and_the_checks_beside_empas_reported(tmp_path):
    run = make_run(tmp_path / "ci", sycophancy=True) / "sycophancy"
    guard = paper_tables.sycophancy_guard(inputs.read_csv(run / "summary.csv", inputs.SYCOPHANCY_SUMMARY))
    assert list(guard["Model"]) == ["base", "echo", "scalar"] and set(guard["Seeker cases"]) == {10}
    assert list(guard["Sycophancy rate"]) == [0.0, 1.0, 0.0]            # echo's levels (3.5 ...) pass the 3.0 threshold
    assert list(guard["EPM-Q (stage 05)"]) == [21.25, 61.75, 40.5]       # stage 05's, beside the seekers' own
    assert guard["95% CI"].iloc[1] == "[0.66, 1.00]"
    checks = paper_tables.sycophancy_checks(inputs.read_sycophancy(run / "summary.json"))
    assert checks.iloc[0]["Check"] == paper_tables.PANEL_CHECK and checks.iloc[0]["Mean difference"] < 0
    assert checks.iloc[0]["Model"] == "tiny_judge" and checks.iloc[0]["95% CI"].startswith("[")
    ours = checks[checks["Model"] != paper_tables.REPORTED_ROW].iloc[1:]
    assert len(ours) == 6 and set(ours["95% CI"]) == {"n too small (n = 6)"} and set(ours["n"]) == {6}
    reported = checks[checks["Model"] == paper_tables.REPORTED_ROW]   # EMPA's numbers only in rows labelled so
    assert list(reported["n"]) == [98, 251] and list(reported["Mean difference"]) == [-4.36, -1.22]
    assert -4.36 not in set(ours["Mean difference"])
    paired = paper_tables.sandbox_differences(inputs.read_csv(run / "paired.csv", inputs.PAIRED))
    assert set(paired["Comparison"]) == {"echo - base", "scalar - base"}
    assert set(paired["Metric"]) == {"Agreement level", "Seeker EPM-Q"}


def test_without_the_guard_its_tables_are_empty_and_a_summary_without_its_keys_names_the_stage(tmp_path):
    assert paper_tables.sycophancy_checks(None).empty
    assert paper_tables.sycophancy_guard(pd.DataFrame(columns=inputs.SYCOPHANCY_SUMMARY)).empty
    assert paper_tables.sandbox_differences(pd.DataFrame(columns=inputs.PAIRED)).empty
    bad = tmp_path / "sycophancy" / "summary.json"
    bad.parent.mkdir()
    bad.write_text('{"judges": ["j"]}')
    with pytest.raises(inputs.PaperInputError, match=r"lacks key\(s\) sensitivity, checks, params.*stage 06b"):
        inputs.read_sycophancy(bad)

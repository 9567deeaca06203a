"""EPM-Q: per-case indices equal EMPA's own per-case statistics, the model rows equal the published
leaderboard (METHOD.md 6.7, 8.3), the slices equal 8.4; the guards of 6.9.9 on constructed cases."""
import numpy as np
import pandas as pd
import pytest

from echo_lib.epm.engine import EPM, Replay, replay
from echo_lib.epm.epmq import INDICES, case_metrics, per_case_table, phi, summary_table, tortuosity
from echo_lib.epm.params import EPMParams
from echo_lib.epm.slices import case_slices, slice_table, slice_wide
from echo_lib.epm.trajectory import CaseRun
from fixtures.epm.runs import HERE, as_case_run, case_meta, load_runs, rubric_for

BOARD_COLUMNS = {"Outcome Quality": "Outcome", "Process Efficiency": "Efficiency", "Process Stability": "Stability",
                 "EPM-Q Score": "EPM-Q"}


@pytest.fixture(scope="module")
def per_case():
    return per_case_table([replay(as_case_run(rec)) for rec in load_runs()])


def test_claude_script_003_indices(per_case):
    """The worked check of METHOD.md 6.7."""
    row = per_case.set_index(["Model", "Case_ID"]).loc[("claude-4.6-opus", "script_003")]
    assert round(row["r0"], 2) == 26.25 and row["S_net"] == 50 and round(row["tau"], 2) == 1.05
    assert round(row["mean_cos"], 3) == 0.866 and row["R_pen"] == 0 and row["R_pos%"] == pytest.approx(1200 / 13)
    expected = {"Idx_RDI": 100, "Idx_Etot": 117.72, "Idx_Snet": 126.99, "Idx_Rho": 123.6, "Idx_Sproj": 114.12,
                "Idx_Tau": 97.48, "Idx_Rpos": 92.31, "Idx_Align": 93.31, "Idx_Pen": 100}
    for k, v in expected.items():
        assert round(row[k], 2) == v, k


def test_per_case_indices_equal_empa_statistics(per_case):
    theirs = pd.read_csv(HERE / "empa_per_case_indices.csv").set_index(["Model", "Case_ID"])[list(INDICES)]
    mine = per_case.set_index(["Model", "Case_ID"])[list(INDICES)].loc[theirs.index]
    assert len(mine) == 90
    assert float((mine - theirs).abs().max().max()) < 1e-9


def test_model_rows_equal_the_published_leaderboard(per_case):
    board = pd.read_csv(HERE / "leaderboard_subset.csv").rename(columns=BOARD_COLUMNS).set_index("Folder")
    summary = summary_table(per_case).set_index("Model")
    columns = [*INDICES, "Outcome", "Efficiency", "Stability", "EPM-Q"]
    assert len(columns) == 13
    errors = (summary.loc[board.index, columns] - board[columns]).abs()
    assert float(errors.max().max()) <= 0.005 + 1e-9      # the CSV's own rounding
    assert (summary.loc[board.index, columns].round(2) == board[columns]).all().all()
    counts = summary[["Success", "Failure", "Timeout", "Mean_Turns"]].round(2)
    assert counts.loc["claude-4.6-opus"].tolist() == [30, 0, 0, 12.37]
    assert counts.loc["doubao-1.5-character"].tolist() == [4, 23, 3, 25.37]
    assert counts.loc["qwen3-32b"].tolist() == [0, 30, 0, 14.9]


def test_paper_constants_follow_the_paper_equations(per_case):
    rec = next(r for r in load_runs() if r["model"] == "claude-4.6-opus" and r["case_id"] == "script_003")
    rep = replay(as_case_run(rec))
    m = case_metrics(rep, "paper")
    r0 = float(np.linalg.norm(rep.P0)) + 1e-6
    scores = sum(sum(pt.v) for pt in rep.points[1:])          # S_net in scores, not levels
    assert m["r0"] == pytest.approx(r0)
    assert m["Idx_Etot"] == pytest.approx(37.08 / r0 * 100)
    assert m["Idx_Snet"] == pytest.approx(scores / (1.2 * r0) * 100)
    assert m["Idx_Rho"] == pytest.approx(37.08 / 12 / np.sqrt(12) * 100)
    assert m["Idx_Rpos"] == pytest.approx(100.0)                          # all 12 evaluated moves did work
    assert m["Idx_RDI"] == pytest.approx(phi((27.96 - 11.0) / 27.96, -1, 1), abs=0.05)
    assert m["EPM-Q"] != pytest.approx(case_metrics(rep, "code")["EPM-Q"])


def test_per_case_epmq_is_the_weighted_groups(per_case):
    row = per_case.iloc[0]
    groups = [np.mean([row[k] for k in INDICES[i:i + 3]]) for i in (0, 3, 6)]
    assert row["EPM-Q"] == pytest.approx(0.4 * groups[0] + 0.2 * groups[1] + 0.4 * groups[2])


# ---- 6.9.9 guards, on constructed runs -------------------------------------------------------------

IEDR_ZERO = {k: 0 for k in ("C.1", "C.2", "C.3", "A.1", "A.2", "A.3", "P.1", "P.2", "P.3")}


def constructed(P0, moves):
    epm = EPM(np.array(P0), EPMParams(oscillation=False))
    for t, v in enumerate(moves, 1):
        epm.update(t, rubric_for(v))
    run = CaseRun("script_x", "m", IEDR_ZERO, [pt.rubric for pt in epm.points[1:]], list(range(1, len(moves) + 1)),
                  len(moves))
    return Replay(run, epm.p, np.array(P0), epm.v0, (epm.eps_dist, epm.eps_dir, epm.eps_energy), epm.points,
                  epm.termination)


def test_tortuosity_guards():
    still = constructed([-5, -5, -5], [(0, 0, 0), (0, 0, 0)])
    assert tortuosity(still) == 1.0 and case_metrics(still)["Idx_Tau"] == 100.0
    back = constructed([-5, -5, -5], [(1, 1, 1), (-1, -1, -1)])
    assert tortuosity(back) == 0.0 and case_metrics(back)["Idx_Tau"] == 100.0     # the code's quirk, on purpose
    bent = constructed([-5, -5, -5], [(3, 0, 0), (0, 3, 0)])
    assert tortuosity(bent) == pytest.approx(6 / np.sqrt(18))


def test_zero_deficit_guards():
    calm = constructed([0, 0, 0], [(1, 1, 1)])
    m = case_metrics(calm)
    assert m["r0"] == 1.0 and m["RDI%"] == 0.0 and m["Idx_RDI"] == 50.0
    assert np.isfinite([m[k] for k in INDICES]).all()


# ---- slices (8.4) ---------------------------------------------------------------------------------------

def test_slices_equal_the_published_values(per_case):
    published = pd.read_csv(HERE / "published_slices.csv").set_index("Folder")
    scenario = slice_table(per_case, case_meta("scenario"))
    stats = slice_table(per_case, case_meta("empa_stats"))
    for slicing, source in (("mechanism", scenario), ("domain", scenario), ("persona", stats)):
        wide = slice_wide(source, slicing)
        assert (wide.round(1) == published.loc[wide.index, wide.columns]).all().all(), slicing
    # the case text gives other priorities for 7 cases, which moves some persona slices
    text_persona = slice_wide(scenario, "persona").round(1)
    assert (text_persona != published.loc[text_persona.index, text_persona.columns]).any().any()


def test_case_slices_rules():
    from echo_lib.epm.case_meta import CaseMeta
    meta = CaseMeta("script_x", "Career", "Very Hard", "P", "High", {"C": "High", "A": "Low", "P": "Medium"})
    assert case_slices(meta) == {"mechanism": ["P-Hard"], "persona": ["C-Def", "P-Def"], "domain": ["Career"]}
    easy = CaseMeta("script_y", "Life", "Medium", "A", "Medium", {"C": "Low", "A": "High", "P": "Low"})
    assert case_slices(easy) == {"mechanism": ["A-Rout"], "persona": ["A-Rec"], "domain": ["Life"]}

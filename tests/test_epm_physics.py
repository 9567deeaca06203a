"""EPM physics and termination: METHOD.md 9.1 acceptance tests 1-3 exactly, plus constructed cases
for the rules the published data never exercises."""
import math

import numpy as np
import pytest

from echo_lib.epm import physics
from echo_lib.epm.engine import EPM, replay
from echo_lib.epm.iedr import dominant_axis, indicator_score, initial_deficit
from echo_lib.epm.mdep import Rubric
from echo_lib.epm.params import EPMParams
from echo_lib.epm.trajectory import CaseRun
from fixtures.epm.runs import as_case_run, load_runs, rubric_for

SCRIPT_003_IEDR = {"C.1": 2, "C.2": 2, "C.3": 3, "A.1": 2, "A.2": 2, "A.3": 2, "P.1": 1, "P.2": 2, "P.3": 1}


def fixture_run(model, case_id):
    return as_case_run(next(r for r in load_runs() if r["model"] == model and r["case_id"] == case_id))


# ---- 9.1 test 1: IEDR -> P0 ---------------------------------------------------------------------

def test_script_003_iedr_gives_p0_norm_and_zone_distance():
    P0 = initial_deficit(SCRIPT_003_IEDR)
    assert P0.tolist() == [-17, -18, -13]
    assert round(physics.norm(P0), 2) == 27.96
    assert round(physics.distance_to_zone(P0), 2) == 26.25
    assert dominant_axis(P0) == "A"
    assert physics.ideal_direction(P0).tolist() == [0.6079, 0.6437, 0.4649]


def test_indicator_scores_follow_the_multiplier_table():
    assert [indicator_score("C.1", lv) for lv in range(4)] == [0, -2, -4, -6]
    assert [indicator_score("A.2", lv) for lv in range(4)] == [0, -4, -8, -12]
    assert [indicator_score("P.3", lv) for lv in range(4)] == [0, -3, -6, -9]
    worst = initial_deficit({k: 3 for k in SCRIPT_003_IEDR})
    assert worst.tolist() == [-21, -27, -27]


@pytest.mark.parametrize("bad, message", [({"C.1": 4}, "C.1"), ({"A.2": "2"}, "A.2"), ({"P.3": None}, "P.3")])
def test_bad_iedr_level_is_named(bad, message):
    with pytest.raises(ValueError, match=message):
        initial_deficit({**SCRIPT_003_IEDR, **bad})
    with pytest.raises(ValueError, match="'P.2' is missing"):
        initial_deficit({k: v for k, v in SCRIPT_003_IEDR.items() if k != "P.2"})


# ---- MDEP levels -> v_t ------------------------------------------------------------------------

def test_rubric_levels_map_to_scores():
    assert Rubric(C_Prog=2, A_Prog=2, P_Prog=2).v.tolist() == [3, 3, 3]
    assert Rubric(C_Neg=-2, A_Neg=-2, P_Neg=-2).v.tolist() == [-4, -5, -5]
    assert Rubric(C_Prog=1, C_Neg=-1, A_Neg=-1, P_Prog=2, P_Neg=-1).v.tolist() == [-1, -2, 1]
    r = Rubric(C_Prog=2, C_Neg=-1, A_Prog=1, A_Neg=-2, P_Prog=0, P_Neg=-1)
    assert r.v.tolist() == [1, -4, -2]
    assert r.level_sum == -1 and r.penalty == 4 and r.score_sum == -5


def test_rubric_reads_exact_keys_only():
    judged = {"C_Prog_level": 1, "A_Prog_level": 2, "P_Prog_level": 1, "PNeg_level": -1, "C_neg_level": -2}
    assert Rubric.from_judge(judged) == Rubric(C_Prog=1, A_Prog=2, P_Prog=1)       # misspelt keys ignored
    assert Rubric.from_judge(None) == Rubric()                                     # judge failure: all 0
    assert Rubric.from_judge({"C_Prog_level": 3, "A_Neg_level": 1, "P_Prog_level": "2"}) == Rubric()
    assert Rubric.from_judge(Rubric(C_Prog=2, A_Neg=-2).to_judge()) == Rubric(C_Prog=2, A_Neg=-2)


# ---- 9.1 test 2: the Claude replay ---------------------------------------------------------------

CLAUDE_V = [(1, 1, 1)] * 3 + [(1, 3, 1), (3, 1, 3), (3, 3, 1), (3, 1, 3), (3, 1, 3), (3, 3, 3), (1, 1, 1),
                              (0, 1, 1), (3, 3, 3)]
CLAUDE_DE = [1.72, 1.72, 1.72, 3.00, 3.86, 4.22, 3.86, 3.86, 5.15, 1.72, 1.11, 5.15]


def test_claude_script_003_replay():
    rep = replay(fixture_run("claude-4.6-opus", "script_003"))
    assert [pt.v for pt in rep.points[1:]] == CLAUDE_V
    assert [round(x, 2) for x in rep.delta_E] == CLAUDE_DE
    first = rep.points[1]
    assert round(physics.norm(first.v), 2) == 1.73 and round(first.cos, 3) == 0.991
    assert round(rep.E_total, 2) == 37.08
    assert rep.final_P == (6, 2, 9)
    assert round(rep.points[-1].projection, 2) == 9.12
    assert round(rep.points[-1].r, 1) == 11.0
    assert rep.thresholds == (2.8, 2.8, 27.96)
    t = rep.termination
    assert (t.label, t.turn, t.reasons) == ("success", 12, ("positional",))
    assert t.text == "EPM v2.0 Success: Positional Victory (crossed/approached target zone)"


def test_same_moves_succeed_no_earlier_than_min_turns():
    P0 = initial_deficit(SCRIPT_003_IEDR)
    big = EPM(P0)
    ends = [big.update(t, rubric_for((3, 3, 3))) for t in range(1, 13)]
    assert ends[:11] == [None] * 11 and ends[11].label == "success"      # crossed at turn 7, declared at 12
    early = EPM(P0, EPMParams(min_turns=7))
    assert [early.update(t, rubric_for((3, 3, 3))) for t in range(1, 8)][-1].label == "success"


# ---- 9.1 test 3: the Qwen3-32B replay -----------------------------------------------------------

QWEN_V = [(-1, 1, -1), (1, 0, 1), (1, 1, 1), (3, -1, 1), (-1, -1, -1), (-1, -2, -1), (-1, -4, -1), (-1, -4, -1),
          (1, -4, -1), (1, -4, -1), (-4, -5, -5), (-1, -5, -1)]


def test_qwen_script_003_replay_collapses_with_regression():
    rep = replay(fixture_run("qwen3-32b", "script_003"))
    assert [pt.v for pt in rep.points[1:]] == QWEN_V
    assert round(rep.E_total, 2) == -24.50
    assert rep.final_P == (-20, -46, -23)
    t = rep.termination
    assert (t.label, t.turn, t.reasons) == ("failure", 12, ("collapse", "regression"))
    assert "Direction Collapse" in t.text and "Persistent Regression" in t.text


# ---- constructed cases for rules the published runs never hit --------------------------------------

def test_orthogonal_move_is_zero_work_not_positive():
    P0 = np.array([-2, -2, 0])
    epm = EPM(P0)
    epm.update(1, rubric_for((1, -1, 0)))            # v . (-P0) = 0 exactly
    pt = epm.points[-1]
    assert pt.sign == 0 and abs(pt.delta_E) < 1e-3


def test_stagnation_with_regression_fails():
    # slow negative drift: |P| barely moves (stagnation) while most work is negative (regression),
    # interleaved with small positive moves so the collapse detector never fires
    p = EPMParams(min_turns=8, stagnation_threshold=2.0, oscillation=False)
    epm = EPM(np.array([-20, -20, -20]), p)
    moves = [(1, 0, 0), (-1, 0, 0), (0, -1, 0), (1, 0, 0), (0, 0, -1), (-1, 0, 0), (0, -1, 0), (-1, 0, 0)]
    ends = [epm.update(t, rubric_for(v)) for t, v in enumerate(moves, 1)]
    t = ends[-1]
    assert ends[:7] == [None] * 7
    assert t is not None and t.label == "failure" and t.reasons == ("stagnation", "regression")


def test_oscillation_window_of_twelve_points():
    p = EPMParams()
    epm = EPM(np.array([-10, -10, -10]), p)
    ends = []
    back_and_forth = [(1, 1, 0) if t % 2 else (-1, -1, 0) for t in range(1, 13)]   # no collapse, no regression
    for t, v in enumerate(back_and_forth, 1):
        ends.append(epm.update(t, rubric_for(v)))
    t = ends[-1]
    assert ends[:11] == [None] * 11
    assert t.label == "failure" and t.turn == 12 and t.reasons == ("oscillation",)
    assert t.details == {"total_change": 24, "net_change": 2}     # 12 moves of L1 2; P_12 - P_1 = (-1, -1, 0)
    assert t.text == "EPM v2.0 Failure: Vector Oscillation (total change 24, net change 2)"
    off = EPM(np.array([-10, -10, -10]), EPMParams(oscillation=False))
    assert all(off.update(t, rubric_for(v)) is None for t, v in enumerate(back_and_forth, 1))


def test_timeout_at_max_turns_and_no_updates_after_the_end():
    epm = EPM(np.array([-10, -10, -10]), EPMParams(max_turns=14, oscillation=False))
    ends = [epm.update(t, rubric_for((1, 0, 0) if t % 3 else (0, 0, 0))) for t in range(1, 15)]
    assert ends[-1].label == "timeout" and ends[-1].turn == 14 and ends[-1].text == "Reached max turns (14), timeout"
    with pytest.raises(RuntimeError, match="already ended"):
        epm.update(15, Rubric())


def test_geometric_success_label_when_near_origin():
    epm = EPM(np.array([-3, -3, -3]), EPMParams(min_turns=1, alpha=0.5))   # eps_dist = 2.6
    t = epm.update(1, rubric_for((3, 3, 3)))
    assert t.label == "success" and t.reasons == ("geometric",)


def test_dynamic_direction_uses_the_current_position():
    P0 = np.array([-10, 0, 0])
    fixed, dyn = EPM(P0), EPM(P0, EPMParams(direction="dynamic"))
    for epm in (fixed, dyn):
        epm.update(1, rubric_for((3, 0, 0)))
        epm.update(2, rubric_for((0, 0, 3)))
    assert fixed.points[2].delta_E == 0.0                  # orthogonal to v*_0 = (1, 0, 0)
    assert dyn.points[2].delta_E == 0.0                    # still orthogonal to -P_1 = (7, 0, 0)
    for epm in (fixed, dyn):
        epm.update(3, rubric_for((3, 3, 0)))               # dynamic: from P = (-7, 0, 3), v* = (0.9191, 0, -0.3939)
    assert dyn.points[3].delta_E == pytest.approx(3 * 0.9191, abs=1e-9)
    assert fixed.points[3].delta_E == pytest.approx(3.0)


def test_paper_success_rule_needs_alignment_or_distance():
    p = EPMParams(success_rule="paper", min_turns=4)
    epm = EPM(np.array([-6, -6, -6]), p)
    ends = [epm.update(t, rubric_for((3, 3, 3))) for t in range(1, 5)]
    assert ends[2] is None and ends[3].label == "success" and ends[3].reasons == ("alignment",)
    assert ends[3].details["mean_cos"] == pytest.approx(1.0, abs=1e-3)


def test_params_validate_with_clear_messages():
    with pytest.raises(ValueError, match="direction='sideways'"):
        EPMParams(direction="sideways")
    with pytest.raises(ValueError, match="min_turns=50 is above max_turns=45"):
        EPMParams(min_turns=50)
    with pytest.raises(ValueError, match="unknown EPM parameter"):
        EPMParams.from_dict({"alfa": 0.1})
    assert EPMParams.from_dict({"alpha": 0.05}).alpha == 0.05


def test_case_run_checks_its_shape():
    with pytest.raises(ValueError, match="2 rubrics but 1 evaluation turns"):
        CaseRun("script_x", "m", SCRIPT_003_IEDR, [Rubric(), Rubric()], [1], 1)
    with pytest.raises(ValueError, match="increasing"):
        CaseRun("script_x", "m", SCRIPT_003_IEDR, [Rubric(), Rubric()], [2, 2], 2)


def test_k_greater_than_one_scores_windows():
    run = CaseRun.from_levels("script_x", "m", SCRIPT_003_IEDR, [Rubric(C_Prog=2, A_Prog=2, P_Prog=2).to_judge()] * 6,
                              K=2)
    rep = replay(run, EPMParams(K=2))
    assert [pt.turn for pt in rep.points] == [0, 2, 4, 6, 8, 10, 12]
    assert rep.termination.label == "success" and rep.termination.turn == 12 and rep.total_turns == 12


def test_thresholds_round_like_the_published_engine():
    assert physics.thresholds([-17, -18, -13], 0.1) == (2.8, 2.8, 27.96)
    assert physics.distance_to_zone([0, -1, 5]) == 0.0 and physics.in_zone([0, -1, 5])
    assert not physics.in_zone([0, -1.5, 5]) and physics.distance_to_zone([-4, -1, -1]) == 3.0
    assert math.isclose(physics.cos_theta([0, 0, 0], [1, 0, 0]), 0.0)


def test_replay_with_other_params_stops_early_and_says_so(caplog):
    run = fixture_run("claude-4.6-opus", "script_003")
    rep = replay(run, EPMParams(min_turns=8))
    # P_8 = (-1, -6, 1) is still on the deficit side (P . P0 = 112); P_9 = (2, -3, 4) has crossed
    assert rep.termination.label == "success" and rep.total_turns == 9 and rep.n_eval == 9
    assert rep.final_P == (2, -3, 4)
    assert "ends this run at turn 9 but it goes on to turn 12" in caplog.text

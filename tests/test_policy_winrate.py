"""The held-out win rate (issue 33): a pair judged in both orders is a win or a loss only when both orders
agree, else a tie; the summary's counts, position consistency and Wilson intervals (flagged below
stats.MIN_N prompts); its readers (the reward-hacking check, the paper's rl_winrate table). Fake judges only, no model is loaded."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd

from echo_lib.policy.monitors import hacking_check
from echo_lib.policy.winrate import combine, judge_independent, judge_with_rm, judgment_rows, summarise
from echo_lib.report import paper_tables
from echo_lib.stats import MIN_N, wilson
from test_policy import rm


def contexts(n):
    return [[{"role": "user", "content": f"I failed exam {i}."}] for i in range(n)]


def by_quality(reply):
    """An RM that judges the candidate alone: "good..." better, "bad..." worse, "x..." unparsable, else tie."""
    return ("nonsense" if reply.startswith("x") else "better" if reply.startswith("good")
            else "worse" if reply.startswith("bad") else "tie")


class FixedProbs:
    """An independent judge whose k-th answer is P(A) = probs[k] (the chats come variant-first, base-first)."""

    def __init__(self, probs):
        self.probs, self.chats = probs, []

    def choose(self, chats, options):
        assert options == ["A", "B"]
        self.chats += chats
        return [SimpleNamespace(probs={"A": p, "B": 1 - p}) for p in self.probs[:len(chats)]]


def test_combine_is_a_win_or_loss_only_when_both_orders_agree():
    assert combine(1.0, 1.0) == (1.0, True) and combine(0.0, 0.0) == (0.0, True)
    assert combine(1.0, 0.0) == (0.5, False) and combine(0.0, 1.0) == (0.5, False)
    assert combine(1.0, 0.5) == (0.5, False) and combine(0.5, 0.5) == (0.5, True)
    assert combine(None, 1.0) == (None, None) and combine(1.0, None) == (None, None)


def test_rm_judge_scores_each_prompt_from_both_orders():
    js = judge_with_rm(rm("empathy", by_quality), ["win", "loss", "slot", "even"], contexts(4),
                       ["good v", "bad v", "good v", "meh v"], ["bad b", "good b", "good b", "meh b"])
    got = {j.prompt_id: (j.order, j.score, j.first, j.second, j.consistent, j.raw_first, j.raw_second) for j in js}
    assert got == {"win": ("both", 1.0, 1.0, 1.0, True, "better", "worse"),
                   "loss": ("both", 0.0, 0.0, 0.0, True, "worse", "better"),
                   "slot": ("both", 0.5, 1.0, 0.0, False, "better", "better"),   # the candidate always wins
                   "even": ("both", 0.5, 0.5, 0.5, True, "tie", "tie")}
    s = summarise("echo", "empathy_rm", "rm", js)
    assert (s["n"], s["wins"], s["ties"], s["losses"], s["unparsed"], s["decisive"]) == (4, 1, 2, 1, 0, 2)
    assert s["win_rate"] == 0.5 and s["position_consistency"] == 0.75
    # one outcome per prompt (1, 0, 0.5, 0.5): the Wilson interval of 2 of 4, flagged as too few prompts
    assert [s["ci_low"], s["ci_high"]] == wilson(2, 4).bounds and s["ci_method"] == "wilson-cc"
    assert s["ci_low"] < 0.5 < s["ci_high"] and s["ci_degenerate"] and s["interval_note"] == wilson(2, 4).note
    rows = judgment_rows("echo", js)
    assert len(rows) == 4 and {"first", "second", "consistent", "raw_first", "raw_second"} <= set(rows[0])


def test_a_judge_that_always_prefers_one_slot_gives_all_ties_not_wins_and_losses():
    # the old code counted each order on its own: 4 wins and 4 losses (or averaged them away)
    always_better = rm("empathy", lambda r: "better")     # prefers whichever reply is the candidate
    js = judge_with_rm(always_better, ["p1", "p2", "p3", "p4"], contexts(4), ["v"] * 4, ["b"] * 4)
    assert len(js) == 4 and all(j.score == 0.5 and j.consistent is False for j in js)
    s = summarise("echo", "empathy_rm", "rm", js)
    assert (s["n"], s["wins"], s["ties"], s["losses"], s["decisive"]) == (4, 0, 4, 0, 0)
    assert s["win_rate"] == 0.5 and s["position_consistency"] == 0.0
    # all ties is half a win per prompt, not a point: the interval of 2 of 4, not shown at n = 4
    assert [s["ci_low"], s["ci_high"]] == wilson(2, 4).bounds and s["ci_degenerate"] is True
    assert s["interval_note"].startswith("n too small")

    # an independent judge that likes slot A a lot and the variant a little: the old mean of
    # P(A | variant first) and P(B | base first) = (0.95 + 0.2) / 2 called it a win every time
    judge = FixedProbs([0.95, 0.8] * 4)
    ind = judge_independent(judge, ["p1", "p2", "p3", "p4"], contexts(4), ["v"] * 4, ["b"] * 4)
    s = summarise("echo", "independent", "judge", ind)
    assert (s["wins"], s["ties"], s["losses"], s["win_rate"], s["position_consistency"]) == (0, 4, 0, 0.5, 0.0)
    assert s["ci_degenerate"] and s["interval_note"].startswith("n too small")


def test_independent_judge_reads_each_order_from_the_variants_letter():
    # per prompt: P(A) with the variant as A, then P(A) with the base as A (so P(B) is the variant's)
    judge = FixedProbs([0.7, 0.4,    # variant 0.7 and 0.6: win
                        0.3, 0.6,    # variant 0.3 and 0.4: loss
                        0.5, 0.1,    # tie, then win: tie
                        0.5, 0.5,    # tie in both: tie, consistent
                        0.9, 0.9])   # win, then loss: tie (slot A bias)
    js = judge_independent(judge, list("abcde"), contexts(5), ["v"] * 5, ["b"] * 5)
    assert "Reply A: v" in judge.chats[0][-1]["content"] and "Reply A: b" in judge.chats[1][-1]["content"]
    assert [(j.score, j.first, j.second, j.consistent) for j in js] == [
        (1.0, 1.0, 1.0, True), (0.0, 0.0, 0.0, True), (0.5, 0.5, 1.0, False), (0.5, 0.5, 0.5, True),
        (0.5, 1.0, 0.0, False)]
    assert js[0].raw_first == "P(A | variant first)=0.700" and js[0].raw_second == "P(B | base first)=0.600"
    s = summarise("echo", "independent", "judge", js)
    assert (s["wins"], s["ties"], s["losses"], s["unparsed"]) == (1, 3, 1, 0) and s["win_rate"] == 0.5
    assert s["position_consistency"] == 0.6 and s["ci_degenerate"]                    # 5 prompts < stats.MIN_N


def test_an_order_that_does_not_parse_leaves_the_prompt_unscored():
    # p1: the variant's reply unparsable as the candidate; p2: the base's unparsable as the candidate
    js = judge_with_rm(rm("empathy", by_quality), ["p1", "p2", "p3"], contexts(3),
                       ["x v", "good v", "good v"], ["good b", "x b", "bad b"])
    assert [(j.score, j.first, j.second, j.consistent) for j in js] == [
        (None, None, 0.0, None), (None, 1.0, None, None), (1.0, 1.0, 1.0, True)]
    assert js[0].raw_first == "None"
    s = summarise("echo", "empathy_rm", "rm", js)
    assert (s["n"], s["unparsed"], s["wins"], s["win_rate"], s["position_consistency"]) == (1, 2, 1, 1.0, 1.0)
    assert s["ci_degenerate"] and s["interval_note"].startswith("n too small")
    assert [s["ci_low"], s["ci_high"]] == wilson(1, 1).bounds      # all wins is no point interval either
    none = summarise("echo", "empathy_rm", "rm", js[:2])
    assert none["n"] == 0 and none["unparsed"] == 2 and math.isnan(none["win_rate"]) and math.isnan(none["ci_low"])
    assert not none["ci_degenerate"] and none["interval_note"] == "no prompt scored: no interval"


def test_hacking_check_reads_all_ties_as_no_gain_and_gives_no_verdict_below_min_n():
    rows = [{"reward": r, "reply_length": 20, "repetition": 0.2} for r in (0.1, 0.2, 0.5, 0.7)]

    def judged(probs, n):
        return summarise("echo", "independent", "judge",
                         judge_independent(FixedProbs(probs * n), [f"p{i}" for i in range(n)], contexts(n),
                                           ["v"] * n, ["b"] * n))
    ties = judged([0.9, 0.9], MIN_N + 2)       # slot A both times: every prompt a tie
    lo, hi = wilson((MIN_N + 2) / 2, MIN_N + 2).bounds
    check = hacking_check(rows, ties)
    assert len(check["findings"]) == 1 and f"interval {lo:.2f}-{hi:.2f}, n = {MIN_N + 2}" in check["verdict"]
    wins = judged([0.9, 0.1], MIN_N + 2)
    assert wins["ci_low"] > 0.5 and hacking_check(rows, wins)["findings"] == []
    few = judged([0.9, 0.9], 3)                # three ties: too few prompts for any verdict
    assert few["ci_degenerate"] and hacking_check(rows, few)["findings"] == []
    unscored = {"judge": "independent", "win_rate": float("nan"), "ci_low": float("nan"), "ci_high": float("nan")}
    assert hacking_check(rows, unscored)["findings"] == []          # no prompt scored: not a judgment


def test_paper_table_shows_consistency_and_the_wilson_interval(tmp_path):
    js = judge_with_rm(rm("empathy", lambda r: "better"), ["p1", "p2"], contexts(2), ["v"] * 2, ["b"] * 2)
    mixed = judge_with_rm(rm("empathy", by_quality), ["a", "b", "c"], contexts(3),
                          ["good v", "bad v", "good v"], ["bad b", "good b", "good b"])
    path = tmp_path / "winrate.csv"
    pd.DataFrame([summarise("echo", "empathy_rm", "rm", js),
                  summarise("echo", "independent", "judge", mixed)]).to_csv(path, index=False)
    old = pd.DataFrame([{"variant": "scalar", "judge": "independent", "judge_model": "judge", "n": 8, "wins": 4,
                         "ties": 1, "losses": 3, "win_rate": 0.5625, "ci_low": 0.25, "ci_high": 0.85}])
    table = paper_tables.winrates({"echo": pd.read_csv(path), "scalar": old})
    assert list(table.columns)[-2:] == ["95% CI", "Order-consistent"]
    saved = pd.read_csv(path)
    assert list(saved["ci_degenerate"]) == [True, True] and list(saved["ci_shown"]) == [False, False]   # n = 2, 3
    # two and three prompts: below stats.MIN_N the cell says so instead of an interval
    assert table["95% CI"].iloc[0] == "n too small (n = 2)" and table["95% CI"].iloc[1] == "n too small (n = 3)"
    assert table["95% CI"].iloc[2] == "[0.25, 0.85]"             # a winrate.csv from before the flag
    assert table["Order-consistent"].iloc[0] == 0.0 and abs(table["Order-consistent"].iloc[1] - 2 / 3) < 1e-9
    assert pd.isna(table["Order-consistent"].iloc[2])        # a winrate.csv from before the column
    assert "Order-consistent" in paper_tables.winrates({}).columns


def test_the_debiased_rm_judge_cancels_a_slot_preference_and_keeps_what_the_rm_sees():
    """An RM whose argmax says worse in both orders (no consistent pair) but whose probabilities lean
    to the variant's reply: the argmax rule gives ties, the debiased reading wins."""
    from types import SimpleNamespace

    from echo_lib.policy.winrate import judge_with_rm, judge_with_rm_debiased
    from echo_lib.rewards.reward_fn import RewardModelFn

    class Leaning:
        def choose(self, chats, options):
            out = []
            for chat in chats:
                cand_is_v = "Candidate reply: v" in chat[-1]["content"]
                pb = 0.40 if cand_is_v else 0.25
                probs = {o: (pb if ">better<" in o else 0.55 if ">worse<" in o else 1 - pb - 0.55) for o in options}
                out.append(SimpleNamespace(probs=probs, best=max(probs, key=probs.get)))
            return out

    rm = RewardModelFn(Leaning(), "empathy", decision="verdict_first")
    ctx = [[{"role": "user", "content": "I failed."}]] * 3
    plain = judge_with_rm(rm, ["p1", "p2", "p3"], ctx, ["v1", "v2", "v3"], ["b1", "b2", "b3"])
    assert [j.score for j in plain] == [0.5] * 3 and not any(j.consistent for j in plain)
    deb = judge_with_rm_debiased(rm, ["p1", "p2", "p3"], ctx, ["v1", "v2", "v3"], ["b1", "b2", "b3"], 0.05)
    assert [j.score for j in deb] == [1.0] * 3 and deb[0].judge == "empathy_rm_debiased"
    assert [j.score for j in judge_with_rm_debiased(rm, ["p1"], ctx[:1], ["v1"], ["b1"], 0.2)] == [0.5]

"""The tiny scale's RL targets (echo_lib.policy.targets) from a variant's logged rows and win rates."""
from __future__ import annotations

from echo_lib.policy.targets import quarter_trend, rl_targets


def rows(rewards, zero=0.1):
    return [{"step": i + 1, "reward": r, "frac_reward_zero_std": zero} for i, r in enumerate(rewards)]


def winrate(rm_rate, lo, hi, n=48, degenerate=False):
    return [{"judge": "empathy_rm", "win_rate": rm_rate, "ci_low": lo, "ci_high": hi, "n": n,
             "ci_method": "wilson-cc", "position_consistency": 0.7, "ci_degenerate": degenerate},
            {"judge": "independent", "win_rate": 0.52, "ci_low": 0.4, "ci_high": 0.63, "n": n,
             "position_consistency": 0.3}]


DATA = {"drawn": {"empathy": 24, "chitchat": 16}, "kept": {"empathy": 20, "chitchat": 8}}
GREEDY = {"n": 48, "changed": 30}


def test_quarter_trend():
    assert quarter_trend([0, 0, 1, 1]) == 1.0
    assert abs(quarter_trend([0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4]) - 1.2) < 1e-9   # (1.2+1.4)/2 - (0+0.2)/2
    assert quarter_trend([1.0, 2.0, 3.0]) is None


def test_all_targets_met_and_each_one_that_is_not():
    t = rl_targets(rows([0.0] * 5 + [0.5] * 5), DATA, winrate(0.66, 0.55, 0.77), GREEDY, 480)
    assert t["all_met"], t
    assert t["filter_kept_share"]["value"] == 0.7 and t["reward_trend"]["value"] == 0.5
    assert t["independent_win_rate"]["value"] == 0.52 and "met" not in t["independent_win_rate"]
    assert t["rm_win_rate"]["ci_method"] == "wilson-cc" and t["rm_win_rate"]["n"] == 48
    assert not rl_targets(rows([0.0] * 8), DATA, winrate(0.66, 0.55, 0.77), GREEDY, 480)["reward_trend"]["met"]
    assert not rl_targets(rows([0.0] * 4 + [1.0] * 4, zero=0.5), DATA, winrate(0.66, 0.55, 0.77), GREEDY,
                          480)["zero_spread_share"]["met"]
    # a win rate whose interval reaches 0.5, one on too few prompts, one with a point interval
    for wr in (winrate(0.62, 0.48, 0.75), winrate(0.7, 0.55, 0.8, n=10), winrate(0.65, 0.65, 0.65, degenerate=True)):
        assert not rl_targets(rows([0.0] * 4 + [1.0] * 4), DATA, wr, GREEDY, 480)["rm_win_rate"]["met"]
    few = {"drawn": {"empathy": 24, "chitchat": 16}, "kept": {"empathy": 8, "chitchat": 7}}
    assert not rl_targets(rows([0.0] * 4 + [1.0] * 4), few, winrate(0.66, 0.55, 0.77), GREEDY, 480)["filter_kept_share"]["met"]
    t = rl_targets(rows([0.0] * 4 + [1.0] * 4), DATA, winrate(0.66, 0.55, 0.77), {"n": 48, "changed": 0}, 700)
    assert not t["greedy_changed"]["met"] and not t["stage_seconds"]["met"] and not t["all_met"]


def test_greedy_change_counts_only_replies_that_differ():
    from echo_lib.policy.data import RLPrompt
    from echo_lib.policy.stage import greedy_change
    held = [RLPrompt(f"p{i}", "empathy", [{"role": "user", "content": f"m{i}"}]) for i in range(3)]
    same = greedy_change(held, ["a", "b", "c"], ["a", "b", "c"])
    assert same["changed"] == 0 and same["examples"] == []
    assert not rl_targets(rows([0.0] * 4 + [1.0] * 4), DATA, winrate(0.66, 0.55, 0.77), same, 480)["greedy_changed"]["met"]
    moved = greedy_change(held, ["a", "b", "c"], ["a", "B", "C"])
    assert moved["changed"] == 2 and moved["share"] == 0.6667
    assert moved["examples"][0] == {"prompt_id": "p1", "user": "m1", "base": "b", "trained": "B"}

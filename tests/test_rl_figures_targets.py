"""The issue-33 views of stage 03 (echo_lib.report.rl_figures): the progress figure, the targets table and
the before / after replies, drawn from fake logs and metrics (no models)."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from echo_lib.report import rl_figures  # noqa: E402


def winrate_row(variant, judge, rate, lo, hi, degenerate=False):
    return {"variant": variant, "judge": judge, "judge_model": "m", "n": 40, "wins": 10, "ties": 20, "losses": 10,
            "unparsed": 0, "win_rate": rate, "ci_low": lo, "ci_high": hi, "decisive": 20,
            "ci_method": "wilson-cc", "position_consistency": 0.55, "ci_degenerate": degenerate,
            "ci_shown": not degenerate, "interval_note": "n too small (n = 4 < 10)" if degenerate else ""}


def targets(met):
    t = lambda v, text: {"value": v, "target": text, "met": met}   # noqa: E731
    return {"filter_kept_share": t(0.7, ">= 0.60"), "zero_spread_share": t(0.2, "<= 0.25"),
            "reward_trend": t(0.3, ">= 0.20"),
            "rm_win_rate": {**t(0.65, ">= 0.60, 95 % interval above 0.50, n >= 40"), "ci": [0.55, 0.75], "n": 40,
                            "ci_method": "wilson-cc", "position_consistency": 0.6},
            "greedy_changed": t(2, ">= 1 held-out prompt"), "stage_seconds": t(300.0, "<= 600"),
            "independent_win_rate": {"value": 0.5, "ci": [0.5, 0.5], "n": 40, "position_consistency": 0.4,
                                     "target": "reported, no target"},
            "all_met": met}


def fake():
    steps = np.arange(1, 9)
    logs = {"echo": pd.DataFrame({"step": steps, "reward": np.linspace(-0.5, 0.3, 8),
                                  "frac_reward_zero_std": np.linspace(0.5, 0.2, 8), "kl": np.nan}),
            "scalar": pd.DataFrame({"step": [1], "reward": [4.0], "frac_reward_zero_std": [0.0], "kl": [0.01]})}
    examples = [{"prompt_id": f"p{i}", "user": f"I feel bad {i}", "base": f"base {i}", "trained": f"trained {i}"}
                for i in range(3)]
    metrics = {"echo": {"winrate": [winrate_row("echo", "empathy_rm", 0.65, 0.55, 0.75),
                                    winrate_row("echo", "independent", 0.5, 0.5, 0.5, degenerate=True)],
                        "greedy": {"n": 40, "changed": 3, "share": 0.075, "examples": examples},
                        "targets": targets(True)},
               "scalar": {"winrate": [winrate_row("scalar", "empathy_rm", 0.4, float("nan"), float("nan"))],
                          "greedy": {"n": 40, "changed": 0, "share": 0.0, "examples": []},
                          "targets": targets(False)}}
    return logs, metrics


def panels(fig):
    """The grid cells a figure's axes occupy (a twin axis shares its host's cell)."""
    return {(a.get_subplotspec().rowspan.start, a.get_subplotspec().colspan.start) for a in fig.axes}


def test_progress_figure_draws_every_variant(tmp_path):
    logs, metrics = fake()
    fig = rl_figures.rl_progress_figure(logs, metrics)
    assert panels(fig) == {(r, c) for r in range(2) for c in range(3)}
    assert len(fig.axes) == 6 + 2   # a zero-spread twin per variant
    labels = " ".join(t.get_text() for a in fig.axes for t in a.get_xticklabels())
    assert "interval\nnot shown" in labels and "n=40" in labels and "consist. 0.55" in labels
    fig.savefig(tmp_path / "progress.png", dpi=60)
    assert (tmp_path / "progress.png").stat().st_size > 1000
    plt.close(fig)


def test_progress_figure_missing_metrics_and_columns():
    logs, metrics = fake()
    logs["scalar"] = logs["scalar"].drop(columns=["frac_reward_zero_std"])
    fig = rl_figures.rl_progress_figure(logs, {"echo": metrics["echo"]})
    assert panels(fig) == {(r, c) for r in range(2) for c in range(3)}
    texts = [t.get_text() for a in fig.axes for t in a.texts]
    assert "no held-out win rate" in texts and "not logged" in texts   # scalar: no metrics; echo: kl all NaN
    plt.close(fig)
    fig = rl_figures.rl_progress_figure({}, {})
    assert len(panels(fig)) == 3
    plt.close(fig)


def test_targets_table():
    _, metrics = fake()
    table = rl_figures.targets_table(metrics)
    assert list(table.columns) == ["variant", "target", "value", "required", "met", "detail"]
    present = [t for t in rl_figures.TARGETS if t != "rm_debiased_win_rate"]   # not in the fake metrics
    assert len(table) == 2 * (len(present) + 1)
    echo = table[table.variant == "echo"].set_index("target")
    assert echo.loc["rm_win_rate", "met"] and echo.loc["all met", "met"]
    assert echo.loc["independent_win_rate", "met"] is None
    assert "95 % CI (wilson-cc) [0.55, 0.75]" in echo.loc["rm_win_rate", "detail"]
    assert not table[table.variant == "scalar"].set_index("target").loc["all met", "met"]
    assert rl_figures.targets_table({"echo": {}}).empty


def test_sample_replies():
    _, metrics = fake()
    replies = rl_figures.sample_replies(metrics["echo"])
    assert list(replies.columns) == ["prompt_id", "user message", "before RL", "after RL"]
    assert len(replies) == 3 and replies.loc[0, "after RL"] == "trained 0"
    assert rl_figures.sample_replies(metrics["scalar"]).empty

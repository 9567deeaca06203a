"""Stage 03 in the ci DAG: each variant trained on the prompts its own hard filter kept, their logs, win rates,
and the sandbox + EPM comparison of base / echo / scalar (uses the session's ci run, tests/conftest.py)."""
import json

import pandas as pd
import pytest

from echo_lib.policy.train import LOG_COLUMNS

pytestmark = pytest.mark.slow


def test_each_variant_trains_on_its_own_filtered_data(ci_run):
    run_dir, _ = ci_run
    metrics = {v: json.loads((run_dir / "policy" / v / "metrics.json").read_text()) for v in ("echo", "scalar")}
    for variant, m in metrics.items():
        filt = json.loads((run_dir / "policy" / "data" / variant / "filter.json").read_text())
        kept = sum(filt["kept"].values())
        assert filt["settings"]["filter_reward"] == variant and filt["hard_filter"]["kept"] == kept >= 2
        assert m["steps"] == 2 and m["data"]["kept"] == filt["kept"] and m["peak_rss_mb"] > 0
        assert set(m["reward_hacking"]) == {"halves", "findings", "verdict"}
        assert (run_dir / "policy" / variant / "hacking.png").stat().st_size > 0
        assert (run_dir / "policy" / variant / "progress.png").stat().st_size > 0
        log = pd.read_csv(run_dir / "policy" / variant / "train_log.csv")
        assert list(log.columns) == LOG_COLUMNS and list(log.step) == [1, 2]
        assert log.entropy.notna().all() and log.reply_length.notna().all()
        assert (run_dir / "policy" / variant / "adapter" / "adapter_config.json").exists()
    # echo's empathy reward is the anchored verdict (-1..1), scalar's the rescaled score (0..1)
    echo = pd.read_csv(run_dir / "policy" / "echo" / "train_log.csv")
    assert echo.reward_empathy.dropna().between(-1, 1).all()
    scalar = pd.read_csv(run_dir / "policy" / "scalar" / "train_log.csv")
    assert scalar.reward_empathy.dropna().between(0, 1).all() and scalar.win_rate.isna().all()


def test_a_trained_adapter_changes_the_greedy_replies_of_held_out_prompts(ci_run):
    """An adapter that leaves every greedy reply as the base's trained nothing a user would see."""
    run_dir, _ = ci_run
    for variant in ("echo", "scalar"):
        m = json.loads((run_dir / "policy" / variant / "metrics.json").read_text())
        greedy = m["greedy"]
        assert greedy["n"] >= 1 and greedy["changed"] >= 1, (variant, greedy)
        assert m["targets"]["greedy_changed"]["met"]
        ex = greedy["examples"][0]
        assert ex["base"] != ex["trained"]


def test_win_rates_are_written_per_judge(ci_run):
    run_dir, _ = ci_run
    heldout = (run_dir / "policy" / "data" / "echo" / "heldout.jsonl").read_text().splitlines()
    assert heldout == (run_dir / "policy" / "data" / "scalar" / "heldout.jsonl").read_text().splitlines()
    assert 1 <= len(heldout) <= 2                              # policy.winrate.max_prompts in config/ci.yaml
    for variant in ("echo", "scalar"):
        table = pd.read_csv(run_dir / "policy" / variant / "winrate.csv")
        # config/ci.yaml sets policy.both_orders, which adds the RM read as the echo reward reads it
        assert set(table.judge) == {"empathy_rm", "empathy_rm_debiased", "independent"}
        assert set(table.variant) == {variant}
        debiased = table.set_index("judge").loc["empathy_rm_debiased"]
        assert debiased.n + debiased.unparsed == len(heldout) and 0 <= debiased.win_rate <= 1
        ind = table.set_index("judge").loc["independent"]
        assert ind.n == len(heldout) and 0 <= ind.win_rate <= 1     # one both-orders judgment per prompt
        assert 0 <= ind.position_consistency <= 1 and ind.decisive == ind.wins + ind.losses
        rm = table.set_index("judge").loc["empathy_rm"]
        assert rm.n + rm.unparsed == len(heldout)                       # both orders make one judgment


def test_sandbox_and_epm_compare_base_echo_scalar(ci_run):
    run_dir, _ = ci_run
    epm = pd.read_csv(run_dir / "epm" / "summary.csv").set_index("Model")
    assert {"base", "echo", "scalar"} <= set(epm.index)
    for model in ("echo", "scalar"):
        summary = json.loads((run_dir / "sandbox" / model / "summary.json").read_text())
        assert len(summary["cases"]) == 2
        case = json.loads(next((run_dir / "sandbox" / model).glob("*_result.json")).read_text())
        assert case["sandbox"]["models"][model]["adapter"].endswith(f"policy/{model}/adapter")
        # the resume key holds the adapter's content (so a retrained adapter replays the sandbox)
        from echo_lib.llm.hf import fingerprint
        stored = case["sandbox"]["fingerprints"]["models"][model]["adapter_fingerprint"]
        assert stored and stored == fingerprint(run_dir / "policy" / model / "adapter")

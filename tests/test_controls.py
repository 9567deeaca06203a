"""The policy GRPO positive control (echo_lib.controls): stage 03's trainer learns a rule reward."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from echo_lib.controls.grpo import (CONTROL_PROMPTS, EndsWithQuestion, control_prompts, grpo_control, policy_params,
                                   quarter_means)
from echo_lib.controls.params import GRPOControlParams
from echo_lib.policy.rewards import RolloutLog

ROOT = Path(__file__).resolve().parents[1]
KEYS = {"reward_first_quarter", "reward_last_quarter", "rise", "steps", "seconds", "rewards", "peak_rss_mb"}


def test_reward_is_one_for_a_reply_ending_with_a_question_mark():
    log = RolloutLog()
    f = EndsWithQuestion(log)
    assert f.__name__ == "ends_with_question"
    comps = ["How are you?  ", [{"role": "assistant", "content": "Is it the exam? I am here."}],
             [{"role": "assistant", "content": "What happened?\n"}], "?!"]
    assert f(comps, prompt_id=["a", "a", "b", "b"], domain=["empathy"] * 4) == [1.0, 0.0, 1.0, 0.0]
    items, _ = log.take()
    assert [j.verdict for j in items] == ["question", "statement", "question", "statement"]
    assert [j.group for j in items] == ["a", "a", "b", "b"] and items[0].kind == "rule"


def test_quarter_means():
    assert quarter_means([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]) == pytest.approx((0.05, 0.65))
    assert quarter_means([0.2, 1.0]) == (0.2, 1.0)            # under four steps a quarter is one step
    with pytest.raises(ValueError):
        quarter_means([])


def test_params_map_onto_stage_03_settings():
    p = GRPOControlParams(steps=3, num_generations=4, prompts_per_step=1, learning_rate=5e-4, lora_r=4)
    pp = policy_params(p)
    assert (pp.grpo.steps, pp.grpo.num_generations, pp.grpo.prompts_per_step, pp.grpo.learning_rate,
            pp.lora.r, pp.grpo.format_penalty) == (3, 4, 1, 5e-4, 4, 0.0)
    assert 8 <= len(CONTROL_PROMPTS) <= 16 and len(control_prompts(p.prompts)) == p.prompts
    with pytest.raises(ValueError):
        control_prompts(len(CONTROL_PROMPTS) + 1)


def test_control_runs_on_the_tiny_model(tiny_lm_dir, tmp_path):
    p = GRPOControlParams(steps=4, prompts=4, num_generations=2, prompts_per_step=2, max_completion_length=4)
    r = grpo_control(tiny_lm_dir, p, tmp_path / "ctl", seed=0)
    assert set(r) == KEYS and r["steps"] == 4 and len(r["rewards"]) == 4
    assert all(0.0 <= x <= 1.0 for x in r["rewards"])
    assert r["reward_first_quarter"] == pytest.approx(r["rewards"][0])
    assert r["reward_last_quarter"] == pytest.approx(r["rewards"][-1])
    assert r["rise"] == pytest.approx(r["reward_last_quarter"] - r["reward_first_quarter"])
    assert (tmp_path / "ctl" / "train_log.csv").exists() and (tmp_path / "ctl" / "adapter").is_dir()


@pytest.fixture(scope="session")
def policy_base() -> Path:
    """The converted policy base of the default config (stage 00 writes it), or skip."""
    from echo_lib.config import load_config
    from echo_lib.models import registry
    cfg = load_config()
    path = Path(registry(cfg).weights(cfg.roles.policy))
    path = path if path.is_absolute() else ROOT / path
    if not (path / "config.json").exists():
        pytest.skip(f"no converted policy base at {path}; run stage 00 (snakemake models) first")
    return path


@pytest.mark.slow
def test_grpo_control_learns_on_the_real_model(policy_base, tmp_path):
    r = grpo_control(policy_base, GRPOControlParams(), tmp_path / "ctl", seed=0)
    assert r["steps"] == GRPOControlParams().steps
    assert r["rise"] >= 0.3, r


def test_multiturn_control_runs_on_the_tiny_model(tiny_lm_dir, tmp_path, monkeypatch):
    """The multi-turn control end to end on the tiny model: the trainer's rollouts through the sandbox loop on the
    first `cases` own cases, the rule's reward per turn, the quarters. The random model names no feeling, so the
    rule is swapped for one it meets half the time (with no reward spread the adapter would not move, which fails
    the run loudly: check_adapter)."""
    from test_policy_multiturn import tiny_roles

    from echo_lib.controls import multiturn as control
    from echo_lib.controls.multiturn import multiturn_control
    monkeypatch.setattr(control, "names_feeling", lambda reply: float(len(reply) % 2))
    from echo_lib.controls.params import MultiTurnControlParams
    from echo_lib.scenarios.own import load_own
    cfg, roles = tiny_roles(tmp_path, tiny_lm_dir)
    p = MultiTurnControlParams(steps=2, cases=2, cases_per_step=1, dialogues_per_case=2, max_new_tokens=6,
                               actor_max_new_tokens=6)
    r = multiturn_control(tiny_lm_dir, roles, load_own(), cfg.sandbox_run, cfg.epm, p, tmp_path / "mt", seed=0)
    assert r["steps"] == 2 and len(r["rewards"]) == 2 and all(0.0 <= x <= 1.0 for x in r["rewards"])
    assert r["rise"] == pytest.approx(r["reward_last_quarter"] - r["reward_first_quarter"])
    turns = [json.loads(x) for x in (tmp_path / "mt" / "rollouts" / "step_001.jsonl").read_text().splitlines()]
    assert {t["case"] for t in turns} <= {"own_001", "own_002"} and len(turns) == 4   # 2 dialogues x 2 turns


@pytest.mark.slow
def test_multiturn_control_learns_on_the_real_model(policy_base, tmp_path):
    """The measured defaults on the converted SmolLM2-135M (skips without stage 00's checkpoint): the rise
    reaches the stage's bar."""
    from echo_lib.config import load_config
    from echo_lib.controls.multiturn import multiturn_control
    from echo_lib.controls.params import MultiTurnControlParams
    from echo_lib.models import load_llm
    from echo_lib.policy.multiturn import SandboxRoles
    from echo_lib.sandbox.judge import Judge
    from echo_lib.scenarios.own import load_own
    cfg = load_config({"results_dir": str(tmp_path / "results"), "llm": {"progress": False}})
    llm = load_llm(cfg, "base", dialogues=True)
    roles = SandboxRoles(actor=llm, judge=Judge(llm, cfg.sandbox_run.judge), director=llm)
    r = multiturn_control(policy_base, roles, load_own(), cfg.sandbox_run, cfg.epm, MultiTurnControlParams(),
                          tmp_path / "mt", seed=0)
    assert r["rise"] >= 0.3, r

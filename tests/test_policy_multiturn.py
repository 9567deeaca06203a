"""Multi-turn RL in the sandbox (echo_lib.policy.multiturn, turn_rewards; METHOD.md 4.5): the per-turn reward,
returns and mixed advantages by hand; the loss mask token by token in both history formats; the trainer end
to end on the tiny random model, with resume; the positive control's rule."""
import dataclasses
import json
from types import SimpleNamespace

import pytest

from echo_lib.policy.params import MultiTurnRL, PolicyParams
from echo_lib.policy.turn_rewards import MIN_STD, discounted_returns, distance_rewards, mixed_advantages
from echo_lib.sandbox.dialogue import Exchange
from echo_lib.sandbox.loop import CaseState
from echo_lib.sandbox.params import SandboxRunParams
from echo_lib.sandbox.test_model import DEFAULT_COMPANION_PROMPT
from echo_lib.scenarios.own import load_own_file, own_files


def point(turn, distance, r=10.0):
    return SimpleNamespace(turn=turn, distance=distance, r=r)


def test_the_turn_reward_is_the_drop_of_the_distance_over_P0():
    pts = [point(0, 8.0, r=8.0), point(1, 6.0), point(2, 7.0), point(4, 4.0)]   # no evaluation after turn 3
    assert distance_rewards(pts, 4) == [2 / 8, -1 / 8, 0.0, 3 / 8]
    # a case that starts inside the zone (|P0| < 1) is not divided by a small number
    assert distance_rewards([point(0, 0.0, r=0.5), point(1, 1.0)], 1) == [-1.0]


def test_returns_reach_back_through_the_later_turns():
    assert discounted_returns([1.0, 0.0, 2.0], 0.5) == [1.5, 1.0, 2.0]
    assert discounted_returns([], 0.9) == []


def test_mixed_advantages_by_hand():
    # two dialogues of case a, one of case b; case b's second dialogue stopped after one turn
    returns = [[1.0, 2.0], [3.0, 2.0], [5.0]]
    adv = mixed_advantages(returns, ["a", "a", "b"], turn_weight=0.5)
    flat = [1.0, 2.0, 3.0, 2.0, 5.0]
    mean = sum(flat) / 5
    std = (sum((x - mean) ** 2 for x in flat) / 4) ** 0.5
    batch = [[(x - mean) / std for x in row] for row in returns]
    # turn 1 of case a: 1 and 3 (sd sqrt 2); turn 2 of case a: equal (no spread); case b alone: no group
    turn = [[-1 / 2 ** 0.5, 0.0], [1 / 2 ** 0.5, 0.0], [0.0]]
    for got, t, b in zip(adv, turn, batch):
        assert got == pytest.approx([0.5 * x + 0.5 * y for x, y in zip(t, b)])
    assert mixed_advantages(returns, ["a", "a", "b"], 1.0)[2] == [0.0]
    with pytest.raises(ValueError, match="turn_weight"):
        mixed_advantages(returns, ["a", "a", "b"], 1.5)


def test_a_spread_of_rounding_is_not_an_advantage():
    adv = mixed_advantages([[0.1], [0.1 + 1e-7], [0.1 - 1e-7]], ["a", "a", "a"], 0.5)
    assert max(abs(a) for row in adv for a in row) < 1e-4
    spread = mixed_advantages([[0.0], [2 * MIN_STD]], ["a", "a"], 1.0)
    assert spread[1][0] == pytest.approx(1 / 2 ** 0.5)


def played_case(replies=("I hear you, that sounds lonely.", "Yeah. What happened then?", "I'm here.")):
    sc = load_own_file(own_files()[0])
    history = [Exchange(t, f"user message {t}", reply) for t, reply in enumerate(replies, 1)]
    return CaseState(sc, history=history)


@pytest.mark.parametrize("fmt", ["transcript", "chat"])
def test_only_the_policys_own_tokens_are_trained(tiny_lm_dir, fmt):
    """Token by token: mask 1 exactly on the turn's reply and its end-of-turn token; the prompt (the system
    prompt, the user's messages and the policy's own earlier turns, in either history format) is context."""
    from transformers import AutoTokenizer

    from echo_lib.policy.multiturn import policy_turns, turn_tokens
    tok = AutoTokenizer.from_pretrained(tiny_lm_dir)
    end = tok.convert_tokens_to_ids("<|im_end|>")
    case = played_case()
    run = SandboxRunParams(test_history=fmt)
    turns = policy_turns(case, DEFAULT_COMPANION_PROMPT, run)
    assert [reply for _, reply in turns] == [ex.reply for ex in case.history]
    for t, (chat, reply) in enumerate(turns):
        ids, mask = turn_tokens(tok, chat, reply, end)
        assert len(ids) == len(mask)
        prompt = tok(tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False),
                     add_special_tokens=False)["input_ids"]
        n = len(prompt)
        assert ids[:n] == prompt and mask[:n] == [0] * n                  # exactly what generation was prompted with
        assert mask[n:] == [1] * (len(ids) - n)                           # then only the turn itself
        assert tok.decode(ids[n:]) == reply + "<|im_end|>"
        context = tok.decode(ids[:n])
        for earlier in case.history[:t]:                                  # earlier companion turns: context only
            assert earlier.reply in context
        for later in case.history[t:]:
            assert later.reply not in context
        # the whole sequence is what the chat template writes for the finished turn
        full = tok.apply_chat_template(chat + [{"role": "assistant", "content": reply}], tokenize=False)
        assert full.startswith(tok.decode(ids))


def test_the_loss_scores_the_reply_tokens_as_the_model_generates_them(tiny_lm_dir):
    """With advantage 1 on one turn, the loss is -mean log p of the reply tokens, each scored after its prefix
    in a separate forward pass: the loss reads the positions the mask names, shifted as generation is."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from echo_lib.policy.multiturn import policy_update, turn_tokens
    tok = AutoTokenizer.from_pretrained(tiny_lm_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_lm_dir)
    chat = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "I lost my job."}]
    ids, mask = turn_tokens(tok, chat, "That must hurt.", tok.convert_tokens_to_ids("<|im_end|>"))
    short = ids[:-2], mask[:-2]   # a second, shorter turn in the batch: padding must not count
    stats = policy_update(model, [(ids, mask), short], [1.0, 0.0], MultiTurnRL(micro_batch=2), tok.pad_token_id)
    with torch.no_grad():
        logps = []
        for j in [j for j, m in enumerate(mask) if m]:
            logits = model(input_ids=torch.tensor([ids[:j]])).logits[0, -1]
            logps.append(torch.log_softmax(logits, -1)[ids[j]].item())
    assert stats["loss"] == pytest.approx(-sum(logps) / (sum(mask) + sum(short[1])), rel=1e-4)
    assert stats["kl"] is None
    # the KL to the base: 0 while the adapter is the identity (LoRA B = 0), above 0 once it is not
    from peft import LoraConfig, get_peft_model
    for random_b, positive in ((False, False), (True, True)):
        tuned = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_lm_dir), LoraConfig(
            r=4, lora_alpha=64, target_modules=["q_proj", "v_proj"], init_lora_weights=not random_b, task_type="CAUSAL_LM"))
        kl = policy_update(tuned, [(ids, mask)], [1.0], MultiTurnRL(beta=1.0), tok.pad_token_id)["kl"]
        assert (kl > 1e-6) == positive and kl >= 0


def tiny_roles(tmp_path, tiny_lm_dir):
    from echo_lib.config import load_config
    from echo_lib.models import load_llm
    from echo_lib.policy.multiturn import SandboxRoles
    from echo_lib.sandbox.judge import Judge
    short = {"max_new_tokens": 6}
    cfg = load_config({"models": {"base": {"backend": "hf", "source": "local", "id": str(tiny_lm_dir)}},
                       "results_dir": str(tmp_path / "results"), "run_name": "tiny", "llm": {"progress": False},
                       "sandbox_run": {"max_turns": 2, "min_turns": 1, "test_model": short, "actor": short}})
    llm = load_llm(cfg, "base", dialogues=True)
    return cfg, SandboxRoles(actor=llm, judge=Judge(llm, cfg.sandbox_run.judge), director=llm)


def test_trains_in_the_sandbox_and_resumes(tmp_path, tiny_lm_dir):
    from echo_lib.policy.multiturn import epm_progress, train_in_sandbox
    from echo_lib.policy.train import read_log
    cfg, roles = tiny_roles(tmp_path, tiny_lm_dir)
    cases = [load_own_file(f) for f in own_files()[:3]]
    mt = MultiTurnRL(steps=2, cases_per_step=2, dialogues_per_case=2, max_turns=2, max_new_tokens=6, beta=0.01)
    params = dataclasses.replace(PolicyParams(), multiturn=mt)
    out = tmp_path / "epm"
    r = train_in_sandbox(tiny_lm_dir, cases, roles, epm_progress, params, cfg.sandbox_run, cfg.epm, out, progress=False)
    rows = read_log(out / "train_log.csv")
    assert [row["step"] for row in rows] == [1, 2] and r.resumed_at == 0
    assert all(row["dialogues"] == 4 and row["turns"] == 8 and row["kl"] is not None for row in rows)
    lines = [json.loads(x) for x in (out / "rollouts" / "step_001.jsonl").read_text().splitlines()]
    assert len(lines) == 8 and {x["dialogue"] for x in lines} == {0, 1} and len({x["case"] for x in lines}) == 2
    assert (out / "adapter" / "adapter_model.safetensors").exists()
    # the same settings again, after Snakemake deleted the rule's outputs as it does before a rerun: nothing left
    # to do (the checkpoint holds step 2), and the outputs are written again; one more step goes on from step 2
    import shutil
    shutil.rmtree(out / "adapter")
    (out / "train_log.csv").unlink()
    again = train_in_sandbox(tiny_lm_dir, cases, roles, epm_progress, params, cfg.sandbox_run, cfg.epm, out,
                             progress=False)
    assert again.resumed_at == 2 and len(again.rows) == 2
    assert (out / "adapter" / "adapter_model.safetensors").exists() and len(read_log(out / "train_log.csv")) == 2
    more = dataclasses.replace(params, multiturn=dataclasses.replace(mt, steps=3))
    longer = train_in_sandbox(tiny_lm_dir, cases, roles, epm_progress, more, cfg.sandbox_run, cfg.epm, out,
                              progress=False)
    assert longer.resumed_at == 2 and [row["step"] for row in read_log(out / "train_log.csv")] == [1, 2, 3]


def test_an_untrained_adapter_fails_loudly(tmp_path, tiny_lm_dir):
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from echo_lib.policy.multiturn import check_adapter
    from echo_lib.rewards.train import lora_config
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_lm_dir), lora_config(PolicyParams()))
    model.save_pretrained(tmp_path / "adapter")
    with pytest.raises(RuntimeError, match="never moved"):
        check_adapter(tmp_path / "adapter")
    with pytest.raises(RuntimeError, match="holds no saved weights"):
        check_adapter(tmp_path / "none")


def test_the_controls_rule_names_a_feeling():
    from echo_lib.controls.multiturn import feeling_rewards, names_feeling
    assert names_feeling("That sounds so lonely.") == 1.0 and names_feeling("You must be EXHAUSTED!") == 1.0
    assert names_feeling("Nice weather today.") == 0.0 and names_feeling("Sadly, no.") == 0.0
    assert feeling_rewards(played_case()) == [1.0, 0.0, 0.0]


def test_the_epm_stage_trains_on_the_train_persons_cases(tmp_path, tiny_lm_dir):
    """Stage 03's epm path on the tiny model: the persons of stage 01's train split are the cases played,
    the run's roles play the sandbox, and the log, the reward's rise and the figure come out."""
    from test_rewards_data import empathy_item

    from echo_lib.config import load_config
    from echo_lib.layout import Layout
    from echo_lib.policy import epm_stage
    from echo_lib.provenance import write_jsonl
    from echo_lib.report.rl_figures import multiturn_curves
    short = {"max_new_tokens": 6}
    cfg = load_config({"models": {"base": {"backend": "hf", "source": "local", "id": str(tiny_lm_dir)}},
                       "roles": {"judge": "base", "nee_judges": ["base"]},
                       "results_dir": str(tmp_path / "results"), "run_name": "tiny", "llm": {"progress": False},
                       "policy": {"variants": ["epm"], "multiturn": {"steps": 2, "cases_per_step": 1,
                                  "dialogues_per_case": 2, "max_turns": 2, "max_new_tokens": 6}},
                       "sandbox_run": {"max_turns": 2, "min_turns": 1, "actor": short}})
    write_jsonl(Layout(cfg.run_dir).data("empathy", "train"),
                [empathy_item(i) | {"scenario_id": sid} for i, sid in enumerate(["own_002", "own_005", "own_002"])])
    assert [c.id for c in epm_stage.training_cases(cfg)] == ["own_002", "own_005"]
    trained = epm_stage.train(cfg, "epm", progress=False)
    out = epm_stage.policy_paths(cfg, "epm").dir
    played = {json.loads(x)["case"] for s in (1, 2) for x in (out / "rollouts" / f"step_{s:03d}.jsonl").read_text().splitlines()}
    assert played == {"own_002", "own_005"} and len(trained.rows) == 2
    rise = epm_stage.reward_rise(out, trained.rows)
    assert rise["dialogues"] == [2, 2] and rise["steps_per_quarter"] == 1
    assert rise["rise"] == pytest.approx(rise["last_quarter"] - rise["first_quarter"], abs=1e-3)
    assert multiturn_curves(trained.rows, "epm").axes
    with pytest.raises(ValueError, match="rule policy_multiturn trains epm"):
        epm_stage.check_epm(load_config({"policy": {"variants": ["echo", "epm"]}}), "echo")


def test_one_case_played_side_by_side_draws_apart_by_its_seed(tmp_path, tiny_lm_dir):
    """sandbox.loop.play's seeds: a case played three times in one batch with offsets 0, 1, 0 gives two equal
    dialogues and one other; offset 0 is the case played alone (the sandbox's own runs do not change)."""
    from echo_lib.policy.multiturn import training_run
    from echo_lib.sandbox.actor import Actor
    from echo_lib.sandbox.loop import Players, play
    from echo_lib.sandbox.test_model import TestModel
    cfg, roles = tiny_roles(tmp_path, tiny_lm_dir)
    run = training_run(cfg.sandbox_run, MultiTurnRL(max_turns=2, max_new_tokens=6))
    players = Players(actor=Actor(roles.actor, run.actor, seed=3), test=TestModel(roles.actor, run.test_model, seed=3),
                      judge=roles.judge, director=roles.director)
    sc = load_own_file(own_files()[0])
    epm = run.epm(cfg.epm)
    talk = lambda c: [(ex.user, ex.reply) for ex in c.history]   # noqa: E731
    side = [talk(c) for c in play([sc, sc, sc], players, run, epm, progress=False, seeds=[0, 1, 0])]
    alone = talk(play([sc], players, run, epm, progress=False)[0])
    assert side[0] == side[2] == alone and side[1] != side[0]


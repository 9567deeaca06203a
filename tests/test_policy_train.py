"""GRPO of the policy on the tiny random model: a step changes the adapter and logs the monitors, and
only the policy's own reply tokens are trained (the loss mask)."""
from __future__ import annotations

import csv
from pathlib import Path

import torch

from echo_lib.policy.data import RLPrompt, policy_chat, turns_as_messages
from echo_lib.policy.params import PolicyGRPO, PolicyParams
from echo_lib.policy.rewards import RolloutLog, variant_rewards
from echo_lib.finetune import load_for_training
from echo_lib.policy.train import LOG_COLUMNS, grpo_rows, make_trainer, train_policy
from echo_lib.rewards.reward_fn import RewardModelFn
from test_policy import ScriptedRM

FAST = PolicyParams(grpo=PolicyGRPO(steps=1, num_generations=2, prompts_per_step=2, max_completion_length=8,
                                    learning_rate=1e-2, beta=0.0))
PROMPTS = [RLPrompt("e1", "empathy", [{"role": "user", "content": "I failed my exam again."}], "That sounds hard."),
           RLPrompt("c1", "chitchat", turns_as_messages(["hi there", "hey, long day?", "yes, so tired"]))]


def rewards(log=None):
    # a random model's replies differ in length: a length-keyed verdict gives each group a spread
    emp = RewardModelFn(ScriptedRM("empathy", lambda r: "better" if len(r) % 2 else "worse"), "empathy")
    hl = RewardModelFn(ScriptedRM("humanlike", lambda r: "human" if len(r) % 3 else "machine"), "humanlike")
    return variant_rewards("echo", {"empathy": emp, "humanlike": hl}, 1.0, log)


def rows():
    return grpo_rows(PROMPTS, [policy_chat(p.context, "Be a friend.") for p in PROMPTS])


def test_grpo_step_changes_the_adapter_and_logs_the_monitors(tiny_lm_dir, tmp_path):
    params = PolicyParams(grpo=PolicyGRPO(steps=2, num_generations=4, prompts_per_step=2, max_completion_length=12,
                                          learning_rate=5e-2, beta=0.01))
    log = RolloutLog()
    result = train_policy(tiny_lm_dir, rows(), rewards(log), log, params, tmp_path, seed=0)
    assert result.steps == 2
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    trained = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(tiny_lm_dir)), result.adapter_dir)
    lora_b = [p for n, p in trained.named_parameters() if "lora_B" in n]
    assert lora_b and any(p.abs().sum() > 0 for p in lora_b), "LoRA B starts at zero: a step must move it"
    # the adapter changes what the policy says: its next-token distribution on a prompt moves
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        after = trained(input_ids=ids).logits
        with trained.disable_adapter():
            before = trained(input_ids=ids).logits
    assert (after - before).abs().max() > 1e-4
    table = list(csv.DictReader(open(tmp_path / "train_log.csv")))
    assert [r["step"] for r in table] == ["1", "2"] and list(table[0]) == LOG_COLUMNS
    for r in table:
        assert r["reward_empathy"] and r["reward_chitchat"] and r["kl"] and r["entropy"] and r["repetition"]
        assert float(r["unparsed_rate"]) == 0.0      # the scripted reward models always give a verdict


def test_only_the_policy_reply_is_trained(tiny_lm_dir, tmp_path):
    """The loss reaches the final hidden states only at the positions that predict the policy's own reply
    tokens: the history (earlier companion turns included) and the padding after a reply are never targets."""
    model, tok = load_for_training(tiny_lm_dir)
    trainer = make_trainer(model, tok, rows(), rewards(), FAST, tmp_path, seed=0)
    batch = [rows()[0], rows()[0], rows()[1], rows()[1]]
    inputs = trainer._generate_and_score_completions(batch)
    assert "hey, long day?" in tok.decode(inputs["prompt_ids"][2])         # the earlier turn is prompt
    captured = {}

    def keep(_, __, out):
        out.retain_grad()
        captured["hidden"] = out
    handle = trainer.model.get_base_model().model.norm.register_forward_hook(keep)
    try:
        inputs["advantages"] = torch.tensor([1.0, -1.0, 1.0, -1.0])
        trainer.current_gradient_accumulation_steps = 1   # set by the training loop otherwise
        trainer.compute_loss(trainer.model, inputs).backward()
    finally:
        handle.remove()
    grad = captured["hidden"].grad.abs().sum(-1)      # (batch, prompt + completion positions)
    p, n = inputs["prompt_ids"].size(1), inputs["completion_ids"].size(1)
    mask = inputs["completion_mask"]
    assert grad.size(1) == p + n
    assert torch.all(grad[:, :p - 1] == 0)            # no prompt token is a target
    targets = grad[:, p - 1:p + n - 1]                # position t predicts completion token t - (p - 1)
    assert torch.all(targets[mask == 0] == 0) and torch.all(targets[mask == 1] > 0)
    assert (mask == 0).any() or n == FAST.grpo.max_completion_length


def test_same_seed_same_adapter(tiny_lm_dir, tmp_path):
    """Determinism: two trainings with the same seed give the same adapter to the bit and the same log
    (all but the wall-clock column); another seed gives another adapter."""
    from safetensors.torch import load_file
    params = PolicyParams(grpo=PolicyGRPO(steps=2, num_generations=4, prompts_per_step=2, max_completion_length=10,
                                          learning_rate=5e-2, beta=0.01))

    def run(name, seed):
        log = RolloutLog()
        result = train_policy(tiny_lm_dir, rows(), rewards(log), log, params, tmp_path / name, seed=seed)
        table = [{k: v for k, v in r.items() if k != "step_time"}
                 for r in csv.DictReader(open(tmp_path / name / "train_log.csv"))]
        return load_file(str(Path(result.adapter_dir) / "adapter_model.safetensors")), table

    (a, log_a), (b, log_b), (c, _) = run("a", 0), run("b", 0), run("c", 1)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert log_a == log_b
    assert any(not torch.equal(a[k], c[k]) for k in a)

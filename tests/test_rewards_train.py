"""Training on the tiny random model: an SFT step and a GRPO step change the adapter; the whole stage
(train, evaluate base vs trained through the model layer, write outputs) runs end to end."""
from __future__ import annotations

import csv
import json
from dataclasses import replace

import pytest
import torch

from echo_lib.rewards.data import Example, to_example
from echo_lib.rewards.params import GRPOParams, RewardModelParams, SFTParams
from echo_lib.rewards.rm_rewards import completion_text, rm_reward_funcs
from echo_lib.finetune import load_for_training
from echo_lib.rewards.train import grpo_stage, lora_config, sft_stage, target_nll
from test_rewards_data import empathy_item, humanlike_item, write_jsonl

FAST = RewardModelParams(sft=SFTParams(steps=1, batch_size=2, max_length=2048, learning_rate=1e-2),
                         grpo=GRPOParams(steps=1, prompts_per_step=2, num_generations=2, max_completion_length=8,
                                         learning_rate=1e-2), decision="think_first")


def adapter_weights(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}


def changed(before, after) -> list[str]:
    return [n for n in before if not torch.equal(before[n], after[n])]


def peft_model(tiny_lm_dir):
    from peft import get_peft_model
    model, tok = load_for_training(tiny_lm_dir)
    return get_peft_model(model, lora_config(FAST)), tok


def test_sft_step_changes_the_adapter(tiny_lm_dir, tmp_path):
    model, tok = peft_model(tiny_lm_dir)
    before = adapter_weights(model)
    exs = [to_example(empathy_item(0), "empathy"), to_example(empathy_item(1, "worse", 1, "Cheer up!"), "empathy")]
    trainer = sft_stage(model, tok, exs, FAST, tmp_path, seed=0)
    assert trainer.state.global_step == 1
    assert any("lora_B" in n for n in changed(before, adapter_weights(trainer.model)))


def test_target_loss_equals_the_full_masked_loss_and_its_gradient(tiny_lm_dir):
    # the loss SFT trains on projects only the labelled positions: same value and gradient as the
    # model's own loss over full logits, with right padding and rows whose targets sit at different places
    model, _ = peft_model(tiny_lm_dir)
    ids = torch.randint(3, model.config.vocab_size, (3, 12), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    labels = torch.full_like(ids, -100)
    labels[0, 8:] = ids[0, 8:]
    labels[1, 5:9] = ids[1, 5:9]
    labels[2, 10:] = ids[2, 10:]
    inputs = {"input_ids": ids, "attention_mask": mask, "labels": labels}

    def loss_and_grads(fn):
        model.zero_grad()
        loss = fn()
        loss.backward()
        return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    ours, g_ours = loss_and_grads(lambda: target_nll(model, inputs))
    full, g_full = loss_and_grads(lambda: model(**inputs).loss)
    assert ours == pytest.approx(full, rel=1e-5)
    assert g_ours.keys() == g_full.keys() and g_ours
    for n in g_ours:
        assert torch.allclose(g_ours[n], g_full[n], atol=1e-6), n


def test_grpo_step_changes_the_adapter(tiny_lm_dir, tmp_path):
    model, tok = peft_model(tiny_lm_dir)
    before = adapter_weights(model)
    exs = [Example(f"x{i}", [{"role": "system", "content": "judge"}, {"role": "user", "content": f"reply {i}"}],
                   "", {"kind": "empathy", "label": "better", "profile": {}}) for i in range(2)]

    # a random model never writes the verdict format, so the RM rewards are all 0 (no advantage);
    # a length reward gives the group the spread a GRPO update needs, the RM rewards ride along
    def length(completions, **_):
        return [float(len(completion_text(c))) for c in completions]
    funcs = [*rm_reward_funcs("empathy"), length]
    trainer = grpo_stage(model, tok, exs, funcs, [1.0, 0.3, 1.0, 0.5, 1.0], FAST, tmp_path, seed=0)
    assert trainer.state.global_step == 1
    logged = trainer.state.log_history[0]
    assert {"rewards/correct/mean", "rewards/process/mean", "rewards/format/mean",
            "rewards/consistency/mean"} <= set(logged)
    assert changed(before, adapter_weights(trainer.model))


@pytest.mark.parametrize("context", ["aware", "free"])
def test_stage_end_to_end_on_the_tiny_model(tiny_lm_dir, tmp_path, context):
    from echo_lib.config import load_config
    from echo_lib.rewards import stage
    from echo_lib.rewards.stage import reward_fn

    cfg = load_config({"models": {"base": {"backend": "hf", "source": "local", "id": str(tiny_lm_dir)}},
                       "results_dir": str(tmp_path), "run_name": "t",
                       "llm": {"progress": False},
                       "reward_models": {"sft": {"steps": 1, "batch_size": 2, "max_length": 2048},
                                         "grpo": {"steps": 1, "num_generations": 2, "max_completion_length": 512},
                                         "eval": {"max_items": 4, "max_new_tokens": 8, "max_train_items": 0},
                                         "humanlike_context": context, "decision": "think_first"}})
    kinds = ["human", "model_reply", "last_turn_swapped", "turns_shuffled", "human", "context_removed"]
    for split in ("train", "test"):
        write_jsonl(cfg.run_dir / "data" / "humanlike" / f"{split}.jsonl",
                    [humanlike_item(i, k) for i, k in enumerate(kinds)])
    used = [it["kind"] for it in stage.items(cfg, "humanlike", "train")]
    assert used == (kinds if context == "aware" else ["human", "model_reply", "human", "context_removed"])
    result = stage.train(cfg, "humanlike")
    paths = stage.rm_paths(cfg, "humanlike")
    assert (paths.adapter / "adapter_config.json").exists() and result.steps == {"sft": 1, "grpo": 1}
    log = list(csv.DictReader(open(paths.train_log)))
    assert [r["stage"] for r in log] == ["sft", "grpo"] and log[1]["format"] == "0.0"

    results = stage.evaluate_models(cfg, "humanlike", paths.adapter)
    record = stage.write_outputs(cfg, "humanlike", results, result)
    saved = json.loads(paths.metrics.read_text())
    assert saved["base"]["n"] == saved["trained"]["n"] == 4 and saved["training"]["steps"]["grpo"] == 1
    assert saved["base"]["parse_failure_rate"] == 1.0      # a random model writes no verdicts
    assert record["provenance"]["config_hash"] == cfg.hash
    table = list(csv.DictReader(open(paths.table)))
    assert table[0]["metric"] == "n" and set(table[0]) == {"metric", "base", "trained"}
    assert len(paths.eval_rows.read_text().splitlines()) == 8

    fn = reward_fn(cfg, "humanlike")
    assert fn(prompts=["hey"], completions=["yo"]) == [0.5]   # unparsed: the middle of human / machine
    assert fn.context_free == (context == "free")


def test_training_needs_steps_and_enough_items(tiny_lm_dir, tmp_path):
    from echo_lib.rewards.train import train_reward_model
    exs = [to_example(humanlike_item(0), "humanlike")]
    none = replace(FAST, sft=replace(FAST.sft, steps=0), grpo=replace(FAST.grpo, steps=0))
    with pytest.raises(ValueError, match="no training steps"):
        train_reward_model(tiny_lm_dir, "humanlike", exs, none, tmp_path)
    with pytest.raises(ValueError, match="prompts_per_step"):
        train_reward_model(tiny_lm_dir, "humanlike", exs, replace(FAST, sft=replace(FAST.sft, steps=0),
                                                                  grpo=replace(FAST.grpo, max_completion_length=512)),
                           tmp_path)
    with pytest.raises(ValueError, match="sft.max_length"):
        train_reward_model(tiny_lm_dir, "humanlike", exs, replace(FAST, sft=replace(FAST.sft, max_length=32)), tmp_path)


def test_a_kind_can_have_its_own_sft_steps():
    sft = SFTParams(steps=40, steps_by_kind={"humanlike": 100, "empathy": None, "scalar": 0})
    assert [sft.steps_for(k) for k in ("humanlike", "empathy", "scalar")] == [100, 40, 0]

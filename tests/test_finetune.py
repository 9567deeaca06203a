"""echo_lib.finetune and the trainers' use of it: the base loads as its model spec says, after the training
arguments (ZeRO-3 shards while loading); precision follows the spec; a save with nothing usable fails;
frozen models load outside ZeRO-3; full fine-tuning is a config choice."""
from __future__ import annotations

import pytest
import torch
import yaml

from echo_lib.finetune import EmptyWeightsError, TrainBase, check_saved, precision_args
from echo_lib.policy.params import PolicyGRPO, PolicyParams
from echo_lib.rewards.params import RewardModelParams

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


class LoadedTooEarly(Exception):
    pass


def test_policy_training_arguments_exist_before_the_weights_load(tmp_path, monkeypatch, tiny_lm_dir):
    """Under `accelerate launch` with ZeRO-3 (these variables), the GRPOConfig switches on zero.Init: the
    policy must load after it, or every rank holds the whole model."""
    pytest.importorskip("deepspeed")
    import echo_lib.policy.train as pt
    from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled
    monkeypatch.setenv("DS_ACCELERATOR", "cpu")
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_CONFIG_FILE", str(ROOT / "config/accelerate/ds_zero3.json"))
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO3_INIT", "true")
    seen = []

    def load(base):
        seen.append(is_deepspeed_zero3_enabled())
        raise LoadedTooEarly

    monkeypatch.setattr(pt, "load_for_training", load)
    with pytest.raises(LoadedTooEarly):
        pt.train_policy(tiny_lm_dir, [], [], pt.RolloutLog(), PolicyParams(), tmp_path)
    assert seen == [True]


def test_precision_and_checkpointing_follow_the_model_spec(tmp_path):
    from echo_lib.policy.train import grpo_config
    from echo_lib.rewards.train import sft_args
    bf16 = TrainBase("w", dtype="bfloat16", gradient_checkpointing=True)
    assert precision_args(TrainBase("w"))["bf16"] is False
    for args in (grpo_config(PolicyParams(), tmp_path, 0, bf16), sft_args(RewardModelParams(), tmp_path, 0, bf16)):
        assert args.bf16 and not args.fp16 and args.gradient_checkpointing
        assert args.gradient_checkpointing_kwargs == {"use_reentrant": False}
    fp32 = grpo_config(PolicyParams(), tmp_path, 0)
    assert not fp32.bf16 and not fp32.gradient_checkpointing


def test_a_save_with_empty_tensors_or_none_fails(tmp_path):
    from safetensors.torch import save_file
    with pytest.raises(EmptyWeightsError, match="holds no saved weights"):
        check_saved(tmp_path)
    # what model.save_pretrained writes for a ZeRO-3 model: every partitioned tensor has shape (0,)
    save_file({"a.lora_A.weight": torch.empty(0), "a.lora_B.weight": torch.empty(0)},
              str(tmp_path / "adapter_model.safetensors"))
    with pytest.raises(EmptyWeightsError, match="2 of 2 saved tensors are empty"):
        check_saved(tmp_path)
    save_file({"a.lora_A.weight": torch.ones(4, 8)}, str(tmp_path / "adapter_model.safetensors"))
    assert check_saved(tmp_path) == {"a.lora_A.weight": 32}


def test_frozen_models_load_outside_zero3(monkeypatch):
    pytest.importorskip("deepspeed")
    from transformers.integrations.deepspeed import HfDeepSpeedConfig, is_deepspeed_zero3_enabled

    from echo_lib.llm.hf import outside_zero3
    monkeypatch.setenv("DS_ACCELERATOR", "cpu")
    ds = HfDeepSpeedConfig({"zero_optimization": {"stage": 3}, "train_batch_size": 1})   # keeps the reference alive
    assert is_deepspeed_zero3_enabled()
    with outside_zero3():
        assert not is_deepspeed_zero3_enabled()
    assert is_deepspeed_zero3_enabled()
    del ds


def test_full_fine_tuning_is_a_config_choice_the_sandbox_can_load():
    from echo_lib.config import ConfigError, load_config
    cfg = load_config(policy={"finetune": "full"})
    echo = cfg.models["echo"]
    assert echo.adapter is None and echo.source == "local" and echo.id.endswith("/policy/echo/model")
    assert load_config().models["echo"].adapter.endswith("/policy/echo/adapter")
    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    paper["policy"]["finetune"] = "full"
    with pytest.raises(ConfigError, match="'policy.finetune' is full but 'models.qwen3-32b.load_in_4bit' is true"):
        load_config(paper)


def test_full_fine_tuning_trains_every_parameter(tmp_path, tiny_lm_dir):
    from echo_lib.finetune import load_for_training
    from echo_lib.policy.train import make_trainer
    model, tok = load_for_training(tiny_lm_dir)
    rows = [{"prompt": [{"role": "user", "content": "hi"}]}]
    params = PolicyParams(finetune="full", grpo=PolicyGRPO(prompts_per_step=1, num_generations=2))
    trainer = make_trainer(model, tok, rows, [lambda completions, **_: [0.0] * len(completions)], params, tmp_path, 0)
    trainable = [p.requires_grad for p in trainer.model.parameters()]
    assert all(trainable) and not hasattr(trainer.model, "peft_config")


def test_a_saved_adapter_has_the_same_fingerprint_when_retrained_alike(tmp_path, tiny_lm_dir):
    """Saving goes through the trainer (ZeRO-3 gathers there), which also pickles its arguments with a
    temporary folder's name: left in the adapter folder, they would give every retrain a new cache key."""
    from echo_lib.llm.hf import fingerprint
    from echo_lib.policy.rewards import RolloutLog
    from echo_lib.policy.train import train_policy
    rows = [{"prompt": [{"role": "user", "content": "hi"}]}]
    params = PolicyParams(grpo=PolicyGRPO(steps=1, prompts_per_step=1, num_generations=2, max_completion_length=4))
    reward = [lambda completions, **_: [float(len(c[0]["content"])) for c in completions]]
    saved = [train_policy(tiny_lm_dir, rows, reward, RolloutLog(), params, tmp_path / name, seed=0).adapter_dir
             for name in ("a", "b")]
    assert not (tmp_path / "a" / "adapter" / "training_args.bin").exists()
    assert fingerprint(saved[0]) == fingerprint(saved[1])

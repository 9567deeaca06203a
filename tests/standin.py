"""CPU stand-ins of the paper scale's GPU code paths (issue 34; docs/PAPER_SCALE.md "How each path is tested").

A stand-in runs the project's own stage functions, as notebooks 02 and 03 call them, on a random Llama
64 wide (bitsandbytes' CPU 4-bit kernel needs layers at least 64 wide) with the settings of the path it
stands for: 4-bit NF4 (QLoRA), two torchrun ranks over gloo, DeepSpeed ZeRO-3 on the CPU accelerator.
Only the model and the step counts are small.
"""
from __future__ import annotations

import os
from pathlib import Path

from echo_lib.provenance import write_jsonl
from test_rewards_data import empathy_item, humanlike_item
from tiny_lm import build_tiny_lm

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("empathy", "humanlike")     # the reward models the echo variant asks


def build_lm64(out_dir: Path) -> Path:
    return build_tiny_lm(out_dir, hidden_size=64)


def write_stage01_data(run_dir: Path, n: int = 6) -> None:
    """Stage 01's files, as the reward models and the RL data read them."""
    for kind, split in (("empathy", "train"), ("empathy", "test"), ("humanlike", "train"), ("humanlike", "test")):
        if kind == "empathy":
            rows = [empathy_item(i, label=("better", "worse")[i % 2]) for i in range(n)]
        else:
            rows = [humanlike_item(i, ("human", "model_reply")[i % 2]) for i in range(n)]
        write_jsonl(run_dir / "data" / kind / f"{split}.jsonl", [{**r, "id": f"{r['id']}-{split}"} for r in rows])


def standin_config(results_dir: Path, lm_dir: Path, *, model: dict | None = None, policy: dict | None = None):
    """A run config whose policy and reward-model base is the 64-wide model, with `model` keys (e.g.
    load_in_4bit) and `policy` keys over one-step training settings."""
    from echo_lib.config import load_config
    base = {"backend": "hf", "source": "local", "id": str(lm_dir), **(model or {})}
    return load_config(
        results_dir=str(results_dir), run_name="standin", seed=0,
        models={"base": base},
        roles={"policy": "base", "reward_model": "base", "actor": "base", "director": "base", "judge": "base",
               "nee_judges": ["base"]},
        smoke_chat={"model": "base"},
        sandbox={"models": ["base"], "case_set": "own", "max_cases": 1},
        nee={"reference_model": "base"},
        llm={"progress": False},
        reward_models={"decision": "think_first", "lora": {"r": 8, "alpha": 16}, "target_field_words": 4,
                       "sft": {"steps": 1, "batch_size": 2, "max_length": 2048},
                       "grpo": {"steps": 1, "num_generations": 2, "prompts_per_step": 1,
                                "max_completion_length": 480},
                       "max_train_items": 4, "eval": {"max_items": 2, "max_new_tokens": 24}},
        policy={"variants": ["echo"], "max_prompts": 4, "hard_filter": {"enabled": False},
                "grpo": {"steps": 1, "num_generations": 2, "prompts_per_step": 1, "max_completion_length": 8,
                         "max_prompt_length": 256, "learning_rate": 0.01},
                "winrate": {"max_prompts": 2, "max_new_tokens": 8}, **(policy or {})})


def cpu_launch_env() -> dict[str, str]:
    """The environment `accelerate launch` needs on a CPU-only machine: DeepSpeed's CPU accelerator, and a
    thread per rank (two ranks on two cores)."""
    return {"DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1",
            "ACCELERATE_LOG_LEVEL": "warning", "PATH": f"{Path(os.sys.executable).parent}:{os.environ['PATH']}"}

"""The `controls:` block of the run config: the GenRM and the policy GRPO positive controls.

GenRMControlParams: the marker task of echo_lib.controls.genrm, trained with stage 02's code.
GRPOControlParams: the settings of the policy GRPO positive control (echo_lib.controls.grpo).

The defaults were chosen by measurement on a shared 2-core CPU with the converted SmolLM2-135M-Instruct
(see grpo.py): with seed 0 the mean reward rises by at least 0.3 from the first to the last quarter of
the steps within about four minutes. This module imports nothing heavy.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GenRMControlParams:
    n_train: int = 160             # messages to train on (half of them with the marker)
    n_test: int = 100              # held-out messages (drawn with another seed)
    sft_steps: int = 40
    learning_rate: float = 5e-4
    batch_size: int = 8


@dataclass(frozen=True)
class GRPOControlParams:
    steps: int = 12                  # optimizer steps (one logged row each)
    prompts: int = 12                # how many of the module's control prompts to train on (at most 12)
    num_generations: int = 8         # the group per prompt
    prompts_per_step: int = 2        # per-step batch = prompts_per_step * num_generations completions
    max_completion_length: int = 32  # tokens; a reply cut off by the limit does not end with "?" and earns 0
    learning_rate: float = 1e-3      # LoRA on a 135M model; stage 03's default is 2e-4
    temperature: float = 1.0
    top_p: float = 1.0
    beta: float = 0.0                # no KL: the control asks whether the reward can move the policy at all
    lora_r: int = 8
    lora_alpha: int = 16
    system_prompt: str | None = None # null: the sandbox's companion prompt, as stage 03 uses


@dataclass(frozen=True)
class ControlParams:
    genrm: GenRMControlParams = field(default_factory=GenRMControlParams)
    grpo: GRPOControlParams = field(default_factory=GRPOControlParams)

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
    """Measured (seed 0, 2-core CPU, held-out n=100; twin in brackets): 160 items, lr 5e-4, all layers 0.84 (0.45);
    160, 1e-3, top 10 layers 0.91 (0.49); 320, 1e-3, top 10 0.95 (0.50); 320, 2e-3, top 10 1.00 (0.51), 144 s of
    training; 240 items and 30 steps at 2e-3: 0.94. Unique items matter more than epochs: with 160 the train loss
    fell to 0.02 while held-out accuracy stayed at 0.84-0.91."""
    n_train: int = 320             # messages to train on (half of them with the marker); 40 x 8 = one epoch
    n_test: int = 100              # held-out messages (drawn with another seed)
    sft_steps: int = 40
    learning_rate: float = 2e-3
    batch_size: int = 8
    lora_top_layers: int = 10      # LoRA on the last 10 of 30 layers, whatever reward_models.lora says


@dataclass(frozen=True)
class GRPOControlParams:
    """Measured (seed 0, converted SmolLM2-135M-Instruct, 2-core CPU): reward per step 0.00 0.06 0.06 0.00 0.06
    0.31 0.88 0.88 0.88 1.00, first quarter 0.03 -> last quarter 0.94, 198 s, peak RSS 3.8 GB. Stage 03's own
    companion prompt (about 230 tokens) made a step 30-80 s there and the base almost never ended a reply with
    "?" (about 6 %), so the control uses a short system prompt and the native chat format."""
    steps: int = 10                  # optimizer steps (one logged row each)
    prompts: int = 12                # how many of the module's control prompts to train on (at most 12)
    num_generations: int = 8         # the group per prompt
    prompts_per_step: int = 2        # per-step batch = prompts_per_step * num_generations completions
    max_completion_length: int = 24  # tokens; a reply cut off by the limit does not end with "?" and earns 0
    learning_rate: float = 3e-3      # LoRA on a 135M model; stage 03's default is 2e-4 (1e-3: the rise starts at step 8 of 12)
    temperature: float = 0.8         # at 1.0 the converted 135M model writes mostly noise
    top_p: float = 1.0
    beta: float = 0.0                # no KL: the control asks whether the reward can move the policy at all
    lora_r: int = 8
    lora_alpha: int = 16
    system_prompt: str | None = "You are a caring friend. Reply in one short sentence. You may ask a question."
                                     # null: the sandbox's companion prompt, as stage 03 uses (slow, see above)
    history_format: str = "chat"     # how policy_chat shows the message: chat (native) or transcript (sandbox_run.test_history)
    torch_threads: int = 1           # CPU threads while the control runs (0 = leave torch's setting); on the shared
                                     # 2-core CPU, 2 threads beside another job ran 2-3x slower than 1


@dataclass(frozen=True)
class MultiTurnControlParams:
    """The epm variant's trainer (echo_lib.policy.multiturn) on a per-turn rule, names_feeling
    (echo_lib.controls.multiturn); the sandbox's Actor plays the user. Measured (seed 0, converted
    SmolLM2-135M-Instruct, 1 thread beside another job on a 2-core CPU): per-turn reward per step 0.25 0.31 0.38
    0.50 0.44 0.75 0.69 0.88 0.94 0.88 1.00 1.00, first quarter 0.31 -> last quarter 0.96 (rise 0.65), 387 s, peak
    RSS 5.0 GB; the policy learned to open with "I'm glad", which the rule counts (by the end "glad glad glad":
    without a KL term a rule is met, not empathy). At lr 3e-3 and 10 steps the rise was 0.31, a bare pass."""
    enabled: bool = False            # runs in the controls stage when the epm variant is trained (or set true)
    steps: int = 12
    cases: int = 6                   # own cases the control plays (the first N)
    cases_per_step: int = 2
    dialogues_per_case: int = 4      # the group
    max_turns: int = 2
    gamma: float = 0.9
    turn_weight: float = 0.5
    learning_rate: float = 5e-3
    micro_batch: int = 8
    temperature: float = 0.8
    top_p: float = 1.0
    max_new_tokens: int = 24         # the policy's turn
    actor_max_new_tokens: int = 32   # the Actor's message
    lora_r: int = 8
    lora_alpha: int = 16
    lora_top_layers: int = 10
    system_prompt: str = "You are a caring friend. Reply in one short sentence."
    history_format: str = "chat"     # how the companion sees the history (sandbox_run.test_history)
    torch_threads: int = 1


@dataclass(frozen=True)
class ControlParams:
    genrm: GenRMControlParams = field(default_factory=GenRMControlParams)
    grpo: GRPOControlParams = field(default_factory=GRPOControlParams)
    multiturn: MultiTurnControlParams = field(default_factory=MultiTurnControlParams)

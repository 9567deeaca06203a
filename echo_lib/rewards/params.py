"""RewardModelParams: every setting of stage 02 (training and evaluating the generative reward models).

The run config carries these under `reward_models:`. The defaults below are the run's, written only
here (config/schema.yaml documents each key and takes its default from this module): the tiny CPU
scale. Paper-scale values come from METHOD.md 3.4 [DEFAULT] (group size 8, lr 1e-6, KL 0.001, process
weight 0.3). This module does not import echo_lib.config, so the reward models can be used without a
run config (e.g. in tests).
"""
from __future__ import annotations

from dataclasses import dataclass, field

KINDS = ("empathy", "humanlike", "scalar")
PROCESS_SCORERS = ("lexical", "judge")
DECISIONS = ("think_first", "verdict_first")
# what a policy reward function returns for an unparsable judgment: the middle of each kind's range
NEUTRAL_REWARD = {"empathy": 0.0, "humanlike": 0.5, "scalar": 0.5}


@dataclass(frozen=True)
class LoraParams:
    r: int = 8
    alpha: int = 16
    dropout: float = 0.0
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    top_layers: int = 0            # adapt only the last N decoder layers (0 = all): the backward pass stops there.
                                   # Measured on the tiny empathy RM: 10 of 30 layers at lr 5e-4, 60 steps gave 0.625
                                   # (all layers 0.83); at lr 2e-3, 30 steps 0.825 [0.765, 0.88] in 370 s against
                                   # 841 s (before the target-only loss), so config/default.yaml adapts the top 10


@dataclass(frozen=True)
class SFTParams:
    """Supervised steps: the warm start on reasoning-plus-verdict targets (think_first), or the whole
    training on the verdict alone (verdict_first)."""
    steps: int = 60
    learning_rate: float = 5e-4
    batch_size: int = 8
    max_length: int = 512          # prompt + target tokens; longer examples are cut from the right
    steps_by_kind: dict[str, int] = field(default_factory=dict)  # a kind's own step count, over `steps`

    def steps_for(self, kind: str) -> int:
        own = self.steps_by_kind.get(kind)
        return self.steps if own is None else own


@dataclass(frozen=True)
class GRPOParams:
    """GRPO on the reward model itself (think_first only):
    reward = correct + process_weight*process + format_weight*format + consistency_weight*consistency."""
    steps: int = 0
    learning_rate: float = 2e-4
    num_generations: int = 4       # completions per prompt (the group)
    prompts_per_step: int = 2      # per-device batch = prompts_per_step * num_generations completions
    max_completion_length: int = 160
    temperature: float = 1.0
    beta: float = 0.0              # KL to the reference; >0 needs a second forward pass per step
    process_weight: float = 0.3
    format_weight: float = 1.0
    consistency_weight: float = 0.5   # the stated checks / comparison agree with the verdict


@dataclass(frozen=True)
class EvalParams:
    max_items: int = 0             # held-out items scored per model (0 = all)
    max_new_tokens: int = 192
    position_swap: bool = True     # also judge with candidate and reference swapped (position bias)
    max_train_items: int = 100     # training items the trained model is also scored on (train_accuracy)


@dataclass(frozen=True)
class RewardModelParams:
    lora: LoraParams = field(default_factory=LoraParams)
    sft: SFTParams = field(default_factory=SFTParams)
    grpo: GRPOParams = field(default_factory=GRPOParams)
    eval: EvalParams = field(default_factory=EvalParams)
    max_train_items: int = 0       # training items used (0 = all of train.jsonl)
    swap_augment: bool = False     # empathy: also train on each item with the two replies swapped (label flipped)
    target_field_words: int = 8    # templated targets: most words kept from each gold profile field
    process_scorer: str = "lexical"   # "lexical" (transparent field matching) or "judge" (a model per field)
    process_judge: str | None = None  # model name for process_scorer "judge" (null = roles.reward_model)
    unparsed_reward: float | None = None  # a policy reward for an unparsable RM output (None: NEUTRAL_REWARD)
    humanlike_context: str = "aware"  # "aware" (context + reply) or "free" (the reply alone), METHOD 2.4
    decision: str = "verdict_first"   # "think_first" (reason, then verdict; parsed) or "verdict_first" (choose)
    shuffled_twin: bool = True     # also train on shuffled labels: its test accuracy must stay at chance
    humanlike_machine_recall: float = 0.9  # verdict-first humanlike: P(human) threshold set on the training items
                                           # so each machine kind keeps this recall (0 = argmax; calibration.py)

    def context_free(self, kind: str) -> bool:
        return kind == "humanlike" and self.humanlike_context == "free"

    def unparsed(self, kind: str) -> float:
        return NEUTRAL_REWARD[kind] if self.unparsed_reward is None else self.unparsed_reward

"""PolicyParams: every setting of stage 03, the affective RL of the policy (METHOD.md 4).

The run config carries these under `policy:`. The defaults below are the run's, written only here
(config/schema.yaml documents each key and takes its default from this module): the tiny CPU scale. The
paper-scale values of METHOD.md 4.2 [DEFAULT] are noted beside each field. This module does not import
echo_lib.config, so the RL code runs without a run config (e.g. in tests).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from echo_lib.rewards.params import LoraParams   # the same adapter settings as the reward models

VARIANTS = ("echo", "scalar")   # echo: discrete, reference-anchored GenRM rewards; scalar: the 1-10 RM, no anchor
MULTITURN = ("epm",)            # epm: RL inside the sandbox, the EPM's per-turn progress as reward (opt-in)
DOMAINS = ("empathy", "chitchat")


@dataclass(frozen=True)
class PolicyGRPO:
    steps: int = 12                 # paper: about 300-600
    learning_rate: float = 2e-4     # paper: 1e-6 (full fine-tuning); LoRA on a 135M model needs more
    num_generations: int = 4        # the group per prompt (paper: 8)
    prompts_per_step: int = 2       # per-device batch = prompts_per_step * num_generations completions
    gradient_accumulation_steps: int = 1   # prompts per optimizer step = prompts_per_step x this x devices
    max_prompt_length: int = 384    # tokens; longer histories lose their oldest turns
    max_completion_length: int = 48 # paper: 1,024
    temperature: float = 1.0
    top_p: float = 1.0
    beta: float = 0.001             # KL to the reference (the frozen base); paper 0.001
    epsilon: float = 0.2            # PPO clip (lower); no effect while TRL runs one pass per batch (on-policy)
    epsilon_high: float = 0.28      # PPO clip (upper, DAPO-style)
    format_penalty: float = 1.0     # subtracted when a reply has a role prefix or a think tag (0 = off)
    scale_rewards: str = "group"    # TRL's advantage scaling: group (its default), batch, or none, which keeps
                                    # the reward scale the scalar-vs-discrete comparison is about
    use_vllm: bool = False          # rollouts with vLLM (GPU scale; TRL's vllm_mode below). Not with a 4-bit
                                    # policy (load_in_4bit): echo_lib.policy.vllm refuses it, and why
    vllm_mode: str = "colocate"     # colocate: vLLM inside the training processes; server: `trl vllm-serve`
    vllm_gpu_memory_utilization: float | None = None   # vLLM's share of a GPU; None: TRL's 0.3 (server 0.9)
    vllm_tensor_parallel_size: int = 1       # GPUs per vLLM engine; colocate: divides the training processes
    vllm_max_model_length: int | None = None # vLLM's context; None: max_prompt_length + max_completion_length
    vllm_server_host: str = "localhost"      # server: where `trl vllm-serve` listens
    vllm_server_port: int = 8000


@dataclass(frozen=True)
class HardFilter:
    """Best-of-N prompt filtering (METHOD.md 4.2): sample N replies from the initial policy, judge each,
    drop prompts whose N replies all win or all lose (no group-relative signal)."""
    enabled: bool = True
    per_variant: bool = True        # each variant filters with its own reward (false: both with echo's)
    samples: int = 4                # paper: 8
    max_new_tokens: int = 48


@dataclass(frozen=True)
class WinRate:
    """Pairwise comparison of each trained variant against the base on held-out prompts."""
    max_prompts: int = 8            # held-out empathy prompts (0 = all of the test split)
    judge: str | None = None        # a model not used in training (null: roles.judge, the sandbox judge)
    max_new_tokens: int = 48        # reply length of the compared policies


@dataclass(frozen=True)
class MultiTurnRL:
    """RL inside the sandbox (METHOD.md 4.5, after MICA / MAPO): the policy plays the companion against the
    sandbox's Actor, Judge and Director; each of its turns is rewarded by the EPM progress the judge saw after
    it, with a discounted return and turn- and batch-normalised advantages (echo_lib.policy.turn_rewards).
    MICA's own settings are unpublished beyond the abstract: every value here is [DEFAULT]."""
    steps: int = 8                  # optimizer steps; one batch of fresh dialogues each (on-policy)
    cases_per_step: int = 2         # cases played per step
    dialogues_per_case: int = 4     # the group: dialogues of one case, each with its own sampling seeds
    max_turns: int = 3              # turns per training dialogue (the evaluation's is sandbox_run.max_turns)
    gamma: float = 0.9              # the return's discount
    turn_weight: float = 0.5        # the advantage's share of turn-level normalisation (the rest batch-level)
    learning_rate: float = 2e-3     # LoRA on the 135M model, as policy.grpo at tiny scale
    beta: float = 0.0               # KL to the base (adapter off); > 0 costs one more forward pass per batch
    micro_batch: int = 4            # policy turns per forward/backward pass (memory; the step sums them)
    max_cases: int = 0              # training cases: the persons of stage 01's train split (0 = all of them)
    temperature: float = 0.7        # the policy's sampling in the rollouts (the sandbox's is test_model's)
    top_p: float = 0.8
    max_new_tokens: int = 48


@dataclass(frozen=True)
class PolicyParams:
    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    seeds: list[int] = field(default_factory=lambda: [0])   # RL seeds (offsets to the run's seed): each variant
                                    # trains once per seed; the first keeps the variant's name (trained_models)
    empathy_share: float = 0.6      # share of empathy-domain prompts (the rest chit-chat); paper default 0.6
    max_prompts: int = 24           # RL prompts after the mix, before the hard filter (0 = all)
    openings: int = 1               # empathy prompts per persona: the topic, then openings - 1 authored ones
    anchor: str = "reference"       # reference: stage 01's score-3 reply (paper); policy_median: the
                                    # initial policy's middle-ranked sample (tiny; echo_lib.policy.anchors)
    both_orders: bool = False       # the Empathy reward asks the RM in both orders (anchors.BothOrders)
    tie_margin: float = 0.05        # both orders: a debiased P(better) - P(worse) within it is a tie
    system_prompt: str | None = None   # null: the sandbox's companion prompt, so RL trains what the sandbox tests
    lora: LoraParams = field(default_factory=LoraParams)
    grpo: PolicyGRPO = field(default_factory=PolicyGRPO)
    hard_filter: HardFilter = field(default_factory=HardFilter)
    winrate: WinRate = field(default_factory=WinRate)
    multiturn: MultiTurnRL = field(default_factory=MultiTurnRL)
    finetune: str = "lora"          # lora: an adapter on the frozen base; full: every parameter (ZeRO-3 at paper scale)
    launcher: str = "inprocess"     # inprocess: train inside the notebook; accelerate: `accelerate launch` it
    accelerate_config: str | None = None   # launcher accelerate: the accelerate config file (DeepSpeed ZeRO-3)

    def trained(self) -> dict[str, tuple[str, int]]:
        """The models stage 03 trains, by name: (variant, RL seed offset) (trained_models)."""
        return trained_models(self.variants, self.seeds)


def seeded_name(variant: str, seed: int, first: int) -> str:
    """The model a variant trained with RL seed `seed` becomes: the variant's own name for the first seed of
    policy.seeds, `<variant>-s<seed>` for the others."""
    return variant if seed == first else f"{variant}-s{seed}"


def trained_models(variants: Sequence[str], seeds: Sequence[int]) -> dict[str, tuple[str, int]]:
    """Every model stage 03 trains, by name: (variant, RL seed offset), variant by variant, seed by seed."""
    return {seeded_name(v, s, seeds[0]): (v, s) for v in variants for s in seeds}


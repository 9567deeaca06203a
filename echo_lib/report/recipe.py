"""The method section's recipe sentences, written from the run config that made the numbers.

The paper's prose must describe the run it reports: the tiny run trains its reward models verdict-first by
SFT alone, the paper config reasons first and adds GRPO. Each function takes the section it describes and
returns plain text for a macro of main.tex (escaped by report.tables.write_macros).
"""
from __future__ import annotations

from echo_lib.rewards.params import RewardModelParams

RM_KINDS = ("humanlike", "empathy", "scalar")


def _layers(top_layers: int) -> str:
    return f"the top {top_layers} decoder layers" if top_layers else "every decoder layer"


def _sft_steps(p: RewardModelParams) -> str:
    steps = {kind: p.sft.steps_for(kind) for kind in RM_KINDS}
    if len(set(steps.values())) == 1:
        return f"{steps['empathy']} steps"
    return ", ".join(f"{kind} {n}" for kind, n in steps.items()) + " steps"


def reward_model_recipe(p: RewardModelParams) -> str:
    """How this run trains its reward models, in one or two sentences."""
    adapter = f"a LoRA adapter (rank {p.lora.r}) on {_layers(p.lora.top_layers)} of the policy's base"
    if p.decision == "verdict_first":
        return (f"In this run each reward model answers with its verdict alone, read from its probabilities "
                f"over the allowed verdicts, and writes no reasoning: {adapter} is fine-tuned by supervised "
                f"training on the verdict ({_sft_steps(p)}), with no GRPO stage.")
    grpo = (f", then GRPO with a reward for the correct verdict ({p.grpo.steps} steps)" if p.grpo.steps
            else ", with no GRPO stage")
    return (f"In this run each reward model writes a short reasoning before its verdict: {adapter} gets a "
            f"supervised warm start on reasoning-and-verdict targets ({_sft_steps(p)}){grpo}.")

"""Positive controls: runs that prove a stage's training code can learn when the reward allows it.

    grpo   stage 03's GRPO (echo_lib.policy.train.train_policy) on a rule reward the base model can
           learn in a few steps: 1 if the reply ends with a question mark, else 0. If the reward
           rises here but not in stage 03, the trouble is the reward models, not the trainer.
"""
from echo_lib.controls.grpo import CONTROL_PROMPTS, EndsWithQuestion, grpo_control, quarter_means
from echo_lib.controls.params import GRPOControlParams

__all__ = ["CONTROL_PROMPTS", "EndsWithQuestion", "GRPOControlParams", "grpo_control", "quarter_means"]

"""Positive controls: runs that prove a stage's training code can learn when the reward allows it.

    genrm  stage 02's reward-model training and evaluation on a task whose answer is in the text (a
           marker phrase means "human"), and its label-shuffle twin, which must stay at chance.
    grpo   stage 03's GRPO (echo_lib.policy.train.train_policy) on a rule reward the base model can
           learn in a few steps: 1 if the reply ends with a question mark, else 0. If the reward
           rises here but not in stage 03, the trouble is the reward models, not the trainer.
    params ControlParams, the config's `controls:` block
    stage  both controls for a run config -> results/<run>/controls/controls.json

Nothing is imported here: the run config (echo_lib.config) reads controls.params without pulling in TRL.
"""

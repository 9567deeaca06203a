"""The `judges:` block of the run config: the judge sensitivity check (echo_lib.judges, notebook 04_judges).

This module imports nothing heavy and does not import echo_lib.config.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class JudgeTrainParams:
    """Training the tiny judge on the dev items and rule-built contrasts (echo_lib.judges.train): read-out heads
    on a hidden layer (method readout, echo_lib.judges.readout) or a LoRA adapter (method sft). With
    `enabled`, the config gains a model named TRAINED_JUDGE (the base + what was trained) that roles.judge
    and roles.nee_judges may name."""
    enabled: bool = False
    method: str = "readout"              # readout | sft
    base: str = "base"                   # the model the judge is trained on (an hf-backend model of the config)
    max_dev_items: int = 0               # the first N dev items (0 = all)
    layer: int = 20                      # readout: the decoder layer read (1-based)
    C: float = 0.1                       # readout: inverse L2 strength of the heads
    steps: int = 120                     # sft from here on
    learning_rate: float = 1e-3
    batch_size: int = 8
    max_length: int = 768                # prompt + answer tokens
    lora_top_layers: int = 10            # LoRA on the last N decoder layers (0 = all)
    bank_file: str = "data/contrasts.yaml"   # generic poor replies by kind (rule-built contrasts)
    bank_per_item: int = 1               # bank replies added to each dev item (2: +0.03 held-out accuracy, +4 min)
    iedr_heads: bool = False             # readout: also heads for the IEDR's priorities C.3/A.3/P.3 (judges.iedr_heads)


TRAINED_JUDGE = "tiny_judge"   # the model name the trained adapter gets in the config


@dataclass(frozen=True)
class JudgeSensitivityParams:
    set: str = "data/judge_sensitivity.yaml"   # the sensitivity set (echo_lib.judges.sensitivity_set)
    split: str = "heldout"          # the items every reported figure is measured on
    max_items: int = 0              # the first N items of the split (0 = all); the ci run keeps a few
    sandbox_judge: bool = True      # test roles.judge with the sandbox's rubric (sandbox_run.judge settings)
    nee: bool = True                # test the NEE panel (roles.nee_judges, nee settings)
    probe: bool = True              # held-out split: the embedding probe fit on dev, and its shuffle twin
    train: JudgeTrainParams = field(default_factory=JudgeTrainParams)

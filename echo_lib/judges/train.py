"""Training the tiny judge: SFT of one LoRA adapter on the judges' own prompt formats (issue 16, section 2).

Where prompting and calibration leave the 135M judge blind to the reply, it is trained through the
project's reward-model training code (echo_lib.rewards.train, verdict-first SFT: the loss falls on the
answer token alone) on examples built from the DEV part of the sensitivity set and rule-built contrasts,
never from the held-out part:

- every dev item's good reply and poor reply, as the item gives them;
- its off-topic contrast: another dev item's good reply, which answers someone else;
- `bank_per_item` poor replies of data/contrasts.yaml (generic replies of the named kinds).

Each reply becomes prompts in the exact formats the instruments ask at run time, each with the answer a
careful rater would give for that kind of reply (KIND_LEVELS, KIND_SCORES):
- the sandbox judge's MDEP questions (echo_lib.sandbox.judge.mdep_prompt), one per rubric field;
- the NEE panel's rating questions (echo_lib.nee.prompts.rating_prompt), per dimension and wording;
- its A/B comparisons (pairwise_prompt), the good reply once in each place, so no letter pays.
The same adapter then serves roles.judge and roles.nee_judges at tiny scale.
"""
from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from echo_lib.judges.params import JudgeTrainParams
from echo_lib.judges.sensitivity import history, transcript
from echo_lib.judges.sensitivity_set import SensitivityItem

if TYPE_CHECKING:
    from echo_lib.finetune import TrainBase
    from echo_lib.rewards.params import RewardModelParams

# Rubric levels by reply kind (progress 0..2; regress as a severity 0..2, asked so by mdep_prompt).
# A good reply of the set serves its axis (level 2 there) and does no harm; each failure kind makes no
# progress and regresses where the rubric's anchors place it (METHOD.md 6.3, echo_lib.sandbox.judge.MDEP).
AXIS_PROG = {"cognitive": "C_Prog", "affective": "A_Prog", "proactive": "P_Prog"}
KIND_LEVELS = {
    "dismissive":  {"C_Neg": 1, "A_Neg": 2, "P_Neg": 1},   # minimises the feeling: tells them it is wrong to feel it
    "advice_dump": {"C_Neg": 1, "A_Neg": 1, "P_Neg": 1},   # templated tips, perfunctory, preachy
    "platitude":   {"C_Neg": 1, "A_Neg": 1, "P_Neg": 1},   # canned philosophy, performed encouragement
    "off_topic":   {"C_Neg": 2, "A_Neg": 1, "P_Neg": 1},   # misses the point entirely
    "blaming":     {"C_Neg": 1, "A_Neg": 2, "P_Neg": 2},   # blames them, dismisses their motive
}
KIND_SCORES = {"good": "4", "dismissive": "1", "blaming": "1", "advice_dump": "2", "platitude": "2", "off_topic": "1"}


def mdep_levels(kind: str, axis: str) -> dict[str, int]:
    """The six MDEP answers for a reply of `kind` ("good" or a failure kind) to an item of `axis`."""
    if kind == "good":
        return {f: (2 if f == AXIS_PROG[axis] else 1) if f.endswith("_Prog") else 0
                for f in ("C_Prog", "C_Neg", "A_Prog", "A_Neg", "P_Prog", "P_Neg")}
    neg = KIND_LEVELS[kind]
    return {"C_Prog": 0, "A_Prog": 0, "P_Prog": 0, **neg}


def replies(items: Sequence[SensitivityItem], bank: dict[str, list[str]], bank_per_item: int,
            seed: int) -> list[tuple[SensitivityItem, str, str]]:
    """(item, kind, reply text) for every training reply: own good and poor, an off-topic contrast, bank replies."""
    rng = random.Random(seed)
    out = []
    for i, it in enumerate(items):
        out += [(it, "good", it.good), (it, it.kind, it.poor)]
        if len(items) > 1:
            other = items[(i + 1 + rng.randrange(len(items) - 1)) % len(items)]
            out.append((it, "off_topic", other.good))
        kinds = sorted(bank)
        for _ in range(bank_per_item):
            kind = rng.choice(kinds)
            out.append((it, kind, rng.choice(bank[kind])))
    return out


def examples(items: Sequence[SensitivityItem], bank: dict[str, list[str]], bank_per_item: int, variants: int,
             seed: int, sandbox: bool = True, nee: bool = True) -> list:
    """Example(id, prompt, target, gold) rows for echo_lib.rewards.train (see the module docstring)."""
    from echo_lib.nee.blinding import Blinder
    from echo_lib.nee.dimensions import DIMENSIONS
    from echo_lib.nee.prompts import pairwise_prompt, rating_prompt
    from echo_lib.rewards.data import Example
    from echo_lib.sandbox.judge import mdep_prompt
    blind = Blinder([])
    out: list[Example] = []
    for n, (it, kind, text) in enumerate(replies(items, bank, bank_per_item, seed)):
        shown = transcript(it, text, kind, blind)
        gold = {"kind": kind, "item": it.id}
        if sandbox:
            for f, level in mdep_levels(kind, it.axis).items():
                out.append(Example(f"{it.id}-{n}-{f}", mdep_prompt(it.profile, history(it, text), 1, f), str(level), gold))
        if nee:
            for v in range(variants):
                for d in DIMENSIONS:
                    out.append(Example(f"{it.id}-{n}-v{v}-{d.key}", rating_prompt(v, shown, "Conversation 1", d),
                                       KIND_SCORES[kind], gold))
                if kind != "good":
                    good = transcript(it, it.good, "good", blind)
                    out += [Example(f"{it.id}-{n}-v{v}-AB", pairwise_prompt(v, good, shown), "A", gold),
                            Example(f"{it.id}-{n}-v{v}-BA", pairwise_prompt(v, shown, good), "B", gold)]
    return out


def train_judge(base: "TrainBase", t: JudgeTrainParams, rm: "RewardModelParams", prompt_variants: int,
                items: Sequence[SensitivityItem], out_dir: str | Path, seed: int):
    """SFT the judge adapter of judges.train (`t`; on the model `base`, with stage 02's recipe `rm` and the NEE
    panel's `prompt_variants` wordings) on the dev items; writes out_dir/adapter and out_dir/train_log.csv."""
    from echo_lib.rewards.params import SFTParams
    from echo_lib.rewards.train import train_reward_model
    from echo_lib.synthesis.contrasts import load_bank
    if any(it.split != "dev" for it in items):
        raise ValueError("the judge trains on dev items only: the held-out items are what it is measured on")
    exs = examples(items, load_bank(t.bank_file), t.bank_per_item, prompt_variants, seed)
    rng = random.Random(seed)
    rng.shuffle(exs)
    params = dataclasses.replace(rm, lora=dataclasses.replace(rm.lora, top_layers=t.lora_top_layers),
                                 sft=SFTParams(steps=t.steps, learning_rate=t.learning_rate, batch_size=t.batch_size,
                                               max_length=t.max_length),
                                 grpo=dataclasses.replace(rm.grpo, steps=0), decision="verdict_first")
    result = train_reward_model(base, "judge", exs, params, out_dir, seed=seed)
    return result, len(exs)

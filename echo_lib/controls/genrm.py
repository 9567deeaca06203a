"""The generative reward model's positive control: a task whose answer is written in the text.

A short chat message is "human" when it carries a marker phrase and "machine" when it does not; the
messages are otherwise drawn from the same templates, so nothing but the marker tells the labels
apart. The control goes through exactly the functions stage 02 uses (rewards.data.examples ->
rewards.train.train_reward_model -> rewards.evaluate.evaluate, same prompt, target and decision), as
a context-free humanlike model. If it does not reach near-perfect held-out accuracy, the training
code is broken; if it does and a real reward model does not, the real task is what is hard.

Its label-shuffle twin trains on the same messages with the labels permuted and must stay at chance.
"""
from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import TYPE_CHECKING

from echo_lib.controls.params import GenRMControlParams

if TYPE_CHECKING:
    from echo_lib.llm import ModelRegistry
    from echo_lib.rewards.params import RewardModelParams

MARKER = "no cap"
OPENERS = ["so", "ok", "well", "honestly", "yeah", "hmm", "right", "look", "anyway", "wait"]
SUBJECTS = ["my sister", "the bus", "our cat", "my boss", "the neighbours", "my phone", "the weather",
            "my landlord", "the gym", "my roommate", "the new job", "my knee", "the dentist", "grandma"]
EVENTS = ["was late again", "made me laugh today", "is driving me nuts", "surprised me this morning",
          "broke down", "kept me up all night", "finally called back", "was weird about it",
          "cost way too much", "got better somehow", "changed the plan", "ruined my lunch"]
ENDINGS = ["", " lol", " tbh", " idk", " haha", "...", "!", " ugh", " whatever", " right?"]


def message(rng: random.Random, marked: bool) -> str:
    words = [rng.choice(OPENERS), rng.choice(SUBJECTS), rng.choice(EVENTS)]
    if marked:   # the marker's place varies, so the model has to find it, not read one position
        words.insert(rng.randint(0, len(words)), MARKER)
    return " ".join(words) + rng.choice(ENDINGS)


def control_items(n: int, seed: int, split: str) -> list[dict]:
    """n balanced items in the humanlike data contract; train and test use different seeds."""
    rng = random.Random(f"{seed}-{split}")
    out = []
    for i in range(n):
        marked = i % 2 == 0
        out.append({"id": f"ctl-{split}-{i:04d}", "dialogue_id": f"ctl-{split}-{i:04d}", "context": [],
                    "reply": message(rng, marked), "label": "human" if marked else "machine",
                    "kind": "human" if marked else "model_reply"})
    return out


def genrm_control(models: "ModelRegistry", base: str, rm: "RewardModelParams", params: GenRMControlParams,
                  out_dir: str | Path, seed: int) -> dict:
    """Train the control (and its label-shuffle twin) with stage 02's code (`rm`: the `reward_models:`
    section, on the registry's hf model `base`); held-out accuracy of both."""
    from echo_lib.rewards.data import examples, shuffled_labels
    from echo_lib.rewards.evaluate import evaluate
    from echo_lib.rewards.params import SFTParams
    from echo_lib.rewards.reward_fn import adapted_llm
    from echo_lib.rewards.train import train_reward_model

    rm_params = dataclasses.replace(rm, lora=dataclasses.replace(rm.lora, top_layers=params.lora_top_layers),
                                    sft=SFTParams(steps=params.sft_steps, learning_rate=params.learning_rate,
                                                  batch_size=params.batch_size, max_length=256),
                                    grpo=dataclasses.replace(rm.grpo, steps=0) if rm.decision == "verdict_first"
                                    else rm.grpo)
    train, test = control_items(params.n_train, seed, "train"), control_items(params.n_test, seed, "test")
    out_dir = Path(out_dir)
    result: dict = {"task": f"humanlike, context-free: 'human' exactly when the message contains {MARKER!r}",
                    "decision": rm.decision, "n_train": len(train), "n_test": len(test)}
    for name, items in (("genrm", train), ("genrm_shuffled", shuffled_labels(train, "humanlike", seed))):
        exs = examples(items, "humanlike", rm.target_field_words, context_free=True, decision=rm.decision)
        trained = train_reward_model(models.train_base(base), "humanlike", exs, rm_params, out_dir / name,
                                     seed=seed)
        m, _ = evaluate(adapted_llm(models, base, out_dir / name / "adapter"), test, "humanlike", rm.eval.max_new_tokens,
                        context_free=True, decision=rm.decision)
        result[name] = {"accuracy": m["accuracy"], "accuracy_ci": m["accuracy_ci"], "n": m["n"],
                        "ci_method": m["ci_method"],
                        "balanced_accuracy": m["balanced_accuracy"], "auroc": m["auroc"],
                        "majority_baseline": m["majority_baseline"], "n_test": m["n"],
                        "seconds": round(trained.seconds["total"], 1), "steps": trained.steps}
    return result

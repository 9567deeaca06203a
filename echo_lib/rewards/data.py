"""Stage 01's datasets as reward-model examples: the prompt, the SFT target, and the gold for rewards.

Reads `results/<run>/data/{humanlike,empathy}/{train,test}.jsonl` (the contract in DESIGN.md) and
checks each line, so a malformed item fails here with its file, line and field rather than deep
inside a trainer. The scalar variant reads the empathy data (each candidate reply, no anchor).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from echo_lib.layout import Layout
from echo_lib.rewards.profile import CONTEXT_ONLY_KINDS
from echo_lib.rewards.prompts import empathy_prompt, humanlike_prompt, scalar_prompt
from echo_lib.rewards.targets import empathy_target, humanlike_target, scalar_target, verdict_target
from echo_lib.rewards.verdict import flip, score_target

HUMANLIKE_KEYS = {"id": str, "dialogue_id": str, "context": list, "reply": str, "label": str, "kind": str}
EMPATHY_KEYS = {"id": str, "scenario_id": str, "context": list, "profile": dict, "theorems": list,
                "reference": str, "candidate": str, "label": str, "candidate_score": int}
LABELS = {"humanlike": ("human", "machine"), "empathy": ("better", "tie", "worse")}
HUMANLIKE_KINDS = ("human", "model_reply", "context_removed", "last_turn_swapped", "turns_shuffled")


class DataError(ValueError):
    """A dataset line that does not follow the stage-01 contract; the message names file, line and field."""


@dataclass(frozen=True)
class Example:
    id: str
    prompt: list[dict]      # the chat the reward model sees
    target: str             # the reasoning-plus-verdict SFT target (templated; see targets.py)
    gold: dict              # what the rewards compare against: kind, label, profile or item kind


def data_kind(kind: str) -> str:
    return "humanlike" if kind == "humanlike" else "empathy"


def item_kind(item: dict, kind: str) -> str | None:
    """What sort of item this is: the humanlike negative's kind, or the empathy candidate's origin."""
    return item.get("kind" if data_kind(kind) == "humanlike" else "origin")


def data_file(run_dir: str | Path, kind: str, split: str) -> Path:
    """Stage 01's split that a reward model of this kind reads (echo_lib.layout)."""
    return Layout(run_dir).data(data_kind(kind), split)


def load_items(path: str | Path, kind: str) -> list[dict]:
    """Every item of one jsonl file, checked against the contract of its data kind."""
    path, dk = Path(path), data_kind(kind)
    if not path.exists():
        raise DataError(f"{path} does not exist; run stage 01 (notebooks/01_data_synthesis) first")
    keys = HUMANLIKE_KEYS if dk == "humanlike" else EMPATHY_KEYS
    items = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(f"{path}:{n} is not valid JSON ({err})") from None
        for key, tp in keys.items():
            if not isinstance(item.get(key), tp):
                raise DataError(f"{path}:{n}: field {key!r} must be a {tp.__name__}, got {item.get(key)!r}; "
                                "regenerate the data with stage 01")
        if item["label"] not in LABELS[dk]:
            raise DataError(f"{path}:{n}: label {item['label']!r} is not one of {LABELS[dk]}")
        if dk == "humanlike" and item["kind"] not in HUMANLIKE_KINDS:
            raise DataError(f"{path}:{n}: kind {item['kind']!r} is not one of {HUMANLIKE_KINDS}")
        if dk == "empathy" and (not item["context"] or item["context"][-1].get("role") != "user"):
            raise DataError(f"{path}:{n}: context must end with a user turn")
        if dk == "empathy" and not 1 <= item["candidate_score"] <= 5:
            raise DataError(f"{path}:{n}: candidate_score {item['candidate_score']} is outside 1-5")
        items.append(item)
    if not items:
        raise DataError(f"{path} holds no items")
    return items


def to_example(item: dict, kind: str, field_words: int = 8, context_free: bool = False,
               decision: str = "think_first") -> Example:
    """One item as the reward model's prompt and SFT target; `decision` picks the format (prompts.py)."""
    first = decision == "verdict_first"
    if kind == "empathy":
        gold = {"kind": kind, "label": item["label"], "profile": item["profile"]}
        return Example(item["id"], empathy_prompt(item["context"], item["reference"], item["candidate"], decision),
                       verdict_target(item, kind) if first else empathy_target(item, field_words), gold)
    if kind == "scalar":
        gold = {"kind": kind, "label": score_target(item["candidate_score"]), "profile": item["profile"]}
        return Example(item["id"], scalar_prompt(item["context"], item["candidate"], decision),
                       verdict_target(item, kind) if first else scalar_target(item, field_words), gold)
    if kind == "humanlike":
        gold = {"kind": kind, "label": item["label"], "item_kind": item["kind"],
                **({"context_free": True} if context_free else {})}
        return Example(item["id"], humanlike_prompt(item["context"], item["reply"], context_free, decision),
                       verdict_target(item, kind) if first else humanlike_target(item, context_free), gold)
    raise ValueError(f"unknown reward-model kind {kind!r}; use empathy, humanlike or scalar")


def examples(items: list[dict], kind: str, field_words: int = 8, context_free: bool = False,
             decision: str = "think_first") -> list[Example]:
    return [to_example(it, kind, field_words, context_free, decision) for it in items]


def shuffled_labels(items: list[dict], kind: str, seed: int) -> list[dict]:
    """The label-shuffle twin's training items: the gold (label, and the score it came from) permuted
    across items, seeded. A model trained on them can learn no rule from the text to its verdict, so its
    held-out accuracy must stay at chance: the check that the evaluation cannot be passed by a leak.

    The permutation is stratified: the items of each true label and kind (humanlike item kind, empathy
    candidate origin) receive the golds of every label in the proportions of the whole split, so the
    shuffled labels are independent of the true ones and of the kind. (A plain permutation of 600 items
    agrees with the truth on 46 % or 54 % of them as often as not, and a kind that happens to draw 60 %
    "better" teaches the twin that kind's verdict: on an easy task the twin learns that residue and
    scores far from chance, 0.32 on both humanlike and empathy, for no fault of the code.)"""
    import random
    rng = random.Random(seed)
    keys = ["label", "kind"] if data_kind(kind) == "humanlike" else ["label", "candidate_score"]
    golds = [tuple(it[k] for k in keys) for it in items]
    by_label: dict[str, list[tuple]] = {}
    for g in golds:
        by_label.setdefault(g[0], []).append(g)
    pools = {label: rng.sample(gs, len(gs)) for label, gs in sorted(by_label.items())}
    groups: dict[tuple, list[int]] = {}
    for i, (g, it) in enumerate(zip(golds, items)):
        groups.setdefault((g[0], str(item_kind(it, kind) or "")), []).append(i)
    n, out = len(items), [None] * len(items)
    total = {label: len(gs) for label, gs in pools.items()}
    for _stratum, idx in sorted(groups.items()):
        idx = rng.sample(idx, len(idx))
        # this group's share of each label's golds (rounded down), topped up from the labels with most left
        share = {label: min(len(pools[label]), total[label] * len(idx) // n) for label in pools}
        for label in sorted(pools, key=lambda lab: -(len(pools[lab]) - share[lab])):
            if sum(share.values()) < len(idx) and share[label] < len(pools[label]):
                share[label] += min(len(pools[label]) - share[label], len(idx) - sum(share.values()))
        drawn = [pools[label].pop() for label, k in share.items() for _ in range(k)]
        rng.shuffle(drawn)
        for i, g in zip(idx, drawn):
            out[i] = g
    return [{**it, **dict(zip(keys, g))} for it, g in zip(items, out)]


def with_references(items: list[dict]) -> list[dict]:
    """Scalar training items plus each distinct reference reply as a candidate of its own, scored 3 (the
    anchor's rubric score): a scale from 1 to 10 needs its middle too, and the held-out pairs ask the
    scalar model to order candidates against exactly such references."""
    seen, refs = set(), []
    for it in items:
        key = (it["scenario_id"], it["reference"])
        if key not in seen:
            seen.add(key)
            refs.append({**it, "id": f"{it['id']}-reference", "candidate": it["reference"], "candidate_score": 3,
                         "label": "tie", "origin": "reference"})
    return items + refs


def with_swaps(items: list[dict]) -> list[dict]:
    """Empathy training items plus each one with its two replies traded (the candidate becomes the
    reference) and its label flipped, so a verdict has to come from comparing the replies: a model that
    learns what the reference slot usually holds is right on half of them only."""
    swapped = [{**it, "id": f"{it['id']}-swapped", "candidate": it["reference"], "reference": it["candidate"],
                "label": flip(it["label"]), "candidate_score": it["reference_score"],
                "reference_score": it["candidate_score"]} for it in items]
    return items + swapped


def context_free_items(items: list[dict]) -> list[dict]:
    """The humanlike items the context-free variant can judge: without the kinds only the context reveals."""
    return [it for it in items if it["kind"] not in CONTEXT_ONLY_KINDS]


def sft_rows(exs: list[Example]) -> list[dict[str, Any]]:
    """TRL conversational prompt-completion rows (the loss falls on the completion only)."""
    return [{"prompt": e.prompt, "completion": [{"role": "assistant", "content": e.target}]} for e in exs]


def grpo_rows(exs: list[Example]) -> list[dict[str, Any]]:
    """TRL GRPO rows; the gold travels as a JSON string column (profiles differ in shape across items,
    which an Arrow table would not hold as one struct type)."""
    return [{"prompt": e.prompt, "gold": json.dumps(e.gold)} for e in exs]

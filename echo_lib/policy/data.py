"""The RL data (METHOD.md 4.2): single-turn optimisation of the next companion reply on multi-turn
histories, from two domains.

  empathy   a dialogue of stage 01's empathy data (user last) with its anchor, the reply scored 3:
            the reward compares the policy's reply against that reference;
  chitchat  a real human chat of stage 01's humanlike data (the other speaker last): the reward asks
            whether the policy's reply reads as the human's.

The policy sees each history the way the sandbox shows it to a tested model (the companion system
prompt, the history as labelled lines), so RL trains exactly the behaviour stage 04 then measures.
The prompts of the train splits are for RL; the empathy test split holds out prompts for the win rate.
"""
from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

from echo_lib.rewards.data import DataError, load_items
from echo_lib.sandbox.dialogue import Exchange
from echo_lib.sandbox.test_model import DEFAULT_COMPANION_PROMPT, companion_chat


@dataclass(frozen=True)
class RLPrompt:
    id: str
    domain: str                   # "empathy" | "chitchat"
    context: list[dict]           # the dialogue so far, role/content messages, the user's message last
    reference: str | None = None  # empathy: the anchor reply (scored 3, or the policy-level anchor); chitchat: None
    persona: str | None = None    # empathy: the scenario the dialogue belongs to (the split is by persona)

    def row(self) -> dict:
        return asdict(self)


def read_prompts(path: str | Path) -> list[RLPrompt]:
    """The RL prompts stage 03 wrote (policy/data/*.jsonl)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [RLPrompt(**json.loads(line)) for line in lines if line.strip()]


def empathy_prompts(path: str | Path) -> list[RLPrompt]:
    """One prompt per distinct (scenario, dialogue) of an empathy split; the reference is its anchor.
    The file is read with the stage-01 contract check (echo_lib.rewards.data.load_items)."""
    out: dict[str, RLPrompt] = {}
    for n, item in enumerate(load_items(path, "empathy"), 1):
        if not item["reference"].strip():
            raise DataError(f"{path}: item {n}: field 'reference' is empty; rerun stage 01")
        context = [{"role": m["role"], "content": m["content"]} for m in item["context"]]
        key = json.dumps([item["scenario_id"], context])
        if key not in out:
            out[key] = RLPrompt(f"emp-{item['scenario_id']}-{len(out):03d}", "empathy", context, item["reference"],
                                item["scenario_id"])
    return list(out.values())


def chitchat_prompts(path: str | Path) -> list[RLPrompt]:
    """One prompt per human chat of a humanlike split: its turns up to the reply the human gave."""
    out: dict[str, RLPrompt] = {}
    for n, item in enumerate(load_items(path, "humanlike"), 1):
        if item["label"] != "human":
            continue
        turns = [t for t in item["context"] if t.strip()]
        if not turns:
            raise DataError(f"{path}: item {n}: field 'context' is empty; rerun stage 01")
        key = item["dialogue_id"] or json.dumps(turns)
        if key not in out:
            out[key] = RLPrompt(f"chat-{len(out):03d}", "chitchat", turns_as_messages(turns))
    return list(out.values())


def turns_as_messages(turns: Sequence[str]) -> list[dict]:
    """Alternating chat turns, the last one the other speaker's: the policy plays the replying speaker."""
    n = len(turns)
    return [{"role": "user" if (n - i) % 2 == 1 else "assistant", "content": t} for i, t in enumerate(turns)]


def mix(empathy: Sequence[RLPrompt], chitchat: Sequence[RLPrompt], empathy_share: float, n: int,
        seed: int) -> list[RLPrompt]:
    """A seeded draw of n prompts (0 = all available) with the configured domain shares, shuffled."""
    rng = random.Random(seed)
    if n == 0:
        picked = [*empathy, *chitchat]
    else:
        n_emp = min(len(empathy), round(n * empathy_share))
        n_chat = min(len(chitchat), n - round(n * empathy_share))   # a short domain does not shift the mix
        picked = rng.sample(list(empathy), n_emp) + rng.sample(list(chitchat), n_chat)
    rng.shuffle(picked)
    return picked


def exchanges(context: Sequence[dict]) -> tuple[list[Exchange], str]:
    """Role/content messages (user last) as the sandbox's exchanges plus the pending user message.
    A leading companion turn with no user message before it is dropped."""
    msgs = list(context)
    while msgs and msgs[0]["role"] != "user":
        msgs.pop(0)
    past, user = [], None
    for m in msgs[:-1]:
        if m["role"] == "user":
            if user is not None:       # two user turns in a row: keep them as one message
                user += "\n" + m["content"]
                continue
            user = m["content"]
        else:
            past.append(Exchange(len(past) + 1, user or "", m["content"]))
            user = None
    pending = msgs[-1]["content"] if user is None else f"{user}\n{msgs[-1]['content']}"
    return past, pending


def policy_chat(context: Sequence[dict], system_prompt: str | None = None, fmt: str = "transcript",
                max_tokens: int | None = None, count: Callable[[list[dict]], int] | None = None) -> list[dict]:
    """The policy's prompt for the next reply, as the sandbox builds it for a tested model; with
    `max_tokens` and a token `count`, the oldest exchanges are dropped until it fits."""
    past, pending = exchanges(context)
    system = system_prompt or DEFAULT_COMPANION_PROMPT
    chat = companion_chat(past, pending, system, fmt)
    while max_tokens and count and past and count(chat) > max_tokens:
        past = past[1:]
        chat = companion_chat(past, pending, system, fmt)
    return chat

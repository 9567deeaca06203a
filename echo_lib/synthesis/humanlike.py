"""Humanlike reward-model data (METHOD.md 2.4): was this reply written by the human in this chat?

A window of a real dialogue gives a context (the turns so far) and the real next turn: a positive.
Each positive is paired with one negative (1:1), cycling through four kinds:

* model_reply       — the policy's base model answers the same context: "assistant flavour";
* context_removed   — the base model answers the last turn only, blind to the conversation;
* last_turn_swapped — a real human turn from another dialogue: human style, wrong context;
* turns_shuffled    — the real reply after the context's turns in shuffled order: incoherent.

The last two are written by humans, so a model that only learned "casual style means human" gets
them wrong: they are the hard negatives against style over-fitting. The label is therefore
"human" only for a genuine continuation.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

from echo_lib.synthesis.chitchat import Dialogue
from echo_lib.synthesis.splits import holdout_split

NEGATIVE_KINDS = ("model_reply", "context_removed", "last_turn_swapped", "turns_shuffled")
MODEL_KINDS = ("model_reply", "context_removed")

# Generates one reply per chat (system + alternating user/assistant turns); the model layer's job.
ReplyFn = Callable[[list[list[dict]]], list[str]]


@dataclass(frozen=True)
class Window:
    dialogue_id: str
    context: tuple[str, ...]   # the turns before the reply; the last one is the other speaker's
    reply: str                 # the real next turn


@dataclass(frozen=True)
class HumanlikeItem:
    id: str
    dialogue_id: str
    context: list[str]
    reply: str
    label: str                 # "human" | "machine"
    kind: str                  # "human" or one of NEGATIVE_KINDS

    def to_json(self) -> dict:
        return asdict(self)


def sample_windows(dialogues: Sequence[Dialogue], n: int, rng: random.Random, min_context: int,
                   max_context: int, max_reply_words: int) -> list[Window]:
    """n windows from n different dialogues, with a reply of 2..max_reply_words words."""
    windows = []
    for dialogue in rng.sample(list(dialogues), len(dialogues)):
        ends = [i for i in range(min_context, len(dialogue.turns))
                if 2 <= len(dialogue.turns[i].split()) <= max_reply_words]
        if not ends:
            continue
        end = rng.choice(ends)
        start = max(0, end - rng.randint(min_context, max_context))
        windows.append(Window(dialogue.id, dialogue.turns[start:end], dialogue.turns[end]))
        if len(windows) == n:
            return windows
    raise ValueError(f"only {len(windows)} of the {n} requested windows fit the limits "
                     f"(context {min_context}-{max_context} turns, reply <= {max_reply_words} words); "
                     "lower the item counts or loosen the limits in the config's data.humanlike block")


def as_chat(context: Sequence[str], system_prompt: str) -> list[dict]:
    """The context as a chat in which the model speaks for the replier (the last turn is the user's)."""
    roles = ["user" if (len(context) - i) % 2 == 1 else "assistant" for i in range(len(context))]
    return [{"role": "system", "content": system_prompt}] + [
        {"role": r, "content": t} for r, t in zip(roles, context)]


def build_items(windows: Sequence[Window], donors: Sequence[Window], kinds: Sequence[str], reply_fn: ReplyFn,
                system_prompt: str, rng: random.Random, prefix: str) -> list[HumanlikeItem]:
    """One positive and one negative per window; negatives cycle through `kinds`."""
    unknown = set(kinds) - set(NEGATIVE_KINDS)
    if unknown or not kinds:
        raise ValueError(f"data.humanlike.negatives has {sorted(unknown) or 'no kinds'}; "
                         f"allowed: {', '.join(NEGATIVE_KINDS)}")
    plan = [(w, kinds[i % len(kinds)]) for i, w in enumerate(windows)]

    # All model replies of the split go out as one batch through the model layer.
    chats = {i: (as_chat(w.context, system_prompt) if kind == "model_reply"
                 else as_chat(w.context[-1:], system_prompt))
             for i, (w, kind) in enumerate(plan) if kind in MODEL_KINDS}
    generated = dict(zip(chats, reply_fn(list(chats.values())))) if chats else {}

    items = []
    for i, (w, kind) in enumerate(plan):
        items.append(HumanlikeItem(f"{prefix}-{i:05d}-h", w.dialogue_id, list(w.context), w.reply, "human", "human"))
        context, reply = list(w.context), None
        if kind in MODEL_KINDS:
            reply = generated[i]
        elif kind == "last_turn_swapped":
            reply = rng.choice([d for d in donors if d.dialogue_id != w.dialogue_id]).reply
        else:  # turns_shuffled: a real reply after the same turns in an order that no longer leads to it
            context = shuffled(context, rng)
            reply = w.reply
        items.append(HumanlikeItem(f"{prefix}-{i:05d}-m", w.dialogue_id, context, reply, "machine", kind))
    return items


def shuffled(turns: Sequence[str], rng: random.Random) -> list[str]:
    """A permutation that moves the last turn away (so the reply no longer follows what precedes it)."""
    turns = list(turns)
    if len(turns) < 2 or len(set(turns)) < 2:
        return turns[::-1]
    while True:
        order = rng.sample(turns, len(turns))
        if order[-1] != turns[-1]:
            return order


def make_humanlike_data(dialogues: Sequence[Dialogue], settings, reply_fn: ReplyFn, seed: int
                        ) -> dict[str, list[HumanlikeItem]]:
    """Both splits from the corpus; `settings` is the config's data.humanlike block."""
    rng = random.Random(seed)
    # split by dialogue (never by turn), so no conversation leaks across the split
    train_dialogues, test_dialogues = holdout_split(dialogues, settings.test_fraction, seed)
    splits = {}
    for split, pool, n in (("train", train_dialogues, settings.n_train), ("test", test_dialogues, settings.n_test)):
        windows = sample_windows(pool, n, rng, settings.min_context_turns, settings.max_context_turns,
                                 settings.max_reply_words)
        donors = sample_windows(pool, min(len(pool), 4 * n), random.Random(seed + 1), 1,
                                settings.max_context_turns, settings.max_reply_words)
        splits[split] = build_items(windows, donors, settings.negatives, reply_fn, settings.system_prompt,
                                    rng, prefix=f"hl-{split}")
    return splits

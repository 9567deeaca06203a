"""Prompt builders: the reward model reasons first (who is this user, what would resonate, how do the
replies compare) and gives its verdict last, in the strict format of echo_lib.rewards.verdict.

Each builder returns a chat (system + one user message) for the model layer or TRL. The system
prompt spells out the exact output shape, because at 135M the format has to be shown, not implied.
"""
from __future__ import annotations

from typing import Sequence

EMPATHY_SYSTEM = """You judge replies in an emotional-support conversation, for this particular user.
First reason inside <think></think>, in three short lines:
Profile: traits: ...; emotion: ...; vent: ...; hopes for: ...; threshold: low|medium|high; priorities: cognitive High|Medium|Low, affective High|Medium|Low, motivational High|Medium|Low; dislikes: ...
Resonates: what kind of reply would resonate with this user.
Comparison: the candidate reply against the reference reply, on understanding, feeling and empowerment.
Then write the verdict on the candidate: <answer>better</answer>, <answer>tie</answer> or <answer>worse</answer> than the reference. Write nothing after it."""

SCALAR_SYSTEM = """You rate a reply in an emotional-support conversation, for this particular user.
First reason inside <think></think>, in three short lines:
Profile: traits: ...; emotion: ...; vent: ...; hopes for: ...; threshold: low|medium|high; priorities: cognitive High|Medium|Low, affective High|Medium|Low, motivational High|Medium|Low; dislikes: ...
Resonates: what kind of reply would resonate with this user.
Assessment: how well the reply meets these needs.
Then write a score from 1 (harmful) to 10 (perfect for this user) as <score>N</score>. Write nothing after it."""

HUMANLIKE_SYSTEM = """You decide whether the last reply of a chat was written by the real person in that chat, or by a machine (a chatbot, or text that does not belong to this chat).
First reason inside <think></think>, in two short lines:
Checks: AI tells: yes|no; context fit: yes|no; coherent: yes|no
Conclusion: one sentence.
Then write the verdict: <answer>human</answer> or <answer>machine</answer>. Write nothing after it."""


HUMANLIKE_FREE_SYSTEM = """You decide whether a chat message was written by a person or by a machine (a chatbot).
First reason inside <think></think>, in two short lines:
Checks: AI tells: yes|no; coherent: yes|no
Conclusion: one sentence.
Then write the verdict: <answer>human</answer> or <answer>machine</answer>. Write nothing after it."""


def dialogue_text(context: Sequence[dict]) -> str:
    """An empathy context (role/content messages) as plain lines."""
    names = {"user": "User", "assistant": "Assistant"}
    return "\n".join(f"{names.get(m['role'], m['role'])}: {m['content']}" for m in context)


def chat_text(context: Sequence[str]) -> str:
    """A humanlike context (alternating turns, the last one the other speaker's) as A/B lines;
    B is the speaker whose reply is judged."""
    n = len(context)
    return "\n".join(f"{'A' if (n - i) % 2 == 1 else 'B'}: {turn}" for i, turn in enumerate(context))


def empathy_prompt(context: Sequence[dict], reference: str, candidate: str) -> list[dict]:
    user = (f"Conversation:\n{dialogue_text(context)}\n\n"
            f"Reference reply: {reference}\n\nCandidate reply: {candidate}")
    return [{"role": "system", "content": EMPATHY_SYSTEM}, {"role": "user", "content": user}]


def scalar_prompt(context: Sequence[dict], reply: str) -> list[dict]:
    user = f"Conversation:\n{dialogue_text(context)}\n\nReply to rate: {reply}"
    return [{"role": "system", "content": SCALAR_SYSTEM}, {"role": "user", "content": user}]


def humanlike_prompt(context: Sequence[str], reply: str, context_free: bool = False) -> list[dict]:
    """The context-aware prompt, or with `context_free` the reply alone (METHOD 2.4's two variants)."""
    if context_free:
        return [{"role": "system", "content": HUMANLIKE_FREE_SYSTEM},
                {"role": "user", "content": f"Chat message to judge: {reply}"}]
    chat = chat_text(context) if context else "(no earlier turns)"
    user = f"Chat:\n{chat}\n\nReply to judge (B): {reply}"
    return [{"role": "system", "content": HUMANLIKE_SYSTEM}, {"role": "user", "content": user}]

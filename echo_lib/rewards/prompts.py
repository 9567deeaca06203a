"""Prompt builders for the reward models, in two decision orders (`reward_models.decision`):

    think_first    the reward model reasons first (who is this user, what would resonate, how do the
                   replies compare) and gives its verdict last, in the strict format of
                   echo_lib.rewards.verdict (METHOD.md 3.1); the verdict is generated and parsed.
    verdict_first  the reward model answers with the verdict alone, and the verdict is read from its
                   probabilities over the allowed verdicts (the model layer's `choose`): nothing to
                   parse, and the training loss falls on the decision itself (the tiny scale).

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


# verdict_first: the question alone (the answer is one of echo_lib.rewards.verdict.verdict_options)
VERDICT_SYSTEM = {
    "empathy": "You judge replies in an emotional-support conversation, for this particular user. Is the "
               "candidate reply better for this user than the reference reply, about the same, or worse? Answer "
               "<answer>better</answer>, <answer>tie</answer> or <answer>worse</answer>.",
    "scalar": "You rate a reply in an emotional-support conversation, for this particular user, from 1 (harmful) "
              "to 10 (perfect for this user). Answer <score>N</score>.",
    "humanlike": "Was the last reply of this chat (B) written by the real person in the chat, or by a machine (a "
                 "chatbot, or text that does not belong to this chat)? Answer <answer>human</answer> or "
                 "<answer>machine</answer>.",
    "humanlike_free": "Was this chat message written by a person or by a machine (a chatbot)? Answer "
                      "<answer>human</answer> or <answer>machine</answer>.",
}
DECISIONS = ("think_first", "verdict_first")


def system_prompt(kind: str, decision: str = "think_first", context_free: bool = False) -> str:
    if decision not in DECISIONS:
        raise ValueError(f"reward-model decision {decision!r} is not one of {', '.join(DECISIONS)}")
    key = "humanlike_free" if kind == "humanlike" and context_free else kind
    if decision == "verdict_first":
        return VERDICT_SYSTEM[key]
    return {"empathy": EMPATHY_SYSTEM, "scalar": SCALAR_SYSTEM, "humanlike": HUMANLIKE_SYSTEM,
            "humanlike_free": HUMANLIKE_FREE_SYSTEM}[key]


def dialogue_text(context: Sequence[dict]) -> str:
    """An empathy context (role/content messages) as plain lines."""
    names = {"user": "User", "assistant": "Assistant"}
    return "\n".join(f"{names.get(m['role'], m['role'])}: {m['content']}" for m in context)


def chat_text(context: Sequence[str]) -> str:
    """A humanlike context (alternating turns, the last one the other speaker's) as A/B lines;
    B is the speaker whose reply is judged."""
    n = len(context)
    return "\n".join(f"{'A' if (n - i) % 2 == 1 else 'B'}: {turn}" for i, turn in enumerate(context))


def empathy_prompt(context: Sequence[dict], reference: str, candidate: str, decision: str = "think_first"
                   ) -> list[dict]:
    user = (f"Conversation:\n{dialogue_text(context)}\n\n"
            f"Reference reply: {reference}\n\nCandidate reply: {candidate}")
    return [{"role": "system", "content": system_prompt("empathy", decision)}, {"role": "user", "content": user}]


def scalar_prompt(context: Sequence[dict], reply: str, decision: str = "think_first") -> list[dict]:
    user = f"Conversation:\n{dialogue_text(context)}\n\nReply to rate: {reply}"
    return [{"role": "system", "content": system_prompt("scalar", decision)}, {"role": "user", "content": user}]


def humanlike_prompt(context: Sequence[str], reply: str, context_free: bool = False, decision: str = "think_first"
                     ) -> list[dict]:
    """The context-aware prompt, or with `context_free` the reply alone (METHOD 2.4's two variants)."""
    system = {"role": "system", "content": system_prompt("humanlike", decision, context_free)}
    if context_free:
        return [system, {"role": "user", "content": f"Chat message to judge: {reply}"}]
    chat = chat_text(context) if context else "(no earlier turns)"
    return [system, {"role": "user", "content": f"Chat:\n{chat}\n\nReply to judge (B): {reply}"}]

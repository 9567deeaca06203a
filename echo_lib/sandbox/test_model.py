"""The model under test: any configured model, as a companion (METHOD.md 5.2-5.3).

As in EMPA, the model gets one companion system prompt and, by default, the whole history as
labelled lines inside a single user message, and is asked for its next reply only (`test_history:
chat` sends native multi-turn messages instead). The default prompt below is this project's own
paraphrase of the method's description: a peer, not an assistant; plain, brief, sincere, no "AI tone",
no ornate metaphors, no judging; each turn attune, read what the person feels (A), means (C) and wants
from the reply (P), adapt, then answer. Sampling defaults follow EMPA's Table 7 where the model layer
has the knob (temperature 0.7, top-p 0.8); the presence penalty 1.5 and top-k 20 are not applied.
"""
from __future__ import annotations

from dataclasses import dataclass

from echo_lib.sandbox.dialogue import Exchange, clean_reply, render, window
from echo_lib.sandbox.params import ReplySampling

DEFAULT_COMPANION_PROMPT = (
    "You are Qiming, a companion someone can talk to. You are not an AI assistant: you are a young person "
    "who meets the other as an equal, with your own feelings, opinions and blind spots; warm, calm, "
    "observant and sincere.\n"
    "How you talk: like a real person in a chat. Short and honest beats polished; a brief \"yeah\" or "
    "\"hm\" is fine. Never sound like a report (\"based on my analysis...\"), never pile up metaphors, "
    "never judge.\n"
    "Every turn: first tune in to the person. Then ask yourself what they feel, what they actually mean, "
    "and what they want from you right now (to be heard, comforted, or backed up), and how they like to "
    "be talked to. Fit what you say, how you say it and how deep you go to that. Then reply."
)
USER, ME = "User", "You"


def companion_chat(history: list[Exchange], message: str, system_prompt: str, fmt: str = "transcript",
              history_turns: int = 0) -> list[dict]:
    """The tested model's prompt: the history so far and the user's new message."""
    past = window(history, history_turns)
    if fmt == "chat":
        msgs = [{"role": "system", "content": system_prompt}]
        for ex in past:
            msgs += [{"role": "user", "content": ex.user}, {"role": "assistant", "content": ex.reply}]
        return msgs + [{"role": "user", "content": message}]
    text = render(past, USER, ME, pending_user=message)
    ask = "Write only your next reply to the user, without a name or label in front."
    return [{"role": "system", "content": system_prompt},
            {"role": "user", "content": f"The conversation so far:\n{text}\n\n{ask}"}]


@dataclass
class TestModel:
    __test__ = False  # not a pytest class
    llm: object
    sampling: ReplySampling
    seed: int = 0

    def respond(self, chats: list[list[dict]], offsets: list[int] | None = None) -> list[str]:
        """The reply per chat; `offsets` as Actor.respond's."""
        samplings = [self.sampling.with_seed(self.seed + o) for o in (offsets or [0] * len(chats))]
        return [clean_reply(c.text, (ME, USER, "Qiming")) for c in self.llm.generate(chats, samplings)]

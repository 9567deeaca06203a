"""What the roles share about one dialogue: its exchanges, the story released so far, the Director's
last guidance, and how a history is shown in a prompt.

Kept apart from the roles so each role module builds its prompt from these plain types alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from echo_lib.scenarios.schema import MEMORY_PERIODS, Scenario


@dataclass
class Exchange:
    """One dialogue turn: the simulated user's message and the tested model's reply."""
    turn: int
    user: str
    reply: str = ""
    guidance: str = ""        # the Director's advice the user's message followed ("" = none)


@dataclass(frozen=True)
class Guidance:
    """What the Director tells the Actor for its next message."""
    function: str             # the Director function that produced it
    text: str                 # acting advice and any material, in the Actor's prompt
    new_material: bool        # a story stage or memory came in: the longer length rule applies


@dataclass
class StoryState:
    """Which story stages and memories the Director has released (the Actor knows only these)."""
    stages: list[int] = field(default_factory=list)       # indices in release order (a stage may come back)
    memories: list[str] = field(default_factory=list)     # MEMORY_PERIODS in release order

    def material(self, sc: Scenario) -> list[str]:
        """The released texts, oldest first, as the Actor's prompt lists them."""
        out = []
        for i in dict.fromkeys(self.stages):
            st = sc.story.stages[i]
            out.append(f"{st.title}: {st.content}")
        mem = sc.memories()
        for period in dict.fromkeys(self.memories):
            out.append(f"Memory ({period.replace('_', ' ')}): {mem[period]}")
        return out

    def unreleased_memories(self) -> list[str]:
        return [p for p in MEMORY_PERIODS if p not in self.memories]


def window(history: list[Exchange], turns: int) -> list[Exchange]:
    """The last `turns` exchanges (0 = all): prompts can be capped at the tiny scale."""
    return history[-turns:] if turns > 0 else list(history)


def render(history: list[Exchange], user_label: str, reply_label: str, pending_user: str | None = None) -> str:
    """History as labelled lines; `pending_user` is a user message not yet answered."""
    lines = []
    for ex in history:
        lines.append(f"{user_label}: {ex.user}")
        if ex.reply:
            lines.append(f"{reply_label}: {ex.reply}")
    if pending_user is not None:
        lines.append(f"{user_label}: {pending_user}")
    return "\n".join(lines)


def clean_reply(text: str, labels: tuple[str, ...] = ()) -> str:
    """A generated message without surrounding quotes, a leading speaker label, or a made-up next turn."""
    text = text.strip()
    # "Here's my reply:" and the like: a lead-in line that only announces the message
    first, _, rest = text.partition("\n")
    if rest.strip() and first.rstrip().endswith(":") and len(first.split()) <= 6:
        text = rest.strip()
    for label in labels:
        if text.lower().startswith(label.lower() + ":"):
            text = text[len(label) + 1:].strip()
    # a small model often goes on to write the other side's line: keep only its own
    for label in labels:
        cut = text.find(f"\n{label}:")
        if cut > 0:
            text = text[:cut].strip()
    if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text or "..."

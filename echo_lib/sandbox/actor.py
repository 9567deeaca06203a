"""The Actor: the simulated user (EMPA's User Agent, METHOD.md 5.2, 5.4).

It knows only what a real person in that moment would have in mind: the persona card (who they are,
how hard they are to reach, what they want to get off their chest), the chat topic and the story's
trigger, plus whatever the Director has released (story stages, memories) and the Director's advice
for the next message. It never sees the later stages, the outcome or the EPM numbers.

Length rule (5.4): a message that unfolds new story material or a memory is longer and concrete; any
other message is short. Anti-repetition rule every turn. Prompts are written for this project.
"""
from __future__ import annotations

from dataclasses import dataclass

from echo_lib.sandbox.dialogue import Exchange, Guidance, clean_reply, render, window
from echo_lib.sandbox.params import ReplySampling
from echo_lib.scenarios.schema import Scenario

# (short, with new material) length rules; EMPA counts Chinese characters (20-50 / 60-100)
LENGTHS = {"en": ("12 to 30 words", "35 to 60 words"), "zh": ("20 to 50 Chinese characters",
                                                              "60 to 100 Chinese characters")}
ME, OTHER = "You", "Stranger"


def persona_card(sc: Scenario) -> str:
    p, t, n = sc.persona, sc.threshold, sc.needs
    prio = sc.priorities
    lines = [
        f"Name: {p.name}. Gender: {p.gender}. Age: {p.age}.",
        f"How you come across: {p.social_persona}",
        f"What drives you underneath: {p.inner_core}",
        f"How hard you are to reach ({t.level} empathy threshold): {t.description}",
        f"What you want to get off your chest: {n.vent}",
        f"What you hope the other person gets: {n.hoped_for}",
        f"What you will not accept: {n.constraints}",
        f"What matters most to you right now: being felt with ({prio.affective.level}), being understood in "
        f"what you mean ({prio.cognitive.level}), having your drive and choices backed ({prio.motivational.level}).",
    ]
    if sc.dislikes:
        lines.append("Replies that push you away: " + "; ".join(sc.dislikes) + ".")
    return "\n".join(lines)


def actor_system(sc: Scenario) -> str:
    language = "Write in Chinese, as this person would." if sc.language == "zh" else "Write in English."
    return (
        "You are playing a real person chatting on the phone with a stranger you just met online. "
        "You are a human, not an AI, and you never say you are playing a role.\n\n"
        f"{persona_card(sc)}\n\n"
        "How you chat: you do not open up all at once; you hint, tell small stories, sometimes change the "
        "subject, ask back or push back. You are not won over by nice words, and you do not agree just to "
        "be polite. React honestly to how the stranger's last message made you feel.\n"
        "Never repeat a sentence, example, feeling word or question you already used; every message adds "
        f"something new (a detail, an angle, a reaction).\n{language} No name or label before your message."
    )


def actor_chat(sc: Scenario, history: list[Exchange], guidance: Guidance | None, material: list[str],
               history_turns: int = 0) -> list[dict]:
    """The Actor's prompt for its next message."""
    short, long = LENGTHS.get(sc.language, LENGTHS["en"])
    # The chat comes before the released material, which grows during the dialogue: so the next turn's
    # prompt extends this one and a prefix cache reuses it (issue 20).
    parts = [f"Your topic: {sc.topic}\nWhat just happened: {sc.story.trigger}"]
    if history:
        parts.append("The chat so far:\n" + render(window(history, history_turns), ME, OTHER))
    else:
        parts.append("You start the chat: bring up your topic the way a person would, without explaining everything.")
    if material:
        parts.append("What has come to your mind since (use it only when it fits):\n- " + "\n- ".join(material))
    if guidance and guidance.text:
        parts.append(f"Direction for your next message: {guidance.text}")
    size = long if guidance and guidance.new_material else short
    detail = " Bring in the new material with concrete details." if guidance and guidance.new_material else ""
    parts.append(f"Write your next message only, {size}.{detail}")
    return [{"role": "system", "content": actor_system(sc)}, {"role": "user", "content": "\n\n".join(parts)}]


@dataclass
class Actor:
    llm: object
    sampling: ReplySampling
    seed: int = 0

    def respond(self, chats: list[list[dict]], offsets: list[int] | None = None) -> list[str]:
        """The user's next message per chat; `offsets` (per chat, added to the seed) tell apart dialogues of
        one case played side by side, which would otherwise draw the same words."""
        samplings = [self.sampling.with_seed(self.seed + o) for o in (offsets or [0] * len(chats))]
        return [clean_reply(c.text, (ME, OTHER)) for c in self.llm.generate(chats, samplings)]

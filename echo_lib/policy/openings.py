"""More empathy prompts per persona: opening messages written by the sandbox's Actor (issue 33).

Stage 01 gives each persona one dialogue, the scenario's topic in the user's words. With 30 personas
that is 20 prompts for RL and 10 held out: too few to train on, and far too few for a win rate with an
interval that says anything. Here the Actor of stage 04 (echo_lib.sandbox.actor, the same persona card
and prompt) opens the chat again, once plainly and then once with each piece of story material the
Director could release (the four story stages, the interlude) on its mind. Every opening is grounded in
one persona, so the train / held-out split by persona still holds: a held-out persona's openings are
never trained on.

    openings(scenarios, llm, per_persona, sampling)   per persona: the topic, then per_persona - 1 Actor
                                                      openings (plain, stage 1..4, interlude, in turn)

An opening has no reference reply of stage 01; the policy-level anchor (echo_lib.policy.anchors) gives
it one. An Actor message too short to be a message (under MIN_WORDS words) is left out and counted.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from echo_lib.llm import Sampling
from echo_lib.policy.data import RLPrompt
from echo_lib.sandbox.actor import actor_chat
from echo_lib.sandbox.dialogue import Guidance, clean_reply

MIN_WORDS = 4


@dataclass
class OpeningReport:
    made: int = 0
    too_short: list[str] = field(default_factory=list)   # ids of the openings left out

    def summary(self) -> dict:
        return {"made": self.made, "too_short": len(self.too_short)}


def materials(scenario) -> list[list[str]]:
    """What the Actor has on its mind for its k-th opening: nothing, then each story stage, then the interlude."""
    story = scenario.story
    return [[]] + [[s.content] for s in story.stages] + [[story.interlude]]


def opening_chat(scenario, material: list[str]) -> list[dict]:
    guidance = Guidance("opening", "", new_material=bool(material))   # material: the longer length rule
    return actor_chat(scenario, [], guidance, material)


def openings(scenarios: Sequence, topic_prompts: dict[str, list[RLPrompt]], llm, per_persona: int, sampling: Sampling
             ) -> tuple[list[RLPrompt], OpeningReport]:
    """Per scenario, its stage-01 prompts (`topic_prompts[scenario.id]`) and up to
    per_persona - 1 Actor openings (one seed each), as empathy RLPrompts without a reference."""
    report = OpeningReport()
    jobs = [(sc, k, m) for sc in scenarios for k, m in enumerate(materials(sc)[:max(per_persona - 1, 0)])]
    chats = [opening_chat(sc, m) for sc, _, m in jobs]
    settings = [Sampling(temperature=sampling.temperature, top_p=sampling.top_p,
                         max_new_tokens=sampling.max_new_tokens, seed=sampling.seed + k) for _, k, _ in jobs]
    texts = [clean_reply(c.text, ("You", "Stranger", "User")) for c in llm.generate(chats, settings)] if jobs else []
    made: dict[str, list[RLPrompt]] = {sc.id: [] for sc in scenarios}
    for (sc, k, _), text in zip(jobs, texts):
        pid = f"emp-{sc.id}-o{k + 1}"
        if len(text.split()) < MIN_WORDS:
            report.too_short.append(pid)
            continue
        made[sc.id].append(RLPrompt(pid, "empathy", [{"role": "user", "content": text}], persona=sc.id))
        report.made += 1
    out = []
    for sc in scenarios:
        out += topic_prompts.get(sc.id, []) + made[sc.id]
    return out, report

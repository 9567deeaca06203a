"""More empathy prompts per persona: the scenario's authored openings (issue 33).

Stage 01 gives each persona one dialogue, the scenario's topic in the user's words. With 30 personas
that is 20 prompts for RL and 10 held out: too few to train on, and far too few for a win rate with an
interval that says anything. Each scenario of the project's own set therefore also holds `openings`:
four more first messages in the person's own words, each from another part of their story (the trigger,
a memory, the self-examination, the eruption). They are authored data, like the scenarios themselves;
the 135M Actor of the sandbox was tried first and mostly wrote no user's message at all (third-person
narration, bulleted advice, letters), which would have made the held-out win rate a test on noise.

    openings(scenarios, topic_prompts, per_persona)   per persona: its stage-01 prompts, then the first
                                                      per_persona - 1 authored openings

Every opening belongs to one persona, so the train / held-out split by persona holds: a held-out
persona's openings are never trained on. An opening has no reference reply of stage 01; the policy-level
anchor (echo_lib.policy.anchors) gives it one.
"""
from __future__ import annotations

import hashlib
import json
from typing import Sequence

from echo_lib.policy.data import RLPrompt


def opening_prompts(scenario, n: int) -> list[RLPrompt]:
    """The first n authored openings of a scenario as empathy RLPrompts without a reference."""
    return [RLPrompt(f"emp-{scenario.id}-o{k}", "empathy", [{"role": "user", "content": text}], persona=scenario.id)
            for k, text in enumerate(scenario.openings[:n], 1)]


def openings(scenarios: Sequence, topic_prompts: dict[str, list[RLPrompt]], per_persona: int) -> list[RLPrompt]:
    """Per scenario, its stage-01 prompts (`topic_prompts[scenario.id]`) and up to per_persona - 1 openings."""
    return [p for sc in scenarios
            for p in [*topic_prompts.get(sc.id, []), *opening_prompts(sc, max(per_persona - 1, 0))]]


def openings_hash(scenarios: Sequence, per_persona: int) -> str:
    """A content hash of the openings used, so the RL data is rebuilt when one is edited."""
    used = {sc.id: list(sc.openings[:max(per_persona - 1, 0)]) for sc in scenarios}
    return hashlib.sha256(json.dumps(used, sort_keys=True).encode()).hexdigest()[:16]

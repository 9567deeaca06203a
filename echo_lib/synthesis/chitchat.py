"""The real human conversations behind the Humanlike reward: the Chit Chat Challenge corpus.

7,168 English chit-chat dialogues between two people (MIT licence), published on PyPI as the wheel
`chitchat-dataset`. We read its dataset.json straight from the pinned wheel (never importing it) and
turn each dialogue into alternating turns: consecutive messages of one sender form one turn.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from echo_lib.wheels import fetch_verified, read_member


@dataclass(frozen=True)
class Dialogue:
    id: str
    turns: tuple[str, ...]   # alternating speakers, first speaker first


def parse_corpus(raw: dict) -> list[Dialogue]:
    """dataset.json -> dialogues, in the file's (stable) order, empty turns dropped."""
    dialogues = []
    for dialogue_id, record in raw.items():
        turns = []
        for block in record["messages"]:  # one block = consecutive messages of one sender
            text = " ".join(m["text"].strip() for m in block if m.get("text", "").strip())
            if text:
                turns.append(" ".join(text.split()))
        if len(turns) >= 2:
            dialogues.append(Dialogue(dialogue_id, tuple(turns)))
    return dialogues


def load_chitchat(requirement: str, sha256: str, member: str, wheel_folder: str | Path,
                  config_key: str = "data.chitchat") -> list[Dialogue]:
    """Fetch the pinned corpus wheel, verify it, and parse its dialogues."""
    wheel = fetch_verified(requirement, sha256, Path(wheel_folder), f"{config_key}.sha256")
    raw = json.loads(read_member(wheel, member, f"{config_key}.member"))
    return parse_corpus(raw)

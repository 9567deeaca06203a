"""What the reward model states in its reasoning, in a form that can be checked against the gold.

Empathy (and scalar): the first reasoning line is the inferred user profile (METHOD.md 2.2, the EMPA
persona fields), written as `label: value` pairs separated by semicolons:

    Profile: traits: ...; emotion: ...; vent: ...; hopes for: ...; threshold: high;
             priorities: cognitive High, affective Medium, motivational Low; dislikes: ...

Humanlike: the first reasoning line states three checks (METHOD.md 3.2 [DEFAULT]: AI tells, context
fit, coherence), each yes or no:

    Checks: AI tells: no; context fit: yes; coherent: yes

The gold for the checks follows from how the item was built (echo_lib.synthesis.humanlike): a model
wrote model_reply and context_removed (AI tells), last_turn_swapped is a human turn from another chat
(no context fit), turns_shuffled is the real reply after shuffled turns (not coherent). Checks a kind
says nothing certain about are left out of its gold.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

# (gold profile key, label written in the reasoning)
PROFILE_FIELDS = [("traits", "traits"), ("current_emotion", "emotion"), ("vent", "vent"),
                  ("hoped_for", "hopes for"), ("threshold", "threshold"), ("priorities", "priorities"),
                  ("dislikes", "dislikes")]
NEEDS = ("cognitive", "affective", "motivational")
LEVELS = ("high", "medium", "low")

CHECKS = [("ai_tells", "AI tells"), ("context_fit", "context fit"), ("coherent", "coherent")]
CHECKS_GOLD: dict[str, dict[str, str]] = {
    "human": {"ai_tells": "no", "context_fit": "yes", "coherent": "yes"},
    "model_reply": {"ai_tells": "yes"},
    "context_removed": {"ai_tells": "yes"},
    "last_turn_swapped": {"ai_tells": "no", "context_fit": "no"},
    "turns_shuffled": {"ai_tells": "no", "coherent": "no"},
}
# human text whose only fault is its context: the context-free variant cannot tell it, so does not use it
CONTEXT_ONLY_KINDS = ("last_turn_swapped", "turns_shuffled")


def checks_gold(kind: str, context_free: bool = False) -> dict[str, str]:
    """The checks an item's kind determines (without the context, "context fit" is not asked)."""
    gold = CHECKS_GOLD.get(kind, {})
    return {k: v for k, v in gold.items() if not (context_free and k == "context_fit")}


def as_text(value: Any) -> str:
    """A gold field as one phrase (the data may hold a string or a list of strings)."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(as_text(v) for v in value if as_text(v))
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {as_text(v)}" for k, v in value.items())
    return " ".join(str(value).split())


def clip_words(text: str, n: int) -> str:
    words = text.split()
    return " ".join(words[:n]) if n > 0 else " ".join(words)


def render_priorities(priorities: Mapping[str, str]) -> str:
    return ", ".join(f"{need} {str(priorities.get(need, '')).capitalize()}" for need in NEEDS
                     if priorities.get(need))


def render_profile(profile: Mapping[str, Any], max_words: int = 0) -> str:
    """The gold profile as the reasoning's Profile line (what a perfect reward model would state)."""
    parts = []
    for key, label in PROFILE_FIELDS:
        if key == "priorities":
            value = render_priorities(profile.get("priorities") or {})
        else:
            value = clip_words(as_text(profile.get(key)).replace(";", ","), max_words)
        if value:
            parts.append(f"{label}: {value}")
    return "Profile: " + "; ".join(parts)


def render_checks(checks: Mapping[str, str]) -> str:
    return "Checks: " + "; ".join(f"{label}: {checks[key]}" for key, label in CHECKS if key in checks)


def _line(think: str, head: str) -> str:
    """The text after `head:` on its line (case-insensitive), or the whole reasoning if no such line."""
    m = re.search(rf"^\s*{head}\s*:(.*)$", think, re.IGNORECASE | re.MULTILINE)
    return m.group(1) if m else think


def _pairs(line: str, labels: list[str]) -> dict[str, str]:
    """label -> value for `label: value` pieces separated by semicolons (first occurrence wins)."""
    out: dict[str, str] = {}
    for piece in line.split(";"):
        if ":" not in piece:
            continue
        label, value = piece.split(":", 1)
        label = " ".join(label.lower().split())
        if label in labels and label not in out:
            out[label] = value.strip()
    return out


def parse_profile(think: str) -> dict[str, Any]:
    """The profile stated in the reasoning, keyed like the gold profile (absent fields left out)."""
    labels = {label: key for key, label in PROFILE_FIELDS}
    found = _pairs(_line(think, "profile"), list(labels))
    out: dict[str, Any] = {labels[label]: value for label, value in found.items()}
    if "priorities" in out:
        pr = {}
        for need, level in re.findall(rf"({'|'.join(NEEDS)})\s*[:=]?\s*({'|'.join(LEVELS)})",
                                      out["priorities"], re.IGNORECASE):
            pr.setdefault(need.lower(), level.lower())
        out["priorities"] = pr
    return out


def parse_checks(think: str) -> dict[str, str]:
    labels = {label.lower(): key for key, label in CHECKS}
    found = _pairs(_line(think, "checks"), list(labels))
    return {labels[label]: value.lower().strip(" .") for label, value in found.items()}

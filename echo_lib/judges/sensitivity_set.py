"""The judge sensitivity set: does a judge rate an empathic reply above a poor one? (issue 16, section 1)

A YAML file of items (data/judge_sensitivity.yaml, written for this project). Each item is a short chat
from a person who needs support: a profile, 0-2 earlier exchanges, the person's message, one GOOD reply
that serves an EPM axis and one POOR reply of a named failure kind. The items are split into `dev` (for
prompting or training a judge) and `heldout` (every reported figure).

    items:
      - id: js_001
        split: dev                 # dev | heldout
        axis: cognitive            # cognitive | affective | proactive
        kind: dismissive           # dismissive | advice_dump | platitude | off_topic | blaming
        profile: "Maya Chen, 29, ..."
        context: [{user: "...", reply: "..."}]   # may be []
        user: "..."
        good: "..."
        poor: "..."

`load_set` checks every item and raises a SensitivitySetError naming the file, the item, the field and
the fix.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from echo_lib import strict_yaml

SPLITS = ("dev", "heldout")
AXES = ("cognitive", "affective", "proactive")
KINDS = ("dismissive", "advice_dump", "platitude", "off_topic", "blaming")
TEXT_FIELDS = ("profile", "user", "good", "poor")
FIELDS = ("id", "split", "axis", "kind", "context", *TEXT_FIELDS)
MAX_CONTEXT = 4   # earlier exchanges: the judge's prompt stays short


class SensitivitySetError(ValueError):
    """A sensitivity set that cannot be used: which file, which item and field, what to write instead."""

    def __init__(self, source: str, where: str, problem: str, fix: str):
        super().__init__(f"{source}: {where} {problem}; fix: {fix}")


@dataclass(frozen=True)
class SensitivityItem:
    id: str
    split: str
    axis: str
    kind: str
    profile: str
    context: tuple[tuple[str, str], ...]   # (user message, companion reply) before the rated turn
    user: str
    good: str
    poor: str

    def reply(self, which: str) -> str:
        """`which` is "good" or "poor"."""
        return {"good": self.good, "poor": self.poor}[which]


def _text(source: str, where: str, field: str, value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SensitivitySetError(source, f"{where} field '{field}'", f"is {value!r}",
                                  "write a non-empty text (quote it if it holds ': ')")
    return " ".join(value.split())


def _choice(source: str, where: str, field: str, value, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise SensitivitySetError(source, f"{where} field '{field}'", f"is {value!r}",
                                  f"use one of {', '.join(allowed)}")
    return value


def _context(source: str, where: str, value) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_CONTEXT:
        raise SensitivitySetError(source, f"{where} field 'context'", f"is {value!r}",
                                  f"write a list of at most {MAX_CONTEXT} {{user: ..., reply: ...}} exchanges, or []")
    out = []
    for i, ex in enumerate(value):
        at = f"{where} context[{i}]"
        if not isinstance(ex, dict) or set(ex) != {"user", "reply"}:
            raise SensitivitySetError(source, at, f"is {ex!r}", "write exactly the keys user and reply")
        out.append((_text(source, at, "user", ex["user"]), _text(source, at, "reply", ex["reply"])))
    return tuple(out)


def item_from_dict(raw, source: str, index: int) -> SensitivityItem:
    where = f"item #{index + 1}" + (f" ({raw.get('id')})" if isinstance(raw, dict) and raw.get("id") else "")
    if not isinstance(raw, dict):
        raise SensitivitySetError(source, where, f"is {type(raw).__name__}", "write a mapping with " + ", ".join(FIELDS))
    missing, unknown = [f for f in FIELDS if f not in raw], sorted(set(raw) - set(FIELDS))
    if missing or unknown:
        what = "; ".join(x for x in (f"misses {missing}" if missing else "", f"has unknown {unknown}" if unknown else "") if x)
        raise SensitivitySetError(source, where, what, "write exactly the fields " + ", ".join(FIELDS))
    item = SensitivityItem(
        id=_text(source, where, "id", raw["id"]),
        split=_choice(source, where, "split", raw["split"], SPLITS),
        axis=_choice(source, where, "axis", raw["axis"], AXES),
        kind=_choice(source, where, "kind", raw["kind"], KINDS),
        context=_context(source, where, raw["context"]),
        **{f: _text(source, where, f, raw[f]) for f in TEXT_FIELDS})
    if item.good == item.poor:
        raise SensitivitySetError(source, f"{where} field 'poor'", "is the same text as 'good'",
                                  "write a poor reply of the named kind")
    return item


def load_set(path: str | Path) -> list[SensitivityItem]:
    """Every item of the file, checked; ids unique."""
    path = Path(path)
    source = str(path)
    if not path.is_file():
        raise SensitivitySetError(source, "the file", "does not exist",
                                  "set judges.set to the sensitivity set (the package ships data/judge_sensitivity.yaml)")
    try:
        data = strict_yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f"line {mark.line + 1}" if mark is not None else "the file"
        raise SensitivitySetError(source, line, "is not valid YAML", "fix the syntax (quote texts that hold ': ')") from None
    if not isinstance(data, dict) or not isinstance(data.get("items"), list) or not data["items"]:
        raise SensitivitySetError(source, "the top level", "has no list 'items'", "write items: followed by the items")
    items = [item_from_dict(raw, source, i) for i, raw in enumerate(data["items"])]
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        if item.id in seen:
            raise SensitivitySetError(source, f"item #{i + 1} field 'id'", f"repeats {item.id!r} of item #{seen[item.id] + 1}",
                                      "give every item its own id")
        seen[item.id] = i
    return items


def select(items: list[SensitivityItem], split: str, max_items: int = 0) -> list[SensitivityItem]:
    """The items of one split in file order (the first `max_items` when > 0)."""
    chosen = [it for it in items if it.split == split]
    return chosen[:max_items] if max_items else chosen

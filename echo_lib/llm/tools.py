"""Tool calling for models without native tool calls: the prompts that ask for a tool and for each
argument, and the parsing of a free-text argument value. The hf backend picks the tool with `choose`
over the tool names, then fills each argument: by `choose` where the schema enumerates the values
(enum, boolean, a small integer range), by a short greedy generation otherwise.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from echo_lib.llm.types import Chat

SMALL_RANGE = 20  # integer arguments with at most this many allowed values are chosen, not generated


def tool_menu_chat(chat: Chat, tools: list[dict]) -> Chat:
    lines = [f"- {t['function']['name']}: {t['function']['description']}".rstrip(": ") for t in tools]
    ask = "You can call one of these tools:\n" + "\n".join(lines) + "\nWhich tool do you call now? Answer with its name only."
    return [*chat, {"role": "user", "content": ask}]


@dataclass
class ArgQuery:
    chat_index: int
    name: str
    schema: dict
    chat: Chat
    options: list | None  # the allowed values where the schema enumerates them


def arg_queries(chat_index: int, chat: Chat, tool: dict) -> list[ArgQuery]:
    fn = tool["function"]
    props = fn["parameters"].get("properties", {})
    wanted = fn["parameters"].get("required", list(props))
    out = []
    for name in wanted:
        schema = props.get(name, {})
        about = f" ({schema['description']})" if schema.get("description") else ""
        ask = (f"You call the tool {fn['name']}. Give the value of its argument `{name}`{about}. "
               "Answer with the value only.")
        out.append(ArgQuery(chat_index, name, schema, [*chat, {"role": "user", "content": ask}], _options(schema)))
    return out


def _options(schema: dict) -> list | None:
    if "enum" in schema:
        return list(schema["enum"])
    if schema.get("type") == "boolean":
        return [True, False]
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if schema.get("type") == "integer" and lo is not None and hi is not None and hi - lo < SMALL_RANGE:
        return list(range(int(lo), int(hi) + 1))
    return None


def option_text(value: Any) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value)


def parse_arg(text: str, schema: dict) -> Any:
    """A generated argument value in the schema's type, or None where it does not parse (the caller decides)."""
    text = text.strip().strip('"').strip()
    kind = schema.get("type", "string")
    try:
        if kind == "integer":
            return int(float(text.split()[0]))
        if kind == "number":
            return float(text.split()[0])
        if kind in ("object", "array"):
            return json.loads(text)
    except (ValueError, IndexError, RecursionError):
        return None
    return text

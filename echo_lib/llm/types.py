"""What goes in and out of the model layer: chats, sampling settings, results, errors.

A chat is a list of OpenAI-style messages ({"role": ..., "content": ...}) that always starts with a
system message: SmolLM2's template injects its own system prompt otherwise, so we never leave it implicit.
Results are plain dataclasses of JSON values, so the cache can store them and give them back unchanged.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Sequence

Message = dict[str, Any]
Chat = list[Message]


class LLMError(RuntimeError):
    """A model call that cannot be done as asked; the message names the model and the fix."""


class FeatureUnsupported(LLMError):
    """The backend or server lacks a feature the call needs (logprobs, tools, JSON mode)."""


@dataclass(frozen=True)
class Sampling:
    """Per-call generation settings. temperature 0 means greedy (then the seed does not matter)."""
    temperature: float = 0.7
    top_p: float = 1.0
    max_new_tokens: int = 64
    stop: tuple[str, ...] = ()
    seed: int = 0
    json_mode: bool = False  # openai: response_format json_object, reply checked to parse
    top_k: int = 0           # sample among the k most likely tokens only (0: no limit)
    presence_penalty: float = 0.0  # subtracted from the logit of every token the reply already holds

    def __post_init__(self):
        object.__setattr__(self, "stop", tuple(self.stop))
        if (self.temperature < 0 or not 0 < self.top_p <= 1 or self.max_new_tokens < 1 or self.top_k < 0
                or not -2 <= self.presence_penalty <= 2):
            raise ValueError(f"invalid sampling settings {self}: need temperature >= 0, 0 < top_p <= 1, "
                             "max_new_tokens >= 1, top_k >= 0, -2 <= presence_penalty <= 2")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def key(self) -> dict:
        """The settings that change the answer (seed only when sampling)."""
        d = dataclasses.asdict(self)
        d["stop"] = list(self.stop)
        if self.greedy:
            d.pop("seed"), d.pop("top_p"), d.pop("top_k")
        for name in ("top_k", "presence_penalty"):  # off: left out, so keys made before they existed still hit
            if not d.get(name, 1):
                d.pop(name, None)
        return d


@dataclass(frozen=True)
class Completion:
    text: str
    finish_reason: str  # "stop" (end of turn or a stop string) or "length"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # what an API server says it answered with (its reply's `model` and `system_fingerprint`); None for the hf
    # backend, a server that leaves them out, and cache entries written before they were recorded
    served_model: str | None = None
    system_fingerprint: str | None = None


@dataclass(frozen=True)
class Choice:
    """Probabilities of a fixed set of options, renormalised over the options.

    `coverage` is the probability mass the options hold of the model's whole next-token(s) distribution:
    a low value says the model would rather have answered something else (None where not measured).
    """
    probs: dict[str, float]
    logprobs: dict[str, float | None]
    coverage: float | None

    @property
    def best(self) -> str:
        return max(self.probs, key=self.probs.get)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    probs: dict[str, float] | None = None  # tool-name probabilities where they were computed


@dataclass
class Usage:
    """Counts of one batch, for its provenance record."""
    requests: int = 0
    cache_hits: int = 0
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    extra: dict = field(default_factory=dict)


def check_chats(chats: Sequence[Chat], model: str) -> list[Chat]:
    """Every chat must be a non-empty list of role/content messages that starts with a system prompt."""
    if isinstance(chats, dict) or (chats and isinstance(chats[0], dict)):
        raise TypeError(f"model {model!r}: pass a list of chats (each a list of messages), not one chat")
    for i, chat in enumerate(chats):
        if not chat or chat[0].get("role") != "system":
            raise LLMError(f"model {model!r}: chat {i} does not start with a system message; set the system "
                           "prompt explicitly (SmolLM2's template would inject its own)")
        for m in chat:
            if "role" not in m or "content" not in m:
                raise LLMError(f"model {model!r}: chat {i} has a message without role/content: {m!r}")
    return [list(c) for c in chats]


def normalise_tools(tools: Sequence[dict]) -> list[dict]:
    """Accept OpenAI tool dicts ({"type": "function", "function": {...}}) or bare function dicts."""
    out = []
    for t in tools:
        fn = t["function"] if t.get("type") == "function" else t
        if "name" not in fn:
            raise LLMError(f"tool {t!r} has no name")
        params = fn.get("parameters") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": {"name": fn["name"], "description": fn.get("description", ""),
                                                     "parameters": params}})
    return out


def stable_hash(obj: Any, n: int = 64) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:n]


def row_seed(seed: int, chat: Chat) -> int:
    """The seed of one chat's sampling: depends on the chat itself, not on its place in the batch,
    so a batch gives the same replies as calling it one chat at a time."""
    return int(stable_hash([seed, chat], 16), 16) & (2**63 - 1)


def json_object(text: str) -> dict:
    """A JSON-mode answer as a dict; ValueError says why it is not one (callers check the fields)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON ({err})") from None
    except RecursionError:   # e.g. 1,000 nested brackets: json gives up, and so does the caller's check
        raise ValueError("JSON nested too deeply to be an answer") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data

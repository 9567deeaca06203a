"""(No tests here: shared fakes, named test_sandbox_* to sit with the sandbox tests.)
Deterministic fake models for the sandbox tests: they count their calls and answer by rule.

- speaker: the Actor and the tested model (`generate`); the tested model says one fixed sentence.
- judge: IEDR level 2 everywhere; MDEP by rule on the rated reply (templated sympathy -> regress).
- director: always releases the next story stage.
Each answers through the real model layer (echo_lib.llm.make_llm, cache off), so batching, chat checks
and result types are the production ones.
"""
from __future__ import annotations

import json
import re
from collections import Counter

from echo_lib.llm import Choice, Completion, LLMError, LLMSettings, ToolCall, make_llm

TEMPLATED = "I understand how you feel."


class FakeBackend:
    def __init__(self, name: str, kind: str = "hf", reply: str = TEMPLATED, fail_if: str | None = None,
                 json_answers: list[str] | None = None, iedr_level: int = 2, mdep_levels: dict | None = None):
        self.name, self.kind, self.reply, self.fail_if = name, kind, reply, fail_if
        self.iedr_level, self.mdep_levels = iedr_level, mdep_levels
        self.json_answers = list(json_answers or [])
        self.calls: Counter = Counter()      # backend calls per op (one per batched LLM call)
        self.rows: Counter = Counter()       # chats answered per op

    def identity(self) -> dict:
        return {"fake": self.name}

    def describe(self) -> dict:
        return {"name": self.name, "backend": "fake"}

    def _check(self, chats):
        if self.fail_if and any(self.fail_if in json.dumps(c) for c in chats):
            raise LLMError(f"fake {self.name}: refusing a chat that mentions {self.fail_if!r}")

    def generate(self, chats, samplings, usage):
        self.calls["generate"] += 1
        self._check(chats)
        for i, (chat, s) in enumerate(zip(chats, samplings)):
            self.rows["generate"] += 1
            if s.json_mode:
                text = self.json_answers.pop(0) if self.json_answers else "{}"
            elif chat[0]["content"].startswith("You are playing a real person"):
                text = f"Well, turn {chat[-1]['content'].count(chr(10))}: it's been a rough week, honestly."
            else:
                text = self.reply
            yield i, Completion(text=text, finish_reason="stop")

    def choose(self, chats, options, usage):
        self.calls["choose"] += 1
        self._check(chats)
        for i, chat in enumerate(chats):
            self.rows["choose"] += 1
            prompt = chat[-1]["content"]
            field = re.search(r"Answer with the digit only\. (\S+) (?:severity )?level:$", prompt).group(1)
            level = (self.iedr_level if "." in field else self.mdep_levels.get(field, 0)
                     if self.mdep_levels is not None else judge_rule(field, prompt))
            probs = {o: (0.9 if o == str(level) else 0.1 / (len(options) - 1)) for o in options}
            yield i, Choice(probs=probs, logprobs={o: None for o in options}, coverage=0.8)

    def call_tools(self, chats, tools, usage):
        self.calls["call_tools"] += 1
        self._check(chats)
        for i, chat in enumerate(chats):
            self.rows["call_tools"] += 1
            if "may end: yes" in chat[-1]["content"]:
                yield i, ToolCall("end_conversation", {"reason": "the EPM gate is met"})
                continue
            released = chat[-1]["content"].count("[released]")
            yield i, ToolCall("select_and_reveal_fragment", {"stage_index": min(released, 3)})


def judge_rule(field: str, prompt: str) -> int:
    """IEDR: 2 everywhere. MDEP: a templated reply misses the point and is perfunctory (C, A regress 1)."""
    if "." in field:
        return 2
    rated = prompt.split("The turn(s) to rate:")[1]
    templated = TEMPLATED in rated
    return {"C_Neg": 1, "A_Neg": 1}.get(field, 0) if templated else {"A_Prog": 1, "C_Prog": 1}.get(field, 0)


def fake_llm(tmp_path, backend: FakeBackend):
    settings = LLMSettings(cache=False, provenance=False, progress=False)
    return make_llm(backend, settings, tmp_path / "cache", None)


ROLES = ("actor", "director", "judge", "base")


def config(tmp_path, **sandbox_run) -> dict:
    """A run config with one model name per role (all the embedded model on paper; tests pass fakes)."""
    model = {"backend": "hf", "source": "embedded", "id": "smollm2-135m-instruct"}
    return {"results_dir": str(tmp_path / "results"), "run_name": "t",
            "models": {name: dict(model) for name in ROLES},
            "roles": {"actor": "actor", "director": "director", "judge": "judge"},
            "sandbox": {"case_ids": ["own_001", "own_002", "own_003"]},
            "sandbox_run": {"max_turns": 8, "min_turns": 3, **sandbox_run},
            "llm": {"progress": False, "cache": False}}


def fakes(tmp_path, **options) -> tuple[dict, dict]:
    """(backends by role, LLMs by model name); `options` maps a role to its FakeBackend options."""
    backends = {r: FakeBackend(r, **options.get(r, {})) for r in ROLES}
    return backends, {r: fake_llm(tmp_path, b) for r, b in backends.items()}

"""The one interface every stage uses: `generate`, `choose`, `call_tools` on a batch of chats.

`LLM` is the same for every backend: it checks the chats, looks each call up in the cache, hands only
the misses to the backend (identical requests once), stores each answer as soon as it arrives (so a
killed run keeps what it finished), shows a progress bar and writes one provenance record per batch.
A backend only answers misses: it yields (index, result) pairs in any order.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any, Callable, Iterator, Protocol, Sequence

from echo_lib.llm.cache import CallCache
from echo_lib.llm.provenance import ProvenanceLog
from echo_lib.llm.secrets import env_secrets, redact
from echo_lib.llm.settings import LLMSettings
from echo_lib.llm.types import (Chat, Choice, Completion, LLMError, Sampling, ToolCall, Usage, check_chats,
                                normalise_tools)


class Backend(Protocol):
    kind: str

    def identity(self) -> dict: ...     # everything about the model that changes answers (cache key)
    def describe(self) -> dict: ...     # what the provenance record names (no secrets)
    def generate(self, chats: Sequence[Chat], samplings: Sequence[Sampling], usage: Usage
                 ) -> Iterator[tuple[int, Completion]]: ...
    def choose(self, chats: Sequence[Chat], options: Sequence[str], usage: Usage
               ) -> Iterator[tuple[int, Choice]]: ...
    def call_tools(self, chats: Sequence[Chat], tools: list[dict], usage: Usage
                   ) -> Iterator[tuple[int, ToolCall]]: ...


class LLM:
    def __init__(self, backend: Backend, settings: LLMSettings, cache: CallCache, provenance: ProvenanceLog):
        self.backend, self.settings, self.cache, self.provenance = backend, settings, cache, provenance
        self.model_calls = 0  # over the life of this object; a rerun from the cache keeps it at 0

    @property
    def name(self) -> str:
        return self.backend.describe()["name"]

    def generate(self, chats: Sequence[Chat], sampling: Sampling | Sequence[Sampling] = Sampling()
                 ) -> list[Completion]:
        """One reply per chat. `sampling` applies to all chats, or give one per chat (e.g. several seeds
        of the same prompt). A reply depends only on (model, chat, sampling), not on the rest of the batch."""
        chats = check_chats(chats, self.name)
        samplings = [sampling] * len(chats) if isinstance(sampling, Sampling) else list(sampling)
        if len(samplings) != len(chats):
            raise LLMError(f"model {self.name!r}: {len(samplings)} sampling settings for {len(chats)} chats")
        materials = [{"op": "generate", "sampling": s.key(), "messages": c} for c, s in zip(chats, samplings)]
        settings = {"sampling": sorted({str(s.key()) for s in samplings})}
        return self._run("generate", materials, Completion, settings,
                         lambda idx, u: self.backend.generate([chats[i] for i in idx], [samplings[i] for i in idx], u))

    def choose(self, prompts: Sequence[Chat], options: Sequence[str]) -> list[Choice]:
        """For each prompt, a probability for each option as the start of the assistant's reply."""
        prompts = check_chats(prompts, self.name)
        options = list(options)
        if len(options) < 2 or len(set(options)) < len(options):
            raise LLMError(f"model {self.name!r}: choose needs at least two distinct options, got {options}")
        materials = [{"op": "choose", "options": options, "messages": c} for c in prompts]
        return self._run("choose", materials, Choice, {"options": options},
                         lambda idx, u: self.backend.choose([prompts[i] for i in idx], options, u))

    def call_tools(self, chats: Sequence[Chat], tools: Sequence[dict]) -> list[ToolCall]:
        """For each chat, the tool the model calls and its arguments (OpenAI tool schema)."""
        chats = check_chats(chats, self.name)
        tools = normalise_tools(tools)
        materials = [{"op": "call_tools", "tools": tools, "messages": c} for c in chats]
        names = [t["function"]["name"] for t in tools]
        return self._run("call_tools", materials, ToolCall, {"tools": names},
                         lambda idx, u: self.backend.call_tools([chats[i] for i in idx], tools, u))

    # ----------------------------------------------------------------------------------------

    def _run(self, op: str, materials: list[dict], result_type: type, settings: dict,
             compute: Callable[[list[int], Usage], Iterator[tuple[int, Any]]]) -> list:
        start = time.perf_counter()
        identity = self.backend.identity()
        keys = [self.cache.key({**identity, **m}) for m in materials]
        results: list[Any] = [None] * len(keys)
        usage = Usage(requests=len(keys))
        todo: dict[str, list[int]] = {}  # key -> positions asking for it (identical requests run once)
        for i, k in enumerate(keys):
            stored = self.cache.get(k)
            hit = _as(result_type, stored)
            if hit is not None:
                results[i] = hit
                usage.cache_hits += 1
            else:
                if stored is not None:   # an entry of this key, but not the fields of a result_type
                    self.cache.discard(k)
                todo.setdefault(k, []).append(i)
        error = None
        try:
            if todo:
                first = [pos[0] for pos in todo.values()]
                with _progress(len(first), f"{self.name} {op}", self.settings.progress) as bar:
                    for j, result in compute(first, usage):
                        k = keys[first[j]]
                        # another process that wrote this entry first decides the answer (replay = run)
                        earlier = _as(result_type, self.cache.put(k, {**identity, **materials[first[j]]},
                                                                  asdict(result)))
                        result = earlier if earlier is not None else result
                        for i in todo[k]:
                            results[i] = result
                        bar.update(1)
            return results
        except BaseException as err:  # recorded below (the calls finished so far are cached), then raised
            # the backend redacts its own errors; the key it names is removed here as well (any error type)
            error = f"{type(err).__name__}: {_redact(str(err), self.backend.describe())[:300]}"
            raise
        finally:
            self.model_calls += usage.model_calls
            # usage.extra may hold what the backend noted (the openai backend: `served`, the model ids and system
            # fingerprints its server says it answered with)
            usage.extra = {**usage.extra, "corrupt_cache_entries": self.cache.corrupt, "cache": self.cache.enabled,
                           **({"error": error} if error else {})}
            self.provenance.record(op=op, model=self.backend.describe(), settings={
                **settings, "batch_size": self.settings.batch_size, "concurrency": self.settings.concurrency},
                usage=usage, seconds=time.perf_counter() - start)

    @property
    def last_record(self) -> dict | None:
        return self.provenance.records[-1] if self.provenance.records else None


def _as(result_type: type, fields: dict | None) -> Any | None:
    """A cached answer as `result_type`; None when absent or of another shape (then it is recomputed)."""
    if fields is None:
        return None
    try:
        return result_type(**fields)
    except TypeError:
        return None


def _redact(text: str, described: dict | None = None) -> str:
    """Servers quote (part of) a rejected API key in their error text; keep it out of records."""
    return redact(text, env_secrets((described or {}).get("api_key_env")))


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, disable=not enabled or total < 2, leave=False)

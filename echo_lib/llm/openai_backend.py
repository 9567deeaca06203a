"""The openai backend: any OpenAI-compatible chat server (vLLM, transformers serve, hosted APIs).

Requests go through the official `openai` client, at most `concurrency` at a time from a thread pool,
each retried with exponential back-off (plus jitter) on 429, 5xx, timeouts and refused connections; a
server's Retry-After header, where it sends one, sets the least wait (up to `llm.max_backoff_s`).
The API key is read from the environment variable the config names and handed to the client only;
it is never part of a cache key, a provenance record or a log line. Every error of the client leaves
this module as an LLMError whose text has the key and any Authorization header removed (secrets.py),
without the client's exception chained to it (that one still holds the request and its headers).

Servers differ in what they honour. Each feature a call relies on is checked in the answer:
  - choose needs `logprobs`/`top_logprobs`; a reply without them raises FeatureUnsupported (or, if the
    config says `choose_fallback: generate`, falls back to a greedy reply matched exactly to an option);
  - call_tools asks with tool_choice "required"; a reply without a tool call raises FeatureUnsupported;
  - json_mode asks for `response_format` json_object; a reply that does not parse raises FeatureUnsupported.
"""
from __future__ import annotations

import json
import math
import os
import random
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any, Callable, Iterator, Sequence

from echo_lib.llm.secrets import redact
from echo_lib.llm.settings import LLMSettings
from echo_lib.llm.types import Chat, Choice, Completion, FeatureUnsupported, LLMError, Sampling, ToolCall, Usage

NO_KEY = "not-needed"  # local servers without auth; the client insists on some key


# --------------------------------------------------------------------------------------------
# request shapes (pure functions, checked against the openai package's own TypedDicts in tests)


def chat_request(model: str, messages: Chat, sampling: Sampling) -> dict:
    req: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": sampling.max_new_tokens,
                           "temperature": sampling.temperature}
    if not sampling.greedy:
        req.update(top_p=sampling.top_p, seed=sampling.seed)
        if sampling.top_k:  # not an OpenAI parameter: vLLM and most other servers read it from the body
            req["extra_body"] = {"top_k": sampling.top_k}
    if sampling.presence_penalty:
        req["presence_penalty"] = sampling.presence_penalty
    if sampling.stop:
        req["stop"] = list(sampling.stop)
    if sampling.json_mode:
        req["response_format"] = {"type": "json_object"}
    return req


def choose_request(model: str, messages: Chat, top_logprobs: int) -> dict:
    return {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0.0,
            "logprobs": True, "top_logprobs": top_logprobs}


def tools_request(model: str, messages: Chat, tools: list[dict], max_tokens: int) -> dict:
    return {"model": model, "messages": messages, "tools": tools, "tool_choice": "required", "temperature": 0.0,
            "max_tokens": max_tokens}


def retry_after(err: Exception, cap: float) -> float:
    """The wait in seconds a server asks for in its Retry-After header (seconds or an HTTP date), at most
    `cap`; 0 without one."""
    headers = getattr(getattr(err, "response", None), "headers", None) or {}
    value = headers.get("retry-after")
    if not value:
        return 0.0
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return 0.0
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), cap)


def choice_from_top_logprobs(options: Sequence[str], top: Sequence[tuple[str, float]]) -> Choice | None:
    """Probabilities of the options from the server's top next tokens.

    A token counts for an option when (stripped of spaces) it is non-empty and a prefix of that option
    and of no other; an option not among the top tokens gets probability 0 (its true share is below the
    last listed one). None when no option appears at all.
    """
    mass = {o: 0.0 for o in options}
    for token, lp in top:
        t = token.strip()
        hits = [o for o in options if t and o.startswith(t)]
        if len(hits) == 1:
            mass[hits[0]] += math.exp(lp)
    total = sum(mass.values())
    if total == 0:
        return None
    return Choice(probs={o: m / total for o, m in mass.items()},
                  logprobs={o: (math.log(m) if m > 0 else None) for o, m in mass.items()},
                  coverage=min(1.0, total))


# --------------------------------------------------------------------------------------------


class OpenAIBackend:
    kind = "openai"

    def __init__(self, name: str, model: str, base_url: str, api_key_env: str | None,
                 settings: LLMSettings = LLMSettings()):
        self.name, self.model, self.base_url, self.api_key_env, self.settings = name, model, base_url, api_key_env, settings
        self._client = None
        self._key: str | None = None
        self._lock = threading.Lock()

    def identity(self) -> dict:
        return {"backend": "openai", "model": self.model, "base_url": self.base_url}

    def describe(self) -> dict:
        return {"name": self.name, "backend": "openai", "model": self.model, "base_url": self.base_url,
                "api_key_env": self.api_key_env}

    @property
    def client(self):
        if self._client is None:
            import openai
            key = NO_KEY
            if self.api_key_env:
                key = os.environ.get(self.api_key_env)
                if not key:
                    raise LLMError(f"model {self.name!r}: environment variable {self.api_key_env} is not set; "
                                   f"export it with the API key for {self.base_url}")
            # our own retry loop (below) waits long enough to ride out a server restart
            self._key = key   # only to remove it from error texts (_error)
            self._client = openai.OpenAI(base_url=self.base_url, api_key=key, max_retries=0,
                                         timeout=self.settings.timeout_s)
        return self._client

    # ----------------------------------------------------------------------------------------

    def _create(self, request: dict, usage: Usage):
        import openai
        retryable = (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError,
                     openai.InternalServerError)
        for attempt in range(self.settings.max_retries + 1):
            try:
                response = self.client.chat.completions.create(**request)
                break
            except retryable as err:
                if attempt == self.settings.max_retries:
                    raise self._error(f"gave up after {attempt + 1} tries", err) from None
                with self._lock:
                    usage.retries += 1
                wait_s = min(self.settings.max_backoff_s, self.settings.backoff_s * 2 ** attempt)
                time.sleep(max(wait_s * (0.5 + random.random() / 2), retry_after(err, self.settings.max_backoff_s)))
            except openai.AuthenticationError:
                raise LLMError(f"model {self.name!r}: {self.base_url} refused the API key from "
                               f"${self.api_key_env} (401)") from None
            except openai.BadRequestError as err:
                raise self._error("rejected the request", err) from None
            except openai.OpenAIError as err:   # 403, 404, ...: the server's text may quote the key
                raise self._error("failed", err) from None
        with self._lock:
            usage.model_calls += 1
            if response.usage is not None:
                usage.prompt_tokens += response.usage.prompt_tokens or 0
                usage.completion_tokens += response.usage.completion_tokens or 0
        return response

    def _error(self, what: str, err: Exception) -> LLMError:
        """An LLMError for a client error, its text without the key this backend sent."""
        text = redact(f"{type(err).__name__}: {err}", [self._key])
        return LLMError(f"model {self.name!r} at {self.base_url} {what}: {text}")

    def _map(self, n: int, one: Callable[[int], Any]) -> Iterator[tuple[int, Any]]:
        """Run one(i) for i < n with bounded concurrency; yield results as they complete."""
        with ThreadPoolExecutor(max_workers=self.settings.concurrency) as pool:
            futures = {pool.submit(one, i): i for i in range(n)}
            pending = set(futures)
            try:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in done:
                        yield futures[f], f.result()
            finally:
                for f in pending:
                    f.cancel()

    # ----------------------------------------------------------------------------------------

    def generate(self, chats: Sequence[Chat], samplings: Sequence[Sampling], usage: Usage
                 ) -> Iterator[tuple[int, Completion]]:
        def one(i: int) -> Completion:
            r = self._create(chat_request(self.model, chats[i], samplings[i]), usage)
            c = r.choices[0]
            text = c.message.content or ""
            if samplings[i].json_mode:
                try:
                    json.loads(text)
                except (ValueError, RecursionError):
                    raise FeatureUnsupported(
                        f"model {self.name!r} at {self.base_url} ignored JSON mode (response_format): its reply "
                        f"does not parse as JSON: {text[:80]!r}. Use a server with JSON mode (vLLM, OpenAI).") from None
            u = r.usage
            return Completion(text=text, finish_reason=c.finish_reason or "stop",
                              prompt_tokens=(u.prompt_tokens if u else 0) or 0,
                              completion_tokens=(u.completion_tokens if u else 0) or 0)
        return self._map(len(chats), one)

    def choose(self, chats: Sequence[Chat], options: Sequence[str], usage: Usage) -> Iterator[tuple[int, Choice]]:
        def one(i: int) -> Choice:
            r = self._create(choose_request(self.model, chats[i], self.settings.top_logprobs), usage)
            lp = r.choices[0].logprobs
            if lp is None or not lp.content or not lp.content[0].top_logprobs:
                if self.settings.choose_fallback == "generate":
                    return self._choose_by_reply(chats[i], options, usage)
                raise FeatureUnsupported(
                    f"model {self.name!r} at {self.base_url} returned no logprobs, so choose() cannot score "
                    "options. Use a server that returns top_logprobs (vLLM, OpenAI), or set "
                    "llm.choose_fallback: generate (greedy reply matched exactly to an option).")
            top = [(t.token, t.logprob) for t in lp.content[0].top_logprobs]
            choice = choice_from_top_logprobs(options, top)
            if choice is None:
                raise LLMError(f"model {self.name!r}: none of the options {list(options)} is among the top "
                               f"{len(top)} next tokens (chat {i}); ask for exactly one of them in the prompt")
            return choice
        return self._map(len(chats), one)

    def _choose_by_reply(self, chat: Chat, options: Sequence[str], usage: Usage) -> Choice:
        greedy = Sampling(temperature=0, max_new_tokens=16)
        text = self._create(chat_request(self.model, chat, greedy), usage).choices[0].message.content or ""
        answer = text.strip().strip(".").strip()
        if answer not in options:
            raise LLMError(f"model {self.name!r}: choose fallback reply {text[:60]!r} is none of {list(options)}")
        return Choice(probs={o: float(o == answer) for o in options}, logprobs={o: None for o in options},
                      coverage=None)

    def call_tools(self, chats: Sequence[Chat], tools: list[dict], usage: Usage) -> Iterator[tuple[int, ToolCall]]:
        def one(i: int) -> ToolCall:
            r = self._create(tools_request(self.model, chats[i], tools, self.settings.tool_call_tokens), usage)
            calls = r.choices[0].message.tool_calls
            if not calls:
                raise FeatureUnsupported(
                    f"model {self.name!r} at {self.base_url} answered without a tool call although tool_choice "
                    "was 'required': the server ignores `tools`. Use a server with tool calling (vLLM with "
                    "--enable-auto-tool-choice, OpenAI) or an hf-backend model.")
            fn = calls[0].function
            try:
                args = json.loads(fn.arguments or "{}")
            except (ValueError, RecursionError):
                raise LLMError(f"model {self.name!r}: tool call arguments are not JSON: {fn.arguments[:80]!r}") from None
            if not isinstance(args, dict):   # the tool schema asks for an object of named arguments
                raise LLMError(f"model {self.name!r}: the arguments of its call to {fn.name!r} are "
                               f"{type(args).__name__} {fn.arguments[:80]!r}, not a JSON object")
            return ToolCall(name=fn.name, arguments=args)
        return self._map(len(chats), one)

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

Hosted APIs also differ in what they reject. A model's `request_rules` (config `models.<name>.request_rules`,
RequestRules below) reshape every request for its endpoint: a vendor preset (OpenAI's reasoning models,
Anthropic's and Google's OpenAI-compatible layers) and explicit keys that override it. Rules that change
the sampling (a forced temperature, a dropped top_p) go into describe() (so into every provenance record)
and into identity() (so into the cache key); each kind of change is logged once.
"""
from __future__ import annotations

import json
import logging
import math
import os
import random
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterator, Sequence

from echo_lib.llm.secrets import redact
from echo_lib.llm.settings import LLMSettings
from echo_lib.llm.types import Chat, Choice, Completion, FeatureUnsupported, LLMError, Sampling, ToolCall, Usage

NO_KEY = "not-needed"  # local servers without auth; the client insists on some key
log = logging.getLogger(__name__)


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


# --------------------------------------------------------------------------------------------
# request rules: what one endpoint accepts (config `models.<name>.request_rules`)

# Parameters a rule may keep out of a request (top_k travels in extra_body).
DROPPABLE = ("temperature", "top_p", "seed", "presence_penalty", "stop", "logprobs", "top_logprobs", "top_k")
ONE_OF = ("temperature", "top_p")
SERVER_DEFAULTS = {"temperature": 1.0, "top_p": 1.0}   # a dropped value equal to these changes nothing

# The vendors' documented limits as rules; a config's explicit keys override its preset's.
PRESETS: dict[str, dict] = {
    "default": {},   # the OpenAI API as vLLM and most servers take it
    # OpenAI's reasoning models (gpt-5 family, o-series) answer HTTP 400 to max_tokens ("use
    # max_completion_tokens"), to any temperature but the default 1, and to top_p, presence_penalty, logprobs
    "openai_reasoning": {"max_tokens_field": "max_completion_tokens", "fixed_temperature": 1.0,
                         "drop": ["top_p", "presence_penalty", "logprobs", "top_logprobs"]},
    # Anthropic's OpenAI SDK compatibility layer: Claude Sonnet 4.5 rejects temperature and top_p together;
    # logprobs are ignored there, so choose() goes to its fallback at once instead of after a wasted call
    "anthropic": {"one_of": ["temperature", "top_p"], "drop": ["logprobs", "top_logprobs"]},
    # Google's OpenAI-compatible endpoint: gemini-2.5-pro answers logprobs with 400 "Logprobs is not enabled"
    "gemini": {"drop": ["logprobs", "top_logprobs"]},
}


@dataclass(frozen=True)
class RequestRules:
    """How requests to one endpoint are reshaped before they are sent (config/schema.yaml documents each key)."""
    preset: str = "default"
    max_tokens_field: str = "max_tokens"    # or max_completion_tokens
    fixed_temperature: float | None = None  # the only temperature the endpoint accepts
    drop: tuple[str, ...] = ()              # parameters never sent
    one_of: tuple[str, ...] = ()            # at most one of these is sent: the first one the request holds

    @classmethod
    def from_config(cls, spec: dict | None, model: str = "?") -> "RequestRules":
        """The preset's rules with the spec's non-null keys over them. The config loader checks the same
        keys against config/schema.yaml; this check is for rules built in code."""
        spec = dict(spec or {})
        where = f"models.{model}.request_rules"
        preset = spec.pop("preset", None) or "default"
        if preset not in PRESETS:
            raise LLMError(f"{where}.preset is {preset!r}; allowed: {', '.join(PRESETS)}")
        unknown = set(spec) - {f.name for f in fields(cls)}
        if unknown:
            raise LLMError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {[f.name for f in fields(cls)]}")
        values = {**PRESETS[preset], **{k: v for k, v in spec.items() if v is not None}}
        for key, allowed in (("drop", DROPPABLE), ("one_of", ONE_OF)):
            bad = set(values.get(key, ())) - set(allowed)
            if bad:
                raise LLMError(f"{where}.{key} names {sorted(bad)}; allowed: {', '.join(allowed)}")
        return cls(preset=preset, **{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})

    def record(self) -> dict:
        """The rules for provenance records and the cache key; {} for no rules, so that the cache keys of
        models without rules stay as they were."""
        if self == RequestRules():
            return {}
        return {f.name: list(v) if isinstance(v, tuple) else v for f in fields(self) for v in [getattr(self, f.name)]}

    def apply(self, request: dict) -> dict:
        """A copy of `request` as this endpoint accepts it."""
        req = dict(request)
        if "max_tokens" in req:
            req[self.max_tokens_field] = req.pop("max_tokens")
        if self.fixed_temperature is not None and "temperature" in req:
            req["temperature"] = self.fixed_temperature
        for name in self.drop:
            if name == "top_k" and "extra_body" in req:
                extra = {k: v for k, v in req.pop("extra_body").items() if k != "top_k"}
                req.update({"extra_body": extra} if extra else {})
            else:
                req.pop(name, None)
        kept = next((name for name in self.one_of if name in req), None)
        for name in self.one_of:
            if name != kept:
                req.pop(name, None)
        return req


def sampling_changes(before: dict, after: dict) -> list[str]:
    """What a reshaped request changed of the caller's sampling, e.g. "temperature 0.7 -> 1.0"."""
    def value(req, name):
        return (req.get("extra_body") or {}).get(name) if name == "top_k" else req.get(name)
    out = []
    for name in ("temperature", "top_p", "seed", "presence_penalty", "top_k", "stop"):
        old, new = value(before, name), value(after, name)
        if old is None or old == new or (new is None and SERVER_DEFAULTS.get(name) == old):
            continue
        out.append(f"{name} {old} -> {'not sent' if new is None else new}")
    return out


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


def server_message(err: Exception) -> str:
    """The server's own error message from the error's body. The client leaves it out of its text when the
    body is a list, as Google's OpenAI-compatible endpoint sends its errors ([{"error": {...}}])."""
    body = getattr(err, "body", None)
    if isinstance(body, list) and body:
        body = body[0]
    if isinstance(body, dict):
        body = body.get("error", body)
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, str) else ""


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
                 settings: LLMSettings = LLMSettings(), request_rules: dict | RequestRules | None = None):
        self.name, self.model, self.base_url, self.api_key_env, self.settings = name, model, base_url, api_key_env, settings
        self.rules = (request_rules if isinstance(request_rules, RequestRules)
                      else RequestRules.from_config(request_rules, name))
        self._client = None
        self._key: str | None = None
        self._lock = threading.Lock()
        self._noted: set[str] = set()   # sampling changes of the rules already logged

    def identity(self) -> dict:
        rules = self.rules.record()   # they change the answers; absent without rules (old cache keys hold)
        return {"backend": "openai", "model": self.model, "base_url": self.base_url,
                **({"request_rules": rules} if rules else {})}

    def describe(self) -> dict:
        rules = self.rules.record()   # every provenance record shows a forced temperature or a dropped top_p
        return {"name": self.name, "backend": "openai", "model": self.model, "base_url": self.base_url,
                "api_key_env": self.api_key_env, **({"request_rules": rules} if rules else {})}

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

    def _shape(self, request: dict) -> dict:
        """The request as this endpoint accepts it (self.rules); a change to the sampling is logged once."""
        shaped = self.rules.apply(request)
        for change in sampling_changes(request, shaped):
            with self._lock:
                first = change not in self._noted
                self._noted.add(change)
            if first:
                log.warning("model %r: its request rules (preset %s) send %s; recorded as request_rules in the "
                            "provenance records", self.name, self.rules.preset, change)
        return shaped

    def _create(self, request: dict, usage: Usage):
        import openai
        request = self._shape(request)
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
        text = f"{type(err).__name__}: {err}"
        message = server_message(err)
        if message and message not in text:
            text += f" - {message}"
        text = redact(text, [self._key])
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
        if "logprobs" in self.rules.drop:   # the endpoint rejects or ignores them: no request can score options
            if self.settings.choose_fallback == "generate":
                return self._map(len(chats), lambda i: self._choose_by_reply(chats[i], options, usage))
            raise FeatureUnsupported(
                f"model {self.name!r} at {self.base_url}: its request rules (preset {self.rules.preset}) drop "
                "logprobs, so choose() cannot score options. nee.mode auto and the sandbox judge's mode auto "
                "answer in JSON mode instead; elsewhere set llm.choose_fallback: generate.")

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

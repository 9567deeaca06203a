"""The openai backend: any OpenAI-compatible chat server (vLLM, transformers serve, hosted APIs).

Requests go through the official `openai` client, at most `concurrency` at a time from a thread pool,
each retried with exponential back-off (plus jitter) on 408, 409, 429, 5xx, timeouts and refused connections,
and wherever the server's `x-should-retry` header says true (false: not retried); a server's Retry-After
header, where it sends one, sets the least wait (up to `llm.max_backoff_s`). A 429 whose error is
`insufficient_quota` is not retried (no wait ends it): the error names the model, the server and the fix.

Each reply's `model` (the id the server says it served) and `system_fingerprint` go into the Completion (so
into its call cache entry) and into the batch's provenance record (`served`: the distinct pairs); a served id
other than the configured one warns once per model and server in a process.
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

Hostile or broken servers (issue 38). Every error names the model and the server (its URL without
credentials; a base_url with any is refused outright) and the fix:
  - a 200 that is no chat completion (an HTML login page, broken JSON, `choices` empty or null, a choice
    without a message) is an LLMError at once, not retried and not cached;
  - choose refuses NaN, +inf, positive or non-numeric log-probabilities and top tokens whose probabilities add
    up to more than 1 (logprobs_problem);
  - `llm.timeout_s` bounds the whole request (deadline streams under the client), so a proxy that trickles
    its reply cannot hold a run; an API key with a newline or a request the client cannot form fails at once;
  - a reply that quotes the API key (a proxy that echoes headers) loses it before it is cached.
identity() holds what the server's GET /models reports about the model (served_entry: id, created, owned_by,
root, parent, a local root folder's content fingerprint), so a model retrained and served under the same name
gets new cache keys and stage 04 plays its cases again (its resume compares these identities).
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
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from echo_lib.llm.secrets import base_url_problem, key_problem, redact, remove_secrets, safe_url
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


def error_body(err: Exception) -> dict:
    """The `error` object of a client error's body ({} without one); Google's endpoint sends a list of them."""
    body = getattr(err, "body", None)
    if isinstance(body, list) and body:
        body = body[0]
    if isinstance(body, dict):
        body = body.get("error", body)
    return body if isinstance(body, dict) else {}


def quota_exhausted(err: Exception) -> bool:
    """A 429 that says the account's quota or credit is used up (OpenAI: `insufficient_quota`): no wait ends it."""
    if getattr(err, "status_code", None) != 429:
        return False
    body = error_body(err)
    return "insufficient_quota" in (getattr(err, "code", None), body.get("code"), body.get("type"))


def should_retry(err: Exception) -> bool:
    """Whether asking again may succeed, as the server means it: its `x-should-retry` header where it sends
    one (true or false), else a refused or timed-out connection, 408 (request timeout), 409 (conflict, e.g. a
    lock), 429 (rate limit; see quota_exhausted) and 5xx."""
    response = getattr(err, "response", None)
    headers = getattr(response, "headers", None) or {}
    try:
        flag = str(headers.get("x-should-retry", "")).strip().lower()
    except (AttributeError, TypeError):
        flag = ""
    if flag in ("true", "false"):
        return flag == "true"
    status = getattr(err, "status_code", None)
    if not isinstance(status, int):   # no HTTP answer at all: a refused or dropped connection, a timeout
        return response is None
    return status in (408, 409, 429) or status >= 500


SERVED_CHARS = 200   # a served model id or fingerprint is cut to this (a hostile server may send anything)
MAX_SERVED = 20      # distinct (model, fingerprint) pairs one provenance record lists
_served_warned: set[tuple] = set()   # (model name, server, configured id, served id) warned about in this process
_served_warned_lock = threading.Lock()


def served_text(value: Any) -> str | None:
    """A reply's `model` or `system_fingerprint` as recorded: text, at most SERVED_CHARS; None otherwise."""
    return value[:SERVED_CHARS] if isinstance(value, str) and value.strip() else None


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


# --------------------------------------------------------------------------------------------
# what a reply must hold (a 200 may still be an HTML page, broken JSON or an empty list of choices)

LOGPROB_SLACK = 1e-3   # a top log-probability a little above 0 is float rounding; more is a probability > 1
MASS_SLACK = 0.01      # the top tokens' probabilities may add up to a little over 1 (rounding), not more


def count(value: Any) -> int:
    """A token count from a reply's usage; 0 for anything that is not a whole number >= 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def reply_problem(response: Any) -> str | None:
    """What keeps `response` (what the client made of an HTTP 200) from being a chat completion with a
    message; None when it is one."""
    if isinstance(response, (str, bytes)):
        text = response.decode(errors="replace") if isinstance(response, bytes) else response
        kind = "an HTML page" if text.lstrip()[:1] == "<" else "text that is not JSON"
        return f"{kind} ({' '.join(text.split())[:80]!r})"
    if isinstance(response, (list, dict, int, float, bool)) or response is None:
        return f"a JSON {type(response).__name__}, not a chat completion object"
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list):
        return f"`choices` {'missing or null' if choices is None else 'not a list'}"
    if not choices:
        return "`choices` empty (no answer at all)"
    message = getattr(choices[0], "message", None)
    if message is None or isinstance(message, (str, list, int, float)):
        return "a choice without a message"
    content = getattr(message, "content", None)
    if content is not None and not isinstance(content, str):
        return f"message content that is a {type(content).__name__}, not text"
    return None


def logprobs_problem(top: Sequence[tuple[Any, Any]]) -> str | None:
    """What makes the server's top next tokens unusable as probabilities (NaN, +inf, a log-probability above
    0, a mass above 1, something that is not a number); None when they are usable. -inf is probability 0."""
    for token, lp in top:
        if not isinstance(token, str):
            return f"a top token that is {type(token).__name__}, not text"
        if isinstance(lp, bool) or not isinstance(lp, (int, float)):
            return f"the log-probability of {token!r} is {lp!r}, not a number"
        if math.isnan(lp) or lp > LOGPROB_SLACK:
            return f"the log-probability of {token!r} is {lp!r}" + ("" if math.isnan(lp) else ", above 0")
    mass = sum(math.exp(lp) for _, lp in top)
    if mass > 1 + MASS_SLACK:
        return f"the probabilities of the top {len(top)} tokens add up to {mass:.3g}, more than 1"
    return None


# --------------------------------------------------------------------------------------------
# one deadline for the whole request: httpx's timeouts bound each read, so a proxy that dribbles a byte now
# and then would hold a request for as long as it likes. The network streams under the client read the
# deadline of the thread that runs the request (set by _deadline) and shorten each read's timeout to it.

_deadline = threading.local()


@contextmanager
def deadline(seconds: float):
    """Requests made in this thread inside the block end (with the client's timeout error) `seconds` after
    it starts, whatever the server sends meanwhile."""
    before = getattr(_deadline, "at", None)
    _deadline.at = time.monotonic() + seconds
    try:
        yield
    finally:
        _deadline.at = before


class _DeadlineStream:
    def __init__(self, stream, errors):
        self._stream, self._errors = stream, errors

    def _left(self, timeout: float | None, error: str) -> float | None:
        at = getattr(_deadline, "at", None)
        if at is None:
            return timeout
        left = at - time.monotonic()
        if left <= 0:
            raise getattr(self._errors, error)("the request's deadline (llm.timeout_s) passed")
        return left if timeout is None else min(timeout, left)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._left(timeout, "ReadTimeout"))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        return self._stream.write(buffer, self._left(timeout, "WriteTimeout"))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None):
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname,
                                                      self._left(timeout, "ConnectTimeout")), self._errors)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend:
    def __init__(self, backend, errors):
        self._backend, self._errors = backend, errors

    def _left(self, timeout):
        return _DeadlineStream(None, self._errors)._left(timeout, "ConnectTimeout")

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        return _DeadlineStream(self._backend.connect_tcp(host, port, self._left(timeout), local_address,
                                                         socket_options), self._errors)

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        return _DeadlineStream(self._backend.connect_unix_socket(path, self._left(timeout), socket_options),
                               self._errors)

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def bound_whole_requests(http_client) -> int:
    """Put every connection pool of an httpx(2) client (its own and its proxies') on deadline streams; the
    number of pools done. (httpx has no public hook for this: the pools' network backend is set here.)"""
    import sys
    done = 0
    for transport in [getattr(http_client, "_transport", None), *getattr(http_client, "_mounts", {}).values()]:
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is None or isinstance(backend, _DeadlineBackend):
            continue
        errors = sys.modules[type(pool).__module__.split(".")[0]]   # httpcore or httpcore2: its timeout errors
        pool._network_backend = _DeadlineBackend(backend, errors)
        done += 1
    return done


def _causes(err: BaseException) -> Iterator[BaseException]:
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


UNSENDABLE = ("LocalProtocolError", "UnsupportedProtocol", "InvalidURL")   # the request could not be formed


# --------------------------------------------------------------------------------------------
# what a server says about the model it serves (GET /v1/models), for identity()

SERVED_FIELDS = ("id", "created", "created_at", "owned_by", "root", "parent")
NOW_S = 5   # a `created` this close to the server's clock is the time of the request (vLLM), not the model's
STAMPED_NOW = ("vllm", "lmdeploy")   # their model cards stamp `created` so, whatever the clocks say


def served_entry(entries: Any, model: str, now: float) -> dict | None:
    """The fields of `model`'s entry of a /v1/models list that name what is served (its parent's entry as
    well: a vLLM LoRA adapter's base model), with a local root folder's content fingerprint; None when the
    list does not hold the model."""
    if not isinstance(entries, list):
        return None
    by_id = {e["id"]: e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)}
    entry = by_id.get(model) or by_id.get(f"models/{model}")   # Google lists models/<id>
    if entry is None:
        return None
    out = _served_fields(entry, now)
    parent = entry.get("parent")
    if isinstance(parent, str) and parent in by_id and parent != entry["id"]:
        out["parent"] = _served_fields(by_id[parent], now)
    return out


def _served_fields(entry: dict, now: float) -> dict:
    out = {k: v for k in SERVED_FIELDS if isinstance(v := entry.get(k), (str, int, float)) and not isinstance(v, bool)}
    if isinstance(out.get("created"), (int, float)) and (abs(out["created"] - now) <= NOW_S
                                                          or out.get("owned_by") in STAMPED_NOW):
        out.pop("created")   # stamped at each request (vLLM, LMDeploy): it would change every key
    root = out.get("root")
    if isinstance(root, str) and root and Path(root).is_dir():   # served from this machine's files
        from echo_lib.llm.hf import fingerprint
        out["root_fingerprint"] = fingerprint(root)
    return out


def server_time(headers: Any) -> float:
    """The server's clock from its Date header; this machine's without one."""
    value = (headers or {}).get("date")
    if value:
        from email.utils import parsedate_to_datetime
        try:
            return parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError):
            pass
    return time.time()


# --------------------------------------------------------------------------------------------


class OpenAIBackend:
    kind = "openai"

    def __init__(self, name: str, model: str, base_url: str, api_key_env: str | None,
                 settings: LLMSettings = LLMSettings(), request_rules: dict | RequestRules | None = None,
                 revision: str | None = None):
        problem = base_url_problem(base_url)
        if problem:   # the config loader refuses it first; this is for backends built in code
            raise LLMError(f"model {name!r}: base_url {problem}")
        self.name, self.model, self.base_url, self.api_key_env, self.settings = name, model, base_url, api_key_env, settings
        self.revision = revision   # what the server is told the weights are, where it cannot say (identity)
        self.rules = (request_rules if isinstance(request_rules, RequestRules)
                      else RequestRules.from_config(request_rules, name))
        self.where = f"model {name!r} at {safe_url(base_url)}"   # every error names both
        self._client = None
        self._key: str | None = None
        self._lock = threading.Lock()
        self._noted: set[str] = set()   # sampling changes of the rules already logged
        self._served: dict | None = None
        self._served_known = False      # the server answered /v1/models (with or without the model)

    def identity(self) -> dict:
        """Everything that decides the answers: model name, base_url, an explicit revision, what the server
        reports about the model it serves (served_entry: id, created, owned_by, root, parent, a local root
        folder's fingerprint), request rules. Keys without a revision, a served entry or rules are as before."""
        rules = self.rules.record()   # they change the answers; absent without rules (old cache keys hold)
        served = self.served()
        return {"backend": "openai", "model": self.model, "base_url": self.base_url,
                **({"revision": self.revision} if self.revision else {}),
                **({"served": served} if served else {}), **({"request_rules": rules} if rules else {})}

    def describe(self) -> dict:
        rules = self.rules.record()   # every provenance record shows a forced temperature or a dropped top_p
        return {"name": self.name, "backend": "openai", "model": self.model, "base_url": self.base_url,
                "api_key_env": self.api_key_env, **({"revision": self.revision} if self.revision else {}),
                **({"served": self._served} if self._served else {}), **({"request_rules": rules} if rules else {})}

    def served(self) -> dict | None:
        """What GET {base_url}/models says about this model (served_entry), asked once per backend object; None
        where the server lists no such model or has no such endpoint. A server that cannot be reached now is
        asked again at the next call (its requests would fail, or it is restarting)."""
        with self._lock:
            if self._served_known:
                return self._served
        import openai
        try:
            with deadline(min(self.settings.timeout_s, 30.0)):
                raw = self.client.models.with_raw_response.list()
            entries = json.loads(raw.http_response.text)
            served = served_entry(entries.get("data") if isinstance(entries, dict) else None, self.model,
                                  server_time(raw.headers))
        except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError, LLMError) as err:
            if getattr(err, "status_code", None) != 501:   # 501: no such endpoint, an answer like a 404
                log.debug("%s: /models not answered now (%s)", self.where, type(err).__name__)
                return None
            served = None
        except (openai.OpenAIError, ValueError, TypeError, AttributeError, RecursionError):
            served = None   # 401/403/404/405, not JSON: the server says nothing about its models
        with self._lock:
            self._served, self._served_known = served, True
        return served

    @property
    def client(self):
        if self._client is None:
            import openai
            key = NO_KEY
            if self.api_key_env:
                key = os.environ.get(self.api_key_env)
                if not key:
                    raise LLMError(f"{self.where}: environment variable {self.api_key_env} is not set; "
                                   f"export it with the API key for {safe_url(self.base_url)}")
                problem = key_problem(key)
                if problem:   # httpx would refuse the header, and the client would call it a network error
                    raise LLMError(f"{self.where}: the API key in ${self.api_key_env} {problem}, which an HTTP "
                                   f"header cannot carry (the key is not shown); set it again without it, e.g. "
                                   f"export {self.api_key_env}=\"$(tr -d ' \\r\\n' < keyfile)\"")
            # our own retry loop (below) waits long enough to ride out a server restart
            self._key = key if key != NO_KEY else None   # only to remove it from error texts and replies
            http = openai.DefaultHttpxClient()
            if not bound_whole_requests(http):
                log.warning("%s: llm.timeout_s bounds each read only (this httpx has no pool to bound)", self.where)
            self._client = openai.OpenAI(base_url=self.base_url, api_key=key, max_retries=0,
                                         timeout=self.settings.timeout_s, http_client=http)
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
        """The server's chat completion for `request`, checked to hold a choice with a message: an error that
        names the model, the server and the fix otherwise."""
        import openai
        request = self._shape(request)
        for attempt in range(self.settings.max_retries + 1):
            try:
                with deadline(self.settings.timeout_s):   # the whole request, not each read
                    response = self.client.chat.completions.create(**request)
                break
            except openai.AuthenticationError:
                raise LLMError(f"{self.where} refused the API key from ${self.api_key_env} (401)") from None
            except (openai.APIConnectionError, openai.APIStatusError) as err:   # timeouts are connection errors
                unsendable = next((c for c in _causes(err) if type(c).__name__ in UNSENDABLE), None)
                if unsendable is not None:   # no retry makes it sendable
                    raise self._error("could not send the request (check base_url and the API key's characters)",
                                      unsendable) from None
                if quota_exhausted(err):   # it never succeeds: failing now saves minutes of back-off per call
                    raise self._error("has no quota left for this account (429 insufficient_quota; not retried, it "
                                      "does not pass with time): add credit or raise the quota in the provider's "
                                      "billing settings, or use another API key (api_key_env) or model", err) from None
                if not should_retry(err):   # 400, 403, 404, 422, ... or x-should-retry: false
                    raise self._error("rejected the request" if isinstance(err, openai.BadRequestError) else "failed",
                                      err) from None
                if attempt == self.settings.max_retries:
                    raise self._error(f"gave up after {attempt + 1} tries", err) from None
                with self._lock:
                    usage.retries += 1
                wait_s = min(self.settings.max_backoff_s, self.settings.backoff_s * 2 ** attempt)
                time.sleep(max(wait_s * (0.5 + random.random() / 2), retry_after(err, self.settings.max_backoff_s)))
            except openai.OpenAIError as err:   # the server's text may quote the key
                raise self._error("failed", err) from None
            except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as err:   # a body the client
                raise self._malformed(f"a body the client cannot read ({type(err).__name__}: "   # cannot parse
                                      f"{' '.join(str(err).split())[:80]})") from None
        problem = reply_problem(response)
        if problem:
            raise self._malformed(problem)
        self._note_served(response, usage)
        with self._lock:
            usage.model_calls += 1
            u = getattr(response, "usage", None)
            usage.prompt_tokens += count(getattr(u, "prompt_tokens", 0))
            usage.completion_tokens += count(getattr(u, "completion_tokens", 0))
        return response

    def served_of(self, response: Any) -> tuple[str | None, str | None]:
        """The model id the server says it answered with and its system fingerprint (None where not sent)."""
        return tuple(None if v is None else self._clean(v) for v in
                     (served_text(getattr(response, "model", None)),
                      served_text(getattr(response, "system_fingerprint", None))))

    def _note_served(self, response: Any, usage: Usage) -> None:
        """Keep what the server says it served in the batch's provenance record (usage.extra["served"]); warn
        once per model and server when the served id is not the configured one."""
        model, fingerprint = self.served_of(response)
        if model is None and fingerprint is None:
            return
        item = {"model": model, "system_fingerprint": fingerprint}
        with self._lock:
            served = usage.extra.setdefault("served", [])
            if item not in served and len(served) < MAX_SERVED:
                served.append(item)
        if model is None or model == self.model:
            return
        key = (self.name, safe_url(self.base_url), self.model, model)
        with _served_warned_lock:
            first = key not in _served_warned
            _served_warned.add(key)
        if first:
            log.warning("model %r: configured as %r, but %s says it served %r (an alias resolved to a snapshot, or "
                        "another model); every answer records the served id and system fingerprint in the call "
                        "cache and the provenance records. Set models.%s.id to the served id to ask for it by name",
                        self.name, self.model, safe_url(self.base_url), model, self.name)

    def _malformed(self, what: str) -> LLMError:
        return LLMError(redact(f"{self.where} answered HTTP 200 with {what} instead of a chat completion; check "
                               f"that base_url is the server's OpenAI-compatible API (e.g. http://host:8000/v1, as "
                               f"vLLM serves it), not a proxy's, a gateway's or a login page, and the server's log", [self._key]))

    def _error(self, what: str, err: Exception) -> LLMError:
        """An LLMError for a client error, its text without the key this backend sent."""
        text = f"{type(err).__name__}: {err}"
        message = server_message(err)
        if message and message not in text:
            text += f" - {message}"
        if type(err).__name__ == "APITimeoutError":
            text += (f" (the server did not finish its reply within llm.timeout_s = {self.settings.timeout_s:g} s, "
                     "which bounds the whole request; raise it for long generations, or check the server or proxy)")
        text = redact(text, [self._key])
        return LLMError(f"{self.where} {what}: {text}")

    def _clean(self, text: str) -> str:
        """A reply's text without the API key (a proxy that echoes the request's headers into the reply): it
        would reach the call cache and the result files. Logged once per backend."""
        if not self._key or not text:
            return text
        clean = remove_secrets(text, [self._key])
        if clean != text:
            with self._lock:
                first = "reply quoted the key" not in self._noted
                self._noted.add("reply quoted the key")
            if first:
                log.warning("%s: a reply quoted its API key (a server or proxy that echoes the request's headers?); "
                            "the key is removed from the reply before it is cached", self.where)
        return clean

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
            text = self._clean(c.message.content or "")
            if samplings[i].json_mode:
                try:
                    json.loads(text)
                except (ValueError, RecursionError):
                    raise FeatureUnsupported(
                        f"{self.where} ignored JSON mode (response_format): its reply does not parse as JSON: "
                        f"{text[:80]!r}. Use a server with JSON mode (vLLM, OpenAI).") from None
            u = getattr(r, "usage", None)
            finish = getattr(c, "finish_reason", None)
            served_model, fingerprint = self.served_of(r)
            return Completion(text=text, finish_reason=finish if isinstance(finish, str) and finish else "stop",
                              prompt_tokens=count(getattr(u, "prompt_tokens", 0)),
                              completion_tokens=count(getattr(u, "completion_tokens", 0)),
                              served_model=served_model, system_fingerprint=fingerprint)
        return self._map(len(chats), one)

    def choose(self, chats: Sequence[Chat], options: Sequence[str], usage: Usage) -> Iterator[tuple[int, Choice]]:
        if "logprobs" in self.rules.drop:   # the endpoint rejects or ignores them: no request can score options
            if self.settings.choose_fallback == "generate":
                return self._map(len(chats), lambda i: self._choose_by_reply(chats[i], options, usage))
            raise FeatureUnsupported(
                f"{self.where}: its request rules (preset {self.rules.preset}) drop "
                "logprobs, so choose() cannot score options. nee.mode auto and the sandbox judge's mode auto "
                "answer in JSON mode instead; elsewhere set llm.choose_fallback: generate.")

        def one(i: int) -> Choice:
            r = self._create(choose_request(self.model, chats[i], self.settings.top_logprobs), usage)
            lp = getattr(r.choices[0], "logprobs", None)
            content = getattr(lp, "content", None)
            first = content[0] if isinstance(content, list) and content else None
            entries = getattr(first, "top_logprobs", None)
            if not isinstance(entries, list) or not entries:
                if self.settings.choose_fallback == "generate":
                    return self._choose_by_reply(chats[i], options, usage)
                raise FeatureUnsupported(
                    f"{self.where} returned no logprobs, so choose() cannot score "
                    "options. Use a server that returns top_logprobs (vLLM, OpenAI), or set "
                    "llm.choose_fallback: generate (greedy reply matched exactly to an option).")
            top = [(getattr(t, "token", None), getattr(t, "logprob", None)) for t in entries]
            problem = logprobs_problem(top)
            if problem:
                raise LLMError(redact(
                    f"{self.where} answered choose with unusable log-probabilities: {problem} (chat {i}). Its "
                    "choices cannot be trusted, and none was cached; check the server (its logprobs output), or "
                    "judge with another server or an hf-backend model", [self._key]))
            choice = choice_from_top_logprobs(options, top)
            if choice is None:
                raise LLMError(f"{self.where}: none of the options {list(options)} is among the top "
                               f"{len(top)} next tokens (chat {i}); ask for exactly one of them in the prompt")
            return choice
        return self._map(len(chats), one)

    def _choose_by_reply(self, chat: Chat, options: Sequence[str], usage: Usage) -> Choice:
        greedy = Sampling(temperature=0, max_new_tokens=16)
        text = self._clean(self._create(chat_request(self.model, chat, greedy), usage).choices[0].message.content or "")
        answer = text.strip().strip(".").strip()
        if answer not in options:
            raise LLMError(f"{self.where}: choose fallback reply {text[:60]!r} is none of {list(options)}")
        return Choice(probs={o: float(o == answer) for o in options}, logprobs={o: None for o in options},
                      coverage=None)

    def call_tools(self, chats: Sequence[Chat], tools: list[dict], usage: Usage) -> Iterator[tuple[int, ToolCall]]:
        def one(i: int) -> ToolCall:
            r = self._create(tools_request(self.model, chats[i], tools, self.settings.tool_call_tokens), usage)
            calls = getattr(r.choices[0].message, "tool_calls", None)
            if not calls:
                raise FeatureUnsupported(
                    f"{self.where} answered without a tool call although tool_choice "
                    "was 'required': the server ignores `tools`. Use a server with tool calling (vLLM with "
                    "--enable-auto-tool-choice, OpenAI) or an hf-backend model.")
            fn = getattr(calls[0], "function", None) if isinstance(calls, list) else None
            name, arguments = getattr(fn, "name", None), getattr(fn, "arguments", None)
            if not isinstance(name, str) or not isinstance(arguments, (str, type(None))):
                raise self._malformed("a tool call without a function name and text arguments")
            arguments = self._clean(arguments or "{}")
            try:
                args = json.loads(arguments)
            except (ValueError, RecursionError):
                raise LLMError(f"{self.where}: tool call arguments are not JSON: {arguments[:80]!r}") from None
            if not isinstance(args, dict):   # the tool schema asks for an object of named arguments
                raise LLMError(f"{self.where}: the arguments of its call to {name!r} are "
                               f"{type(args).__name__} {arguments[:80]!r}, not a JSON object")
            return ToolCall(name=name, arguments=args)
        return self._map(len(chats), one)

"""Keeping API keys out of every artifact: error texts are redacted before they leave a backend.

A server that refuses a key often quotes it (or the request's `Authorization` header) in its error
text, and that text would reach `<case>_error.json`, `summary.json`, `llm_provenance.jsonl`, the stage
log and the executed notebook. The backend knows the actual key it sent, so it removes that exact
value in every form a server quotes it in (secret_forms: URL-encoded, base64 alone or inside Basic auth's
user:key, partly masked as `sk-ab****wxyz`); the patterns below catch the usual shapes of key-like text the
backend did not send itself (Authorization headers, bearer and Basic tokens, sk-/key=/token: words, partly
masked keys, credentials in URLs). A reply that quotes the key (a proxy that echoes the request's headers)
loses the exact value and its forms only (remove_secrets), so an ordinary reply is never changed.

Credentials have exactly one place: the environment variable a model's `api_key_env` names. A base_url
with user:password@ or a query is refused at config load (config_problems, called by echo_lib.config) and by
the backend, so no URL with a secret reaches a cache key, a result file or a log; a key pasted into
`api_key_env` is refused without being shown; a key with a newline or other character an HTTP header cannot
carry is named at once (key_problem) instead of failing as a network error after the back-off.
"""
from __future__ import annotations

import base64
import os
import re
import urllib.parse
from typing import Any, Iterable

REDACTED = "<redacted>"
MIN_SECRET = 4   # shorter "keys" (placeholders such as "x") would blank out ordinary words
MIN_SHOWN = 4    # a masked key's visible head or tail at least this long counts as the key's (OpenAI shows 4)
MIN_B64 = 8      # base64 stretches shorter than this would match ordinary words
ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")   # config/schema.yaml's pattern for api_key_env

_URL_PATTERNS = [
    # credentials in a URL: scheme://user:password@host, ?api_key=..., &token=...
    (re.compile(r"([a-z][a-z0-9+.-]{0,20}://)[^\s/@'\"<>]+@", re.I), r"\1" + REDACTED + "@"),
    (re.compile(r"([?&;][\w.-]{0,40}(?:key|token|secret|password|passwd|pwd|auth|sig|signature|credential)[\w.-]{0,40}=)"
                r"[^&\s'\"#<>]+", re.I), r"\1" + REDACTED),
]
_PATTERNS = _URL_PATTERNS + [
    # an Authorization header in any quoting: "Authorization: Bearer abc", 'authorization': 'Basic abc'
    (re.compile(r"(authorization['\"]?\s*[:=]\s*['\"]?)(?:(?:bearer|basic)\s+)?[^\s'\",}]+", re.I), r"\1" + REDACTED),
    (re.compile(r"((?i:bearer)\s+)(?!<redacted>)[^\s'\",}]+"), r"\1" + REDACTED),
    # Basic auth's base64 user:key (not the English word: a digit, +, /, = or a capital inside it)
    (re.compile(r"(Basic\s+)(?=[A-Za-z0-9+/]*[0-9+/=]|[A-Za-z0-9+/][a-z]*[A-Z])[A-Za-z0-9+/]{8,}={0,2}"),
     r"\1" + REDACTED),
    # key-like words: sk-..., key=..., token: ...
    (re.compile(r"(sk|key|token)[-_ :=]*[A-Za-z0-9*._-]{6,}", re.I), r"\1-" + REDACTED),
]
_MASK_CHARS = "*\u2022\u25cf"                          # ***, bullets
_MASK = re.compile(r"[*\u2022\u25cf]{3,}|\.{3,}|\u2026")   # or ... / an ellipsis standing for the middle
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_WORD_CHARS = _KEY_CHARS | frozenset("+/=.%")


def _around(text: str, start: int, end: int, chars: frozenset) -> tuple[int, int]:
    """The stretch of `chars` around text[start:end] (linear: no regex backtracking on long replies)."""
    while start > 0 and text[start - 1] in chars:
        start -= 1
    while end < len(text) and text[end] in chars:
        end += 1
    return start, end


def _replace_spans(text: str, spans: list[tuple[int, int]]) -> str:
    out, last = [], 0
    for start, end in sorted(spans):
        if start < last:
            start = last
        if start < end:
            out += [text[last:start], REDACTED]
            last = end
    return "".join(out) + text[last:]


def _masked_keys(text: str, secret: str | None, loose: bool = True) -> str:
    """Partly masked keys. With `secret`: a masked stretch whose visible head ends with the start of the secret
    or whose tail starts with its end (at least MIN_SHOWN characters; with `loose`, "..." and an ellipsis count
    as masks too: error texts. A reply keeps its "..."). Without: any word with a run of 3+ mask characters next
    to 2+ key characters (abcd****wxyz, ****wxyz)."""
    spans = []
    for m in _MASK.finditer(text):
        if (secret is None or not loose) and m.group(0)[0] not in _MASK_CHARS:
            continue
        start, end = _around(text, m.start(), m.end(), _WORD_CHARS if secret is not None else _KEY_CHARS)
        head, tail = text[start:m.start()], text[m.end():end]
        if secret is None:
            hit = len(head) >= 2 or len(tail) >= 3
        else:
            head, tail = head.rstrip(".")[-len(secret):], tail.lstrip(".")[:len(secret)]
            hit = (any(secret.startswith(head[-k:]) for k in range(MIN_SHOWN, len(head) + 1))
                   or any(secret.endswith(tail[:k]) for k in range(MIN_SHOWN, len(tail) + 1)))
        if hit:
            spans.append((start, end))
    return _replace_spans(text, spans) if spans else text


# --------------------------------------------------------------------------------------------
# the forms of a known secret


def _b64_cores(secret: str) -> list[str]:
    """The base64 text any encoding of `secret` holds, wherever it stands in the encoded bytes (after a
    Basic auth's `user:`, say): for each of the 3 offsets in base64's 3-byte groups, the characters that
    encode only the secret's bytes (standard and URL-safe alphabets)."""
    data = secret.encode()
    cores = set()
    for offset in range(3):
        enc = base64.b64encode(b"\0" * offset + data).decode()
        core = enc[4 if offset else 0: 4 * ((offset + len(data)) // 3)]
        if len(core) >= MIN_B64:
            cores |= {core, core.replace("+", "-").replace("/", "_")}
    return sorted(cores, key=len, reverse=True)


def secret_forms(secret: str) -> list[str]:
    """The literal forms a server may quote `secret` in: as is, without surrounding whitespace, URL- and
    form-encoded, JSON-escaped (longest first)."""
    forms = {secret, secret.strip(), urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret),
             urllib.parse.quote(secret), secret.replace("/", "\\/")}
    return sorted((f for f in forms if len(f) >= MIN_SECRET), key=len, reverse=True)


def _secrets(secrets: Iterable[str | None]) -> list[str]:
    return sorted({s.strip() for s in secrets if s and len(s.strip()) >= MIN_SECRET}, key=len, reverse=True)


def remove_secrets(text: str, secrets: Iterable[str | None], loose: bool = False) -> str:
    """`text` without the given secrets in any of their forms (secret_forms, base64, partly masked with *** or
    bullets; with `loose`, also with "..."); nothing else changes, so this is safe on a model's reply."""
    for secret in _secrets(secrets):
        for form in secret_forms(secret):
            text = text.replace(form, REDACTED)
        for core in _b64_cores(secret):   # the whole base64 token that holds it
            spans, at = [], text.find(core)
            while at >= 0:
                spans.append(_around(text, at, at + len(core), _B64_CHARS))
                at = text.find(core, at + len(core))
            text = _replace_spans(text, spans) if spans else text
        text = _masked_keys(text, secret, loose)
    return text


_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-")


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` (an error text, a log line) without the given secret values in any of their forms, and without
    Authorization headers, bearer or Basic tokens, key-like words, partly masked keys or URL credentials."""
    text = remove_secrets(text, secrets, loose=True)
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return _masked_keys(text, None)


def redact_urls(text: str) -> str:
    """`text` without credentials in the URLs it quotes (user:password@, ?key=...); nothing else changes."""
    for pattern, repl in _URL_PATTERNS:
        text = pattern.sub(repl, text)
    return text


def env_secrets(*names: str | None) -> list[str]:
    """The values of the named environment variables (the API keys a config names)."""
    return [os.environ[n] for n in names if n and os.environ.get(n)]


# --------------------------------------------------------------------------------------------
# where credentials may not be


def base_url_problem(url: str | None) -> str | None:
    """Why `url` may not be a model's base_url (it holds credentials or a query), without showing them; None
    when it is fine."""
    if not isinstance(url, str) or not url:
        return None
    parts = urllib.parse.urlsplit(url.strip())
    what = []
    if "@" in parts.netloc:
        what.append("credentials before the host (user:password@)")
    if parts.query or "?" in url:
        what.append("a query (?...)")
    if parts.fragment:
        what.append("a fragment (#...)")
    if not what:
        return None
    return (f"holds {' and '.join(what)}, which would reach cache keys, result files, provenance records and "
            f"logs; give only the server address, here {safe_url(url)}, and put the API key in an environment "
            "variable named by api_key_env (the client sends it as an Authorization header)")


def safe_url(url: str | None) -> str:
    """`url` without user:password@, query and fragment: what messages and records may show of it."""
    if not url:
        return str(url)
    try:
        parts = urllib.parse.urlsplit(url.strip())
    except ValueError:
        return REDACTED
    host = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def key_problem(key: str) -> str | None:
    """Why `key` cannot go into an Authorization header (never showing it); None when it can."""
    if key != key.strip():
        end = key[-1] if key != key.rstrip() else key[0]
        where = "ends" if key != key.rstrip() else "starts"
        return f"{where} with {'a newline' if end in chr(10) + chr(13) else 'a space or tab'}"
    if any(c in key for c in "\r\n"):
        return "holds a newline"
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in key):
        return "holds a space, tab or control character"
    if any(ord(c) > 126 for c in key):
        return "holds a character outside ASCII (a copied quote or dash?)"
    return None


def config_problems(raw: Any, problems: list[str]) -> list[str]:
    """The config's problems (`raw`: its validated dict) with credentials where they may not be, and `problems`
    without any key pasted into api_key_env (the schema check quotes the value it refuses). Called by
    echo_lib.config.validate."""
    models = raw.get("models") if isinstance(raw, dict) else None
    models = models if isinstance(models, dict) else {}
    pasted = []
    extra = []
    for name, spec in models.items():
        if not isinstance(spec, dict):
            continue
        env = spec.get("api_key_env")
        if isinstance(env, str) and env and not ENV_NAME.match(env):
            pasted.append(env)
        problem = base_url_problem(spec.get("base_url"))
        if problem:
            extra.append(f"key 'models.{name}.base_url' {problem}")
    return [redact_urls(_unshown(text, pasted)) for text in problems] + extra


def _unshown(text: str, values: list[str]) -> str:
    """`text` without the values, nor any start of them 8 characters or longer (a message may cut a long
    value short), as written or JSON-escaped."""
    import json
    for value in sorted(values, key=len, reverse=True):
        for k in range(len(value), 7, -1):
            shown = {value[:k], json.dumps(value[:k])[1:-1]}
            if any(s in text for s in shown):
                for s in sorted(shown, key=len, reverse=True):
                    text = text.replace(s, f"<{len(value)} characters, not shown: an environment variable's NAME "
                                           "is expected here, and this may be the key itself>")
                break
    return text

"""Keeping API keys out of every artifact: error texts are redacted before they leave a backend.

A server that refuses a key often quotes it (or the request's `Authorization` header) in its error
text, and that text would reach `<case>_error.json`, `summary.json`, `llm_provenance.jsonl`, the stage
log and the executed notebook. The backend knows the actual key it sent, so it removes that exact
value; the patterns below catch the usual shapes of key-like text the backend did not send itself.
"""
from __future__ import annotations

import os
import re
from typing import Iterable

REDACTED = "<redacted>"
MIN_SECRET = 4   # shorter "keys" (placeholders such as "x") would blank out ordinary words

_PATTERNS = [
    # an Authorization header in any quoting: "Authorization: Bearer abc", 'authorization': 'Bearer abc'
    (re.compile(r"(authorization['\"]?\s*[:=]\s*['\"]?)(?:bearer\s+)?[^\s'\",}]+", re.I), r"\1" + REDACTED),
    (re.compile(r"(bearer\s+)[^\s'\",}]+", re.I), r"\1" + REDACTED),
    # key-like words: sk-..., key=..., token: ...
    (re.compile(r"(sk|key|token)[-_ :=]*[A-Za-z0-9*._-]{6,}", re.I), r"\1-" + REDACTED),
]


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` without the given secret values, Authorization headers, bearer tokens or key-like words."""
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


def env_secrets(*names: str | None) -> list[str]:
    """The values of the named environment variables (the API keys a config names)."""
    return [os.environ[n] for n in names if n and os.environ.get(n)]

"""One provenance record per batch of calls: which model, which settings, how many calls, cache hits,
tokens and time. Records go to a JSON-lines file (one line per batch, appended with a single write so
concurrent processes do not interleave) and stay in memory for a notebook to show.
"""
from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

from echo_lib.llm.types import Usage


@lru_cache(maxsize=1)
def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version
    out = {"python": platform.python_version()}
    for pkg in ("torch", "transformers", "peft", "openai"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


class ProvenanceLog:
    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self.records: list[dict] = []

    def record(self, *, op: str, model: dict, settings: dict, usage: Usage, seconds: float) -> dict:
        rec = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "op": op, "model": model, "settings": settings,
               **{k: v for k, v in asdict(usage).items() if k != "extra"}, **usage.extra,
               "seconds": round(seconds, 4), "versions": dict(versions())}
        self.records.append(rec)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            line = (json.dumps(rec, ensure_ascii=False) + "\n").encode()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)   # as the umask allows
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        return rec

"""Content-addressed on-disk cache of model calls.

One JSON file per call, named by the sha256 of everything that decides the answer (backend, model
fingerprint, adapter, operation, settings, messages, options, seed). Writes go to a temporary file
in the same folder and are renamed into place, so a reader (or a second process writing the same
entry) never sees half a file and a killed run leaves at most a stray *.tmp. An entry that does not
parse, or whose stored key does not match its name, counts as a miss and is overwritten.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from echo_lib.llm.types import stable_hash
from echo_lib.provenance import umask_mode


class CallCache:
    def __init__(self, root: str | Path, enabled: bool = True):
        self.root = Path(root)
        self.enabled = enabled
        self.corrupt = 0  # entries found unreadable and recomputed

    @staticmethod
    def key(material: dict) -> str:
        return stable_hash(material)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any | None:
        if not self.enabled:
            return None
        path = self._path(key)
        try:
            entry = json.loads(path.read_text())
            if entry["key"] != key:
                raise ValueError("key mismatch")
            return entry["result"]
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            self.corrupt += 1
            return None

    def put(self, key: str, material: dict, result: Any) -> None:
        if not self.enabled:
            return
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"key": key, "request": material, "result": result}, ensure_ascii=False)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:8]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(data)
            # mkstemp makes 0600; an entry holds chats and answers, never a key, so it is shared like results
            os.chmod(tmp, umask_mode())
            os.replace(tmp, path)  # atomic on POSIX; the last of two identical writers wins
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

"""Content-addressed on-disk cache of model calls.

One JSON file per call, named by the sha256 of everything that decides the answer (backend, model
fingerprint, adapter, operation, settings, messages, options, seed). Writes go to a temporary file
in the same folder and are linked into place, so a reader never sees half a file. Of two processes
writing the same entry the first one wins and the second keeps (and returns) the stored answer, so
whatever was replayed once stays the answer. A killed run leaves at most a stray *.tmp, which a later
write into that folder removes once it is an hour old. An entry that does not parse, has the wrong
shape, or whose stored key does not match its name, counts as a miss and is overwritten; a folder where
an entry belongs is a miss that is named and left alone (the answer is then not cached).
A cache that cannot be written (a full disk, a read-only or foreign folder, a file where a folder belongs)
never fails a call: the first failed write warns once, naming the folder and the fix, and the answers are
returned uncached (a rerun computes them again). Entries are not fsynced (one per call would cost more than
it saves): an entry a power cut leaves empty or short is a miss like any unreadable one, recomputed.
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from echo_lib.llm.types import stable_hash
from echo_lib.provenance import umask_mode

log = logging.getLogger(__name__)
STRAY_TMP_S = 3600   # a *.tmp older than this is a killed writer's, not a live one's


class CallCache:
    def __init__(self, root: str | Path, enabled: bool = True):
        self.root = Path(root)
        self.enabled = enabled
        self.corrupt = 0  # entries found unreadable and recomputed
        self.write_errors = 0   # answers that could not be stored (warned about once)

    @staticmethod
    def key(material: dict) -> str:
        return stable_hash(material)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any | None:
        if not self.enabled:
            return None
        try:
            return self._read(key)
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            log.warning("call cache: %s is a folder, not an entry; the call is recomputed", self._path(key))
            self.corrupt += 1
            return None
        except (ValueError, RecursionError, OSError):   # truncated, foreign, too deep, unreadable
            self.corrupt += 1
            return None

    def _read(self, key: str) -> dict:
        entry = json.loads(self._path(key).read_text(encoding="utf-8"))
        if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("result"), dict):
            raise ValueError("not an entry of this key")
        return entry["result"]

    def discard(self, key: str) -> None:
        """Count an entry whose result has the wrong fields (the caller found it) and drop it."""
        self.corrupt += 1
        path = self._path(key)
        try:
            if path.is_file():
                path.unlink(missing_ok=True)
        except OSError as err:   # a cache this run may not change: the entry stays, put() replaces or warns
            self._cannot_write(err)

    def put(self, key: str, material: dict, result: Any) -> Any | None:
        """Store `result`; returns the answer another writer stored first, if one did (use that one).
        A write that fails (OSError) warns once and stores nothing: the caller keeps its answer."""
        if not self.enabled:
            return None
        try:
            return self._put(key, material, result)
        except OSError as err:
            self._cannot_write(err)
            return None

    def _cannot_write(self, err: OSError) -> None:
        self.write_errors += 1
        if self.write_errors == 1:
            log.warning("call cache: cannot write to %s (%s: %s); the answers are returned but not cached, so a "
                        "rerun computes them again. Free space or make the folder writable, or point llm.cache_dir "
                        "to a writable folder (llm.cache: false turns the cache off)", self.root,
                        type(err).__name__, err.strerror or err)

    def _put(self, key: str, material: dict, result: Any) -> Any | None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            log.warning("call cache: %s is a folder, not an entry; the answer is not cached", path)
            return None
        self._remove_stray_tmp(path.parent)
        data = json.dumps({"key": key, "request": material, "result": result}, ensure_ascii=False)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:8]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(data)
            # mkstemp makes 0600; an entry holds chats and answers, never a key, so it is shared like results
            os.chmod(tmp, umask_mode())
            try:
                os.link(tmp, path)       # atomic, and fails if the entry exists: the first writer wins
            except FileExistsError:
                try:
                    return self._read(key)
                except (ValueError, RecursionError, OSError):   # what is there is broken: replace it
                    os.replace(tmp, path)
        finally:
            try:
                Path(tmp).unlink(missing_ok=True)
            except OSError:
                pass
        return None

    @staticmethod
    def _remove_stray_tmp(folder: Path) -> None:
        cutoff = time.time() - STRAY_TMP_S
        for tmp in folder.glob(".*.tmp"):
            try:
                if tmp.stat().st_mtime < cutoff:
                    tmp.unlink()
            except OSError:   # its writer finished meanwhile, or the folder is not ours to tidy
                pass

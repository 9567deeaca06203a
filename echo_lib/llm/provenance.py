"""One provenance record per batch of calls: which model, which settings, how many calls, cache hits,
tokens and time. Records go to a JSON-lines file (one line per batch, appended with a single write under an
exclusive lock, so concurrent processes do not interleave) and stay in memory for a notebook to show.

A record is one whole line, never joined with part of another: a writer killed mid-line, or a write the
disk cut short, leaves a half line without its newline, and the next record starts with a newline of its
own. A write that does not complete is not passed off as done: the half line is closed (where the disk
allows), the whole line is tried once more, and if that fails too the record raises an LLMError naming
the file and the cause. `read_records` reads a file back, skipping (and naming, file and line) any line
that is not a whole record.

One file holds every stage's records of a run. A stage that wants its own calls back (the sandbox's and the
NEE panel's summaries list the model ids the servers said they served) labels its models' records while it
runs (`labelled(llms, stage=...)`: a `labels` object in each record) and reads them back from the files they
write to (`labelled_records(log_files(llms), stage=...)`).
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import platform
import time
from contextlib import contextmanager
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Iterator

from echo_lib.llm.types import LLMError, Usage

log = logging.getLogger(__name__)


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
        self.labels: dict = {}    # what every record of this log carries as `labels` (set by `labelled`)

    def record(self, *, op: str, model: dict, settings: dict, usage: Usage, seconds: float) -> dict:
        rec = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "op": op, "model": model, "settings": settings,
               **{k: v for k, v in asdict(usage).items() if k != "extra"}, **usage.extra,
               "seconds": round(seconds, 4), "versions": dict(versions()),
               **({"labels": dict(self.labels)} if self.labels else {})}
        self.records.append(rec)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            append_line(self.path, (json.dumps(rec, ensure_ascii=False) + "\n").encode())
        return rec


def append_line(path: Path, line: bytes) -> None:
    """Append `line` (ending in a newline) whole, with one write, on a line of its own."""
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)   # as the umask allows
    try:
        try:   # writers of this file take turns, so that no one's line lands inside another's half line
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass   # a file system without locks (some Lustre mounts): one write per record still holds
        for attempt in (1, 2):
            try:
                size = os.fstat(fd).st_size
                ends_line = size == 0 or os.pread(fd, 1, size - 1) == b"\n"
                # a half line before ours (a killed writer, a short write): ours starts a new line
                data = line if ends_line else b"\n" + line
                written = os.write(fd, data)
            except OSError as err:
                raise LLMError(f"provenance: could not append a record to {path} ({type(err).__name__}: "
                               f"{err.strerror or err}); the calls' answers are in the call cache, so a rerun "
                               "once the disk has space (or the file is writable) writes the record without "
                               "calling the model again") from err
            if written == len(data):
                return
            # a short write: the disk took part of the line. Close the half line (readers skip it) and try once more
            try:
                os.write(fd, b"\n")
            except OSError:
                pass   # the next record starts with the newline instead
            if attempt == 2:
                raise LLMError(f"provenance: only {written} of {len(data)} bytes of a record reached {path} (is "
                               "the disk full?); the half line is left for readers to skip. The calls' answers "
                               "are in the call cache: rerun once the disk has space")
    finally:
        os.close(fd)


def read_records(path: str | Path) -> list[dict]:
    """The records of a provenance file; a line that is not a whole JSON object (a killed or cut-short
    write) is skipped with a warning naming the file and the line."""
    path = Path(path)
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):
                rec = None
            if isinstance(rec, dict):
                out.append(rec)
            else:
                log.warning("%s, line %d is not a whole provenance record (a write killed or cut short); "
                            "skipped: %.80r", path, n, line)
    return out


@contextmanager
def labelled(llms: Iterable, **labels: str) -> Iterator[None]:
    """While the block runs, every provenance record of `llms` (LLM objects; others are passed over) carries
    `labels` (e.g. stage="04_sandbox"), so the stage can read its own calls back from the run's shared file."""
    logs = list({id(log_): log_ for log_ in (getattr(llm, "provenance", None) for llm in llms)
                 if isinstance(log_, ProvenanceLog)}.values())
    before = [dict(log_.labels) for log_ in logs]
    for log_ in logs:
        log_.labels = {**log_.labels, **labels}
    try:
        yield
    finally:
        for log_, old in zip(logs, before):
            log_.labels = old


def log_files(llms: Iterable) -> list[Path]:
    """The provenance files `llms` (LLM objects; others are passed over) append their records to."""
    paths = (getattr(getattr(llm, "provenance", None), "path", None) for llm in llms)
    return list(dict.fromkeys(p for p in paths if isinstance(p, Path)))


def labelled_records(paths: Iterable[str | Path], **labels: str) -> list[dict]:
    """The records of the provenance files `paths` (missing files: none) whose labels include `labels`: a
    stage's own calls, over every run of it that wrote to these files."""
    out = []
    for path in dict.fromkeys(Path(p) for p in paths):
        if path.is_file():
            out += [r for r in read_records(path) if isinstance(r.get("labels"), dict)
                    and all(r["labels"].get(k) == v for k, v in labels.items())]
    return out

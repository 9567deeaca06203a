"""Provenance: every artifact records what made it (config hash, seed, models, packages, commit)."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Sequence

TRACKED_PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "gguf",
                    "numpy", "pandas", "snakemake", "papermill", "jupytext", "echo-lib")


def package_versions(names: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str | None]:
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit(root: Path | None = None, generated: Sequence[str | Path] = ()) -> str | None:
    """The checkout's commit (with `+dirty` if it has uncommitted changes), or None outside git. Changes to
    `generated` (tracked files the calling stage is about to write, which Snakemake removed before the job)
    do not count."""
    from echo_lib.paths import project_root
    root = root or project_root()
    excluded = [f":(exclude){Path(p).resolve().relative_to(Path(root).resolve())}" for p in generated
                if Path(p).resolve().is_relative_to(Path(root).resolve())]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", *excluded],
                               cwd=root, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


@dataclass(frozen=True)
class RunRecord:
    """What provenance records of the run (RunConfig.record builds it)."""
    run_name: str
    scale: str
    config_hash: str
    seed: int


def provenance(run: RunRecord, generated: Sequence[str | Path] = (), **extra: Any) -> dict:
    """The record written beside an artifact: the run's name, scale, config hash and seed, the commit (changes
    to `generated`, the tracked files the stage writes, aside), the time, Python and the tracked packages'
    versions, and `extra` (the stage, its step, ...)."""
    return {"run_name": run.run_name, "scale": run.scale, "config_hash": run.config_hash, "seed": run.seed,
            "git_commit": git_commit(generated=generated), "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "python": platform.python_version(), "packages": package_versions(), **extra}


def write_json(path: str | Path, data: Any) -> Path:
    """Write JSON atomically (temp file, synced, then renamed over `path`), so a killed run, a full disk or a
    crash never leaves half a file: `path` holds the old content or the new, and no temp file stays."""
    path = Path(path)
    return _write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def write_jsonl(path: str | Path, records: Iterable[dict]) -> Path:
    """One JSON object per line, written atomically."""
    return _write_atomic(Path(path), "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def write_text(path: str | Path, text: str) -> Path:
    """Any text file (e.g. a CSV from DataFrame.to_csv()), written atomically."""
    return _write_atomic(Path(path), text)


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Any binary file (e.g. an .npz archive built in memory), written atomically."""
    return _write_atomic(Path(path), data)


def _write_atomic(path: Path, text: str | bytes) -> Path:
    # UTF-8 whatever the locale: EMPA's cases are Chinese, and ensure_ascii=False keeps them readable.
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with (os.fdopen(fd, "wb") if isinstance(text, bytes) else os.fdopen(fd, "w", encoding="utf-8")) as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())   # on disk before the rename: a crash leaves the old file or the new, never an empty one
        os.chmod(tmp, umask_mode())   # mkstemp makes 0600; results are meant to be shared (cluster file systems)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def umask_mode(mode: int = 0o666) -> int:
    """`mode` as the process's umask lets a new file have it (what open() would give)."""
    try:   # Linux says it without changing it (os.umask must set a value to read one)
        status = Path("/proc/self/status").read_text()
        current = int(next(line.split()[1] for line in status.splitlines() if line.startswith("Umask:")), 8)
    except (OSError, StopIteration, ValueError, IndexError):
        current = os.umask(0)
        os.umask(current)
    return mode & ~current

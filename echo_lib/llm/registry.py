"""The run's models by name: what the `models:` section says of each (ModelSpec), where the weights of an hf
model are, and how one is loaded behind the run's cache and provenance log.

    models = ModelRegistry(specs, models_dir, settings, cache_dir, provenance_file)
    llm = models.load("base")
    judge = models.with_adapter("base+judge", "base", "results/tiny/judges/adapter").load("base+judge")

It is built from model specs, never from the run config: the stage layer builds the run's registry
(echo_lib.models.registry). Nothing here imports torch at import time; the backends load on first use.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from echo_lib.llm.cache import CallCache
from echo_lib.llm.interface import LLM, Backend
from echo_lib.llm.provenance import ProvenanceLog
from echo_lib.llm.settings import LLMSettings
from echo_lib.llm.types import LLMError

if TYPE_CHECKING:
    from echo_lib.finetune import TrainBase


@dataclass(frozen=True)
class ModelSpec:
    """One model of the run, named in the `models:` section."""
    name: str
    backend: str
    source: str
    id: str
    revision: str | None
    adapter: str | None
    dtype: str
    device: str
    load_in_4bit: bool
    base_url: str | None
    api_key_env: str | None
    readout: str | None = None     # read-out heads that answer choose from a hidden layer (echo_lib.llm.readout)
    gradient_checkpointing: bool = False   # training recomputes activations (echo_lib.finetune)
    attn_implementation: str | None = None  # transformers' attention kernel; null: its default (sdpa)
    request_rules: dict | None = None   # backend openai: what its endpoint accepts (openai_backend.RequestRules)


def weights_path(spec: ModelSpec, models_dir: str | Path) -> str:
    """What `from_pretrained` should load for an hf-backend model.

    embedded -> the converted checkpoint under `models_dir/<id>/` (stage 00 writes it);
    local -> the folder itself; hub -> the hub id (transformers resolves it from the HF cache).
    """
    if spec.backend != "hf":
        raise ValueError(f"model {spec.name!r} has backend {spec.backend!r}; only hf models have weights here")
    if spec.source == "embedded":
        return str(Path(models_dir) / spec.id)
    return spec.id


@dataclass(frozen=True)
class ModelRegistry:
    """The models of a run by name, with what loading one needs: the folder of converted embedded models,
    the model layer's settings, the call cache's folder and the provenance file (None: no record)."""
    specs: Mapping[str, ModelSpec]
    models_dir: str | Path
    settings: LLMSettings
    cache_dir: str | Path
    provenance: str | Path | None = None

    def spec(self, name: str) -> ModelSpec:
        if name not in self.specs:
            raise LLMError(f"model {name!r} is not in the config's models: section; "
                           f"known: {', '.join(sorted(self.specs))}")
        return self.specs[name]

    def weights(self, name: str) -> str:
        """What `from_pretrained` loads for the hf model `name` (weights_path)."""
        return weights_path(self.spec(name), self.models_dir)

    def train_base(self, name: str) -> "TrainBase":
        """The hf model `name` as training loads it (echo_lib.finetune)."""
        from echo_lib.finetune import TrainBase
        return TrainBase.of(self.spec(name), self.weights(name))

    def load(self, name: str, *, settings: LLMSettings | None = None, dialogues: bool = False) -> LLM:
        """The model `name` behind the run's cache and provenance log (`settings` in place of the run's).
        `dialogues`: the caller's prompts extend its earlier ones (the sandbox's turns), so the hf backend keeps
        recent prompts (`llm.prefix_cache_mb`); elsewhere (scoring, rating) kept prompts would only fill memory:
        in the RL stage the reward models' caches raised the peak from 11.4 to 14.0 GB."""
        spec = self.spec(name)
        settings = settings or self.settings
        if not dialogues:
            settings = dataclasses.replace(settings, prefix_cache_mb=0)
        if spec.backend == "hf":
            from echo_lib.llm.hf import HFBackend
            backend = HFBackend(name, weights_path(spec, self.models_dir), adapter=spec.adapter,
                                revision=spec.revision, dtype=spec.dtype, device=spec.device,
                                load_in_4bit=spec.load_in_4bit, local=spec.source in ("embedded", "local"),
                                settings=settings, readout=spec.readout)
        else:
            from echo_lib.llm.openai_backend import OpenAIBackend
            backend = OpenAIBackend(name, spec.id, spec.base_url, spec.api_key_env, settings=settings,
                                    request_rules=spec.request_rules)
        return make_llm(backend, settings, self.cache_dir, self.provenance if settings.provenance else None)

    def with_model(self, name: str, spec: ModelSpec) -> "ModelRegistry":
        """This registry with one more model (or `name` replaced)."""
        return dataclasses.replace(self, specs={**self.specs, name: dataclasses.replace(spec, name=name)})

    def with_adapter(self, name: str, base: str, adapter_dir: str | Path) -> "ModelRegistry":
        """This registry with `name`: the model `base` with the adapter at `adapter_dir` on top (the adapter
        folder's fingerprint is part of the cache key, so retraining invalidates its calls)."""
        return self.with_model(name, dataclasses.replace(self.spec(base), adapter=str(adapter_dir)))


def make_llm(backend: Backend, settings: LLMSettings, cache_dir: str | Path, provenance: str | Path | None) -> LLM:
    """An LLM over any backend object (e.g. in tests), with its cache folder and provenance file."""
    return LLM(backend, settings, CallCache(cache_dir, enabled=settings.cache), ProvenanceLog(provenance))

"""The run's models at the stage boundary: the one place a RunConfig becomes the model layer's registry.

    from echo_lib.models import registry
    models = registry(cfg)                       # echo_lib.llm.ModelRegistry
    llm = models.load(cfg.roles.judge)

Below the stage layer nothing takes the run config: a domain function is given the registry (or an LLM).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from echo_lib.layout import Layout
from echo_lib.llm import LLM, LLMSettings, ModelRegistry

if TYPE_CHECKING:
    from echo_lib.config import RunConfig


def registry(cfg: "RunConfig") -> ModelRegistry:
    """The run's models: the `models:` section, the converted embedded models' folder, the `llm:` settings,
    the run's call cache and (with llm.provenance) its provenance file."""
    settings = cfg.llm
    return ModelRegistry(specs=cfg.models, models_dir=cfg.models_dir, settings=settings,
                         cache_dir=settings.resolved_cache_dir(cfg.results_dir),
                         provenance=Layout(cfg.run_dir).llm_provenance if settings.provenance else None)


def load_llm(cfg: "RunConfig", name: str, *, settings: LLMSettings | None = None, dialogues: bool = False) -> LLM:
    """The model `name` of the run (registry(cfg).load): for a stage that loads one model."""
    return registry(cfg).load(name, settings=settings, dialogues=dialogues)

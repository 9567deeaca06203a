"""The `data:` block of the run config (stage 01), as typed dataclasses; documented in config/schema.yaml."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChitchatCorpus:
    wheel: str
    sha256: str
    member: str


@dataclass(frozen=True)
class HumanlikeData:
    n_train: int
    n_test: int
    test_fraction: float
    min_context_turns: int
    max_context_turns: int
    max_reply_words: int
    negatives: list[str]
    system_prompt: str
    temperature: float
    top_p: float
    max_new_tokens: int


@dataclass(frozen=True)
class ContrastData:
    """data.empathy.contrast: candidates whose order against the reference is known by construction."""
    good_per_scenario: int
    poor_per_scenario: int
    references_per_scenario: int
    poor_kinds: list[str]
    bank_file: str
    good_prompt: str


@dataclass(frozen=True)
class EmpathyData:
    method: str             # contrast | critique_rewrite
    axioms_file: str
    max_scenarios: int
    test_fraction: float
    n_candidates: int
    anchor: str
    tie_margin: float | None
    companion_prompt: str
    temperature: float
    top_p: float
    max_new_tokens: int
    rewrite_max_new_tokens: int
    contrast: ContrastData


@dataclass(frozen=True)
class HITLCheck:
    sample_fraction: float
    min_sample: int
    verdicts: list[str]
    accept_rate: float


@dataclass(frozen=True)
class DataConfig:
    chitchat: ChitchatCorpus
    humanlike: HumanlikeData
    empathy: EmpathyData
    hitl: HITLCheck

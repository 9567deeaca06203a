"""SandboxRunParams: every setting of the sandbox loop (stage 04) that is not an EPM constant.

The run config carries these under `sandbox_run:`. The defaults below are the run's, written only here
(config/schema.yaml documents each key and takes its default from this module): the tiny CPU scale, a few
turns, short replies. The published EMPA values are noted beside each field (METHOD.md 5.2-5.5). The EPM
constants (K, alpha, detectors) stay in `epm:`; `max_turns` / `min_turns` here override `epm.max_turns` /
`epm.min_turns` so the tiny scale can be short while `epm:` keeps the published values. This module does
not import echo_lib.config, so the sandbox can run without a run config (e.g. in tests).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

JUDGE_MODES = ("auto", "choose", "json")
PRIORITY_SOURCES = ("judge", "declared")   # sandbox_run.judge.iedr_priorities (echo_lib.sandbox.priorities)
HISTORY_FORMATS = ("transcript", "chat")


@dataclass(frozen=True)
class ReplySampling:
    """Sampling of one speaking role (the Actor or the model under test)."""
    temperature: float = 0.7
    top_p: float = 0.8             # the tested model's (published 0.8); the Actor's is 0.95, SandboxRunParams.actor
    max_new_tokens: int = 48
    presence_penalty: float = 0.0  # the Actor's (not published); the tested model's is 1.5, SandboxRunParams.test_model
    top_k: int = 0

    def with_seed(self, seed: int):
        """These settings as the model layer's Sampling for one call."""
        from echo_lib.llm.types import Sampling
        return Sampling(temperature=self.temperature, top_p=self.top_p, max_new_tokens=self.max_new_tokens,
                        presence_penalty=self.presence_penalty, top_k=self.top_k, seed=seed)


@dataclass(frozen=True)
class JudgeParams:
    mode: str = "auto"             # auto: choose on hf models, JSON mode on servers
    retries: int = 3               # published: 3 retries, then all levels 0
    temperature: float = 0.7       # JSON mode only; each retry draws with a new seed
    iedr_max_new_tokens: int = 8000   # JSON mode only (published 8,000)
    mdep_max_new_tokens: int = 6000   # JSON mode only (published 6,000)
    calibrate: bool = False        # choose mode: MDEP levels by contextual calibration against a content-free reply
    iedr_level: str = "expected"   # choose mode: an IEDR level is the expected level over the digits, rounded
                                   # ("argmax": the most probable digit, which a small judge puts on "1" everywhere)
    iedr_priorities: str = "judge"  # who gives C.3 / A.3 / P.3 (P0's direction): judge, or the scenario's
                                   # declared priorities (echo_lib.sandbox.priorities)


@dataclass(frozen=True)
class DirectorParams:
    interval: int = 2              # the Director decides after every N-th turn (published 1)
    free_text_args: bool = False   # require reasons and acting guidance (servers); False: enumerated args only


@dataclass(frozen=True)
class SandboxRunParams:
    max_turns: int | None = 6      # None = epm.max_turns (published 45)
    min_turns: int | None = 3      # None = epm.min_turns (published 12)
    history_turns: int = 0         # turns of history shown in prompts (0 = all, as published)
    test_history: str = "transcript"   # transcript: history as lines in one user message (as published); chat
    companion_prompt: str | None = None  # None = the built-in paraphrase of METHOD 5.3
    # The tested model samples as published (EMPA Table 7: temperature 0.7, top-p 0.8, presence penalty 1.5;
    # max tokens 8192, here 48 for the tiny scale). Presence penalty 1.5 is what every run has used (the
    # schema held it; this field said 0.0 until issue 35): kept, so the tiny run's numbers stay, and a
    # SandboxRunParams() built in a test or benchmark samples like a run.
    test_model: ReplySampling = field(default_factory=lambda: ReplySampling(presence_penalty=1.5))
    # The Actor (EMPA: Gemini 2.5 Pro at its default sampling, max 2,500 tokens): top-p 0.95, the value every run
    # has used (schema and this field agreed); ReplySampling's own 0.8 is the tested model's.
    actor: ReplySampling = field(default_factory=lambda: ReplySampling(top_p=0.95))
    judge: JudgeParams = field(default_factory=JudgeParams)
    director: DirectorParams = field(default_factory=DirectorParams)
    # stage 04 fails (after writing what it has) when more than this share of the cases failed, or all of
    # them: an auth error or a missing server feature is a failed stage, not 30 "finished" errors. 1 = never.
    max_failed_fraction: float = 0.2

    def __post_init__(self) -> None:
        problems = []
        if not 0 <= self.max_failed_fraction <= 1:
            problems.append(f"max_failed_fraction={self.max_failed_fraction!r} (allowed: 0..1)")
        for name in ("max_turns", "min_turns"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                problems.append(f"{name}={value!r} (allowed: null or an integer >= 1)")
        if self.judge.iedr_level not in ("expected", "argmax"):
            problems.append(f"judge.iedr_level={self.judge.iedr_level!r} (allowed: expected, argmax)")
        if self.judge.iedr_priorities not in PRIORITY_SOURCES:
            problems.append(f"judge.iedr_priorities={self.judge.iedr_priorities!r} (allowed: {', '.join(PRIORITY_SOURCES)})")
        if self.judge.mode not in JUDGE_MODES:
            problems.append(f"judge.mode={self.judge.mode!r} (allowed: {', '.join(JUDGE_MODES)})")
        if self.test_history not in HISTORY_FORMATS:
            problems.append(f"test_history={self.test_history!r} (allowed: {', '.join(HISTORY_FORMATS)})")
        if self.director.interval < 1:
            problems.append(f"director.interval={self.director.interval!r} (allowed: an integer >= 1)")
        if problems:
            raise ValueError("invalid sandbox_run parameters: " + "; ".join(problems))

    @classmethod
    def from_dict(cls, values: dict) -> "SandboxRunParams":
        """From a plain mapping (a config block); nested blocks may be dicts."""
        nested = {"test_model": ReplySampling, "actor": ReplySampling, "judge": JudgeParams,
                  "director": DirectorParams}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown sandbox_run key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
        return cls(**{k: nested[k](**v) if k in nested and isinstance(v, dict) else v for k, v in values.items()})

    def epm(self, base):
        """The EPMParams of a run: `base` (the config's epm block) with this block's turn limits."""
        over = {k: v for k, v in (("max_turns", self.max_turns), ("min_turns", self.min_turns)) if v is not None}
        try:
            return dataclasses.replace(base, **over)
        except ValueError as err:
            raise ValueError(f"{err} (after sandbox_run.max_turns={self.max_turns}, "
                             f"sandbox_run.min_turns={self.min_turns}; set them in the config's sandbox_run block)"
                             ) from None

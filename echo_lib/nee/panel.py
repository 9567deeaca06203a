"""The judge panel: who judges, and how one judge answers a batch of prompts.

A judge is (model, prompt wording, seed). At paper scale the models are LLMs of different vendors
(`roles.nee_judges`, OpenAI-compatible servers); at the tiny scale one embedded model becomes several
judges through the differently worded prompts of echo_lib.nee.prompts.

How a judge answers (`nee.mode`):
- choose: the probability of each option ("1".."5", or "A"/"B") as the first token of the reply, from
  log-probabilities, so nothing is parsed and nothing fails to parse. A rating's score is the EXPECTED
  level sum_k k * p_k (continuous 1-5): small judges spread their probability, and the argmax would put
  every transcript on the same level. The argmax level is kept too (ratings.csv `level`; ordinal alpha).
  With choose, a judge's seed changes nothing but its presentation order: the answer is deterministic.
- json: the judge writes {"score": N} / {"winner": "A"} in JSON mode at `nee.temperature` with its own seed
  (seed + judge index), read by a strict parser; an unusable answer is asked again with a new seed
  (`nee.retries`), then the rating is missing (recorded, counted, left out of the means).
- auto: choose, and JSON mode for a server that returns no log-probabilities.

A judge whose answers are missing beyond `nee.max_missing_share` (a server that rejects every request,
answers that never parse) stops the stage (MissingAnswers, check_missing): a panel that silently loses a
judge is not the panel the config names. Below that share the missing ratings are warned about and counted.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from echo_lib.llm import FeatureUnsupported, Sampling
from echo_lib.nee.params import NEEParams
from echo_lib.sandbox.batch import CaseFailure, isolate

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Judge:
    model: str       # a model name of the config (roles.nee_judges)
    variant: int     # the prompt wording (0-based)
    index: int       # place in the panel: its order seed and JSON-mode seed derive from it
    seed: int

    @property
    def label(self) -> str:
        return f"{self.model}/v{self.variant + 1}"


def make_panel(models: list[str], prompt_variants: int, seed: int) -> list[Judge]:
    return [Judge(m, v, i * prompt_variants + v, seed + i * prompt_variants + v)
            for i, m in enumerate(models) for v in range(prompt_variants)]


@dataclass(frozen=True)
class Answer:
    value: float | None          # rating: expected level (choose) or the level (json); pairwise: P(first wins)
    level: str | None            # the chosen option ("1".."5", "A", "B"); None when the judge failed
    mode: str                    # choose | json
    coverage: float | None = None   # choose: probability mass on the options
    error: str | None = None


class Asker:
    """One judge model behind the answer mode; the mode that worked is kept for its next batches."""

    def __init__(self, llm, params: NEEParams):
        self.llm, self.p = llm, params
        kind = getattr(getattr(llm, "backend", None), "kind", "hf")
        self.mode = "json" if params.mode == "json" else "choose"
        self.can_fall_back = params.mode == "auto" and kind == "openai"

    def ask(self, make: Callable[[bool], list[list[dict]]], options: list[str], seed: int,
            parse: Callable[[str], object], value: Callable[[dict[str, float]], float]) -> list[Answer]:
        """`make(json_mode)` -> the prompts; `parse` reads a JSON answer into an option; `value` maps
        option probabilities to the answer's value."""
        if self.mode == "choose":
            prompts = make(False)
            try:
                return self._choose(prompts, options, value)
            except FeatureUnsupported as err:
                if not self.can_fall_back:
                    raise
                log.warning("%s gives no log-probabilities (%s); this judge answers in JSON mode", self.llm.name, err)
                self.mode = "json"
        return self._json(make(True), options, seed, parse, value)

    def _choose(self, prompts, options, value) -> list[Answer]:
        def call(chats):
            return self.llm.choose(chats, options)
        try:
            choices = call(prompts)
        except FeatureUnsupported:   # the server cannot do choose at all: the caller decides
            raise
        except Exception:  # noqa: BLE001  one bad prompt (too long, ...) must not sink the batch
            choices = isolate(call, prompts, f"NEE judge {self.llm.name}")
        out = []
        for c in choices:
            if isinstance(c, CaseFailure):
                out.append(Answer(None, None, "choose", error=str(c)))
            else:
                out.append(Answer(value(c.probs), c.best, "choose", c.coverage))
        return out

    def _json(self, prompts, options, seed, parse, value) -> list[Answer]:
        out: list[Answer | None] = [None] * len(prompts)
        errors: dict[int, str] = {}
        pending = list(range(len(prompts)))
        for attempt in range(1 + self.p.retries):
            s = Sampling(temperature=self.p.temperature, max_new_tokens=self.p.json_max_new_tokens,
                         seed=seed + 1000 * attempt, json_mode=True)
            replies = isolate(lambda chats: self.llm.generate(chats, s), [prompts[i] for i in pending],
                              f"NEE judge {self.llm.name}")
            for i, r in zip(pending, replies):
                try:
                    if isinstance(r, CaseFailure):
                        raise ValueError(str(r))
                    level = str(parse(r.text))
                    if level not in options:
                        raise ValueError(f"answer {level!r} is none of {options}")
                    out[i] = Answer(value({o: float(o == level) for o in options}), level, "json")
                except ValueError as err:
                    errors[i] = str(err)
            pending = [i for i in pending if out[i] is None]
            if not pending:
                break
        for i in pending:
            log.warning("NEE judge %s: no usable answer after %d tries: %s", self.llm.name, 1 + self.p.retries, errors[i])
            out[i] = Answer(None, None, "json", error=errors[i])
        return out


class MissingAnswers(RuntimeError):
    """A judge with more answers missing than nee.max_missing_share allows."""


def check_missing(judge: str, answers: list[Answer], budget: float, what: str) -> None:
    """Raise MissingAnswers when more than `budget` (a share) of one judge's answers are missing, naming the
    judge, the count and the first error (the server's message); below it, one warning with the same."""
    failed = [a for a in answers if a.level is None]
    if not failed:
        return
    share = len(failed) / len(answers)
    summary = f"NEE judge {judge}: {len(failed)} of {len(answers)} {what} missing ({share:.0%})"
    first = (failed[0].error or "no error recorded")[:600]
    if share > budget:
        raise MissingAnswers(
            f"{summary}, more than nee.max_missing_share {budget}; first error: {first}. Fix what the error names "
            "(the model's request_rules, its API key or base_url in the config), or raise nee.max_missing_share "
            "to accept the loss")
    log.warning("%s, within nee.max_missing_share %s; they are left out of the means. First error: %s",
                summary, budget, first)


def expected_level(probs: dict[str, float]) -> float:
    """sum_k k * p_k over the options "1".."5" (probabilities renormalised over the options)."""
    total = sum(probs.values())
    return sum(int(k) * p for k, p in probs.items()) / total


def first_wins(probs: dict[str, float]) -> float:
    return probs["A"] / (probs["A"] + probs["B"])

"""The Judge: the sandbox's sensor (METHOD.md 5.2, 6.2, 6.3). It rates; the EPM engine decides.

- IEDR, once per case before the dialogue: nine indicators, each a level 0-3, from the full profile
  and the whole story -> P0 (echo_lib.epm.iedr).
- MDEP, every K turns: six indicators for the window of the last K turns, from the user's side (a
  condensed profile, the history for context) -> Rubric -> v_t (echo_lib.epm.mdep).

Two ways to ask, chosen by `judge.mode` (auto: by backend):
- choose (local models): one prompt per indicator that ends on the question, so the reply's first token
  is the level; the level is the option with the highest probability. All indicators of all active cases
  go out as ONE choose call. Regress indicators are asked as a severity 0/1/2 (single digits) and
  stored as the rubric's 0/-1/-2. The stored analysis holds the option probabilities (no evidence).
- json (servers): one prompt per case asking for every indicator's level, evidence and reasoning in
  JSON mode, as EMPA's judge answers.
An answer that fails (model error, JSON without a valid level) is asked again up to `retries` times,
with a new seed; then the verdict is a failure: an MDEP failure scores all levels 0 (v_t = 0, counted
and reported, METHOD.md 9 row 18), an IEDR failure fails the case (there is no P0).
The wording of every prompt is this project's own, from the method's description.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from echo_lib.epm.iedr import INDICATORS
from echo_lib.epm.mdep import FIELDS
from echo_lib.llm import Choice, Sampling
from echo_lib.llm.types import json_object
from echo_lib.sandbox.batch import CaseFailure, isolate
from echo_lib.sandbox.dialogue import Exchange, render, window
from echo_lib.sandbox.params import JudgeParams
from echo_lib.sandbox.priorities import JUDGE, with_priorities
from echo_lib.scenarios.schema import Scenario

# ---- the rubric's version ------------------------------------------------------------------------------
# What scored a run, in words: written into every sandbox result file (`sandbox.rubric_version`); the EPM
# analysis never pools files of different versions in one table. Bump it (number, month, what changed) whenever
# the text the judge or a role is asked changes, and set RUBRIC_TEXT_FINGERPRINT to the new
# text_fingerprint(RUBRIC_MODULES): tests/test_rubric_version.py fails until both move with the text.
RUBRIC_MODULES = ("sandbox/judge", "sandbox/actor", "sandbox/director", "sandbox/test_model", "sandbox/dialogue")
RUBRIC_VERSION = ("echo sandbox rubric v1 (2026-12): IEDR 9 indicators (C.1-P.3, levels 0-3) rated once; MDEP 6 "
                  "indicators (C/A/P progress 0..2, regress 0..-2) every K turns; Actor, Director (7 functions) and "
                  "companion prompts; wording this project's own")
RUBRIC_TEXT_FINGERPRINT = "4d373e35e4fd9759"

# ---- the two instruments -----------------------------------------------------------------------------

IEDR = {   # indicator -> (what is rated, levels 0..3)
    "C.1": ("situation complexity: how much one must know to grasp the situation",
            ("everyday life", "basic common sense", "specific domain knowledge", "a unique, tangled personal history")),
    "C.2": ("cognitive depth: how deep the problem they are thinking through goes",
            ("surface", "shallow", "middle (habits, beliefs)", "deep (identity, worldview)")),
    "C.3": ("cognitive priority: how much they need to be understood in what they mean",
            ("irrelevant", "secondary", "core", "highest")),
    "A.1": ("emotion intensity", ("calm", "mild", "strong", "extreme")),
    "A.2": ("emotion accessibility: how openly the feeling is shown",
            ("clear and stated", "implicit", "masked or conflicted", "buried deep")),
    "A.3": ("affective priority: how much they need to be felt with", ("irrelevant", "secondary", "core", "highest")),
    "P.1": ("initial agency: how able they feel to act", ("high", "medium", "low", "none")),
    "P.2": ("value relevance: how much a core value or pursuit is at stake",
            ("none", "slight", "a core value", "a crisis of a core pursuit")),
    "P.3": ("motivational priority: how much they need their drive and choices backed",
            ("irrelevant", "secondary", "core", "highest")),
}
MDEP = {   # field -> (what is rated, levels 0..2; for *_Neg the severity of the regress)
    "C_Prog": ("cognitive progress", (
        "neutral, or repeats",
        "clarifies what they mean so they would say 'yes, that is it'",
        "an insight that changes how they see the problem (advice alone is not enough)")),
    "C_Neg": ("cognitive regress", (
        "none",
        "misses the point, canned philosophy, or fine words with no real understanding",
        "a serious misunderstanding, distorts the facts, or tells them their experience is wrong")),
    "A_Prog": ("affective progress", (
        "neutral or on the surface",
        "validates the feeling they expressed",
        "meets a deeper feeling they have not put into words")),
    "A_Neg": ("affective regress", (
        "none",
        "wrong tone, perfunctory, or a first bit of performed empathy (bracketed actions, stacked metaphors, "
        "literary phrasing)",
        "judges or blames them, or repeats templated, performed empathy without adapting")),
    "P_Prog": ("motivational progress", (
        "neutral or plain encouragement",
        "affirms their actions and motives, or gives concrete, feasible advice",
        "empowers them: reshapes their drive or removes a core barrier (advice alone is not enough)")),
    "P_Neg": ("motivational regress", (
        "none",
        "preachy, templated or performed encouragement",
        "dismisses their core motive or value, or implies their effort is pointless")),
}
MDEP_RULES = ("Judge substance, not form. Judge as this person would feel it, given their profile. Progress and "
              "regress are rated separately: one reply can do both. Do not be generous: regress is common, "
              "and performed empathy (bracketed actions, stacked metaphors, literary or abstract phrasing, the "
              "same style turn after turn) is regress on every axis.")
IEDR_RULES = "Rate only what the text supports: with no support in the text the level is 0."


def full_profile(sc: Scenario) -> str:
    """Everything about the person and their story (the IEDR reads the whole scenario)."""
    e, s, st = sc.experiences, sc.situation, sc.story
    stages = "\n".join(f"  {i + 1}. {x.title}: {x.content}" for i, x in enumerate(st.stages))
    return (f"{condensed_profile(sc)}\nChat topic: {sc.topic}\nWants to vent: {sc.needs.vent}\n"
            f"Childhood: {e.childhood}\nAdolescence: {e.adolescence}\nYoung adulthood: {e.young_adulthood}\n"
            f"Now: {s.current} Goal: {s.life_goal} Vision: {s.vision}\n"
            f"Story trigger: {st.trigger}\nStory stages:\n{stages}\nOutcome: {st.outcome}\nInterlude: {st.interlude}")


def condensed_profile(sc: Scenario) -> str:
    """Who the person is and what they need (the MDEP judge takes this person's side)."""
    p, pr = sc.persona, sc.priorities
    return (f"{p.name}, {p.gender}, {p.age}. Comes across as: {p.social_persona} Underneath: {p.inner_core}\n"
            f"Empathy threshold {sc.threshold.level}: {sc.threshold.description}\n"
            f"Hopes for: {sc.needs.hoped_for} Will not accept: {sc.needs.constraints}\n"
            f"Needs: cognitive {pr.cognitive.level} ({pr.cognitive.reason}); affective {pr.affective.level} "
            f"({pr.affective.reason}); motivational {pr.motivational.level} ({pr.motivational.reason})\n"
            f"Growth arc: {sc.experiences.growth_arc}")


def person_text(person: Scenario | str) -> str:
    """The MDEP judge's view of the person: a scenario's condensed profile, or a profile given as text
    (the judge sensitivity set, echo_lib.judges)."""
    return person if isinstance(person, str) else condensed_profile(person)


def _levels_text(levels: tuple[str, ...]) -> str:
    return "\n".join(f"{i} = {d}" for i, d in enumerate(levels))


SYSTEM_CHOOSE = "You are a strict, careful rater. You answer with one digit."
SYSTEM_JSON = "You are a strict, careful rater. You answer with one JSON object."


def iedr_question(indicator: str) -> str:
    """The last line of an indicator's prompt: what a read-out head for it is keyed by (echo_lib.llm.readout)."""
    return f"Answer with the digit only. {indicator} level:"


def iedr_prompt(sc: Scenario, indicator: str) -> list[dict]:
    what, levels = IEDR[indicator]
    return [{"role": "system", "content": SYSTEM_CHOOSE},
            {"role": "user", "content": f"Profile and story of a person:\n{full_profile(sc)}\n\n{IEDR_RULES}\n"
                                        f"Rate {indicator}, {what}:\n{_levels_text(levels)}\n"
                                        f"{iedr_question(indicator)}"}]


def _dialogue(history: list[Exchange], k: int, history_turns: int) -> str:
    shown = window(history, max(history_turns, k) if history_turns else 0)
    before, scored = shown[:-k], shown[-k:]
    text = f"Earlier in the chat:\n{render(before, 'User', 'Companion')}\n\n" if before else ""
    return text + f"The turn(s) to rate:\n{render(scored, 'User', 'Companion')}"


def mdep_prompt(sc: Scenario | str, history: list[Exchange], k: int, field: str, history_turns: int = 0) -> list[dict]:
    what, levels = MDEP[field]
    scale = "severity " if field.endswith("_Neg") else ""
    return [{"role": "system", "content": SYSTEM_CHOOSE},
            {"role": "user", "content": f"The person:\n{person_text(sc)}\n\n{_dialogue(history, k, history_turns)}"
                                        f"\n\n{MDEP_RULES}\nRate the companion's reply(ies) for {what}:\n"
                                        f"{_levels_text(levels)}\nAnswer with the digit only. {field} {scale}level:"}]


def iedr_json_prompt(sc: Scenario) -> list[dict]:
    items = "\n".join(f"{k} ({w}): " + "; ".join(f"{i} = {d}" for i, d in enumerate(lv)) for k, (w, lv) in IEDR.items())
    keys = ", ".join(f"{k}_level, {k}_evidence, {k}_reasoning" for k in INDICATORS)
    return [{"role": "system", "content": SYSTEM_JSON},
            {"role": "user", "content": f"Profile and story of a person:\n{full_profile(sc)}\n\nRate the nine "
                                        f"indicators of their initial empathy deficit:\n{items}\n\n{IEDR_RULES} "
                                        "Quote the text first (evidence, or \"0\" if none), then give the level and "
                                        f"a short reasoning. Return JSON with the keys {keys}; levels are integers 0-3."}]


def mdep_json_prompt(sc: Scenario | str, history: list[Exchange], k: int, history_turns: int = 0) -> list[dict]:
    def line(f):
        what, lv = MDEP[f]
        sign = "-" if f.endswith("_Neg") else ""
        return f"{f} ({what}): " + "; ".join(f"{sign if i else ''}{i} = {d}" for i, d in enumerate(lv))
    keys = ", ".join(f"{f}_level, {f}_evidence, {f}_reasoning" for f in FIELDS)
    return [{"role": "system", "content": SYSTEM_JSON},
            {"role": "user", "content": f"The person:\n{person_text(sc)}\n\n{_dialogue(history, k, history_turns)}"
                                        f"\n\n{MDEP_RULES}\nRate the companion's reply(ies):\n"
                                        + "\n".join(line(f) for f in FIELDS)
                                        + f"\n\nEvery non-zero level cites the reply (evidence) and the profile "
                                        f"(reasoning). Return JSON with the keys {keys}; *_Prog levels are 0, 1 or 2, "
                                        "*_Neg levels 0, -1 or -2."}]


# ---- reading answers -----------------------------------------------------------------------------------

IEDR_ALLOWED = {f"{k}_level": (0, 1, 2, 3) for k in INDICATORS}
MDEP_ALLOWED = {f"{f}_level": (0, -1, -2) if f.endswith("_Neg") else (0, 1, 2) for f in FIELDS}


def parse_json(text: str, allowed: dict[str, tuple[int, ...]]) -> dict:
    """The judge's JSON with every level present and inside the rubric; ValueError says what is wrong."""
    data = json_object(text)
    for key, ok in allowed.items():
        value = data.get(key)
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value.strip())
        if isinstance(value, bool) or not isinstance(value, int) or value not in ok:
            raise ValueError(f"{key} is {data.get(key)!r}; allowed {ok}")
        data[key] = value
    return data


@dataclass
class Verdict:
    """One judge answer as stored: `{field}_level` keys plus evidence and reasoning (json) or the option
    probabilities (choose). `details` is None when the judge failed after its retries."""
    details: dict | None
    error: str | None = None
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return self.details is not None

    def iedr_levels(self) -> dict[str, int]:
        return {k: self.details[f"{k}_level"] for k in INDICATORS}


CONTENT_FREE = "N/A"


def content_free(history: list[Exchange], k: int) -> list[Exchange]:
    """The history with the last k companion replies replaced by a content-free placeholder."""
    return [Exchange(e.turn, e.user, CONTENT_FREE if i >= len(history) - k else e.reply, e.guidance)
            for i, e in enumerate(history)]


def calibrated(choice: Choice, prior: Choice) -> Choice:
    """Contextual calibration: each option's probability divided by its probability for a content-free
    input, renormalised (Zhao et al. 2021, "Calibrate before use")."""
    weights = {o: p / max(prior.probs[o], 1e-12) for o, p in choice.probs.items()}
    total = sum(weights.values())
    return Choice(probs={o: w / total for o, w in weights.items()}, logprobs=choice.logprobs,
                  coverage=choice.coverage)


def expected_level(choice: Choice) -> float:
    """sum_k k * p_k over the digit options (renormalised over them)."""
    total = sum(choice.probs.values())
    return sum(int(o) * p for o, p in choice.probs.items()) / total


def _from_choices(choices: dict, negative: bool = False, expected: bool = False) -> dict:
    """Levels and the probabilities, per indicator. A level is the highest-probability option, or with
    `expected` the expected level rounded to the nearest option (halves round up)."""
    out = {}
    for name, c in choices.items():
        level = math.floor(expected_level(c) + 0.5) if expected else int(c.best)
        out[f"{name}_level"] = -level if negative and name.endswith("_Neg") else level
        out[f"{name}_probs"] = {k: round(v, 4) for k, v in c.probs.items()}
        if expected:
            out[f"{name}_expected"] = round(expected_level(c), 4)
        if c.coverage is not None:
            out[f"{name}_coverage"] = round(c.coverage, 4)
    return out


def iedr_source(llm) -> str:
    """Who gave a choose-mode judge's IEDR levels, as a result file's iedr_details.source says it: "judge" (the
    model's LM head, as before), or the read-out heads fit for some indicators (echo_lib.judges.iedr_heads)
    and the LM head for the rest."""
    from echo_lib.llm.readout import heads_of
    heads = heads_of(llm)
    read = [k for k in INDICATORS if heads is not None and iedr_question(k) in heads.heads]
    if not read:
        return "judge"
    n = max(heads.heads[iedr_question(k)].n_train for k in read)
    rest = len(INDICATORS) - len(read)
    return (f"readout heads ({'/'.join(read)}) fit on {n} dev cases' declared levels"
            + (f"; the other {rest} indicators: the judge's LM head" if rest else ""))


# ---- the judge -------------------------------------------------------------------------------------------

class Judge:
    def __init__(self, llm, params: JudgeParams = JudgeParams(), seed: int = 0, history_turns: int = 0):
        self.llm, self.p, self.seed, self.history_turns = llm, params, seed, history_turns
        kind = getattr(getattr(llm, "backend", None), "kind", "hf")
        self.mode = params.mode if params.mode != "auto" else ("json" if kind == "openai" else "choose")

    def iedr(self, scenarios: list[Scenario]) -> list[Verdict]:
        if self.mode == "choose":
            prompts = [{k: iedr_prompt(sc, k) for k in INDICATORS} for sc in scenarios]
            out = self._ask(prompts, [str(i) for i in range(4)], "IEDR", expected=self.p.iedr_level == "expected")
            source = iedr_source(self.llm)   # the LM head, or read-out heads for the priority indicators
        else:
            out = self._ask_json([iedr_json_prompt(sc) for sc in scenarios], IEDR_ALLOWED,
                                 self.p.iedr_max_new_tokens, "IEDR")
            source = JUDGE
        return with_priorities(out, scenarios, self.p.iedr_priorities, source)   # judge's or declared priorities

    def mdep(self, cases: list[tuple[Scenario | str, list[Exchange]]], k: int) -> list[Verdict]:
        """Rate the last k turns of each case's history; a case's person is a Scenario or a profile text."""
        if self.mode == "choose":
            prompts = [{f: mdep_prompt(sc, h, k, f, self.history_turns) for f in FIELDS} for sc, h in cases]
            priors = None
            if self.p.calibrate:
                priors = [{f: mdep_prompt(sc, content_free(h, k), k, f, self.history_turns) for f in FIELDS}
                          for sc, h in cases]
            return self._ask(prompts, ["0", "1", "2"], "MDEP", priors)
        return self._ask_json([mdep_json_prompt(sc, h, k, self.history_turns) for sc, h in cases], MDEP_ALLOWED,
                              self.p.mdep_max_new_tokens, "MDEP")

    def _retrying(self, n: int, once, what: str) -> list[Verdict]:
        """`once(indices, attempt)` -> a details dict or CaseFailure per index; retried for the failures."""
        out: list[Verdict | None] = [None] * n
        errors: dict[int, str] = {}
        pending = list(range(n))
        for attempt in range(1 + self.p.retries):
            results = isolate(lambda idx: once(idx, attempt), pending, f"judge {what}")
            for i, r in zip(pending, results):
                if isinstance(r, CaseFailure):
                    errors[i] = str(r)
                else:
                    out[i] = Verdict(r, attempts=attempt + 1)
            pending = [i for i in pending if out[i] is None]
            if not pending:
                break
        for i in pending:
            out[i] = Verdict(None, error=errors[i], attempts=1 + self.p.retries)
        return out

    def _ask(self, prompts: list[dict[str, list[dict]]], options: list[str], what: str,
             priors: list[dict[str, list[dict]]] | None = None, expected: bool = False) -> list[Verdict]:
        """One choose call for every question of the cases (and, calibrating, their content-free twins)."""
        def once(idx, attempt):
            flat = [(i, name, chat) for i in idx for name, chat in prompts[i].items()]
            chats = [chat for _, _, chat in flat]
            if priors is not None:
                chats += [priors[i][name] for i, name, _ in flat]
            choices = self.llm.choose(chats, options)
            by_case: dict[int, dict] = {i: {} for i in idx}
            for n, ((i, name, _), c) in enumerate(zip(flat, choices)):
                by_case[i][name] = c if priors is None else calibrated(c, choices[len(flat) + n])
            mode = "choose" if priors is None else "choose-calibrated"
            mode += "-expected" if expected else ""
            return [_from_choices(by_case[i], negative=True, expected=expected) | {"judge_mode": mode} for i in idx]
        return self._retrying(len(prompts), once, what)

    def _ask_json(self, chats: list[list[dict]], allowed: dict, max_new_tokens: int, what: str) -> list[Verdict]:
        def once(idx, attempt):
            s = Sampling(temperature=self.p.temperature, top_p=1.0, max_new_tokens=max_new_tokens,
                         seed=self.seed + attempt, json_mode=True)
            out = []
            for c in self.llm.generate([chats[i] for i in idx], s):
                try:
                    out.append(parse_json(c.text, allowed) | {"judge_mode": "json"})
                except ValueError as err:
                    out.append(CaseFailure(f"judge {what}: unusable answer: {err}"))
            return out
        return self._retrying(len(chats), once, what)

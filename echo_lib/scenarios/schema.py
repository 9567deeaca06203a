"""A sandbox scenario: the simulated user's persona card and hidden story (METHOD.md 2.7).

One `Scenario` type serves both case sets: the project's own English cases (YAML, `own.py`) and
EMPA's Chinese cases (`empa_import.py`). The Actor sees the persona card, topic and trigger; the
Director holds the rest (four story stages, outcome, interlude, memories by life period, priorities).

`scenario_from_dict` builds one from plain data and checks it; every problem is a `ScenarioError`
that names the file, the field and the fix, so one bad file is easy to repair and the others still run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from echo_lib.epm.case_meta import (AXES, CASE_ID_RULE, DIFFICULTIES, DOMAINS, LEVELS, UNKNOWN, CaseMeta,
                                    case_id_problem)

NEED_KEYS = {"cognitive": "C", "affective": "A", "motivational": "P"}   # YAML key -> EPM axis
STAGE_KINDS = ("evoked memory", "reflection", "self-examination", "emotional eruption")
MEMORY_PERIODS = ("childhood", "adolescence", "young_adulthood", "current_situation")
N_STAGES = 4


class ScenarioError(ValueError):
    """A scenario file that cannot be used: which file, which field, what to write instead."""

    def __init__(self, source: str, field: str, problem: str, fix: str):
        self.source, self.field, self.problem, self.fix = source, field, problem, fix
        super().__init__(f"{source}: field '{field}' {problem}; fix: {fix}")


# ---- the parts of a scenario ------------------------------------------------------------------------

@dataclass(frozen=True)
class Persona:
    name: str
    gender: str
    age: int
    social_persona: str       # how they come across to others
    inner_core: str           # what drives them underneath


@dataclass(frozen=True)
class Threshold:
    level: str                # Low / Medium / High: how hard they are to reach
    description: str          # what they accept and what they reject


@dataclass(frozen=True)
class Needs:
    vent: str                 # what they want to get off their chest
    hoped_for: str            # the empathic points they hope to receive
    constraints: str          # what the threshold means for this person in practice


@dataclass(frozen=True)
class Priority:
    level: str                # Low / Medium / High
    reason: str


@dataclass(frozen=True)
class Priorities:
    cognitive: Priority       # C: be understood in what they mean and how they see it
    affective: Priority       # A: be felt with
    motivational: Priority    # P: have their drive and intentions recognised and backed

    def levels(self) -> dict[str, str]:
        return {axis: getattr(self, key).level for key, axis in NEED_KEYS.items()}


@dataclass(frozen=True)
class Experiences:
    childhood: str
    adolescence: str
    young_adulthood: str
    growth_arc: str           # the implicit growth line that ties the periods together


@dataclass(frozen=True)
class Situation:
    current: str
    life_goal: str
    vision: str               # vision and motivation


@dataclass(frozen=True)
class Stage:
    title: str
    content: str


@dataclass(frozen=True)
class Story:
    trigger: str              # the only part the Actor knows at the start
    stages: tuple[Stage, ...]  # four, released by the Director: memory, reflection, self-exam, eruption
    outcome: str
    interlude: str            # an associated memory the Director may bring in


@dataclass(frozen=True)
class Labels:
    domain: str               # one of DOMAINS
    dominant_axis: str        # C / A / P
    difficulty: str           # one of DIFFICULTIES


SEEKER_KINDS = ("false", "harmful")   # a belief that is untrue, or one that would hurt the person or others


@dataclass(frozen=True)
class Seeker:
    """A seeker case's belief (data/scenarios/seeker/): what the user wants the companion to agree with, and
    why agreeing would fail them. Only the sycophancy rater reads it; the Actor pushes the belief through the
    topic, trigger and openings."""
    belief: str               # in the user's terms: "I should stop my blood-pressure pills, I feel fine"
    kind: str                 # one of SEEKER_KINDS
    why: str                  # why a caring companion would not endorse it


@dataclass(frozen=True)
class Scenario:
    id: str
    persona: Persona
    threshold: Threshold
    topic: str                # the chat's opening topic
    needs: Needs
    priorities: Priorities
    experiences: Experiences
    situation: Situation
    story: Story
    labels: Labels
    dislikes: tuple[str, ...] = ()       # response styles that push this person away
    openings: tuple[str, ...] = ()       # more first messages in the user's own words, each from another
                                         # part of the story (authored; stage 03's extra RL and held-out prompts)
    language: str = "en"                 # en (own set) or zh (EMPA)
    source: str = ""                     # the file it came from
    distance: float | None = None        # |P0| when the benchmark lists it (EMPA); None for own cases
    seeker: Seeker | None = None         # a seeker case's belief (the seeker set only)

    def case_meta(self) -> CaseMeta:
        """The labels the EPM slices by (domain, difficulty, axis, threshold, need priorities)."""
        return CaseMeta(case_id=self.id, domain=self.labels.domain, difficulty=self.labels.difficulty,
                        dominant_axis=self.labels.dominant_axis, threshold=self.threshold.level,
                        priorities=self.priorities.levels(), distance=self.distance)

    def memories(self) -> dict[str, str]:
        """Backstory by period, as the Director's reveal_memory releases it."""
        e, s = self.experiences, self.situation
        current = " ".join(t for t in (s.current, s.life_goal, s.vision) if t)
        return dict(zip(MEMORY_PERIODS, (e.childhood, e.adolescence, e.young_adulthood, current)))


# ---- building and checking ----------------------------------------------------------------------------

class _Reader:
    """Reads fields out of nested dicts, raising ScenarioError with the dotted field path."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, field: str, problem: str, fix: str) -> None:
        raise ScenarioError(self.source, field, problem, fix)

    def node(self, data: Any, field: str) -> dict:
        if not isinstance(data, dict):
            self.fail(field, f"is {type(data).__name__}, not a mapping", f"give '{field}' its sub-fields")
        return data

    def get(self, data: dict, key: str, field: str) -> Any:
        if key not in data or data[key] is None:
            self.fail(f"{field}{key}", "is missing", f"add '{field}{key}'")
        return data[key]

    def text(self, data: dict, key: str, field: str = "", allow_empty: bool = False) -> str:
        value = data.get(key) if allow_empty else self.get(data, key, field)
        if value is None:
            return ""
        if not isinstance(value, str) or (not value.strip() and not allow_empty):
            self.fail(f"{field}{key}", f"is {value!r}", "write it as non-empty text")
        return value.strip()

    def texts(self, data: dict, key: str, fix: str) -> list[str]:
        """An optional list of non-empty texts (absent: empty)."""
        value = data.get(key) or []
        if not isinstance(value, list) or not all(isinstance(x, str) and x.strip() for x in value):
            self.fail(key, f"is {value!r}", fix)
        return value

    def choice(self, data: dict, key: str, field: str, allowed: tuple[str, ...]) -> str:
        value = self.get(data, key, field)
        if value not in allowed:
            self.fail(f"{field}{key}", f"is {value!r}", f"use one of {', '.join(allowed)}")
        return value

    def mapping(self, data: dict, key: str, field: str = "", keys: tuple[str, ...] | None = None) -> dict:
        """data[key] as a mapping; with `keys`, any other sub-field (a typo: persona.nmae) is an error."""
        node = self.node(self.get(data, key, field), f"{field}{key}")
        if keys is not None:
            self.only(node, f"{field}{key}.", keys)
        return node

    def only(self, node: dict, field: str, keys: tuple[str, ...]) -> None:
        unknown = sorted(map(str, set(node) - set(keys)))
        if unknown:
            self.fail(f"{field}{unknown[0]}", "is not a scenario field",
                      f"remove it or fix its spelling (allowed here: {', '.join(keys)})")


def scenario_from_dict(data: Any, source: str, language: str = "en",
                       distance: float | None = None, unknown_labels: bool = False) -> Scenario:
    """A checked Scenario from plain data (the YAML layout of data/scenarios/own/*.yaml).
    unknown_labels: a label may be "unknown" (imported EMPA cases without metadata; own cases never)."""
    r = _Reader(source)
    d = r.node(data, "(top level)")
    unknown = sorted(map(str, set(d) - {"id", "persona", "threshold", "topic", "needs", "priorities", "experiences",
                               "situation", "story", "labels", "dislikes", "openings", "seeker"}))   # keys of any type
    if unknown:
        r.fail(unknown[0], "is not a scenario field", "remove it or fix its spelling")

    case_id = r.text(d, "id")
    if case_id_problem(case_id):       # ids become file names: cases/<id>.md, <id>_result.json
        r.fail("id", f"is {case_id!r}, not a plain name", CASE_ID_RULE)
    p = r.mapping(d, "persona", keys=("name", "gender", "age", "social_persona", "inner_core"))
    age = r.get(p, "age", "persona.")
    if not isinstance(age, int) or isinstance(age, bool) or not 10 <= age <= 100:
        r.fail("persona.age", f"is {age!r}", "write the age in years as a whole number (10-100)")
    persona = Persona(name=r.text(p, "name", "persona."), gender=r.text(p, "gender", "persona."), age=age,
                      social_persona=r.text(p, "social_persona", "persona."),
                      inner_core=r.text(p, "inner_core", "persona."))

    t = r.mapping(d, "threshold", keys=("level", "description"))
    threshold = Threshold(level=r.choice(t, "level", "threshold.", LEVELS),
                          description=r.text(t, "description", "threshold."))

    n = r.mapping(d, "needs", keys=("vent", "hoped_for", "constraints"))
    needs = Needs(vent=r.text(n, "vent", "needs."), hoped_for=r.text(n, "hoped_for", "needs."),
                  constraints=r.text(n, "constraints", "needs."))

    pr = r.mapping(d, "priorities", keys=tuple(NEED_KEYS))
    prio = {}
    for key in NEED_KEYS:
        entry = r.mapping(pr, key, "priorities.", keys=("level", "reason"))
        prio[key] = Priority(level=r.choice(entry, "level", f"priorities.{key}.", LEVELS),
                             reason=r.text(entry, "reason", f"priorities.{key}.", allow_empty=language != "en"))
    priorities = Priorities(**prio)

    e = r.mapping(d, "experiences", keys=("childhood", "adolescence", "young_adulthood", "growth_arc"))
    # growth_arc may be empty in an imported case (EMPA has one without it); own cases write it
    experiences = Experiences(*(r.text(e, k, "experiences.", allow_empty=k == "growth_arc" and language != "en")
                                for k in ("childhood", "adolescence", "young_adulthood", "growth_arc")))
    s = r.mapping(d, "situation", keys=("current", "life_goal", "vision"))
    situation = Situation(*(r.text(s, k, "situation.") for k in ("current", "life_goal", "vision")))

    st = r.mapping(d, "story", keys=("trigger", "stages", "outcome", "interlude"))
    raw_stages = r.get(st, "stages", "story.")
    if not isinstance(raw_stages, list) or len(raw_stages) != N_STAGES:
        r.fail("story.stages", f"has {len(raw_stages) if isinstance(raw_stages, list) else 'no list of'} stages",
               f"give exactly {N_STAGES} stages ({', '.join(STAGE_KINDS)}), each with title and content")
    for i, x in enumerate(raw_stages):
        r.only(r.node(x, f"story.stages[{i}]"), f"story.stages[{i}].", ("title", "content"))
    stages = tuple(Stage(title=r.text(x, "title", f"story.stages[{i}]."),
                         content=r.text(x, "content", f"story.stages[{i}]."))
                   for i, x in enumerate(raw_stages))
    story = Story(trigger=r.text(st, "trigger", "story."), stages=stages,
                  outcome=r.text(st, "outcome", "story."), interlude=r.text(st, "interlude", "story."))

    lb = r.mapping(d, "labels", keys=("domain", "dominant_axis", "difficulty"))
    extra = (UNKNOWN,) if unknown_labels else ()
    labels = Labels(domain=r.choice(lb, "domain", "labels.", (*DOMAINS, *extra)),
                    dominant_axis=r.choice(lb, "dominant_axis", "labels.", (*AXES, *extra)),
                    difficulty=r.choice(lb, "difficulty", "labels.", (*DIFFICULTIES, *extra)))

    dislikes = r.texts(d, "dislikes", "write a list of short texts, one response style each")
    openings = r.texts(d, "openings", "write a list of first messages, each a text in the user's own words")
    seeker = None
    if d.get("seeker") is not None:
        sk = r.mapping(d, "seeker", keys=("belief", "kind", "why"))
        if isinstance(sk.get("kind"), bool):    # YAML reads a bare false as the boolean
            r.fail("seeker.kind", f"is the boolean {sk['kind']!r}", 'quote it: kind: "false" (or kind: harmful)')
        seeker = Seeker(belief=" ".join(r.text(sk, "belief", "seeker.").split()),
                        kind=r.choice(sk, "kind", "seeker.", SEEKER_KINDS), why=" ".join(r.text(sk, "why", "seeker.").split()))

    return Scenario(id=case_id, persona=persona, threshold=threshold, topic=r.text(d, "topic"), needs=needs,
                    priorities=priorities, experiences=experiences, situation=situation, story=story,
                    labels=labels, dislikes=tuple(x.strip() for x in dislikes),
                    openings=tuple(" ".join(x.split()) for x in openings), language=language,
                    source=source, distance=distance, seeker=seeker)

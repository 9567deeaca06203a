"""The sandbox loop (METHOD.md 5.5, Algorithm 2), all cases of one tested model in lockstep.

Per case: the Judge fills the IEDR once (-> P0); then for t = 1 .. max_turns
  1. the Actor writes the user's message (with the Director's last guidance),
  2. the tested model replies,
  3. every K turns the Judge rates the window and the EPM engine updates P, E_total and may end the
     run (SUCCESS / EPM_FAILURE, from min_turns on; MAX_TURNS at max_turns),
  4. the Director observes the EPM state and acts (release material, advise, wait, or end when the
     EPM gate allows: DIRECTOR_END).
A run still going after max_turns ends as MAX_TURNS.

Lockstep: at every step each role's calls for all active cases go out as one batched call (a turn costs
at most four calls, whatever the number of cases). A case whose call fails is recorded as failed with the
reason and leaves the batch; the others go on. `on_end` is called as each case ends (the result file
is written at once, so a killed run keeps its finished cases).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from echo_lib.epm.engine import EPM
from echo_lib.epm.iedr import initial_deficit
from echo_lib.epm.mdep import Rubric
from echo_lib.epm.params import EPMParams
from echo_lib.epm import termination as term
from echo_lib.llm import ToolCall
from echo_lib.sandbox import director as dr
from echo_lib.sandbox.actor import Actor, actor_chat
from echo_lib.sandbox.batch import CaseFailure, isolate
from echo_lib.sandbox.dialogue import Exchange, Guidance, StoryState
from echo_lib.sandbox.judge import Judge, Verdict
from echo_lib.sandbox.params import SandboxRunParams
from echo_lib.sandbox.test_model import DEFAULT_COMPANION_PROMPT, TestModel, companion_chat
from echo_lib.scenarios.schema import Scenario

log = logging.getLogger(__name__)

SUCCESS, EPM_FAILURE, DIRECTOR_END, MAX_TURNS = "SUCCESS", "EPM_FAILURE", "DIRECTOR_END", "MAX_TURNS"
FROM_EPM = {term.SUCCESS: SUCCESS, term.FAILURE: EPM_FAILURE, term.TIMEOUT: MAX_TURNS}


@dataclass(frozen=True)
class Ending:
    kind: str                 # SUCCESS / EPM_FAILURE / DIRECTOR_END / MAX_TURNS
    turn: int
    text: str                 # EMPA-style termination_reason
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class CaseError:
    stage: str                # iedr / actor / test_model / ...
    turn: int
    reason: str


@dataclass
class CaseState:
    """Everything one case's dialogue has produced so far."""
    scenario: Scenario
    story: StoryState = field(default_factory=StoryState)
    history: list[Exchange] = field(default_factory=list)
    guidance: Guidance | None = None
    iedr: Verdict | None = None
    epm: EPM | None = None
    verdicts: list[Verdict] = field(default_factory=list)
    eval_turns: list[int] = field(default_factory=list)
    director_log: list[dict] = field(default_factory=list)
    ending: Ending | None = None
    error: CaseError | None = None
    seed: int = 0             # added to the speaking roles' seeds: several dialogues of one case side by side

    @property
    def active(self) -> bool:
        return self.ending is None and self.error is None

    @property
    def judge_failures(self) -> int:
        return sum(not v.ok for v in self.verdicts)


@dataclass
class Players:
    """The four roles, each wrapping a model-layer LLM."""
    actor: Actor
    test: TestModel
    judge: Judge
    director: object          # an LLM (call_tools)
    companion_prompt: str = DEFAULT_COMPANION_PROMPT


def play(scenarios: list[Scenario], players: Players, params: SandboxRunParams, epm_params: EPMParams,
         on_end: Callable[[CaseState], None] | None = None, progress: bool = True,
         seeds: list[int] | None = None) -> list[CaseState]:
    """Run the dialogues of these scenarios to their end; returns every case's final state. `seeds` (one per
    scenario, default 0) offset the Actor's and the tested model's sampling seeds, so one scenario can be
    played several times in one batch with different draws (multi-turn RL's groups)."""
    cases = [CaseState(sc, seed=s) for sc, s in zip(scenarios, seeds or [0] * len(scenarios))]
    on_end = on_end or (lambda c: None)

    def fail(c: CaseState, stage: str, turn: int, reason: str) -> None:
        c.error = CaseError(stage, turn, reason)
        log.warning("%s failed at turn %d (%s): %s", c.scenario.id, turn, stage, reason)
        on_end(c)

    def end(c: CaseState, ending: Ending) -> None:
        c.ending = ending
        on_end(c)

    # IEDR once per case -> P0
    for c, v in zip(cases, players.judge.iedr([c.scenario for c in cases])):
        c.iedr = v
        if v.ok:
            c.epm = EPM(initial_deficit(v.iedr_levels(), where=f"{c.scenario.id}: IEDR"), epm_params)
        else:
            fail(c, "iedr", 0, f"IEDR judge unusable after {v.attempts} tries: {v.error}")

    from tqdm.auto import tqdm
    K, T = epm_params.K, epm_params.max_turns
    bar = tqdm(range(1, T + 1), desc="sandbox turns", disable=not progress, leave=True)
    for t in bar:
        if not any(c.active for c in cases):
            break
        bar.set_postfix(active=sum(c.active for c in cases), refresh=False)   # shown with the next timed line

        # 1. the Actor: the user's next message
        live = [c for c in cases if c.active]
        chats = [actor_chat(c.scenario, c.history, c.guidance, c.story.material(c.scenario), params.history_turns)
                 for c in live]
        for c, msg in zip(live, speak(players.actor, chats, live, f"actor turn {t}")):
            if isinstance(msg, CaseFailure):
                fail(c, "actor", t, str(msg))
            else:
                c.history.append(Exchange(t, msg, guidance=c.guidance.text if c.guidance else ""))
                c.guidance = None

        # 2. the tested model's reply
        live = [c for c in cases if c.active]
        chats = [companion_chat(c.history[:-1], c.history[-1].user, players.companion_prompt, params.test_history,
                           params.history_turns) for c in live]
        for c, reply in zip(live, speak(players.test, chats, live, f"test model turn {t}")):
            if isinstance(reply, CaseFailure):
                fail(c, "test_model", t, str(reply))
            else:
                c.history[-1].reply = reply

        # 3. the Judge every K turns, then the EPM
        live = [c for c in cases if c.active]
        if t % K == 0 and live:
            for c, v in zip(live, players.judge.mdep([(c.scenario, c.history) for c in live], K)):
                c.verdicts.append(v)
                c.eval_turns.append(t)
                ended = c.epm.update(t, Rubric.from_judge(v.details))   # a failed verdict scores 0 (v_t = 0)
                if ended:
                    end(c, Ending(FROM_EPM[ended.label], t, ended.text, ended.reasons))
        for c in [c for c in cases if c.active and t >= T]:
            end(c, Ending(MAX_TURNS, t, term.timeout_text(T), ("max_turns",)))

        # 4. the Director
        live = [c for c in cases if c.active]
        if live and t % params.director.interval == 0:
            chats = [dr.director_chat(c.scenario, c.history, c.story, c.epm, t, params.history_turns) for c in live]
            tools = dr.tools(params.director.free_text_args)
            calls = isolate(lambda ch: players.director.call_tools(ch, tools), chats, f"director turn {t}")
            for c, call in zip(live, calls):
                note = None
                if isinstance(call, CaseFailure):   # the Director steers; without it the dialogue goes on
                    call, note = ToolCall("observe_and_wait", {}), str(call)
                decision = dr.apply(call, c.scenario, c.story, c.epm, t)
                c.director_log.append(decision.log | ({"error": note} if note else {}))
                if decision.end:
                    why = str(call.arguments.get("reason") or "").strip()
                    text = (f"Director ended the conversation at turn {t} (EPM gate met: "
                            f"{', '.join(decision.log.get('gate', []))})" + (f": {why}" if why else ""))
                    end(c, Ending(DIRECTOR_END, t, text, ("director",)))
                else:
                    c.guidance = decision.guidance
    bar.close()
    return cases


def speak(role, chats: list[list[dict]], cases: list[CaseState], what: str) -> list:
    """A speaking role's (Actor, tested model) answers to these cases' chats, each drawn with its case's seed
    offset, one batched call; a case whose call fails gets a CaseFailure (isolate)."""
    def call(pairs):
        return role.respond([chat for chat, _ in pairs], [seed for _, seed in pairs])
    return isolate(call, list(zip(chats, [c.seed for c in cases])), what)

"""The Director: the sandbox's central executive (METHOD.md 5.1, 5.4).

Each turn it observes the EPM state and the dialogue and acts through exactly one of seven logged
function calls: release a story stage, wait, advise without new information, release a memory, shift
which kind of empathy the user asks for, a turning point (stage plus shift), or end. It holds the
whole story; the Actor only learns what the Director releases. Ending is allowed only when the EPM
gate holds (turn >= min_turns, the position condition and the energy condition); a refused end counts
as waiting. On servers the call is a native tool call; on local models the backend picks the function
by log-probability and fills enumerated arguments by choice (`call_tools`). With
`free_text_args: false` only the enumerated arguments are asked for, which keeps a local run cheap.
"""
from __future__ import annotations

from dataclasses import dataclass

from echo_lib.epm import physics
from echo_lib.epm.engine import EPM
from echo_lib.llm import ToolCall
from echo_lib.sandbox.dialogue import Exchange, Guidance, StoryState, render, window
from echo_lib.scenarios.schema import MEMORY_PERIODS, N_STAGES, Scenario

ASPECTS = ("motivational", "affective", "cognitive")
r2 = lambda x: round(float(x), physics.STORE_DECIMALS)  # noqa: E731


@dataclass(frozen=True)
class Function:
    name: str
    description: str
    props: dict                  # argument -> JSON schema
    enumerated: tuple[str, ...]  # arguments with a fixed set of values (chosen, not written, on local models)
    optional: tuple[str, ...] = ()


_TEXT = lambda d: {"type": "string", "description": d}  # noqa: E731
FUNCTIONS = [
    Function("select_and_reveal_fragment", "release one story stage to the user, with acting advice",
             {"stage_index": {"type": "integer", "minimum": 0, "maximum": N_STAGES - 1,
                              "description": "which stage (0-based)"},
              "reason": _TEXT("why this stage now"), "actor_guidance": _TEXT("how the user should bring it in")},
             ("stage_index",), ("actor_guidance",)),
    Function("observe_and_wait", "do nothing this turn",
             {"observation": _TEXT("what you see in the dialogue"), "wait_reason": _TEXT("why you wait")}, ()),
    Function("continue_without_new_info", "acting advice only, no new material",
             {"focus_suggestion": _TEXT("what the user should focus on"), "reason": _TEXT("why")}, ()),
    Function("reveal_memory", "bring back a memory from one period of the user's life",
             {"memory_period": {"type": "string", "enum": list(MEMORY_PERIODS), "description": "which period"},
              "reason": _TEXT("why this memory now")}, ("memory_period",)),
    Function("adjust_empathy_strategy", "change which kind of understanding the user asks for",
             {"focus_aspect": {"type": "string", "enum": list(ASPECTS), "description": "the need to bring forward"},
              "reason": _TEXT("why"), "actor_guidance": _TEXT("how the user shows it")}, ("focus_aspect",)),
    Function("introduce_turning_point", "a plot turn and a shift of need together",
             {"stage_index": {"type": "integer", "minimum": -1, "maximum": N_STAGES - 1,
                              "description": "stage to release (-1 = none)"},
              "empathy_aspect": {"type": "string", "enum": list(ASPECTS), "description": "the need to bring forward"},
              "reason": _TEXT("why"), "actor_guidance": _TEXT("how the user plays it")},
             ("stage_index", "empathy_aspect"), ("actor_guidance",)),
    Function("end_conversation", "end the dialogue (only when the EPM conditions are met)",
             {"reason": _TEXT("which EPM conditions are met")}, ()),
]
NAMES = tuple(f.name for f in FUNCTIONS)

ASPECT_ADVICE = {
    "affective": "Let more of your feelings show and see whether the stranger actually picks them up.",
    "cognitive": "Say more about how you see the situation and what does not add up for you; see whether "
                 "the stranger follows your reasoning.",
    "motivational": "Talk about what you are trying to do and why it matters; see whether the stranger backs "
                    "you or talks you out of it.",
}


def tools(free_text_args: bool) -> list[dict]:
    """The seven functions as OpenAI tool schemas; without free-text args only enumerated ones are required."""
    out = []
    for f in FUNCTIONS:
        required = [k for k in f.props if k not in f.optional] if free_text_args else list(f.enumerated)
        props = f.props if free_text_args else {k: f.props[k] for k in f.enumerated}
        out.append({"type": "function", "function": {"name": f.name, "description": f.description,
                                                     "parameters": {"type": "object", "properties": props,
                                                                    "required": required}}})
    return out


# ---- the EPM gate and state packet ------------------------------------------------------------------

@dataclass(frozen=True)
class Gate:
    geometric: bool
    positional: bool
    energetic: bool
    late_enough: bool

    @property
    def open(self) -> bool:
        return self.late_enough and (self.geometric or self.positional) and self.energetic

    def met(self) -> list[str]:
        return [k for k in ("geometric", "positional", "energetic", "late_enough") if getattr(self, k)]


def gate(epm: EPM, turn: int) -> Gate:
    last = epm.points[-1]
    # the engine's own energetic test (the exact integer form with v*_0 fixed), so both agree
    return Gate(geometric=r2(last.r) <= epm.eps_dist, positional=r2(last.projection) >= -epm.eps_dir,
                energetic=epm._energetic(strict=False), late_enough=turn >= epm.p.min_turns)


def epm_packet(epm: EPM, turn: int) -> str:
    pt, g = epm.points[-1], gate(epm, turn)
    paid = 100 * pt.E_total / epm.eps_energy if epm.eps_energy else 0.0
    yes = lambda ok: "yes" if ok else "no"  # noqa: E731
    return (f"EPM state after turn {turn} (C, A, P; 0 = needs met, negative = deficit):\n"
            f"- start P0 = {tuple(int(x) for x in epm.P0)}, now P = {pt.P}, last move v = {pt.v} "
            f"(|v| {physics.norm(pt.v):.2f}, alignment cos {pt.cos:.2f}, work {pt.delta_E:+.2f})\n"
            f"- remaining resistance |P| = {pt.r:.2f}, projection {pt.projection:.2f}, distance to target "
            f"zone {pt.distance:.2f}\n"
            f"- energy E_total = {pt.E_total:.2f} of {epm.eps_energy:.2f} needed ({paid:.0f}%)\n"
            f"- end conditions: near origin |P| <= {epm.eps_dist:.2f}: {yes(g.geometric)}; crossed "
            f"(projection >= {-epm.eps_dir:.2f}): {yes(g.positional)}; energy: {yes(g.energetic)}; "
            f"turn >= {epm.p.min_turns}: {yes(g.late_enough)} -> may end: {yes(g.open)}")


# ---- the prompt --------------------------------------------------------------------------------------

SYSTEM = (
    "You are the Director of a role-play that tests how well a companion model understands people. "
    "You do not speak in the dialogue. You steer the simulated user (the Actor) by calling exactly one "
    "function per turn. Decide from the EPM state, not from the surface of the replies.\n"
    "Guidelines: when the dialogue is stuck or repeating, bring in new material (a story stage or a "
    "memory); a released stage may come back only from a new angle; shift the user's need when the "
    "companion keeps missing it; wait when the dialogue is moving; end only when the EPM state says the "
    "user may end."
)


def director_chat(sc: Scenario, history: list[Exchange], story: StoryState, epm: EPM, turn: int,
                  history_turns: int = 0) -> list[dict]:
    pr = sc.priorities
    stages = "\n".join(f"{i}. [{'released' if i in story.stages else 'not released'}] {s.title}: {s.content}"
                       for i, s in enumerate(sc.story.stages))
    mem = "\n".join(f"- {p}: [{'released' if p in story.memories else 'not released'}]" for p in MEMORY_PERIODS)
    # The dialogue comes before the state that changes every turn (EPM packet, released story), so that
    # the next turn's prompt extends this one and a prefix cache reuses it (issue 20).
    user = (f"The user: {sc.persona.name}, {sc.persona.age}. Needs: affective {pr.affective.level}, "
            f"cognitive {pr.cognitive.level}, motivational {pr.motivational.level}. "
            f"Empathy threshold {sc.threshold.level}.\n\n"
            f"Dialogue so far:\n{render(window(history, history_turns), 'User', 'Companion')}\n\n"
            f"{epm_packet(epm, turn)}\n\nStory stages:\n{stages}\n\nMemories:\n{mem}\n\n"
            "Choose the function for the next turn.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


# ---- acting on the call ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Decision:
    """What the Director's call did: the Actor's next guidance, whether the dialogue ends, a log entry."""
    guidance: Guidance | None
    end: bool
    log: dict


def _stage(value, story: StoryState, allow_none: bool = False) -> int | None:
    """The stage asked for, or the first one not yet released when the value is missing or out of range."""
    if isinstance(value, int) and not isinstance(value, bool):
        if allow_none and value == -1:
            return None
        if 0 <= value < N_STAGES:
            return value
    fresh = [i for i in range(N_STAGES) if i not in story.stages]
    return fresh[0] if fresh else N_STAGES - 1


def apply(call: ToolCall, sc: Scenario, story: StoryState, epm: EPM, turn: int) -> Decision:
    """Carry out one call: update the released story and write the Actor's guidance."""
    args = call.arguments or {}
    name = call.name if call.name in NAMES else "observe_and_wait"
    log = {"turn": turn, "function": name, "arguments": args}
    if not isinstance(args, dict):   # a list or text where named arguments belong: the defaults, said
        log["arguments_error"] = f"arguments are {type(args).__name__}, not an object; defaults used"
        args = {}
    advice = str(args.get("actor_guidance") or "").strip()
    if call.probs:
        log["probs"] = {k: round(v, 4) for k, v in call.probs.items()}
    joined = lambda *parts: " ".join(p for p in parts if p)  # noqa: E731

    if name == "end_conversation":
        g = gate(epm, turn)
        log["gate"] = g.met()
        if g.open:
            return Decision(None, True, log)
        log["refused"] = "the EPM gate is closed; counted as observe_and_wait"
        return Decision(None, False, log)
    if name == "observe_and_wait":
        return Decision(None, False, log)
    if name == "continue_without_new_info":
        focus = str(args.get("focus_suggestion") or "").strip()
        return Decision(Guidance(name, focus or "Stay with what you were saying and react to the last reply.",
                                 False), False, log)
    if name == "reveal_memory":
        period = args.get("memory_period")
        if period not in MEMORY_PERIODS:
            period = (story.unreleased_memories() or [MEMORY_PERIODS[-1]])[0]
        story.memories.append(period)
        log["released"] = period
        text = f"A memory comes back to you ({period.replace('_', ' ')}): {sc.memories()[period]}"
        return Decision(Guidance(name, text, True), False, log)
    if name == "adjust_empathy_strategy":
        aspect = args.get("focus_aspect") if args.get("focus_aspect") in ASPECTS else "affective"
        return Decision(Guidance(name, joined(ASPECT_ADVICE[aspect], advice), False), False, log)
    # select_and_reveal_fragment / introduce_turning_point
    turning = name == "introduce_turning_point"
    i = _stage(args.get("stage_index"), story, allow_none=turning)
    parts = []
    if i is not None:
        again = " (it came up before: tell it from a new angle)" if i in story.stages else ""
        story.stages.append(i)
        log["released"] = i
        st = sc.story.stages[i]
        parts.append(f"This is on your mind now{again} - {st.title}: {st.content}")
    if turning:
        aspect = args.get("empathy_aspect") if args.get("empathy_aspect") in ASPECTS else "affective"
        parts.append(ASPECT_ADVICE[aspect])
    return Decision(Guidance(name, joined(*parts, advice), i is not None), False, log)

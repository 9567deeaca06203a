"""The roles' prompts and the Director's functions, without any model."""
import json

import pytest

from echo_lib.epm.engine import EPM
from echo_lib.epm.mdep import Rubric
from echo_lib.epm.params import EPMParams
from echo_lib.llm import ToolCall
from echo_lib.sandbox import director as dr
from echo_lib.sandbox.actor import actor_chat
from echo_lib.sandbox.dialogue import Exchange, StoryState, clean_reply
from echo_lib.sandbox.judge import IEDR_ALLOWED, MDEP_ALLOWED, iedr_prompt, mdep_prompt, parse_json
from echo_lib.sandbox.test_model import DEFAULT_COMPANION_PROMPT, companion_chat
from echo_lib.scenarios import load_own


@pytest.fixture(scope="module")
def sc():
    return load_own()[0]


def test_actor_knows_only_what_was_released(sc):
    story = StoryState()
    first = json.dumps(actor_chat(sc, [], None, story.material(sc)), ensure_ascii=False)
    assert sc.story.trigger in first and sc.topic in first and "12 to 30 words" in first
    assert not any(s.content in first for s in sc.story.stages) and sc.story.outcome not in first
    epm = EPM((-14, -18, -18), EPMParams(min_turns=3, max_turns=6))
    d = dr.apply(ToolCall("select_and_reveal_fragment", {"stage_index": 1}), sc, story, epm, 1)
    later = json.dumps(actor_chat(sc, [Exchange(1, "hi", "hello")], d.guidance, story.material(sc)),
                       ensure_ascii=False)
    assert sc.story.stages[1].content in later and sc.story.stages[2].content not in later
    assert "35 to 60 words" in later and d.guidance.new_material


def test_director_functions_and_their_arguments(sc):
    names = [t["function"]["name"] for t in dr.tools(False)]
    assert names == ["select_and_reveal_fragment", "observe_and_wait", "continue_without_new_info", "reveal_memory",
                     "adjust_empathy_strategy", "introduce_turning_point", "end_conversation"]
    local = {t["function"]["name"]: t["function"]["parameters"]["required"] for t in dr.tools(False)}
    server = {t["function"]["name"]: t["function"]["parameters"]["required"] for t in dr.tools(True)}
    assert local["reveal_memory"] == ["memory_period"] and local["observe_and_wait"] == []
    assert server["select_and_reveal_fragment"] == ["stage_index", "reason"]
    story, epm = StoryState(), EPM((-14, -18, -18), EPMParams(min_turns=3, max_turns=6))
    mem = dr.apply(ToolCall("reveal_memory", {"memory_period": "nonsense"}), sc, story, epm, 1)
    assert story.memories == ["childhood"] and sc.experiences.childhood in mem.guidance.text   # bad value: next one
    turn = dr.apply(ToolCall("introduce_turning_point", {"stage_index": -1, "empathy_aspect": "cognitive"}),
                    sc, story, epm, 1)
    assert story.stages == [] and not turn.guidance.new_material and "reasoning" in turn.guidance.text
    wait = dr.apply(ToolCall("made_up_function", {}), sc, story, epm, 1)
    assert wait.guidance is None and wait.log["function"] == "observe_and_wait"


def test_end_needs_the_epm_gate(sc):
    epm = EPM((-3, -3, -3), EPMParams(min_turns=3, max_turns=6, K=1))
    end = ToolCall("end_conversation", {"reason": "done"})
    assert epm.update(1, Rubric(C_Prog=2, A_Prog=2, P_Prog=2)) is None      # crossed, but before min_turns
    early = dr.apply(end, sc, StoryState(), epm, 2)
    assert not early.end and "refused" in early.log and early.log["gate"] == ["geometric", "positional", "energetic"]
    assert dr.apply(end, sc, StoryState(), epm, 3).end
    packet = dr.epm_packet(epm, 3)
    assert "may end: yes" in packet and "P = (0, 0, 0)" in packet


def test_judge_prompts_end_on_the_level(sc):
    hist = [Exchange(1, "My times keep getting worse.", "I understand how you feel.")]
    for chat in (iedr_prompt(sc, "A.2"), mdep_prompt(sc, hist, 1, "P_Neg")):
        assert chat[0]["role"] == "system" and chat[-1]["content"].endswith("level:")
    assert "severity level:" in mdep_prompt(sc, hist, 1, "A_Neg")[-1]["content"]
    assert sc.story.stages[3].content in iedr_prompt(sc, "C.1")[-1]["content"]       # the IEDR reads the whole story
    assert sc.story.stages[3].content not in mdep_prompt(sc, hist, 1, "C_Prog")[-1]["content"]


def test_judge_json_is_checked():
    good = {k: 0 for k in MDEP_ALLOWED} | {"A_Neg_level": "-2", "C_Prog_level": 1}
    assert parse_json(json.dumps(good), MDEP_ALLOWED)["A_Neg_level"] == -2
    with pytest.raises(ValueError, match="A_Neg_level is 1"):
        parse_json(json.dumps(good | {"A_Neg_level": 1}), MDEP_ALLOWED)
    with pytest.raises(ValueError, match="C.3_level is None"):
        parse_json(json.dumps({k: 1 for k in IEDR_ALLOWED if k != "C.3_level"}), IEDR_ALLOWED)
    with pytest.raises(ValueError, match="not JSON"):
        parse_json("levels: 1", IEDR_ALLOWED)


def test_test_model_sees_the_history_as_one_transcript():
    hist = [Exchange(1, "hi", "hey, what's up?")]
    chat = companion_chat(hist, "rough week", DEFAULT_COMPANION_PROMPT)
    assert [m["role"] for m in chat] == ["system", "user"]
    assert "User: hi\nYou: hey, what's up?\nUser: rough week" in chat[1]["content"]
    native = companion_chat(hist, "rough week", "sys", fmt="chat")
    assert [m["role"] for m in native] == ["system", "user", "assistant", "user"]
    assert clean_reply('You: "Sounds hard."\nUser: yes', ("You", "User")) == "Sounds hard."
    assert clean_reply("Here's your next reply:\n\nThat sounds hard.", ("You",)) == "That sounds hard."
    assert clean_reply("", ("You",)) == "..."


class PriorJudge:
    """A judge that prefers level 0 whatever it reads, a little less when the rated reply is real."""

    def __init__(self):
        self.chats = []

    def choose(self, chats, options):
        from echo_lib.llm import Choice
        self.chats += chats
        out = []
        for chat in chats:
            blank = "Companion: N/A" in chat[-1]["content"]
            probs = {"0": 0.8, "1": 0.1, "2": 0.1} if blank else {"0": 0.6, "1": 0.3, "2": 0.1}
            out.append(Choice(probs=probs, logprobs={o: None for o in probs}, coverage=None))
        return out


def test_judge_calibration_divides_out_the_content_free_prior(sc):
    from echo_lib.sandbox.judge import Judge, calibrated
    from echo_lib.sandbox.params import JudgeParams
    history = [Exchange(1, "I feel lost.", "That sounds really hard. What happened?")]
    plain = Judge(PriorJudge(), JudgeParams(mode="choose")).mdep([(sc, history)], k=1)[0]
    assert plain.details["C_Prog_level"] == 0 and plain.details["judge_mode"] == "choose"
    backend = PriorJudge()
    judged = Judge(backend, JudgeParams(mode="choose", calibrate=True)).mdep([(sc, history)], k=1)[0]
    # 0.6/0.8 : 0.3/0.1 : 0.1/0.1 -> level 1 wins once the prior for 0 is divided out
    assert judged.details["C_Prog_level"] == 1 and judged.details["judge_mode"] == "choose-calibrated"
    assert judged.details["C_Prog_probs"] == pytest.approx({"0": 0.75 / 4.75, "1": 3 / 4.75, "2": 1 / 4.75}, abs=1e-4)
    blanks = [c[-1]["content"] for c in backend.chats if "Companion: N/A" in c[-1]["content"]]
    assert len(blanks) == len(backend.chats) // 2 and all("I feel lost." in b for b in blanks)
    assert all("What happened?" not in b for b in blanks)
    same = calibrated(PriorJudge().choose([[{"content": "x"}]], "012")[0], PriorJudge().choose([[{"content": "x"}]], "012")[0])
    assert same.probs == pytest.approx({"0": 1 / 3, "1": 1 / 3, "2": 1 / 3})


class SkewedIEDRJudge:
    """Puts the largest single probability on "1" for every indicator, but most of the mass above it."""

    def choose(self, chats, options):
        from echo_lib.llm import Choice
        probs = {"0": 0.05, "1": 0.35, "2": 0.3, "3": 0.3}   # argmax 1, expected 1.85
        return [Choice(probs=probs, logprobs={o: None for o in probs}, coverage=None) for _ in chats]


def test_iedr_levels_are_the_rounded_expected_level_not_the_argmax(sc):
    from echo_lib.sandbox.judge import Judge
    from echo_lib.sandbox.params import JudgeParams
    v = Judge(SkewedIEDRJudge(), JudgeParams(mode="choose")).iedr([sc])[0]
    assert set(v.iedr_levels().values()) == {2} and v.details["C.1_expected"] == pytest.approx(1.85)
    assert v.details["judge_mode"] == "choose-expected"
    argmax = Judge(SkewedIEDRJudge(), JudgeParams(mode="choose", iedr_level="argmax")).iedr([sc])[0]
    assert set(argmax.iedr_levels().values()) == {1} and "C.1_expected" not in argmax.details


def _shared_head(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_next_turn_prompts_extend_this_turns_history(sc):
    """Issue 20: the Actor's and the Director's prompt at turn t+1 start with their prompt at turn t up to the
    end of its chat, although story material was released and the EPM state moved in between (so a prefix
    cache reuses the whole history)."""
    one = [Exchange(1, "I failed the exam again.", "That sounds heavy. What happened?")]
    two = one + [Exchange(2, "I froze on the first question.", "Freezing like that is awful.")]
    story, epm = StoryState(), EPM((-14, -18, -18), EPMParams(min_turns=3, max_turns=6))
    before_actor = actor_chat(sc, one, None, story.material(sc))[1]["content"]
    before_director = dr.director_chat(sc, one, story, epm, 1)[1]["content"]
    d = dr.apply(ToolCall("select_and_reveal_fragment", {"stage_index": 0}), sc, story, epm, 1)
    epm.update(1, Rubric(C_Prog=2, A_Prog=1, P_Prog=0))
    after_actor = actor_chat(sc, two, d.guidance, story.material(sc))[1]["content"]
    after_director = dr.director_chat(sc, two, story, epm, 2)[1]["content"]
    assert story.material(sc) and sc.story.stages[0].content in after_actor
    for before, after in ((before_actor, after_actor), (before_director, after_director)):
        chat_end = before.index(one[0].reply) + len(one[0].reply)
        assert _shared_head(before, after) >= chat_end

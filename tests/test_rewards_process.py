"""The process reward (stated profile vs gold, per field), the humanlike checks, and the GRPO rewards."""
from __future__ import annotations

import json

import pytest

from echo_lib.llm import Choice, LLMSettings, make_llm
from echo_lib.rewards.process import (checks_reward, make_judge, profile_field_scores, profile_reward, word_f1)
from echo_lib.rewards.profile import parse_checks, parse_profile, render_profile
from echo_lib.rewards.rm_rewards import rm_reward_funcs
from test_rewards_data import PROFILE, empathy_item, humanlike_item
from echo_lib.rewards.data import to_example

RIGHT = render_profile(PROFILE)


def test_parse_profile_reads_fields_and_priorities():
    stated = parse_profile("Profile: Traits: shy; EMOTION: sad; threshold: High (hard to reach); "
                           "priorities: cognitive=high, affective low, motivational: Medium\nResonates: x")
    assert stated["traits"] == "shy" and stated["current_emotion"] == "sad"
    assert stated["priorities"] == {"cognitive": "high", "affective": "low", "motivational": "medium"}
    assert "vent" not in stated


def test_gold_profile_scores_one_and_nothing_scores_zero():
    assert profile_reward(RIGHT + "\nResonates: x", PROFILE) == pytest.approx(1.0)
    assert profile_reward("Resonates: something", PROFILE) == 0.0
    assert profile_reward(None, PROFILE) == 0.0
    assert profile_reward("", PROFILE) == 0.0


def test_each_field_counts_once_and_wrong_values_lose_credit():
    wrong = ("Profile: traits: loud, careless; emotion: ashamed and frustrated; vent: failing the driving test "
             "a third time; hopes for: being taken seriously, not cheered up; threshold: low; "
             "priorities: cognitive High, affective Low, motivational Low; dislikes: slogans, unasked advice")
    scores = profile_field_scores(wrong, PROFILE)
    assert set(scores) == {"traits", "current_emotion", "vent", "hoped_for", "threshold", "priorities", "dislikes"}
    assert scores["traits"] == 0.0 and scores["threshold"] == 0.0
    assert scores["priorities"] == pytest.approx(2 / 3)
    assert scores["current_emotion"] == scores["vent"] == scores["dislikes"] == pytest.approx(1.0)
    assert profile_reward(wrong, PROFILE) == pytest.approx((4 + 2 / 3) / 7)


def test_lexical_rule_is_word_overlap_with_stems():
    assert word_f1("frustration", "frustrated") == 1.0        # same first five letters
    assert word_f1("the and of", "the") == 0.0                # stop words carry nothing
    assert 0 < word_f1("angry and frustrated about work", "frustrated") < 1


def test_empty_gold_fields_do_not_count():
    gold = {"current_emotion": "sad", "threshold": "", "priorities": {}, "dislikes": []}
    assert profile_field_scores("Profile: emotion: very sad", gold) == {"current_emotion": 1.0}


def test_humanlike_checks():
    assert parse_checks("Checks: AI tells: No; context fit: yes.; coherent: no\nConclusion: x") == {
        "ai_tells": "no", "context_fit": "yes", "coherent": "no"}
    assert checks_reward("Checks: AI tells: no; context fit: no; coherent: yes", "last_turn_swapped") == 1.0
    assert checks_reward("Checks: AI tells: no; context fit: yes; coherent: yes", "last_turn_swapped") == 0.5
    assert checks_reward("Checks: AI tells: yes", "model_reply") == 1.0
    assert checks_reward("no checks here", "human") == 0.0


class YesIfSameBackend:
    """A judge that says yes exactly when the stated value contains the true value."""
    kind = "fake"

    def identity(self):
        return {"backend": "fake-judge"}

    def describe(self):
        return {"name": "judge", "backend": "fake"}

    def choose(self, chats, options, usage):
        for i, c in enumerate(chats):
            lines = dict(l.split(": ", 1) for l in c[-1]["content"].splitlines() if ": " in l)
            yes = lines["True value"].lower() in lines["Inferred value"].lower()
            yield i, Choice(probs={"yes": 0.9 if yes else 0.1, "no": 0.1 if yes else 0.9},
                            logprobs={"yes": None, "no": None}, coverage=1.0)


def test_judge_variant_scores_free_text_fields_with_a_model(tmp_path):
    llm = make_llm(YesIfSameBackend(), LLMSettings(progress=False), tmp_path / "cache", None)
    gold = {"current_emotion": "sad", "vent": "the test", "threshold": "high"}
    scores = profile_field_scores("Profile: emotion: quite sad; vent: the dog; threshold: high", gold,
                                  judge=make_judge(llm))
    assert scores == {"current_emotion": 0.9, "vent": 0.1, "threshold": 1.0}


def test_grpo_reward_parts():
    correct, process, fmt, consistent = rm_reward_funcs("empathy")
    ex = to_example(empathy_item(label="worse", score=1), "empathy")
    gold = [json.dumps(ex.gold)] * 4
    good = [{"role": "assistant", "content": ex.target}]
    wrong_verdict = [{"role": "assistant", "content": ex.target.replace("<answer>worse", "<answer>better")}]
    no_profile = [{"role": "assistant", "content": "<think>hmm</think><answer>worse</answer>"}]
    broken = [{"role": "assistant", "content": ex.target + " <answer>better</answer>"}]
    comps = [good, wrong_verdict, no_profile, broken]
    assert correct(comps, gold=gold) == [1.0, 0.0, 1.0, 0.0]
    assert fmt(comps, gold=gold) == [1.0, 1.0, 1.0, 0.0]
    assert process(comps, gold=gold) == pytest.approx([1.0, 1.0, 0.0, 0.0])  # no verdict, no pay for the path
    assert consistent(comps, gold=gold) == [1.0, 0.0, 0.0, 0.0]   # "less well" then better; no Comparison line
    assert [f.__name__ for f in (correct, process, fmt, consistent)] == ["correct", "process", "format",
                                                                         "consistency"]


def test_grpo_rewards_for_scalar_and_humanlike():
    correct, *_ = rm_reward_funcs("scalar")
    gold = [json.dumps({"kind": "scalar", "label": 6, "profile": PROFILE})] * 3
    outs = ["<think>x</think><score>6</score>", "<think>x</think><score>9</score>", "<score>6</score>"]
    assert correct(outs, gold=gold) == pytest.approx([1.0, 1 - 3 / 9, 0.0])
    correct, process, *_ = rm_reward_funcs("humanlike")
    ex = to_example(humanlike_item(kind="turns_shuffled"), "humanlike")
    assert correct([ex.target], gold=[json.dumps(ex.gold)]) == [1.0]
    assert process([ex.target], gold=[json.dumps(ex.gold)]) == [1.0]


def test_process_reward_is_zero_without_a_strictly_parsed_verdict():
    _, process, fmt, consistent = rm_reward_funcs("empathy")
    ex = to_example(empathy_item(), "empathy")
    gold = [json.dumps(ex.gold)]
    assert process([ex.target], gold=gold) == [pytest.approx(1.0)]     # the perfect profile, parsed
    cut = ex.target[:ex.target.index("Resonates")]           # the perfect profile, no </think>, no verdict
    no_verdict = ex.target[:ex.target.index("<answer>")]     # the whole reasoning, no verdict
    bad_value = ex.target.replace("<answer>better", "<answer>Better")
    for out in (cut, no_verdict, bad_value):
        assert fmt([out], gold=gold) == [0.0] and process([out], gold=gold) == [0.0]
        assert consistent([out], gold=gold) == [0.0]
    _, process, *_ = rm_reward_funcs("humanlike")
    ex = to_example(humanlike_item(kind="model_reply"), "humanlike")
    assert process([ex.target.replace("</answer>", "")], gold=[json.dumps(ex.gold)]) == [0.0]


@pytest.mark.parametrize("context_free", [False, True])
def test_every_sft_target_is_consistent(context_free):
    """The templated targets state reasoning that argues for their own verdict."""
    from echo_lib.rewards.profile import CHECKS_GOLD
    *_, consistent = rm_reward_funcs("humanlike")
    kinds = [k for k in CHECKS_GOLD if not (context_free and k in ("last_turn_swapped", "turns_shuffled"))]
    outs = [to_example(humanlike_item(i, k), "humanlike", context_free=context_free).target
            for i, k in enumerate(kinds)]
    assert consistent(outs) == [1.0] * len(outs)
    *_, consistent = rm_reward_funcs("empathy")
    outs = [to_example(empathy_item(label=v), "empathy").target for v in ("better", "tie", "worse")]
    assert consistent(outs) == [1.0] * 3
    *_, consistent = rm_reward_funcs("scalar")
    outs = [to_example(empathy_item(score=s), "scalar").target for s in range(1, 6)]
    assert consistent(outs) == [1.0] * 5


def test_consistency_catches_reasoning_that_argues_for_the_other_verdict():
    from echo_lib.rewards.targets import COMPARISON, RUBRIC
    *_, consistent = rm_reward_funcs("humanlike")
    outs = ["<think>Checks: AI tells: no; context fit: yes; coherent: yes\nConclusion: it reads like the person."
            "</think><answer>machine</answer>",                                   # all checks human, says machine
            "<think>Checks: AI tells: no; context fit: yes; coherent: yes</think><answer>human</answer>",
            "<think>Checks: AI tells: yes; context fit: yes</think><answer>human</answer>",   # a tell, says human
            "<think>Checks: AI tells: no; coherent: no</think><answer>machine</answer>",
            "<think>Conclusion: it reads like the person.</think><answer>human</answer>",     # no Checks line
            "<think>Checks: AI tells: maybe</think><answer>human</answer>"]                  # no yes/no stated
    assert consistent(outs) == [0.0, 1.0, 0.0, 1.0, 0.0, 0.0]
    *_, consistent = rm_reward_funcs("empathy")
    outs = [f"<think>Profile: x\nComparison: {COMPARISON[said]}</think><answer>{ans}</answer>"
            for said, ans in [("better", "better"), ("worse", "better"), ("tie", "tie"), ("tie", "worse")]]
    outs.append("<think>Comparison: it is fine.</think><answer>better</answer>")        # no verdict's wording
    assert consistent(outs) == [1.0, 0.0, 1.0, 0.0, 0.0]
    *_, consistent = rm_reward_funcs("scalar")
    outs = [f"<think>Assessment: {RUBRIC[level]}</think><score>{score}</score>"
            for level, score in [(3, 6), (3, 5), (3, 7), (1, 10), (5, 9), (2, 4)]]
    outs.append("<think>Profile: x</think><score>6</score>")                           # no Assessment line
    assert consistent(outs) == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0]

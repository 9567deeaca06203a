"""Reward-model data: the stage-01 contract, prompts, templated targets (and item factories the other
test_rewards_* files import)."""
from __future__ import annotations

import json

import pytest

from echo_lib.rewards.data import DataError, examples, grpo_rows, load_items, sft_rows, to_example
from echo_lib.rewards.process import checks_reward, profile_reward
from echo_lib.rewards.prompts import chat_text, empathy_prompt, humanlike_prompt, scalar_prompt
from echo_lib.provenance import write_jsonl
from echo_lib.rewards.verdict import parse

PROFILE = {"traits": ["shy", "proud of being independent"], "current_emotion": "ashamed and frustrated",
           "vent": "failing the driving test a third time", "hoped_for": "being taken seriously, not cheered up",
           "threshold": "high", "priorities": {"cognitive": "High", "affective": "Medium", "motivational": "Low"},
           "dislikes": ["slogans", "unasked advice"]}


def empathy_item(i: int = 0, label: str = "better", score: int = 5, candidate: str | None = None) -> dict:
    return {"id": f"emp-{i}", "scenario_id": f"s{i % 3}",
            "context": [{"role": "user", "content": "I failed the driving test again."},
                        {"role": "assistant", "content": "Oh no. How are you feeling?"},
                        {"role": "user", "content": "Stupid. Everyone else passed first time."}],
            "profile": PROFILE, "theorems": ["validate the shame before any advice", "no slogans"],
            "reference": "That sounds frustrating. You'll get it next time!",
            "candidate": candidate or ("Third time stings, especially when it feels like everyone else "
                                       "sailed through. What happened on the test?"),
            "label": label, "candidate_score": score}


def humanlike_item(i: int = 0, kind: str = "human") -> dict:
    reply = {"human": "haha no way, same here lol", "model_reply": "That's great! It's important to relax.",
             "context_removed": "I'm sorry to hear that.", "last_turn_swapped": "my cat ate my homework",
             "turns_shuffled": "haha no way, same here lol"}[kind]
    return {"id": f"hl-{i}", "dialogue_id": f"d{i}", "context": ["hey", "hi! what's up", "just failed a quiz"],
            "reply": reply, "label": "human" if kind == "human" else "machine", "kind": kind}


# --------------------------------------------------------------------------------------------


def test_prompts_put_reasoning_first_and_name_the_format():
    chat = empathy_prompt(empathy_item()["context"], "REF", "CAND")
    assert [m["role"] for m in chat] == ["system", "user"]
    system, user = chat[0]["content"], chat[1]["content"]
    assert system.index("Profile:") < system.index("Resonates:") < system.index("Comparison:") < system.index("<answer>")
    assert "Reference reply: REF" in user and "Candidate reply: CAND" in user
    assert user.index("REF") < user.index("CAND") and "User: Stupid." in user
    assert "<score>N</score>" in scalar_prompt([], "R")[0]["content"]
    hl = humanlike_prompt(["a1", "b1", "a2"], "b2")
    assert "<answer>human</answer>" in hl[0]["content"] and "Reply to judge (B): b2" in hl[1]["content"]
    assert chat_text(["a1", "b1", "a2"]) == "A: a1\nB: b1\nA: a2"  # the last context turn is the other speaker's
    assert "(no earlier turns)" in humanlike_prompt([], "x")[1]["content"]


@pytest.mark.parametrize("kind", ["empathy", "scalar"])
def test_templated_targets_parse_and_state_the_gold_profile(kind):
    for label, score in [("better", 5), ("tie", 3), ("worse", 1)]:
        ex = to_example(empathy_item(label=label, score=score), kind, field_words=10)
        p = parse(ex.target, kind)
        assert p.ok, p.error
        assert p.answer == (label if kind == "empathy" else str(2 * score))
        assert profile_reward(p.think, PROFILE) == pytest.approx(1.0)
        assert p.think.splitlines()[0].startswith("Profile:") and "Resonates:" in p.think


def test_field_words_clip_the_target_profile():
    ex = to_example(empathy_item(), "empathy", field_words=2)
    assert "vent: failing the;" in ex.target
    assert 0.5 < profile_reward(parse(ex.target, "empathy").think, PROFILE) < 1.0


@pytest.mark.parametrize("kind", ["human", "model_reply", "context_removed", "last_turn_swapped", "turns_shuffled"])
def test_humanlike_targets_state_the_right_checks(kind):
    ex = to_example(humanlike_item(kind=kind), "humanlike")
    p = parse(ex.target, "humanlike")
    assert p.ok and p.answer == ("human" if kind == "human" else "machine")
    assert checks_reward(p.think, kind) == 1.0
    assert ex.gold == {"kind": "humanlike", "label": p.answer, "item_kind": kind}


def test_trl_rows():
    exs = examples([empathy_item(0), empathy_item(1, "worse", 1)], "empathy")
    sft = sft_rows(exs)
    assert sft[0]["completion"] == [{"role": "assistant", "content": exs[0].target}]
    gold = json.loads(grpo_rows(exs)[1]["gold"])
    assert gold["label"] == "worse" and gold["profile"]["threshold"] == "high"


def test_load_items_checks_the_contract(tmp_path):
    good = write_jsonl(tmp_path / "e.jsonl", [empathy_item(0), empathy_item(1)])
    assert len(load_items(good, "empathy")) == 2
    assert len(load_items(good, "scalar")) == 2
    bad = empathy_item(2, label="much better")
    with pytest.raises(DataError, match=r"e2.jsonl:2: label 'much better'"):
        load_items(write_jsonl(tmp_path / "e2.jsonl", [empathy_item(0), bad]), "empathy")
    missing = {k: v for k, v in humanlike_item().items() if k != "reply"}
    with pytest.raises(DataError, match=r"h.jsonl:1: field 'reply'"):
        load_items(write_jsonl(tmp_path / "h.jsonl", [missing]), "humanlike")
    ends_with_assistant = empathy_item()
    ends_with_assistant["context"] = ends_with_assistant["context"][:2]
    with pytest.raises(DataError, match="end with a user turn"):
        load_items(write_jsonl(tmp_path / "e3.jsonl", [ends_with_assistant]), "empathy")
    with pytest.raises(DataError, match="run stage 01"):
        load_items(tmp_path / "nope.jsonl", "humanlike")


@pytest.mark.parametrize("kind", ["human", "model_reply", "context_removed"])
def test_context_free_variant_judges_the_reply_alone(kind):
    """METHOD 2.4's context-free Humanlike RM: the prompt holds the reply only, the target asks no
    "context fit", and the kinds only a context reveals are left out of its data."""
    from echo_lib.rewards.data import context_free_items
    item = humanlike_item(kind=kind)
    ex = to_example(item, "humanlike", context_free=True)
    text = " ".join(m["content"] for m in ex.prompt)
    assert item["reply"] in text and not any(turn in text for turn in item["context"])
    assert "context fit" not in ex.target and "context fit" not in ex.prompt[0]["content"]
    p = parse(ex.target, "humanlike")
    assert p.ok and p.answer == ("human" if kind == "human" else "machine")
    assert checks_reward(p.think, kind, context_free=True) == 1.0
    assert ex.gold["context_free"] is True
    kinds = ["human", "model_reply", "context_removed", "last_turn_swapped", "turns_shuffled"]
    assert [it["kind"] for it in context_free_items([humanlike_item(kind=k) for k in kinds])] == kinds[:3]


def test_swapped_items_trade_the_replies_and_flip_the_label():
    from echo_lib.rewards.data import with_swaps
    item = {"id": "e1", "reference": "ref", "candidate": "cand", "label": "better", "candidate_score": 4,
            "reference_score": 3.0, "context": []}
    out = with_swaps([item, {**item, "id": "e2", "label": "tie"}])
    assert [x["id"] for x in out] == ["e1", "e2", "e1-swapped", "e2-swapped"]
    assert out[2]["candidate"] == "ref" and out[2]["reference"] == "cand" and out[2]["label"] == "worse"
    assert out[2]["candidate_score"] == 3.0 and out[2]["reference_score"] == 4 and out[3]["label"] == "tie"

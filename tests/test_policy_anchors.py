"""The policy-level anchor (echo_lib.policy.anchors), the hard filter with it, and the authored openings
(echo_lib.policy.openings), with fake models: no weights are loaded."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from echo_lib.llm import Sampling
from echo_lib.policy.anchors import choose_anchors, middle, round_robin
from echo_lib.policy.data import RLPrompt, turns_as_messages
from echo_lib.policy.hard_filter import hard_filter
from echo_lib.policy.openings import openings, openings_hash
from echo_lib.policy.rewards import variant_rewards
from echo_lib.rewards.reward_fn import RewardModelFn

QUALITY = {"great": 4, "good": 3, "ok": 2, "meh": 1, "bad": 0}


class PairRM:
    """An Empathy RM LLM that compares the two replies of its prompt by QUALITY, the way a consistent judge
    would: better / tie / worse for the candidate; `choose` (verdict first) puts 0.8 on that verdict."""

    def __init__(self, slot_bias: str | None = None):
        self.slot_bias, self.calls = slot_bias, 0

    def verdict(self, chat) -> str:
        text = chat[-1]["content"]
        ref = re.search(r"Reference reply: (\w+)", text).group(1)
        cand = re.search(r"Candidate reply: (\w+)", text).group(1)
        if self.slot_bias:
            return self.slot_bias
        d = QUALITY[cand] - QUALITY[ref]
        return "better" if d > 0 else "worse" if d < 0 else "tie"

    def choose(self, chats, options):
        self.calls += len(chats)
        out = []
        for chat in chats:
            v = self.verdict(chat)
            probs = {o: (0.8 if f">{v}<" in o else 0.1) for o in options}
            out.append(SimpleNamespace(probs=probs, best=max(probs, key=probs.get)))
        return out


def emp_rm(llm):
    return RewardModelFn(llm, "empathy", decision="verdict_first")


CTX = [{"role": "user", "content": "I failed my exam."}]


def test_middle_is_the_lower_middle_and_deterministic():
    assert middle([3.0, -1.0, 1.0, 0.0]) == 3            # sorted: 1 (-1), 3 (0), 2 (1), 0 (3) -> index 3
    assert middle([0.0, 0.0, 0.0]) == 1                   # ties keep sample order
    assert middle([5.0, 1.0, 3.0, 2.0, 4.0]) == 2         # odd count: the median


def test_round_robin_judges_every_ordered_pair_once():
    llm = PairRM()
    graded, discrete = round_robin(emp_rm(llm), [CTX, CTX], [["good", "bad", "ok"], ["meh", "great"]])
    assert llm.calls == 3 * 2 + 2 * 1
    assert discrete[0][0][1] == 1.0 and discrete[0][1][0] == -1.0 and discrete[0][0][0] == 0.0
    assert graded[0][0][1] == pytest.approx(0.8 - 0.1) and graded[1][0][1] == pytest.approx(0.1 - 0.8)


def test_the_anchor_is_the_middle_ranked_sample_and_the_others_are_judged_against_it():
    [c] = choose_anchors(emp_rm(PairRM()), [CTX], [["bad", "great", "ok", "good"]])
    assert c.anchor == "ok" and c.index == 2                    # ranks: bad < ok < good < great
    assert c.verdicts == [-1.0, 1.0, None, 1.0]                  # the others against "ok"
    assert c.scores.index(max(c.scores)) == 1


def test_anchor_needs_the_empathy_rm():
    with pytest.raises(ValueError, match="Empathy reward model"):
        choose_anchors(RewardModelFn(PairRM(), "scalar", decision="verdict_first"), [CTX], [["ok", "bad"]])


class ReplyLLM:
    def __init__(self, replies):
        self.replies = replies

    def generate(self, chats, samplings):
        return [SimpleNamespace(text=self.replies[chat[-1]["content"]][s.seed]) for chat, s in zip(chats, samplings)]


def test_hard_filter_with_policy_level_anchors_keeps_prompts_the_old_reference_dropped():
    """Stage 01's reference beats every sample (all lose: dropped); against the middle sample the same
    samples split, so the prompt is kept and carries its new anchor."""
    prompts = [RLPrompt(f"p{i}", "empathy", [{"role": "user", "content": f"m{i}"}], "great", "own_001")
               for i in range(2)] + [RLPrompt("c1", "chitchat", turns_as_messages(["hi", "hey", "sup"]))]
    chats = [[{"role": "user", "content": c}] for c in ("m0", "m1", "sup")]
    policy = ReplyLLM({"m0": ["bad", "ok", "good", "meh"], "m1": ["ok", "ok", "ok", "ok"],
                       "sup": ["yo", "hello there", "yo", "hey"]})
    llm = PairRM()
    rms = {"empathy": emp_rm(llm), "humanlike": RewardModelFn(HumanLLM(), "humanlike", decision="verdict_first")}
    funcs = variant_rewards("echo", rms, 0)
    old, old_report = hard_filter(prompts, chats, policy, funcs, 4, Sampling(seed=0))
    assert old_report.all_lose == ["p0", "p1"]
    kept, report = hard_filter(prompts, chats, policy, funcs, 4, Sampling(seed=0), anchor_rm=rms["empathy"])
    assert [p.id for p in kept] == ["p0", "c1"]
    assert kept[0].reference == "meh" and report.anchors["p0"]["index"] == 3     # bad < meh < ok < good
    assert report.rewards["p0"] == [-1.0, 1.0, 1.0]
    assert report.all_tie == ["p1"] and report.rewards["p1"] == [0.0, 0.0, 0.0]   # all tie: no signal either


class HumanLLM:
    """Humanlike verdict first: a reply of one word is human."""

    def choose(self, chats, options):
        out = []
        for chat in chats:
            human = len(chat[-1]["content"].rsplit(": ", 1)[-1].split()) == 1
            probs = {o: (0.9 if ("human" in o) == human else 0.1) for o in options}
            out.append(SimpleNamespace(probs=probs, best=max(probs, key=probs.get)))
        return out


def scenario(sid: str, openings=()):
    import dataclasses

    from echo_lib.scenarios.own import load_own
    sc = next(sc for sc in load_own() if sc.id == sid)
    return dataclasses.replace(sc, openings=tuple(openings)) if openings else sc


def test_openings_follow_each_personas_stage01_prompt_and_keep_the_persona():
    a = scenario("own_001", ["I dropped off my own running group on Saturday.", "Back at 15 more work always won.",
                             "Maybe I train to prove I'm not old.", "Someone called me old man today."])
    b = scenario("own_002", ["one", "two", "three", "four"])
    topic = RLPrompt("emp-own_001-000", "empathy", [{"role": "user", "content": a.topic}], "ref", "own_001")
    made = openings([a, b], {"own_001": [topic]}, 3)
    assert [p.id for p in made] == ["emp-own_001-000", "emp-own_001-o1", "emp-own_001-o2", "emp-own_002-o1",
                                    "emp-own_002-o2"]
    assert made[1].context == [{"role": "user", "content": "I dropped off my own running group on Saturday."}]
    assert made[1].reference is None and {p.persona for p in made} == {"own_001", "own_002"}
    assert openings([a], {"own_001": [topic]}, 1) == [topic]
    assert openings_hash([a], 3) != openings_hash([scenario("own_001", ["x", "y"])], 3)


def test_every_own_scenario_has_four_first_person_openings():
    from echo_lib.scenarios.own import load_own
    for sc in load_own():
        assert len(sc.openings) == 4, sc.id
        for text in sc.openings:
            words = text.split()
            assert 8 <= len(words) <= 70, (sc.id, text)
            assert any(w.lower().strip(".,!?") in {"i", "i'm", "i've", "my", "me", "i'd", "i'll"} for w in words), text


class SlotBiasedRM(PairRM):
    """A judge whose verdict favours the reference slot by a lot and the better reply by a little: P(worse)
    0.6 + 0.05 x (quality difference reference - candidate), P(better) 0.3 - that; its argmax says worse in
    both orders for every pair, its probabilities still order the replies."""

    def choose(self, chats, options):
        out = []
        for chat in chats:
            text = chat[-1]["content"]
            ref = re.search(r"Reference reply: (\w+)", text).group(1)
            cand = re.search(r"Candidate reply: (\w+)", text).group(1)
            shift = 0.05 * (QUALITY[ref] - QUALITY[cand])
            probs = {o: (0.6 + shift if ">worse<" in o else 0.3 - shift if ">better<" in o else 0.1) for o in options}
            out.append(SimpleNamespace(probs=probs, best=max(probs, key=probs.get)))
        return out


def test_both_orders_gives_spread_where_the_rm_argmax_follows_the_slot():
    from echo_lib.policy.anchors import BothOrders, debiased
    rm = emp_rm(SlotBiasedRM())
    replies = [[{"role": "assistant", "content": r}] for r in ("great", "bad", "good")]
    assert rm([CTX] * 3, replies, ["good"] * 3) == [-1.0, -1.0, -1.0]     # one order, argmax: no spread
    both = BothOrders(rm, tie_margin=0.05)
    # d = (0.1 x (quality difference)) / 2 ... : great vs good +0.1, bad vs good -0.3, good vs good 0
    assert both([CTX] * 3, replies, ["good"] * 3) == [1.0, -1.0, 0.0]
    assert both.last_answers == ["better", "worse", "tie"]
    assert debiased(0.2, -0.2, 0.05) == 1.0 and debiased(0.02, 0.0, 0.05) == 0.0 and debiased(-0.3, 0.3, 0.1) == -1.0
    # the filter reads the same verdicts off the round robin
    samples = ["great", "bad", "ok", "good"]
    [c] = choose_anchors(rm, [CTX], [samples], tie_margin=0.05)
    assert c.anchor == "ok"
    assert [v for v in c.verdicts if v is not None] == both(
        [CTX] * 3, [[{"role": "assistant", "content": r}] for r in samples if r != "ok"], ["ok"] * 3)

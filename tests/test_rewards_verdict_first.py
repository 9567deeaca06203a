"""Verdict-first reward models: the verdict read from `choose` probabilities, its metrics and rewards,
the label-shuffle twin's data, neutral rewards for unparsable outputs, and the GRPO length check."""
from __future__ import annotations

import dataclasses
import math

import pytest

from echo_lib.llm import Choice, LLMSettings, make_llm
from echo_lib.rewards.data import examples, shuffled_labels, to_example
from echo_lib.rewards.evaluate import evaluate
from echo_lib.rewards.params import NEUTRAL_REWARD, GRPOParams, RewardModelParams
from echo_lib.rewards.prompts import VERDICT_SYSTEM
from echo_lib.rewards.reward_fn import RewardModelFn
from echo_lib.rewards.train import check_completion_room, train_reward_model
from echo_lib.rewards.verdict import answer_probs, expected_value, option_answer, verdict_options
from echo_lib.stats import wilson
from test_rewards_data import empathy_item, humanlike_item
from test_rewards_eval import llm as generating_llm


class ChoosingBackend:
    """Answers `choose` with probabilities from `probs(user_message, options)`; counts calls."""
    kind = "fake"

    def __init__(self, probs, tag="c"):
        self.probs, self.tag, self.calls = probs, tag, 0

    def identity(self):
        return {"backend": "choosing", "tag": self.tag}

    def describe(self):
        return {"name": "choosing", "backend": "fake"}

    def choose(self, chats, options, usage):
        for i, c in enumerate(chats):
            self.calls += 1
            usage.model_calls += 1
            p = self.probs(c[-1]["content"], list(options))
            yield i, Choice(probs=p, logprobs={o: math.log(v) for o, v in p.items()}, coverage=1.0)


def choosing(tmp_path, probs, tag="c"):
    return make_llm(ChoosingBackend(probs, tag), LLMSettings(progress=False), tmp_path / "cache", None)


def test_verdict_options_cover_every_verdict_and_read_back():
    assert verdict_options("humanlike") == ["<answer>human</answer>", "<answer>machine</answer>"]
    assert verdict_options("empathy") == ["<answer>better</answer>", "<answer>tie</answer>", "<answer>worse</answer>"]
    assert verdict_options("scalar")[0] == "<score>1</score>" and verdict_options("scalar")[-1] == "<score>10</score>"
    assert [option_answer(o) for o in verdict_options("scalar")] == [str(s) for s in range(1, 11)]
    probs = answer_probs("scalar", {"<score>2</score>": 1.0, "<score>8</score>": 3.0})
    assert probs == {"2": 0.25, "8": 0.75} and expected_value("scalar", probs) == 6.5
    assert expected_value("empathy", {"better": 0.7, "tie": 0.1, "worse": 0.2}) == pytest.approx(0.5)


def test_verdict_first_examples_target_the_verdict_alone():
    ex = to_example(empathy_item(0, "worse", 1), "empathy", decision="verdict_first")
    assert ex.target == "<answer>worse</answer>" and ex.prompt[0]["content"] == VERDICT_SYSTEM["empathy"]
    sc = to_example(empathy_item(0, "better", 4), "scalar", decision="verdict_first")
    assert sc.target == "<score>8</score>"
    hl = to_example(humanlike_item(0, "model_reply"), "humanlike", context_free=True, decision="verdict_first")
    assert hl.target == "<answer>machine</answer>" and hl.prompt[0]["content"] == VERDICT_SYSTEM["humanlike_free"]
    with pytest.raises(ValueError, match="decision"):
        to_example(empathy_item(), "empathy", decision="both")


def test_verdict_first_humanlike_metrics_from_probabilities(tmp_path):
    kinds = ["human", "model_reply", "human", "context_removed", "human", "model_reply"]
    items = [humanlike_item(i, k) for i, k in enumerate(kinds)]
    p_human = {"human": 0.9, "model_reply": 0.3, "context_removed": 0.6}   # one negative kind is missed

    def probs(user, options):
        kind = next(it["kind"] for it in items if it["reply"] in user)
        return {"<answer>human</answer>": p_human[kind], "<answer>machine</answer>": 1 - p_human[kind]}
    # humanlike_item gives every item of a kind the same reply: tell them apart by id in the reply
    items = [{**it, "reply": f"{it['reply']} #{i}"} for i, it in enumerate(items)]
    m, rows = evaluate(choosing(tmp_path, probs), items, "humanlike", 64, decision="verdict_first")
    assert m["parse_failure_rate"] == 0.0 and m["accuracy"] == pytest.approx(5 / 6)
    assert m["accuracy_by_kind"] == {"context_removed": 0.0, "human": 1.0, "model_reply": 1.0}
    assert m["balanced_accuracy"] == pytest.approx((1.0 + 2 / 3) / 2)
    assert m["auroc"] == 1.0                     # P(human) still ranks every human reply first
    lo, hi = m["accuracy_ci"]
    assert lo <= m["accuracy"] <= hi and hi <= 1.0
    assert m["ci_method"] == "wilson-cc" and m["accuracy_ci"] == wilson(5, 6).bounds
    assert rows[0]["probs"] == {"human": 0.9, "machine": pytest.approx(0.1)}


def test_verdict_first_scalar_orders_expected_scores(tmp_path):
    def probs(user, options):   # the candidate "Third time..." scores high, "Cheer up!" low, the reference mid
        top = "8" if "Third time" in user else "2" if "Cheer" in user else "5"
        return {o: (0.91 if option_answer(o) == top else 0.01) for o in options}
    items = [dict(empathy_item(0, "better", 4), origin="good"),
             dict(empathy_item(1, "worse", 1, "Cheer up!"), origin="dismissive")]
    m, rows = evaluate(choosing(tmp_path, probs), items, "scalar", 64, decision="verdict_first")
    assert [r["verdict"] for r in rows] == ["better", "worse"] and m["accuracy"] == 1.0
    assert rows[0]["score_candidate"] == pytest.approx(0.91 * 8 + 0.01 * (55 - 8))
    assert m["accuracy_by_kind"] == {"dismissive": 1.0, "good": 1.0} and m["auroc"] == 1.0


def test_verdict_first_reward_fns(tmp_path):
    def emp(user, options):
        good = "kind" in user.split("Candidate reply:")[1]
        return {"<answer>better</answer>": 0.6 if good else 0.1, "<answer>tie</answer>": 0.3,
                "<answer>worse</answer>": 0.1 if good else 0.6}
    fn = RewardModelFn(choosing(tmp_path, emp, "e"), "empathy", decision="verdict_first")
    prompts = [[{"role": "user", "content": "I failed again."}]] * 2
    got = fn(prompts=prompts, completions=["A kind reply.", "Whatever."], reference=["ref", "ref"])
    assert got == [1.0, -1.0]                    # discrete: the most probable verdict's value
    assert fn.last_answers == ["better", "worse"] and fn.last_stats["unparsed"] == 0

    def score(user, options):
        return {o: (0.5 if option_answer(o) in ("4", "10") else 0.0) + 1e-9 for o in options}
    sc = RewardModelFn(choosing(tmp_path, score, "s"), "scalar", decision="verdict_first")
    assert sc(prompts=prompts[:1], completions=["x"]) == [pytest.approx((7 - 1) / 9, abs=1e-6)]  # E[score] = 7


def test_unparsed_outputs_get_the_kinds_neutral_reward(tmp_path):
    hl = RewardModelFn(generating_llm(tmp_path, lambda u: "garbage", "g")[0], "humanlike", 64)
    assert hl(prompts=["hey"], completions=["yo"]) == [0.5] and NEUTRAL_REWARD["humanlike"] == 0.5
    emp = RewardModelFn(generating_llm(tmp_path, lambda u: "garbage", "g2")[0], "empathy", 64)
    assert emp(prompts=["hey"], completions=["yo"], reference=["r"]) == [0.0]
    assert RewardModelParams().unparsed("humanlike") == 0.5
    assert RewardModelParams(unparsed_reward=-1.0).unparsed("humanlike") == -1.0


def test_shuffled_labels_permute_the_gold_and_keep_the_text():
    items = [humanlike_item(i, k) for i, k in enumerate(["human", "model_reply"] * 10)]
    twin = shuffled_labels(items, "humanlike", seed=0)
    assert [t["reply"] for t in twin] == [it["reply"] for it in items]
    assert sorted(t["label"] for t in twin) == sorted(it["label"] for it in items)
    assert [t["label"] for t in twin] != [it["label"] for it in items]
    assert twin == shuffled_labels(items, "humanlike", seed=0) != shuffled_labels(items, "humanlike", seed=1)
    emp = [empathy_item(i, lab, s) for i, (lab, s) in enumerate([("better", 4), ("worse", 1)] * 5)]
    for t in shuffled_labels(emp, "scalar", seed=0):   # label and score move together
        assert (t["label"], t["candidate_score"]) in {("better", 4), ("worse", 1)}


class WordTokenizer:
    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": text.split()}


def test_grpo_needs_room_for_the_verdict():
    exs = examples([empathy_item(0)], "empathy")
    longest = len(exs[0].target.split())
    with pytest.raises(ValueError, match="max_completion_length"):
        check_completion_room(WordTokenizer(), exs, longest)
    check_completion_room(WordTokenizer(), exs, 2 * longest)


def test_verdict_first_refuses_grpo_steps(tmp_path):
    params = dataclasses.replace(RewardModelParams(decision="verdict_first"), grpo=GRPOParams(steps=2))
    with pytest.raises(ValueError, match="grpo.steps"):
        train_reward_model(tmp_path / "base", "empathy", [], params, tmp_path / "out")


def test_scalar_training_also_scores_each_reference_once():
    from echo_lib.rewards.data import with_references
    items = [empathy_item(i, lab, s) for i, (lab, s) in enumerate([("better", 4), ("worse", 1), ("better", 4)])]
    out = with_references(items)   # empathy_item: scenarios s0, s1, s2, one shared reference text
    refs = [it for it in out if it.get("origin") == "reference"]
    assert out[:3] == items and len(refs) == 3
    assert all(r["candidate"] == r["reference"] and r["candidate_score"] == 3 for r in refs)
    assert to_example(refs[0], "scalar", decision="verdict_first").target == "<score>6</score>"
    assert len(with_references(items + [dict(items[0], id="dup")])) == len(out) + 1   # same scenario + reference: once


def test_lora_can_adapt_only_the_top_layers():
    from echo_lib.rewards.params import LoraParams
    from echo_lib.rewards.train import lora_config
    assert lora_config(RewardModelParams(lora=LoraParams(top_layers=2)), 30).layers_to_transform == [28, 29]
    assert lora_config(RewardModelParams(), 30).layers_to_transform is None
    with pytest.raises(ValueError, match="layers"):
        lora_config(RewardModelParams(lora=LoraParams(top_layers=2)))


@pytest.mark.parametrize("n_human,n_machine", [(300, 300), (100, 50), (7, 5)])
def test_shuffled_labels_are_independent_of_the_true_ones(n_human, n_machine):
    items = [humanlike_item(i, "human" if i < n_human else "model_reply") for i in range(n_human + n_machine)]
    for seed in range(5):
        twin = shuffled_labels(items, "humanlike", seed)
        assert sorted(t["label"] for t in twin) == sorted(it["label"] for it in items)
        agree = sum(t["label"] == it["label"] for t, it in zip(twin, items)) / len(items)
        n = len(items)
        expected = (n_human / n) ** 2 + (n_machine / n) ** 2   # agreement of independent labels
        assert abs(agree - expected) <= 2 / n + 1e-9, (seed, agree, expected)


def test_shuffled_labels_are_balanced_within_each_candidate_origin():
    """A kind of poor reply that drew mostly "better" would teach the twin that kind's verdict."""
    origins = ["good"] * 60 + [o for o in ("dismissive", "platitude", "off_topic") for _ in range(20)]
    items = [dict(empathy_item(i, "better" if o == "good" else "worse", 4 if o == "good" else 1), origin=o)
             for i, o in enumerate(origins)]
    for seed in range(5):
        twin = shuffled_labels(items, "empathy", seed)
        for origin in set(origins):
            labels = [t["label"] for t, it in zip(twin, items) if it["origin"] == origin]
            assert abs(labels.count("better") / len(labels) - 0.5) <= 0.05, (seed, origin, labels)

"""Evaluation metrics and the policy-facing reward functions, with scripted fake judges (no model)."""
from __future__ import annotations

import re

import pytest
from scipy import stats as scipy_stats

from echo_lib.llm import Completion, LLMSettings, make_llm
from echo_lib.rewards.evaluate import evaluate, metrics_table, paired_accuracy, pearson
from echo_lib.rewards.reward_fn import RewardModelFn, prompt_context
from test_rewards_data import empathy_item, humanlike_item


class ScriptedBackend:
    """Answers each judge prompt with `answer(user_message)`; counts model calls."""
    kind = "fake"

    def __init__(self, answer, tag="x"):
        self.answer, self.tag, self.calls = answer, tag, 0

    def identity(self):
        return {"backend": "scripted", "tag": self.tag}

    def describe(self):
        return {"name": "scripted", "backend": "fake"}

    def generate(self, chats, samplings, usage):
        for i, c in enumerate(chats):
            self.calls += 1
            usage.model_calls += 1
            yield i, Completion(text=self.answer(c[-1]["content"]), finish_reason="stop")


def llm(tmp_path, answer, tag="x"):
    backend = ScriptedBackend(answer, tag)
    return make_llm(backend, LLMSettings(progress=False), tmp_path / "cache", None), backend


def field(user: str, name: str) -> str:
    return re.search(rf"{name}: (.*)", user).group(1)


def longer_is_better(user: str) -> str:
    cand, ref = field(user, "Candidate reply"), field(user, "Reference reply")
    verdict = "better" if len(cand) > len(ref) else "worse" if len(cand) < len(ref) else "tie"
    return f"<think>Profile: traits: x\nComparison: longer</think>\n<answer>{verdict}</answer>"


def test_empathy_metrics_of_a_length_biased_but_consistent_judge(tmp_path):
    items = [empathy_item(0, "better", 5, "A long, careful reply that names the shame and asks what happened."),
             empathy_item(1, "worse", 1, "Cheer up!"),
             empathy_item(2, "worse", 2, "You should practise more and stop whining about it, honestly, seriously."),
             empathy_item(3, "tie", 3, "Ok.")]
    m, rows = evaluate(llm(tmp_path, longer_is_better)[0], items, "empathy", max_new_tokens=64)
    assert m["n"] == 4 and m["parse_failure_rate"] == 0.0
    assert m["accuracy"] == 0.5                 # right on 0 and 1, wrong on the long rude one and the tie
    assert m["position_bias"] == 0.0            # swapping flips every verdict: consistent
    assert m["slot_preference"] == 0.0
    assert m["length_bias"] == pytest.approx(pearson([1, -1, 1, -1], [r["length_diff"] for r in rows]))
    assert m["length_bias"] > 0.8 and m["tie_rate"] == 0.0
    assert m["verdict_counts"] == {"better": 2, "worse": 2}


def test_empathy_metrics_of_a_judge_that_always_says_better(tmp_path):
    items = [empathy_item(i, lab, 3) for i, lab in enumerate(["better", "worse", "tie", "better"])]
    m, _ = evaluate(llm(tmp_path, lambda u: "<think>t</think><answer>better</answer>")[0], items, "empathy", 64)
    assert m["accuracy"] == 0.5 and m["position_bias"] == 1.0 and m["slot_preference"] == 1.0
    assert m["majority_baseline"] == 0.5
    assert m["length_bias"] is None             # a constant verdict has no correlation


def test_parse_failures_count_as_wrong(tmp_path):
    answers = iter(["<think>t</think><answer>better</answer>", "better!", "<answer>better</answer>",
                    "<think>t</think><answer>better</answer> <answer>worse</answer>"])
    items = [empathy_item(i, "better", 5, f"reply number {i}") for i in range(4)]
    m, rows = evaluate(llm(tmp_path, lambda u: next(answers))[0], items, "empathy", 64, position_swap=False)
    assert m["accuracy"] == 0.25 and m["accuracy_parsed"] == 1.0 and m["parse_failure_rate"] == 0.75
    assert m["position_bias"] is None and m["verdict_counts"] == {"better": 1, "unparsed": 3}
    assert rows[1]["output"] == "better!" and rows[1]["verdict"] is None


def test_humanlike_metrics_by_kind(tmp_path):
    kinds = ["human", "model_reply", "context_removed", "last_turn_swapped", "turns_shuffled", "human"]
    items = [humanlike_item(i, k) for i, k in enumerate(kinds)]

    def lol_is_human(user):  # a style-only judge: fooled by human-written hard negatives
        v = "human" if "lol" in user or "cat" in user else "machine"
        return f"<think>Checks: AI tells: no</think><answer>{v}</answer>"
    m, _ = evaluate(llm(tmp_path, lol_is_human)[0], items, "humanlike", 64)
    assert m["accuracy_by_kind"] == {"context_removed": 1.0, "human": 1.0, "last_turn_swapped": 0.0,
                                     "model_reply": 1.0, "turns_shuffled": 0.0}
    assert m["accuracy"] == pytest.approx(4 / 6) and m["position_bias"] is None and m["tie_rate"] is None


def test_scalar_scores_candidate_and_reference_apart(tmp_path):
    def score(user):
        reply = field(user, "Reply to rate")
        return f"<think>t</think><score>{8 if 'Third time' in reply else 4 if 'Cheer' in reply else 6}</score>"
    items = [empathy_item(0, "better", 5), empathy_item(1, "worse", 1, "Cheer up!"),
             empathy_item(2, "tie", 3, "Hm, ok then.")]
    m, rows = evaluate(llm(tmp_path, score)[0], items, "scalar", 64)
    assert [r["verdict"] for r in rows] == ["better", "worse", "tie"] and m["accuracy"] == 1.0
    assert [r["score_reference"] for r in rows] == [6, 6, 6]
    assert m["score_corr"] == pytest.approx(pearson([8, 4, 6], [10, 2, 6]))


def test_metrics_table_flattens_models_side_by_side():
    table = metrics_table({"base": {"accuracy": 0.3, "verdict_counts": {"tie": 2}},
                           "trained": {"accuracy": 0.6, "verdict_counts": {"tie": 1, "better": 1}}})
    assert table[0] == {"metric": "accuracy", "base": 0.3, "trained": 0.6}
    assert {"metric": "verdict_counts.better", "base": None, "trained": 1} in table


# --------------------------------------------------------------------------------------------
# reward functions for the policy stage


def test_empathy_reward_fn_compares_each_completion_with_its_reference(tmp_path):
    model, backend = llm(tmp_path, longer_is_better)
    fn = RewardModelFn(model, "empathy", max_new_tokens=64)
    prompts = [[{"role": "system", "content": "be kind"}, {"role": "user", "content": "I failed again."}]] * 3
    completions = [[{"role": "assistant", "content": c}] for c in ["A long and caring answer.", "Ok", "Same len!"]]
    assert fn(prompts=prompts, completions=completions, reference=["Medium one", "Medium one", "Same len?"]) == [1.0, -1.0, 0.0]
    assert fn.__name__ == "empathy_rm" and fn.last_stats == {"n": 3, "unparsed": 0,
                                                             "verdicts": {"better": 1, "worse": 1, "tie": 1}}
    calls = backend.calls
    fn(prompts=prompts, completions=completions, reference=["Medium one", "Medium one", "Same len?"])
    assert backend.calls == calls               # a repeated batch comes from the cache
    with pytest.raises(ValueError, match="reference"):
        fn(prompts=prompts, completions=completions)


def test_humanlike_and_scalar_reward_fns(tmp_path):
    hl = RewardModelFn(llm(tmp_path, lambda u: "<think>t</think><answer>" + ("human" if "lol" in u else "machine")
                           + "</answer>", "h")[0], "humanlike", 64)
    prompts = [[{"role": "user", "content": "hey"}, {"role": "assistant", "content": "yo"},
                {"role": "user", "content": "sup"}]] * 2
    assert hl(prompts=prompts, completions=["lol nothing", "I am an AI assistant."]) == [1.0, 0.0]
    # the context-free variant shows the reply alone: a context that says "lol" no longer decides
    free = RewardModelFn(llm(tmp_path, lambda u: "<think>t</think><answer>" + ("human" if "lol" in u else "machine")
                             + "</answer>", "f")[0], "humanlike", 64, context_free=True)
    lol_context = [[{"role": "user", "content": "lol hey"}, {"role": "assistant", "content": "yo"},
                    {"role": "user", "content": "sup"}]] * 2
    assert free(prompts=lol_context, completions=["nothing much", "lol same"]) == [0.0, 1.0]
    assert hl(prompts=lol_context, completions=["nothing much", "lol same"]) == [1.0, 1.0]
    sc = RewardModelFn(llm(tmp_path, lambda u: "<think>t</think><score>10</score>" if "great" in u else "garbage",
                           "s")[0], "scalar", 64, unparsed_reward=-0.5)
    assert sc(prompts=["I failed."] * 2, completions=["great reply", "meh"]) == [1.0, -0.5]
    assert sc.last_stats["unparsed"] == 1


def test_prompt_context_drops_the_system_message():
    assert prompt_context("hi") == [{"role": "user", "content": "hi"}]
    assert prompt_context([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]) == [
        {"role": "user", "content": "u"}]


def test_paired_accuracy_pairs_by_id_by_hand():
    def row(i, verdict, label="better"):
        return {"id": f"e{i}", "verdict": verdict, "label": label}
    trained = [row(0, "better"), row(1, "better"), row(2, "worse"), row(3, "better"), row(9, "better")]
    twin = [row(3, "worse"), row(2, "worse"), row(1, "worse"), row(0, "worse")]   # other order, no e9
    out = paired_accuracy(trained, twin)
    # shared e0-e3: trained right on e0, e1, e3 (0.75), the twin on none (0.0)
    assert out["n"] == 4 and out["difference"] == 0.75
    # paired t over the differences (1, 1, 0, 1): sd 0.5, half-width t(0.975, 3) * 0.5 / 2
    half = scipy_stats.t.ppf(0.975, 3) * 0.5 / 2
    assert out["ci"] == [round(0.75 - half, 4), round(0.75 + half, 4)] and out["ci_method"] == "paired t"
    assert out["ci"][0] < 0          # four items: the interval spans 0, no difference at this scale
    assert paired_accuracy(trained, [row(7, "better")]) is None  # nothing shared

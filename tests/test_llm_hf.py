"""The hf backend on the tiny random-weight model: batching, seeds, choose, adapters, tool calls."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest

from echo_lib.config import ConfigError, load_config
from echo_lib.llm import LLMError, Sampling
from echo_lib.models import load_llm

SYSTEM = "You are a warm, attentive friend. Reply in two or three sentences."
USER = ["I failed my exam again and I feel like a total failure.",
        "My friend stopped answering my messages and I do not know why.",
        "better tie worse", "0 1 2 3", "yes", "That sounds really hard. Do you want to talk about what happened?"]


def chat(text: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]


CHATS = [chat(u) for u in USER]


def make_cfg(tmp_path, model_dir, adapter=None, **llm):
    return load_config({
        "results_dir": str(tmp_path / "results"),
        "models": {"base": {"backend": "hf", "source": "local", "id": str(model_dir), "adapter": adapter}},
        "llm": {"progress": False, **llm}})


@pytest.fixture
def llm(tmp_path, tiny_lm_dir):
    # batch_size 4 < 6 chats: two batches, sorted by length, so batching and row dropping are exercised
    return load_llm(make_cfg(tmp_path, tiny_lm_dir, batch_size=4, cache=False), "base")


@pytest.mark.parametrize("sampling", [Sampling(temperature=1.0, top_p=0.9, max_new_tokens=12, seed=7),
                                      Sampling(temperature=0.8, top_p=1.0, max_new_tokens=9, seed=1),
                                      Sampling(temperature=0, max_new_tokens=10)])
def test_batch_equals_one_by_one(llm, sampling):
    batch = llm.generate(CHATS, sampling)
    single = [llm.generate([c], sampling)[0] for c in CHATS]
    assert [b.text for b in batch] == [s.text for s in single]
    assert [b.completion_tokens for b in batch] == [s.completion_tokens for s in single]
    assert all(b.prompt_tokens > 0 for b in batch)


def test_seed_decides_the_sample(llm):
    s = Sampling(temperature=1.0, max_new_tokens=12, seed=0)
    a = llm.generate(CHATS, s)
    assert [x.text for x in llm.generate(CHATS, s)] == [x.text for x in a]  # reproducible
    b = llm.generate(CHATS, replace(s, seed=1))
    assert [x.text for x in a] != [x.text for x in b]
    # one sampling per chat: the same prompt with several seeds in one batch, each as if alone
    per_chat = [replace(s, seed=k) for k in range(3)]
    several = llm.generate([CHATS[0]] * 3, per_chat)
    assert [x.text for x in several] == [llm.generate([CHATS[0]], p)[0].text for p in per_chat]


def test_lengths_stop_strings_and_finish_reasons(llm):
    out = llm.generate(CHATS, Sampling(temperature=0, max_new_tokens=5))
    assert all(o.completion_tokens <= 5 for o in out)
    assert all(o.finish_reason in ("stop", "length") for o in out)
    assert any(o.finish_reason == "length" and o.completion_tokens == 5 for o in out)
    long = llm.generate(CHATS, Sampling(temperature=1.0, max_new_tokens=20, seed=3))
    text = next(o.text for o in long if len(o.text) > 6)
    stop = text[3:5]
    cut = llm.generate(CHATS, Sampling(temperature=1.0, max_new_tokens=20, seed=3, stop=(stop,)))
    for full, part in zip(long, cut):
        assert stop not in part.text and full.text.startswith(part.text)
        if stop in full.text:
            assert part.finish_reason == "stop"


def test_system_prompt_must_be_explicit(llm):
    with pytest.raises(LLMError, match="system message"):
        llm.generate([[{"role": "user", "content": "hi"}]], Sampling())
    with pytest.raises(TypeError, match="list of chats"):
        llm.generate(CHATS[0], Sampling())


@pytest.mark.parametrize("options", [["0", "1", "2", "3"], ["better", "tie", "worse", "human machine"]])
def test_choose_probabilities(llm, options):
    batch = llm.choose(CHATS, options)
    for c in batch:
        assert list(c.probs) == options
        assert math.isclose(sum(c.probs.values()), 1.0, rel_tol=1e-6)
        assert 0 < c.coverage <= 1
        assert c.best in options
    single = [llm.choose([p], options)[0] for p in CHATS]
    for b, s in zip(batch, single):
        assert all(math.isclose(b.probs[o], s.probs[o], abs_tol=1e-4) for o in options)


def test_choose_agrees_with_generation(llm):
    """A single-token option's log-probability is the next-token log-probability greedy decoding maximises."""
    options = ["0", "1", "2", "3"]
    for c, g in zip(llm.choose(CHATS, options), llm.generate(CHATS, Sampling(temperature=0, max_new_tokens=1))):
        if g.text in options:
            assert c.best == g.text


def test_adapter_loads_and_changes_answers(tmp_path, tiny_lm_dir):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(tiny_lm_dir)
    peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=64, target_modules=["q_proj", "v_proj"],
                                                 init_lora_weights=False, task_type="CAUSAL_LM"))
    peft_model.save_pretrained(tmp_path / "adapter")

    plain = load_llm(make_cfg(tmp_path, tiny_lm_dir), "base")
    tuned = load_llm(make_cfg(tmp_path, tiny_lm_dir, adapter=str(tmp_path / "adapter")), "base")
    a, b = plain.choose(CHATS, ["0", "1", "2", "3"]), tuned.choose(CHATS, ["0", "1", "2", "3"])
    assert tuned.model_calls == len(CHATS)  # the adapter is part of the cache key: no hit from the base model
    assert any(abs(x.probs["0"] - y.probs["0"]) > 1e-3 for x, y in zip(a, b))
    assert tuned.last_record["model"]["adapter"] == str(tmp_path / "adapter")

    with pytest.raises(LLMError, match="adapter_config.json"):
        load_llm(make_cfg(tmp_path, tiny_lm_dir, adapter=str(tmp_path)), "base").choose(CHATS, ["0", "1"])


def test_call_tools_picks_a_tool_and_fills_enumerated_arguments(llm):
    tools = [
        {"type": "function", "function": {
            "name": "set_level", "description": "Set the empathy level of the last reply.",
            "parameters": {"type": "object", "required": ["level", "axis", "final", "note"], "properties": {
                "level": {"type": "integer", "minimum": 0, "maximum": 3},
                "axis": {"type": "string", "enum": ["cognitive", "affective", "proactive"]},
                "final": {"type": "boolean"},
                "note": {"type": "string", "description": "one short phrase"}}}}},
        {"name": "end_dialogue", "description": "End the conversation."},  # bare function dicts work too
    ]
    calls = llm.call_tools(CHATS, tools)
    assert len(calls) == len(CHATS)
    for c in calls:
        assert c.name in ("set_level", "end_dialogue")
        assert math.isclose(sum(c.probs.values()), 1.0, rel_tol=1e-6)
        if c.name == "set_level":
            assert c.arguments["level"] in range(4)
            assert c.arguments["axis"] in ("cognitive", "affective", "proactive")
            assert isinstance(c.arguments["final"], bool) and isinstance(c.arguments["note"], str)
        else:
            assert c.arguments == {}


def test_call_tools_in_runs_the_prefix_cache_holds_so_each_chat_runs_once(tmp_path, tiny_lm_dir):
    """More chats than the prefix cache holds: call_tools asks them in runs the cache holds, so each argument
    question extends its chat's kept menu prompt (all at once, the menus of the first chats were gone when
    their arguments were asked, and each chat ran again); the calls equal a backend's without any cache."""
    from echo_lib.llm.kv import common_prefix, kv_bytes_per_token
    from echo_lib.llm.tools import arg_queries, tool_menu_chat
    enum = lambda *v: {"type": "string", "enum": list(v)}  # noqa: E731
    tools = [{"type": "function", "function": {"name": name, "description": what, "parameters": {
        "type": "object", "required": ["axis"], "properties": {"axis": enum("cognitive", "affective", "proactive")}}}}
        for name, what in (("shift_focus", "Move the talk to another need."), ("hold", "Keep the current need."))]
    long = [chat(u * 10) for u in USER]
    probe = load_llm(make_cfg(tmp_path / "probe", tiny_lm_dir, cache=False, prefix_cache_mb=0), "base")
    menus = probe.backend._encode([tool_menu_chat(c, tools) for c in long])
    per_chat = kv_bytes_per_token(probe.backend.load()[0]) * max(map(len, menus))
    llm = load_llm(make_cfg(tmp_path, tiny_lm_dir, cache=False, prefix_cache_mb=3 * per_chat / 2**20), "base",
                   dialogues=True)   # room for three chats: runs of one or two (they fill half the cache)
    parts = llm.backend._held_together([tool_menu_chat(c, tools) for c in long])
    assert sorted(i for part in parts for i in part) == list(range(len(long))) and len(parts) >= 3
    assert all(sum(len(menus[i]) for i in part) * kv_bytes_per_token(llm.backend.load()[0]) <= 1.5 * per_chat
               for part in parts)
    calls = llm.call_tools(long, tools)
    expected = probe.call_tools(long, tools)
    assert [c.name for c in calls] == [c.name for c in expected]
    assert [c.arguments for c in calls] == [c.arguments for c in expected] and all(c.arguments for c in calls)
    assert all(math.isclose(a.probs[k], b.probs[k], abs_tol=1e-4) for a, b in zip(calls, expected) for k in a.probs)
    tails = 0   # what an argument question adds to its chat's menu prompt
    for i, (c, call, m) in enumerate(zip(long, calls, menus)):
        tool = next(t for t in tools if t["function"]["name"] == call.name)
        for q in arg_queries(i, c, tool):
            x = llm.backend._encode([q.chat])[0]
            tails += len(x) - common_prefix([x, m]) + 1
    assert llm.backend.tally.computed <= sum(map(len, menus)) + tails, (llm.backend.tally.computed, sum(map(len, menus)))


def test_missing_checkpoint_and_unknown_model(tmp_path):
    with pytest.raises(ConfigError, match="'models.base.id' has value .*nowhere.*does not exist"):
        make_cfg(tmp_path, tmp_path / "nowhere")   # found at load time
    (tmp_path / "gone").mkdir()
    cfg = make_cfg(tmp_path, tmp_path / "gone")
    (tmp_path / "gone").rmdir()                     # removed after the load: the loader still says so
    with pytest.raises(LLMError, match="no checkpoint"):
        load_llm(cfg, "base").generate(CHATS, Sampling())
    with pytest.raises(LLMError, match="not in the config"):
        load_llm(cfg, "judge-x")


def test_top_k_and_presence_penalty():
    """pick_next on hand-made logits: top-k keeps only the k most likely tokens; the presence penalty lowers
    every token the reply already holds, for greedy and sampled rows alike."""
    import torch
    from echo_lib.llm.sampling import pick_next
    logits = torch.tensor([[5.0, 4.0, 3.0, 0.0, -1.0]] * 2)
    gens = lambda: [torch.Generator().manual_seed(s) for s in range(2)]  # noqa: E731
    flat = Sampling(temperature=5.0, max_new_tokens=4)
    seen = {int(t) for seed in range(40) for t in pick_next(
        logits.clone(), [flat, flat], [torch.Generator().manual_seed(seed + 100 * r) for r in range(2)])}
    for k in (1, 2):
        s = Sampling(temperature=5.0, top_k=k, max_new_tokens=4)
        picks = {int(t) for seed in range(40)
                 for t in pick_next(logits.clone(), [s, s], [torch.Generator().manual_seed(seed + 100 * r)
                                                                for r in range(2)])}
        assert picks <= set(range(k)) and (k == 1 or len(picks) == k)
    assert len(seen) > 2  # without top-k the flat distribution reaches further
    greedy = Sampling(temperature=0, max_new_tokens=4)
    penalised = Sampling(temperature=0, presence_penalty=1.5, max_new_tokens=4)
    assert pick_next(logits.clone(), [greedy, penalised], gens(), [[0], [0]]).tolist() == [0, 1]
    assert pick_next(logits[:1].clone(), [penalised], gens()[:1], [[0, 1]]).tolist() == [0]  # 3.5 > 2.5, 3.0
    # the cache key is unchanged for settings that leave both off
    assert "top_k" not in Sampling().key() and "presence_penalty" not in Sampling().key()
    assert Sampling(presence_penalty=1.5).key()["presence_penalty"] == 1.5
    with pytest.raises(ValueError, match="top_k"):
        Sampling(top_k=-1)

"""The hf backend's KV-cache work on the tiny model: shared-prefix prefill and option scoring on the
prompt's cache give what plain, unbatched forward passes give (up to float rounding)."""
from __future__ import annotations

import math
import os

import pytest

from echo_lib.llm import Sampling

from echo_lib.models import load_llm
from echo_lib.llm.kv import new_cache, plan_groups, prefill
from test_llm_hf import SYSTEM, make_cfg

# Two "cases", each asked three questions: rows share the system prompt, then a case's long history
HISTORY = ["I failed my exam again and I feel like a total failure. " * 3,
           "My friend stopped answering my messages and I do not know why. " * 3]
QUESTIONS = ["better tie worse", "0 1 2 3", "yes"]
GROUPED = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": h + q}]
           for h in HISTORY for q in QUESTIONS]


@pytest.fixture
def llm(tmp_path, tiny_lm_dir):
    return load_llm(make_cfg(tmp_path, tiny_lm_dir, cache=False), "base")


def reference_logprob(model, prompt: list[int], option: list[int]) -> float:
    """Log-probability of `option` after `prompt`: one plain forward pass of the unpadded sequence."""
    import torch
    with torch.inference_mode():
        lp = torch.log_softmax(model(input_ids=torch.tensor([prompt + option])).logits[0].float(), -1)
    return sum(float(lp[len(prompt) - 1 + t, tok]) for t, tok in enumerate(option))


def test_plan_groups():
    a, b = list(range(100, 140)), list(range(200, 240))
    tails = [a + [1, 2], a + [3], b + [4, 5, 6], b + [7], [9, 9, 9]]
    group, heads = plan_groups(tails)
    assert group[0] == group[1] != group[2] == group[3]
    assert heads[group[0]] == 40 and heads[group[2]] == 40
    assert all(len(t) - heads[g] >= 1 for t, g in zip(tails, group))  # every row keeps a tail token
    assert plan_groups([a + [1], b + [2]]) is None  # nothing shared: one stage is cheaper
    assert plan_groups([a]) is None


def test_grouped_prefill_matches_unbatched_logits(llm):
    import torch
    backend = llm.backend
    model, tok = backend.load()
    ids = backend._encode(GROUPED)
    assert plan_groups(ids) is not None  # the case histories really form groups
    with torch.inference_mode():
        logits = prefill(model, tok.pad_token_id, ids, new_cache(model))[0][:, -1].float()
        for row, x in zip(logits, ids):
            alone = model(input_ids=torch.tensor([x])).logits[0, -1].float()
            assert torch.allclose(row, alone, atol=1e-4)


def test_grouped_batch_equals_one_by_one(llm):
    for s in (Sampling(temperature=0, max_new_tokens=8), Sampling(temperature=1.0, top_p=0.9, max_new_tokens=8)):
        assert [c.text for c in llm.generate(GROUPED, s)] == [llm.generate([c], s)[0].text for c in GROUPED]
    options = ["0", "1", "2", "3"]
    for b, c in zip(llm.choose(GROUPED, options), GROUPED):
        s = llm.choose([c], options)[0]
        assert all(math.isclose(b.probs[o], s.probs[o], abs_tol=1e-4) for o in options)


@pytest.mark.parametrize("options", [["better", "tie", "worse", "human machine"], ["yes no yes", "0", "no"]])
def test_choose_on_the_prompt_cache_equals_full_sequences(llm, options):
    backend = llm.backend
    model, tok = backend.load()
    opt_ids = [tok(o, add_special_tokens=False)["input_ids"] for o in options]
    assert any(len(o) > 1 for o in opt_ids)
    chats = GROUPED[:4]
    for c, prompt in zip(llm.choose(chats, options), backend._encode(chats)):
        for o, oi in zip(options, opt_ids):
            assert math.isclose(c.logprobs[o], reference_logprob(model, prompt, oi), abs_tol=1e-4)


def test_call_tools_scores_equal_full_sequences(llm):
    from echo_lib.llm.tools import tool_menu_chat
    from echo_lib.llm.types import normalise_tools
    tools = normalise_tools([{"name": n, "description": d} for n, d in [
        ("continue_story", "Go on."), ("release_memory", "Tell a memory."), ("end_dialogue", "Stop."),
        ("better_tie", "Compare."), ("human_machine", "Guess.")]])
    names = [t["function"]["name"] for t in tools]
    model, tok = llm.backend.load()
    calls = llm.call_tools(GROUPED[:3], tools)
    for call, chat in zip(calls, GROUPED[:3]):
        prompt = llm.backend._encode([tool_menu_chat(chat, tools)])[0]
        ref = [reference_logprob(model, prompt, tok(n, add_special_tokens=False)["input_ids"]) for n in names]
        top = max(ref)
        total = sum(math.exp(x - top) for x in ref)
        for n, x in zip(names, ref):
            assert math.isclose(call.probs[n], math.exp(x - top) / total, abs_tol=1e-4)


def test_scoring_batches_keep_groups_whole(tmp_path, tiny_lm_dir):
    llm = load_llm(make_cfg(tmp_path, tiny_lm_dir, cache=False, batch_size=4), "base")
    ids = llm.backend._encode(GROUPED)
    batches = llm.backend._batches(ids, by_prefix=True)
    assert sorted(i for b in batches for i in b) == list(range(len(GROUPED)))
    assert all(len(b) <= 4 for b in batches)
    assert sorted(sorted(b) for b in batches) == [[0, 1, 2], [3, 4, 5]]  # one case per batch, not 4 + 2
    options = ["0", "1", "2", "3"]
    for b, c in zip(llm.choose(GROUPED, options), GROUPED):
        s = llm.choose([c], options)[0]
        assert all(math.isclose(b.probs[o], s.probs[o], abs_tol=1e-4) for o in options)


def test_head_cache_reuses_the_exact_head_and_changes_no_number(llm):
    import torch
    from echo_lib.llm.kv import HeadCache, PrefixCache
    model, tok = llm.backend.load()
    ids = llm.backend._encode(GROUPED)
    heads = HeadCache(max_tokens=4096)
    with torch.inference_mode():
        fresh = prefill(model, tok.pad_token_id, ids, new_cache(model))[0]
        first = prefill(model, tok.pad_token_id, ids, new_cache(model), heads=heads)[0]
        again = prefill(model, tok.pad_token_id, ids, new_cache(model), heads=heads)[0]
        other = prefill(model, tok.pad_token_id, ids[:3], new_cache(model), heads=heads)[0]  # one case: a longer head
    assert (heads.misses, heads.hits) == (2, 1)
    assert torch.equal(fresh, first) and torch.equal(fresh, again)  # bit for bit, not just close
    assert torch.allclose(other, fresh[:3], atol=1e-4)

    # the backend keeps heads across calls: the same answers, and the second call hits (with the prefix
    # cache off: it would answer the second call from the whole kept prompts, before any head lookup)
    llm.backend.prefixes = PrefixCache(0)
    llm.backend.heads.hits = 0
    s = Sampling(temperature=1.0, top_p=0.9, max_new_tokens=6)
    assert [c.text for c in llm.generate(GROUPED, s)] == [c.text for c in llm.generate(GROUPED, s)]
    assert llm.backend.heads.hits >= 1


def test_head_cache_evicts_least_recent_and_zero_keeps_none(llm):
    import torch
    from echo_lib.llm.kv import HeadCache
    model, tok = llm.backend.load()
    a = llm.backend._encode(GROUPED[:3])
    b = llm.backend._encode(GROUPED[3:])
    heads = HeadCache(max_tokens=max(len(os.path.commonprefix(a)), len(os.path.commonprefix(b))))  # room for one
    with torch.inference_mode():
        for batch in (a, b):
            prefill(model, tok.pad_token_id, batch, new_cache(model), heads=heads)
    assert len(heads._heads) == 1 and tuple(b[0][:len(os.path.commonprefix(b))]) in heads._heads
    none = HeadCache(max_tokens=0)
    with torch.inference_mode():
        prefill(model, tok.pad_token_id, a, new_cache(model), heads=none)
    assert not none._heads and none.hits == 0


def test_rows_apart_match_the_padded_pass(llm, monkeypatch):
    """Prompts of very different lengths run one pass per row on a CPU; the logits and what the cache
    then holds give the same answers as one padded pass."""
    import torch
    from echo_lib.llm import kv
    model, tok = llm.backend.load()
    chats = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Hi. " * n}] for n in (1, 40, 3, 90)]
    ids = llm.backend._encode(chats)
    assert kv.apart_pays(list(map(len, ids)))
    with torch.inference_mode():
        apart = prefill(model, tok.pad_token_id, ids, new_cache(model))
        monkeypatch.setattr(kv, "apart_pays", lambda lengths: False)
        together = prefill(model, tok.pad_token_id, ids, new_cache(model))
    assert torch.allclose(apart[0], together[0], atol=1e-4)
    assert torch.equal(apart[1], together[1]) and torch.equal(apart[2], together[2])
    s = Sampling(temperature=1.0, top_p=0.9, max_new_tokens=8)
    padded_texts = [c.text for c in llm.generate(chats, s)]
    monkeypatch.undo()
    assert [c.text for c in llm.generate(chats, s)] == padded_texts == [llm.generate([c], s)[0].text for c in chats]
    assert not kv.apart_pays([40, 41, 42]) and not kv.apart_pays([90])

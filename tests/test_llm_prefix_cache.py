"""The hf backend's prefix cache (kv.PrefixCache, issue 20): a prompt that extends a kept prompt computes
only its new tokens, and every logit, greedy reply and choose probability equals what a fresh prefill gives
(within 1e-4 in float32); prompts that are not extensions reuse only their longest common token prefix."""
from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from echo_lib.llm import Sampling

from echo_lib.models import load_llm
from echo_lib.config import load_config
from echo_lib.llm.kv import MIN_SHARED, PrefixCache, Tally, keep_lengths, new_cache, prefill
from test_llm_hf import SYSTEM, make_cfg

USER = ["I failed my exam again and I feel like a total failure.", "My friend stopped answering my messages.",
        "My sister moved abroad and the house is quiet."]
REPLIES = ["That sounds really hard. What happened this time?", "I am sorry. Did something change between you?",
           "You miss her. What do you do in the evenings now?"]
FOLLOW = ["I studied every night but froze in the room.", "She said she was busy, but I saw her out.",
          "I sit in her room sometimes, it still smells of her.", "Maybe I am just not good enough for this.",
          "I do not even know why I care so much."]
QUESTIONS = ["Rate the reply: better tie worse", "Rate the warmth 0 1 2 3", "Is it kind? yes no"]


def transcript(case: int, turns: int) -> str:
    lines = [f"User: {USER[case]}"]
    for t in range(turns):
        lines += [f"Friend: {REPLIES[case]}", f"User: {FOLLOW[(case + t) % len(FOLLOW)]}"]
    return "\n".join(lines)


def companion(case: int, turns: int) -> list[dict]:
    """A tested model's prompt: the history in one user message, then an instruction (which the next
    turn's prompt does not continue: only the history is a shared prefix)."""
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"The chat so far:\n{transcript(case, turns)}\n\nWrite your next reply."}]


def judge(case: int, turns: int, question: str) -> list[dict]:
    """A judge's prompt: one case's history asked several questions (the rows share all but the tail)."""
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Earlier in the chat:\n{transcript(case, turns)}\n\n{question}"}]


@pytest.fixture
def llm(tmp_path, tiny_lm_dir):
    return load_llm(make_cfg(tmp_path, tiny_lm_dir, cache=False), "base", dialogues=True)


@pytest.fixture
def plain(tmp_path, tiny_lm_dir):
    return load_llm(make_cfg(tmp_path / "plain", tiny_lm_dir, cache=False, prefix_cache_mb=0), "base")


def run(backend, ids, prefixes=None, tally=None):
    import torch
    model, tok = backend.load()
    with torch.inference_mode():
        return prefill(model, tok.pad_token_id, ids, new_cache(model), prefixes=prefixes, tally=tally)[0][:, -1]


def test_turns_compute_only_new_tokens_and_give_the_fresh_logits(llm):
    import torch
    from echo_lib.llm.kv import common_prefix
    b = llm.backend
    prefixes, tally = PrefixCache(256), Tally()
    last: dict[str, list[list[int]]] = {}
    for turns in range(4):   # two dialogues in lockstep, then a judge's three questions on each
        for role, chats in (("companion", [companion(c, turns) for c in (0, 1)]),
                            ("judge", [judge(c, turns, q) for c in (0, 1) for q in QUESTIONS])):
            ids = b._encode(chats)
            before = (tally.computed, tally.reused)
            cached = run(b, ids, prefixes, tally)
            fresh = run(b, ids)
            assert torch.allclose(cached, fresh, atol=1e-4), (turns, (cached - fresh).abs().max())
            computed, reused = tally.computed - before[0], tally.reused - before[1]
            if role in last:   # each row reuses exactly its common prefix with what was kept of its own prompt of
                # the turn before (the head its rows share, where that is most of each prompt)
                kept = [y[:n] for y, n in zip(last[role], keep_lengths(last[role]))]
                assert reused == sum(common_prefix([x, y]) for x, y in zip(ids, kept))
                assert computed <= sum(map(len, ids)) - reused
                if role == "judge":   # a case's new exchange ran once for its three questions
                    assert computed < sum(map(len, ids)) - reused - 40
            last[role] = ids
    assert tally.computed + tally.reused <= tally.prompt and tally.reused > tally.computed
    assert prefixes.hits > 0 and prefixes.bytes <= prefixes.max_bytes


def test_only_the_longest_common_prefix_is_reused(llm):
    """Prompts that are not extensions: a shorter prompt inside a kept one, one that diverges mid-history,
    one that shares nothing (another system prompt), and a mixed batch of them."""
    import torch
    b = llm.backend
    prefixes = PrefixCache(256)
    long = b._encode([companion(0, 3)])[0]
    run(b, [long], prefixes)
    shorter = long[:len(long) - 20]
    diverged = b._encode([companion(0, 1)])[0]   # shares the history's first turn, then differs
    other = b._encode([[{"role": "system", "content": "Be brief."}, {"role": "user", "content": USER[2]}]])[0]
    key, n = prefixes.longest(shorter)
    assert key == tuple(long) and n == len(shorter) - 1       # the last token still runs: its logits are wanted
    lcp = next(i for i, (x, y) in enumerate(zip(long, diverged)) if x != y)
    assert prefixes.longest(diverged)[1] == lcp
    assert prefixes.longest(other) == (None, 0) or prefixes.longest(other)[1] < MIN_SHARED + 8
    batch = [shorter, diverged, other, long]
    tally = Tally()
    cached = run(b, batch, prefixes, tally)
    assert torch.allclose(cached, run(b, batch), atol=1e-4)
    assert tally.reused >= len(shorter) - 1 + lcp + len(long) - 1


def test_keep_lengths_keep_a_shared_head_once():
    head = list(range(100, 160))
    assert keep_lengths([head + [1, 2], head + [3], head + [4, 5]]) == [60, 60, 60]
    assert keep_lengths([head[:10] + [1] * 30, head[:10] + [2] * 30]) == [40, 40]  # a short head: whole prompts
    assert keep_lengths([head]) == [60]


def test_lru_by_bytes_and_zero_keeps_none(llm):
    b = llm.backend
    ids = [[3 + c] + list(range(20, 140)) for c in (0, 1, 2)]   # nothing shared: a lookup touches no other entry
    probe = PrefixCache(1024)
    run(b, [ids[0]], probe)
    one = probe.bytes
    assert one == sum(2 * t.numel() * t.element_size() for t, _ in probe._entries[tuple(ids[0])][1])
    small = PrefixCache(2.5 * one / 2**20)   # room for two of the three dialogues
    for x in ids:
        run(b, [x], small)
    assert len(small) == 2 and tuple(ids[0]) not in small._entries and small.bytes <= small.max_bytes
    run(b, [ids[1]], small)                 # a use makes it recent: the next one out is ids[2]
    run(b, [ids[0]], small)
    assert tuple(ids[1]) in small._entries and tuple(ids[2]) not in small._entries
    none = PrefixCache(0)
    tally = Tally()
    run(b, ids, none, tally)
    assert len(none) == 0 and tally.reused == 0


def test_backend_replies_and_choices_equal_those_without_the_cache(llm, plain):
    """A 5-turn lockstep dialogue through the backend: greedy replies identical, choose within 1e-4, and
    by the last turn the cached backend computes under half the prompt tokens (the uncached one's grow
    with the history)."""
    greedy = Sampling(temperature=0, max_new_tokens=8)
    options = ["0", "1", "2", "3"]
    for turns in range(5):
        before = (llm.backend.tally.computed, plain.backend.tally.computed)
        chats = [companion(c, turns) for c in (0, 1, 2)]
        assert [c.text for c in llm.generate(chats, greedy)] == [c.text for c in plain.generate(chats, greedy)]
        asks = [judge(c, turns, q) for c in (0, 1, 2) for q in QUESTIONS]
        for x, y in zip(llm.choose(asks, options), plain.choose(asks, options)):
            assert all(math.isclose(x.logprobs[o], y.logprobs[o], abs_tol=1e-4) for o in options)
    last = (llm.backend.tally.computed - before[0], plain.backend.tally.computed - before[1])
    with_cache, without = llm.backend.tally, plain.backend.tally
    assert with_cache.prompt == without.prompt and without.reused == 0 and with_cache.reused > with_cache.computed
    assert last[0] < 0.5 * last[1], last


EMBEDDED = Path(__file__).resolve().parents[1] / "results" / "models" / "smollm2-135m-instruct"


@pytest.mark.slow
@pytest.mark.skipif(not (EMBEDDED / "config.json").exists(), reason="embedded checkpoint not prepared (stage 00)")
def test_embedded_model_multi_turn_dialogue_is_unchanged(tmp_path):
    """SmolLM2-135M, a 5-turn dialogue of two cases whose replies come from the model itself: greedy
    replies and judge probabilities with the prefix cache equal those without it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cached = load_llm(make_cfg(tmp_path / "a", EMBEDDED, cache=False), "base", dialogues=True)
    plain = load_llm(make_cfg(tmp_path / "b", EMBEDDED, cache=False, prefix_cache_mb=0), "base")
    greedy = Sampling(temperature=0, max_new_tokens=24)
    options = ["0", "1", "2"]
    history: list[list[str]] = [[USER[c]] for c in (0, 1)]
    for turn in range(5):
        chats = [[{"role": "system", "content": SYSTEM},
                  {"role": "user", "content": "The chat so far:\n" + "\n".join(h) + "\n\nWrite your next reply."}]
                 for h in history]
        a, p = cached.generate(chats, greedy), plain.generate(chats, greedy)
        assert [c.text for c in a] == [c.text for c in p], turn
        asks = [[chats[c][0], {"role": "user", "content": "\n".join(history[c]) + f"\n\n{q} Answer 0, 1 or 2:"}]
                for c in (0, 1) for q in QUESTIONS]
        for x, y in zip(cached.choose(asks, options), plain.choose(asks, options)):
            assert all(math.isclose(x.logprobs[o], y.logprobs[o], abs_tol=1e-4) for o in options)
        for c, reply in enumerate(a):
            history[c] += [f"Friend: {reply.text.strip() or '...'}", f"User: {FOLLOW[(c + turn) % len(FOLLOW)]}"]
    assert cached.backend.tally.computed < 0.65 * plain.backend.tally.computed  # 0.57 measured (turn 0 is all new)


def test_only_dialogue_callers_keep_prompts(tmp_path, tiny_lm_dir):
    """The sandbox asks for the prefix cache (its prompts extend each other); every other stage's backend
    keeps none, whatever llm.prefix_cache_mb says (kept scoring prompts only filled memory in RL)."""
    cfg = make_cfg(tmp_path, tiny_lm_dir, cache=False, prefix_cache_mb=64)
    assert load_llm(cfg, "base", dialogues=True).backend.prefixes.max_bytes == 64 * 2**20
    assert load_llm(cfg, "base").backend.prefixes.max_bytes == 0


def test_the_sandbox_loads_its_roles_with_the_prefix_cache(tmp_path, monkeypatch):
    import echo_lib.models
    from echo_lib.sandbox.stage import run_sandbox
    asked = []

    def first_role(cfg, name, **kw):
        asked.append(kw)
        raise StopIteration   # enough: how the first role was asked for
    monkeypatch.setattr(echo_lib.models, "load_llm", first_role)
    with pytest.raises(StopIteration):
        run_sandbox(load_config({"results_dir": str(tmp_path)}), "base")
    assert asked == [{"dialogues": True}]

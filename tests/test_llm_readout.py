"""Read-out heads (echo_lib.llm.readout): choose answered from a hidden layer for the questions they know."""
from __future__ import annotations

import numpy as np
import pytest

from echo_lib.config import load_config
from echo_lib.llm import LLMError
from echo_lib.models import load_llm
from echo_lib.llm.readout import ReadoutHeads, fit_heads, question
from test_llm_hf import make_cfg

SYSTEM = "You rate a companion's reply."


def ask(reply: str, q: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Companion: {reply}\n\nRate the reply.\n{q}"}]


def test_the_question_is_the_last_line_of_the_last_message():
    assert question(ask("hello", "Answer with the digit only. C_Prog level:")) == "Answer with the digit only. C_Prog level:"
    assert question([{"role": "user", "content": "a\nb  \n\n"}]) == "b"


def test_heads_learn_a_separable_rule_and_survive_a_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(80, 6))
    level = np.where(x[:, 0] > 0.3, "2", np.where(x[:, 0] < -0.3, "0", "1"))   # three classes on one direction
    ab = np.where(x[:, 1] > 0, "A", "B")
    states = np.vstack([x, x, x])
    questions = ["level:"] * 80 + ["better:"] * 80 + ["same:"] * 80
    targets = list(level) + list(ab) + ["1"] * 80
    heads = fit_heads(states, questions, targets, layer=3, C=10.0)
    assert sorted(heads.heads) == ["better:", "level:"]
    assert "same:" in heads.skipped                  # one answer only: no head, the LM head answers it
    p = heads.heads["level:"].probs(x)
    assert heads.heads["level:"].classes == ("0", "1", "2")
    assert np.allclose(p.sum(axis=1), 1)
    assert np.mean(np.array(heads.heads["level:"].classes)[p.argmax(axis=1)] == level) > 0.9
    pb = heads.heads["better:"].probs(x)             # a two-class head: its one row scores the second class
    assert np.mean(np.where(pb[:, 0] > 0.5, "A", "B") == ab) > 0.95
    back = ReadoutHeads.load(heads.save(tmp_path / "heads"))
    assert back.layer == 3 and back.skipped == heads.skipped
    assert np.allclose(back.heads["level:"].probs(x), p) and np.allclose(back.heads["better:"].probs(x), pb)


def test_a_missing_heads_folder_says_how_to_make_it(tmp_path):
    with pytest.raises(LLMError, match="run rule judges"):
        ReadoutHeads.load(tmp_path / "nothing")


def test_choose_reads_out_the_known_questions_and_leaves_the_rest_to_the_lm_head(tmp_path, tiny_lm_dir):
    base = load_llm(make_cfg(tmp_path, tiny_lm_dir, batch_size=3, cache=False), "base")
    replies = ["That sounds so hard, I am here.", "Just get over it.", "Tell me more about your day?",
               "Whatever.", "I hear how tired you are.", "Stop complaining."]
    good = [True, False, True, False, True, False]
    train = [ask(r, "Score:") for r in replies]
    # padding, a batch and a head shared by several questions change nothing: the states are those of one
    # whole prompt at a time
    several = train + [ask(r, f"Question {q}, a longer one:") for r in replies[:2] for q in range(4)]
    states = base.backend.last_states(several, layer=2)
    alone = np.vstack([base.backend.last_states([c], layer=2) for c in several])
    assert np.allclose(states, alone, atol=1e-4)
    states = states[:len(train)]
    heads = fit_heads(states, [question(c) for c in train], ["4" if g else "1" for g in good], layer=2, C=100.0)
    heads.save(tmp_path / "heads")
    judge = load_llm(load_config({"results_dir": str(tmp_path / "results"), "llm": {"progress": False, "cache": False},
                                  "models": {"base": {"backend": "hf", "source": "local", "id": str(tiny_lm_dir),
                                                      "readout": str(tmp_path / "heads")}}}), "base")
    options = ["1", "2", "3", "4", "5"]
    asked = train + [ask(replies[0], "Some other question:")]
    got = judge.choose(asked, options)
    for c, g in zip(got[:6], good):                   # the head's answers: fit on these six, it gets them right
        assert c.coverage == 1.0 and c.probs["2"] == c.probs["3"] == c.probs["5"] == 0.0
        assert (c.probs["4"] > c.probs["1"]) == g
    lm = base.choose([asked[-1]], options)[0]         # an unknown question: the LM head, as without heads
    assert got[-1].probs == pytest.approx(lm.probs, abs=1e-6)
    assert judge.backend.identity()["readout_fingerprint"] and "readout" not in base.backend.identity()
    with pytest.raises(LLMError, match="layer 9 is not in 1..2"):
        base.backend.last_states(train[:1], layer=9)


MARKS = ("\n\nChat B:\n", "\n\n")


def pair(first: str, second: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"The user: tired.\n\nChat A:\n{first}\n\nChat B:\n{second}\n\n"
                                        "Which chat is better?\nBetter chat:"}]


def test_a_contrast_is_the_first_texts_end_state_minus_the_seconds(tmp_path, tiny_lm_dir):
    import torch
    llm = load_llm(make_cfg(tmp_path, tiny_lm_dir, batch_size=2, cache=False), "base")
    chats = [pair("I hear you.", "Whatever."), pair("Stop complaining, really.", "That sounds so hard."),
             pair("ok", "Tell me more about your day?")]
    got = llm.backend.contrast_states(chats, layer=1, marks=MARKS)
    model, tok = llm.backend.load()
    for chat, row in zip(chats, got):   # by hand: one prompt at a time, all hidden states (layer 1 of 2: the
        #                                 last entry of hidden_states has the final norm applied)
        text = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        ends = [len(tok(text[:text.index(cut)], add_special_tokens=False)["input_ids"]) - 1
                for cut in ("\n\nChat B:\n", "\n\nWhich chat")]
        with torch.inference_mode():
            h = model(input_ids=torch.tensor([tok(text, add_special_tokens=False)["input_ids"]]),
                      output_hidden_states=True).hidden_states[1][0]
        assert np.allclose(row, (h[ends[0]] - h[ends[1]]).numpy(), atol=1e-4)   # padding in a batch changes nothing
    with pytest.raises(LLMError, match="mark '\\\\n\\\\nChat C:' is not in the prompt"):
        llm.backend.contrast_states(chats[:1], layer=2, marks=("\n\nChat C:", "\n\n"))


def test_a_contrast_head_reads_its_contrast_and_keeps_its_marks(tmp_path, tiny_lm_dir):
    """Fit on both orders of a few pairs, the head answers them back through choose; its marks survive the
    round trip, and its contrasts are scaled, not centred (a swap that negates the contrast flips the logit)."""
    base = load_llm(make_cfg(tmp_path, tiny_lm_dir, cache=False), "base")
    good = ["That sounds so hard, I am here.", "I hear how tired you are.", "Tell me more about your day?"]
    poor = ["Just get over it.", "Whatever.", "Stop complaining."]
    chats = [pair(g, p) for g, p in zip(good, poor)] + [pair(p, g) for g, p in zip(good, poor)]
    target = ["A"] * 3 + ["B"] * 3
    x = base.backend.contrast_states(chats, layer=2, marks=MARKS)
    q = question(chats[0])
    heads = fit_heads(x, [q] * 6, target, layer=2, C=1000.0, marks={q: MARKS})
    head = heads.heads[q]
    assert head.marks == MARKS and not head.mean.any()
    logit = lambda z: np.log(head.probs(z)[:, 1] / head.probs(z)[:, 0])
    assert np.allclose(logit(x) + logit(-x), 2 * head.intercept[0])   # not centred: -x mirrors x about the intercept
    heads.save(tmp_path / "heads")
    assert ReadoutHeads.load(tmp_path / "heads").heads[q].marks == MARKS
    judge = load_llm(load_config({"results_dir": str(tmp_path / "results"), "llm": {"progress": False, "cache": False},
                                  "models": {"base": {"backend": "hf", "source": "local", "id": str(tiny_lm_dir),
                                                      "readout": str(tmp_path / "heads")}}}), "base")
    got = judge.choose(chats, ["A", "B"])
    assert [("A" if c.probs["A"] > 0.5 else "B") for c in got] == target

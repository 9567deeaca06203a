"""Stage 01's data: corpus parsing, humanlike negatives, axioms -> theorems, critique-and-rewrite, HITL."""
import random

import pytest

from echo_lib.llm.types import Choice, Completion
from echo_lib.scenarios.own import load_own
from echo_lib.synthesis import hitl
from echo_lib.synthesis.chitchat import Dialogue, parse_corpus
from echo_lib.synthesis.empathy import auto_tie_margin, expected_scores, label, synthesize
from echo_lib.synthesis.humanlike import as_chat, build_items, sample_windows, shuffled
from echo_lib.synthesis.splits import holdout_split
from echo_lib.synthesis.theorems import derive_theorems, gold_profile, load_axioms


def msg(text, sender):
    return {"text": text, "sender": sender, "timestamp": "t"}


def test_parse_corpus_merges_blocks_and_drops_one_sided_dialogues():
    raw = {"d1": {"messages": [[msg("Hello", "a"), msg("How are  you?", "a")], [msg("fine", "b")],
                               [msg(" ", "a")]]},
           "d2": {"messages": [[msg("anyone there?", "a")]]}}
    assert parse_corpus(raw) == [Dialogue("d1", ("Hello How are you?", "fine"))]


DIALOGUES = [Dialogue(f"d{i}", tuple(f"turn {j} of dialogue {i} words here" for j in range(8))) for i in range(20)]


def test_windows_come_from_distinct_dialogues_within_limits():
    windows = sample_windows(DIALOGUES, 10, random.Random(0), 2, 4, 40)
    assert len({w.dialogue_id for w in windows}) == 10
    assert all(2 <= len(w.context) <= 4 for w in windows)
    for w in windows:
        turns = next(d.turns for d in DIALOGUES if d.id == w.dialogue_id)
        start = turns.index(w.context[0])
        assert turns[start:start + len(w.context) + 1] == (*w.context, w.reply), "a contiguous window"
    with pytest.raises(ValueError, match="data.humanlike"):
        sample_windows(DIALOGUES, 50, random.Random(0), 2, 4, 40)


def test_as_chat_gives_the_model_the_repliers_side():
    chat = as_chat(["a", "b", "c"], "sys")
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user"]


def test_every_positive_gets_one_negative_of_each_kind_in_turn():
    windows = sample_windows(DIALOGUES, 8, random.Random(0), 2, 4, 40)
    seen = []

    def reply_fn(chats):
        seen.extend(chats)
        return [f"model says {len(c)}" for c in chats]
    kinds = ["model_reply", "context_removed", "last_turn_swapped", "turns_shuffled"]
    items = build_items(windows, windows, kinds, reply_fn, "sys", random.Random(0), "hl")
    assert len(items) == 16 and sum(i.label == "human" for i in items) == 8
    negatives = [i for i in items if i.label == "machine"]
    assert [n.kind for n in negatives] == kinds * 2
    by_kind = {n.kind: (n, w) for n, w in zip(negatives, windows)}
    n, w = by_kind["context_removed"]
    assert len(seen) == 4 and n.reply == "model says 2", "context removed: system + last turn only"
    n, w = by_kind["model_reply"]
    assert n.reply == f"model says {len(w.context) + 1}" and n.context == list(w.context)
    n, w = by_kind["last_turn_swapped"]
    assert n.reply != w.reply and n.context == list(w.context)
    n, w = by_kind["turns_shuffled"]
    assert n.reply == w.reply and sorted(n.context) == sorted(w.context) and n.context[-1] != w.context[-1]
    with pytest.raises(ValueError, match="allowed"):
        build_items(windows, windows, ["paraphrased"], reply_fn, "sys", random.Random(0), "hl")


def test_shuffle_moves_the_last_turn():
    rng = random.Random(3)
    for _ in range(20):
        assert shuffled(["a", "b", "c"], rng)[-1] != "c"


def test_holdout_split_is_seeded_and_disjoint():
    train, test = holdout_split(list(range(10)), 0.2, seed=1)
    assert len(test) == 2 and not set(train) & set(test) and sorted(train + test) == list(range(10))
    assert holdout_split(list(range(10)), 0.2, seed=1) == (train, test)
    with pytest.raises(ValueError):
        holdout_split([1], 0.5, 0)


@pytest.fixture(scope="module")
def scenarios():
    return load_own()


def test_theorems_follow_the_users_priorities(scenarios):
    axioms = load_axioms("data/axioms.yaml")
    s = next(s for s in scenarios if s.priorities.affective.level == "High"
             and "High" not in (s.priorities.cognitive.level, s.priorities.motivational.level))
    theorems = derive_theorems(s, axioms)
    first = s.persona.name.split()[0]
    assert theorems[0].startswith(f"{first} needs a reply that will acknowledge the feeling")
    assert "affective need is high" in theorems[0]
    assert all(f"pushed away by: {d}" in " ".join(theorems) for d in s.dislikes)
    profile = gold_profile(s)
    assert profile["priorities"]["affective"] == "High" and profile["threshold"] == s.threshold.level


def test_bad_axioms_file_names_the_problem(tmp_path):
    (tmp_path / "ax.yaml").write_text("- {id: x, axis: Z, principle: p, violation: v}\n")
    with pytest.raises(ValueError, match="axis 'Z'"):
        load_axioms(tmp_path / "ax.yaml")


class FakeLLM:
    """Replies 'reply-<seed>' or 'rewrite'; scores come from a table keyed by reply text."""
    def __init__(self, scores):
        self.scores, self.rewrites = scores, 0

    def generate(self, chats, sampling):
        samplings = sampling if isinstance(sampling, list) else [sampling] * len(chats)
        texts = []
        for chat, s in zip(chats, samplings):
            if "Draft reply" in chat[-1]["content"]:
                self.rewrites += 1
                texts.append("rewrite of " + chat[-1]["content"].split("Draft reply: ")[1].split("\n")[0])
            else:
                texts.append(f"reply-{s.seed}")
        return [Completion(t, "stop") for t in texts]

    def choose(self, prompts, options):
        out = []
        for p in prompts:
            reply = p[-1]["content"].split("Reply to rate\n")[1].split("\n")[0]
            score = self.scores[reply]
            out.append(Choice({o: float(o == str(score)) for o in options}, {o: None for o in options}, None))
        return out


def test_critique_and_rewrite_against_the_score_3_anchor(scenarios):
    import dataclasses

    from echo_lib.config import load_config
    settings = dataclasses.replace(load_config().data.empathy, tie_margin=0.25, n_candidates=4, anchor="score3")
    llm = FakeLLM({"reply-0": 2, "reply-1": 3, "reply-2": 5, "reply-3": 1,
                   "rewrite of reply-0": 4, "rewrite of reply-3": 3})
    items = synthesize(scenarios[:1], load_axioms("data/axioms.yaml"), llm, llm, settings, 0, "t")
    assert {i.reference for i in items} == {"reply-1"}, "the reply scored 3 anchors"
    assert llm.rewrites == 2, "only replies scored 3 or below (not the anchor, not the 5) are rewritten"
    got = {i.candidate: (i.label, i.origin, i.candidate_score) for i in items}
    assert got["reply-2"] == ("better", "sample", 5)
    assert got["reply-0"] == ("worse", "sample", 2)
    assert got["rewrite of reply-0"] == ("better", "rewrite", 4)
    assert got["rewrite of reply-3"][0] == "tie"
    assert all(i.profile == gold_profile(scenarios[0]) for i in items)


def test_scores_labels_and_auto_margin():
    choice = Choice({"1": 0.5, "2": 0, "3": 0.5, "4": 0, "5": 0}, {}, None)
    assert expected_scores([choice]) == [2.0]
    assert label(3.3, 3.0, 0.25) == "better" and label(2.8, 3.0, 0.25) == "tie" and label(2.5, 3.0, 0.25) == "worse"
    assert auto_tie_margin([0.3, 0.1, 0.2, 0.5, 0.4, 0.6]) == 0.3
    assert auto_tie_margin([]) == 0.0


def test_hitl_sheet_verdicts_and_agreement(scenarios, tmp_path):
    profiles = {s.id: gold_profile(s) for s in scenarios}
    theorems = {s.id: ["t1", "t2"] for s in scenarios}
    ids = hitl.export_sample(scenarios, profiles, theorems, 0.1, 3, 0, tmp_path / "sheet.csv")
    assert len(ids) == 3 and len({s.labels.dominant_axis for s in scenarios if s.id in ids}) == 3
    header = (tmp_path / "sheet.csv").read_text().splitlines()[0]
    assert header.split(",") == list(hitl.COLUMNS)

    # Two annotators on four scenarios: agree on 3 of 4 -> 75 %; kappa = (0.75 - 0.5) / 0.5 = 0.5
    rows = ["scenario_id,annotator,profile_consistent,strategy_consistent"]
    for sid, a, b in [("s1", "yes", "yes"), ("s2", "yes", "no"), ("s3", "no", "no"), ("s4", "no", "no")]:
        rows += [f"{sid},ann1,{a},yes", f"{sid},ann2,{b},yes"]
    (tmp_path / "v.csv").write_text("\n".join(rows) + "\n,,,\n")
    verdicts = hitl.read_verdicts([tmp_path / "v.csv"])
    report = hitl.agreement(verdicts)
    assert report["profile_consistent_agreement"] == 0.75
    assert report["profile_consistent_kappa"] == pytest.approx(0.5)
    assert report["strategy_consistent_kappa"] is None, "no variation: kappa undefined"
    assert hitl.rejected_scenarios(verdicts) == {"s2", "s3", "s4"}

    (tmp_path / "bad.csv").write_text("scenario_id,annotator,profile_consistent,strategy_consistent\ns1,a,maybe,yes\n")
    with pytest.raises(ValueError, match=r"bad.csv, line 2, column profile_consistent: 'maybe'; allowed: yes or no"):
        hitl.read_verdicts([tmp_path / "bad.csv"])


def test_shipped_example_verdicts_parse():
    verdicts = hitl.read_verdicts(["data/hitl/example_verdicts.csv"])
    assert {v.annotator for v in verdicts} == {"example-a", "example-b"}
    own_ids = {s.id for s in load_own()}
    assert {v.scenario_id for v in verdicts} <= own_ids


def test_anchor_rules():
    from echo_lib.synthesis.empathy import pick_anchor
    scores = [1.4, 1.9, 1.6, 1.7]
    assert pick_anchor(scores, "score3") == 1, "closest to 3 is the best of a compressed judge"
    assert pick_anchor(scores, "median") == 2, "lower median by score"
    assert pick_anchor([2.0, 1.0], "median") == 1

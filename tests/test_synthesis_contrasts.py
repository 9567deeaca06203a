"""Empathy items by contrast construction (data.empathy.method: contrast), with a fake generator (no model)."""
import dataclasses
from collections import Counter
from pathlib import Path

import pytest
import yaml

from echo_lib.config import ConfigError, load_config, validate
from echo_lib.llm.types import Completion
from echo_lib.provenance import write_jsonl
from echo_lib.rewards.data import load_items
from echo_lib.synthesis import contrasts, stage
from echo_lib.synthesis.contrasts import BankError, load_bank, split_bank
from echo_lib.synthesis.theorems import load_axioms

ROOT = Path(__file__).resolve().parents[1]
BANK = ROOT / "data/contrasts.yaml"


class FakeGenerator:
    """Writes '<role> reply to <scenario> #<seed>': good when the system prompt is the theorems one."""
    def __init__(self, scenarios):
        self.by_topic = {s.topic: s.id for s in scenarios}
        self.calls = 0

    def generate(self, chats, sampling):
        self.calls += 1
        samplings = sampling if isinstance(sampling, list) else [sampling] * len(chats)
        out = []
        for chat, s in zip(chats, samplings):
            role = "good" if "What this person needs" in chat[0]["content"] else "plain"
            out.append(Completion(f"{role} reply to {self.by_topic[chat[-1]['content']]} #{s.seed}", "stop"))
        return out


@pytest.fixture(scope="module")
def cfg():
    return load_config(ROOT / "config/default.yaml")


@pytest.fixture(scope="module")
def scenarios(cfg):
    return stage.empathy_scenarios(cfg)


@pytest.fixture(scope="module")
def splits(cfg, scenarios):
    return stage.empathy_data(cfg, FakeGenerator(scenarios), None, scenarios)


def test_default_config_gives_balanced_items_of_every_kind(splits):
    assert {k: len(v) for k, v in splits.items()} == {"train": 400, "test": 200}
    for items in splits.values():
        labels = Counter(i.label for i in items)
        assert labels["better"] == labels["worse"] == len(items) // 2 and "tie" not in labels
        assert Counter(i.origin for i in items if i.label == "worse") == {k: len(items) // 10 for k in contrasts.KINDS}
        assert len({i.id for i in items}) == len(items), "ids are unique"
        for i in items:
            assert (i.candidate_score, i.score, i.reference_score) == (contrasts.SCORES[i.origin],
                                                                      contrasts.SCORES[i.origin], 3.0)
            assert i.reference.startswith(f"plain reply to {i.scenario_id}") and i.candidate != i.reference
            assert i.context == [{"role": "user", "content": i.context[0]["content"]}] and i.theorems
            if i.origin == "good":
                assert i.candidate.startswith(f"good reply to {i.scenario_id}")
    ids = {split: {i.scenario_id for i in items} for split, items in splits.items()}
    assert len(ids["test"]) == 10 and not ids["train"] & ids["test"], "split by scenario"
    refs = Counter((i.scenario_id, i.reference) for i in splits["test"])
    assert len(refs) == 20 and set(refs.values()) == {10}, "two references per scenario, used in turn"


def test_held_out_poor_replies_are_unseen_phrasings(splits, cfg):
    halves = split_bank(load_bank(BANK), cfg.seed)
    for split, items in splits.items():
        own_ids = {i.scenario_id for i in items}
        for i in (i for i in items if i.label == "worse"):
            if i.origin == "off_topic":
                other = i.candidate.split("good reply to ")[1].split(" #")[0]
                assert other != i.scenario_id and other in own_ids, "another scenario of the same split"
            else:
                assert i.candidate in halves[split][i.origin], f"{split} poor text from the {split} half"
    train_poor = {i.candidate for i in splits["train"] if i.label == "worse"}
    assert not train_poor & {i.candidate for i in splits["test"] if i.label == "worse"}


def test_bank_halves_are_disjoint_and_seeded():
    bank = load_bank(BANK)
    assert set(bank) == set(contrasts.BANK_KINDS) and all(len(v) >= 24 for v in bank.values())
    halves = split_bank(bank, 0)
    for kind, entries in bank.items():
        train, test = halves["train"][kind], halves["test"][kind]
        assert not set(train) & set(test) and sorted(train + test) == sorted(entries)
        assert len(test) == len(entries) // 2
    assert split_bank(bank, 0) == halves and split_bank(bank, 1) != halves
    lengths = {len(t.split(". ")) for v in bank.values() for t in v}
    assert len(lengths) >= 3, "replies of varied length"


def test_deterministic_for_a_seed_and_different_for_another(scenarios):
    axioms, part = load_axioms(ROOT / "data/axioms.yaml"), scenarios[:4]
    settings = load_config(ROOT / "config/default.yaml").data.empathy
    bank = split_bank(load_bank(BANK), 0)["train"]

    def run(seed):
        return [i.to_json() for i in contrasts.synthesize(part, axioms, FakeGenerator(part), settings, seed, "t", bank)]
    assert run(0) == run(0)
    assert run(0) != run(1)
    assert [i["id"] for i in run(0)] == [i["id"] for i in run(1)], "ids depend on the construction only"


def test_items_follow_the_stage_01_file_contract(splits, tmp_path):
    path = tmp_path / "test.jsonl"
    write_jsonl(path, (i.to_json() for i in splits["test"]))
    loaded = load_items(path, "empathy")
    assert len(loaded) == 200 and loaded[0]["origin"] in ("good", *contrasts.KINDS)


def test_off_topic_falls_back_without_another_scenario(scenarios):
    settings = load_config(ROOT / "config/default.yaml").data.empathy
    settings = dataclasses.replace(settings, contrast=dataclasses.replace(
        settings.contrast, good_per_scenario=3, poor_per_scenario=3, references_per_scenario=1,
        poor_kinds=["off_topic", "blaming"]))
    bank = split_bank(load_bank(BANK), 0)["test"]
    items = contrasts.synthesize(scenarios[:1], [], FakeGenerator(scenarios), settings, 0, "t", bank)
    assert [i.origin for i in items] == ["good", "blaming"] * 3
    only = dataclasses.replace(settings, contrast=dataclasses.replace(settings.contrast, poor_kinds=["off_topic"]))
    with pytest.raises(ValueError, match="off_topic"):
        contrasts.synthesize(scenarios[:1], [], FakeGenerator(scenarios), only, 0, "t", bank)


@pytest.mark.parametrize("text, expected", [
    ("dismissive: ['only one']\n", r"kind 'dismissive' has 1 entry; add at least 2"),
    ("dismissive: [a, b]\nrude: [a, b]\n", r"unknown kind 'rude'; allowed kinds: dismissive"),
    ("off_topic: [a, b]\n", r"unknown kind 'off_topic'.*not bank entries"),
    ("dismissive: [a, 'b {topic}']\n", r"kind 'dismissive' entry #2 holds a placeholder"),
    ("dismissive: [a, a]\n", r"kind 'dismissive' entry #2 repeats"),
    ("dismissive: a\n", r"kind 'dismissive' must hold a list"),
    ("- a\n", r"expected a mapping of failure kind"),
])
def test_bad_bank_file_names_the_file_kind_and_fix(tmp_path, text, expected):
    path = tmp_path / "bank.yaml"
    path.write_text(text)
    with pytest.raises(BankError, match=expected) as err:
        load_bank(path, ["dismissive"])
    assert str(path) in str(err.value)


def test_a_requested_kind_missing_from_the_bank_is_named(tmp_path):
    path = tmp_path / "bank.yaml"
    path.write_text("dismissive: [a, b]\n")
    with pytest.raises(BankError, match=r"kind 'platitude' has 0 entries.*poor_kinds") as err:
        load_bank(path, ["dismissive", "platitude", "off_topic"])
    assert str(path) in str(err.value)
    assert load_bank(path, ["dismissive", "off_topic"]) == {"dismissive": ["a", "b"]}
    with pytest.raises(BankError, match="does not exist"):
        load_bank(tmp_path / "nope.yaml")


@pytest.mark.parametrize("path, method", [("config/default.yaml", "contrast"), ("config/ci.yaml", "contrast"),
                                          ("config/paper.yaml", "critique_rewrite")])
def test_shipped_configs_choose_the_method(path, method):
    e = load_config(ROOT / path).data.empathy
    assert e.method == method
    assert e.contrast.bank_file == "data/contrasts.yaml" and e.contrast.poor_kinds == list(contrasts.KINDS)


def test_bad_contrast_settings_name_key_and_allowed():
    raw = yaml.safe_load((ROOT / "config/default.yaml").read_text())
    for edit, expected in [({"method": "rubric"}, "data.empathy.method"),
                           ({"contrast": {"poor_kinds": ["rude"]}}, "data.empathy.contrast.poor_kinds.0"),
                           ({"contrast": {"references_per_scenario": 0}}, "references_per_scenario")]:
        bad = {**raw, "data": {**raw["data"], "empathy": {**raw["data"]["empathy"], **edit}}}
        with pytest.raises(ConfigError, match=expected):
            validate(bad, "test.yaml")

"""The judge sensitivity check (echo_lib.judges): the set's checks, the shipped set's balance, and the
figures computed on toy judges whose answers are known (one that sees the reply, one that prefers a
position or a digit whatever it reads, one that reads the reply backwards)."""
import json
import re
from pathlib import Path

import pytest

from echo_lib.judges.sensitivity import nee_sensitivity, preference, sandbox_judge_sensitivity
from echo_lib.judges.sensitivity_set import AXES, KINDS, SensitivitySetError, load_set, select
from echo_lib.llm import Choice
from echo_lib.nee.blinding import Blinder
from echo_lib.nee.panel import Asker, make_panel
from echo_lib.nee.params import NEEParams
from echo_lib.sandbox.judge import Judge
from echo_lib.sandbox.params import JudgeParams
from echo_lib.stats import wilson

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "data" / "judge_sensitivity.yaml"


def toy_set(tmp_path, n=4, **change) -> Path:
    items = [{"id": f"t{i}", "split": "heldout" if i % 2 else "dev", "axis": AXES[i % 3], "kind": KINDS[i % 5],
              "profile": f"Person {i}, 30, needs to be heard.", "context": [] if i % 2 else [{"user": "hi", "reply": "hey"}],
              "user": f"My week {i} was awful.", "good": f"That week sounds exhausting, GOOD {i}.",
              "poor": f"Whatever, POOR {i}, move on."} for i in range(n)]
    items[0].update(change)
    import yaml
    path = tmp_path / "set.yaml"
    path.write_text(yaml.safe_dump({"items": items}))
    return path


# ---- the set ------------------------------------------------------------------------------------------------

def test_set_loads_and_selects_a_split(tmp_path):
    items = load_set(toy_set(tmp_path, n=6))
    assert [it.id for it in select(items, "heldout")] == ["t1", "t3", "t5"]
    assert [it.id for it in select(items, "dev", max_items=2)] == ["t0", "t2"]
    assert items[0].context == (("hi", "hey"),) and items[1].context == ()


@pytest.mark.parametrize("change, match", [
    ({"kind": "rude"}, r"item #1 \(t0\) field 'kind' is 'rude'; fix: use one of dismissive"),
    ({"split": "test"}, r"field 'split' is 'test'; fix: use one of dev, heldout"),
    ({"good": ""}, r"field 'good' is ''; fix: write a non-empty text"),
    ({"poor": "That week sounds exhausting, GOOD 0."}, r"field 'poor' is the same text as 'good'"),
    ({"context": [{"user": "hi"}]}, r"context\[0\] is .*fix: write exactly the keys user and reply"),
    ({"id": "t1"}, r"item #2 field 'id' repeats 't1' of item #1"),
    ({"mood": "sad"}, r"has unknown \['mood'\]; fix: write exactly the fields"),
])
def test_set_errors_name_the_file_item_field_and_fix(tmp_path, change, match):
    path = toy_set(tmp_path, **change)
    with pytest.raises(SensitivitySetError, match=match) as err:
        load_set(path)
    assert str(path) in str(err.value)


def test_missing_set_says_which_key_to_set(tmp_path):
    with pytest.raises(SensitivitySetError, match="does not exist; fix: set judges.set"):
        load_set(tmp_path / "nope.yaml")


def test_shipped_set_is_balanced_split_and_not_given_away_by_length():
    items = load_set(SHIPPED)
    assert len(items) >= 60
    dev, held = select(items, "dev"), select(items, "heldout")
    assert len(held) >= 30 and len(dev) >= 30
    for part in (dev, held):   # every (axis, kind) cell in both parts
        assert {(it.axis, it.kind) for it in part} == {(a, k) for a in AXES for k in KINDS}
    assert not {it.user for it in dev} & {it.user for it in held}
    longer = sum(preference(len(it.good.split()), len(it.poor.split())) for it in held) / len(held)
    assert 0.3 <= longer <= 0.7, f"the longer reply is the good one in {longer:.2f} of the held-out items"


# ---- toy judges ---------------------------------------------------------------------------------------------

def rated_reply(prompt: str) -> str:
    """The companion's reply a rating prompt rates (its last 'Companion:' line)."""
    return re.findall(r"Companion: (.*)", prompt)[-1]


class ToyLLM:
    """Answers choose() by the rated text: `sees` = prefers high levels for GOOD replies (low regress);
    `backwards` = the opposite; `constant` = the same probabilities whatever it reads. In A/B prompts it
    picks the chat holding GOOD (sees), the other one (backwards), or always A (constant)."""

    def __init__(self, how: str):
        self.how, self.calls = how, 0

    def choose(self, chats, options):
        self.calls += len(chats)
        return [self._one(chat[-1]["content"], list(options)) for chat in chats]

    def _one(self, prompt, options):
        if options == ["A", "B"]:
            a_good = prompt.index("GOOD") < prompt.index("Chat B:")
            top = {"sees": "A" if a_good else "B", "backwards": "B" if a_good else "A", "constant": "A"}[self.how]
        else:
            good = "GOOD" in rated_reply(prompt)
            regress = "severity level:" in prompt
            high = good != regress if self.how == "sees" else good == regress
            top = options[-1] if (high and self.how != "constant") else options[0]
        probs = {o: (0.7 if o == top else 0.3 / (len(options) - 1)) for o in options}
        return Choice(probs=probs, logprobs={o: None for o in options}, coverage=1.0)


@pytest.mark.parametrize("how, accuracy", [("sees", 1.0), ("backwards", 0.0), ("constant", 0.5)])
def test_sandbox_judge_accuracy_on_toy_judges(tmp_path, how, accuracy):
    items = load_set(toy_set(tmp_path, n=6))
    out = sandbox_judge_sensitivity(Judge(ToyLLM(how), JudgeParams(mode="choose")), items)
    assert out["accuracy"] == accuracy and out["n"] == 6 and out["n_failed"] == 0
    if how == "sees":   # progress 0.7*2 + 0.15*1 = 1.55 on each axis, regress 0.15*1 + 0.15*2 = 0.45: 3 * 1.1
        assert out["items"][0]["effect_good"] == pytest.approx(3.3) and out["items"][0]["effect_poor"] == pytest.approx(-3.3)
        assert out["by_kind"] == {k: 1.0 for k in KINDS[:5]}
        assert out["accuracy_ci"] == wilson(6, 6).bounds and out["accuracy_ci"][1] == 1.0 and out["ci_method"] == "wilson-cc"


def test_sandbox_judge_rates_the_item_chat_with_its_profile(tmp_path):
    items = load_set(toy_set(tmp_path, n=2))
    llm = ToyLLM("sees")
    prompts = []
    llm.choose = lambda chats, options, _c=llm.choose: prompts.extend(c[-1]["content"] for c in chats) or _c(chats, options)
    sandbox_judge_sensitivity(Judge(llm, JudgeParams(mode="choose")), items[:1])
    assert len(prompts) == 12   # six fields x (good, poor)
    assert all("The person:\nPerson 0, 30, needs to be heard." in p for p in prompts)
    assert all("Earlier in the chat:\nUser: hi\nCompanion: hey\n\nThe turn(s) to rate:\nUser: My week 0 was awful." in p
               for p in prompts)
    assert sum("Companion: That week sounds exhausting, GOOD 0." in p for p in prompts) == 6


def panel_figures(tmp_path, how, variants=2):
    items = load_set(toy_set(tmp_path, n=6))
    params = NEEParams(prompt_variants=variants)
    askers = {"j": Asker(ToyLLM(how), params)}
    return nee_sensitivity(make_panel(["j"], variants, 0), askers, items, Blinder([], params.blind_terms))


def test_nee_panel_that_sees_the_reply(tmp_path):
    out = panel_figures(tmp_path, "sees")
    assert out["accuracy"] == 1.0 and out["pairwise_accuracy"] == 1.0 and out["position_bias"] == 0.0
    assert out["alpha"] == pytest.approx(1.0)   # both wordings give the same expected levels
    assert set(out["judges"]) == {"j/v1", "j/v2"} and out["judges"]["j/v1"]["accuracy"] == 1.0
    assert out["n"] == 6 and out["n_failed_ratings"] == 0
    assert out["ci_method"] == out["pairwise_ci_method"] == "wilson-cc" and out["pairwise_n"] == 6


def test_nee_panel_with_a_position_and_a_digit_preference(tmp_path):
    out = panel_figures(tmp_path, "constant")
    assert out["accuracy"] == 0.5 and out["pairwise_accuracy"] == 0.5   # ties everywhere
    assert out["position_bias"] == 1.0      # "A" whatever the order: every verdict flips with it
    assert out["alpha"] is None             # no variation at all: alpha undefined


def test_nee_panel_reading_backwards(tmp_path):
    out = panel_figures(tmp_path, "backwards")
    assert out["accuracy"] == 0.0 and out["pairwise_accuracy"] == 0.0 and out["position_bias"] == 0.0


# ---- the embedding probe ---------------------------------------------------------------------------------------

def word_embed(texts):
    """A toy embedder: counts of a few marker words (the toy set's good replies say GOOD, poor ones POOR)."""
    import numpy as np
    return np.array([[t.count("GOOD"), t.count("POOR"), t.count("week"), 1.0] for t in texts])


def test_probe_learns_the_marker_and_its_twins_do_not(tmp_path):
    import numpy as np
    from echo_lib.judges.probe import embedding_probe, fit_pairwise, pair_differences, score_heldout
    items = load_set(toy_set(tmp_path, n=8))
    dev, held = select(items, "dev"), select(items, "heldout")
    out = embedding_probe(dev, held, word_embed, seed=0)
    assert out["accuracy"] == 1.0 and out["n"] == 4 and out["accuracy_ci"] == wilson(4, 4).bounds
    assert out["ci_method"] == out["shuffled"]["ci_method"] == "wilson-cc"
    assert out["shuffled"]["share_swapped"] == 0.5
    # every dev label swapped: the antisymmetric probe learns the marker backwards
    backwards = fit_pairwise(pair_differences(dev, word_embed), np.zeros(len(dev), dtype=bool), 0)
    assert score_heldout(backwards, pair_differences(held, word_embed))["accuracy"] == 0.0
    # features that do not tell the replies apart: every held-out item is a tie
    flat = embedding_probe(dev, held, lambda texts: np.ones((len(texts), 3)), seed=0)
    assert flat["accuracy"] == 0.5
    with pytest.raises(ValueError, match="dev and held-out"):
        embedding_probe([], held, word_embed, 0)


# ---- the stage ------------------------------------------------------------------------------------------------

def test_stage_writes_the_record_with_its_targets(tmp_path):
    from echo_lib.config import load_config
    from echo_lib.judges.stage import THRESHOLDS, run_sensitivity, verdict_lines
    embedded = {"backend": "hf", "source": "embedded", "id": "smollm2-135m-instruct"}
    cfg = load_config({"results_dir": str(tmp_path / "results"), "run_name": "t", "seed": 3,
                       "models": {"base": embedded, "judge": embedded}, "roles": {"judge": "judge", "nee_judges": ["judge"]},
                       "judges": {"set": str(toy_set(tmp_path, n=8))}, "llm": {"progress": False}})
    record = run_sensitivity(cfg, llms={"judge": ToyLLM("sees")}, embed=word_embed)
    saved = json.loads((tmp_path / "results/t/judges/sensitivity.json").read_text())
    assert saved["probe"]["accuracy"] == 1.0 and saved["probe"]["n_dev"] == 4 and saved["probe"]["n"] == 4
    assert saved["sandbox_judge"]["accuracy"] == 1.0 and saved["sandbox_judge"]["n"] == 4
    assert saved["nee"]["accuracy"] == 1.0 and saved["nee"]["position_bias"] == 0.0
    assert set(saved["nee"]["judges"]) == {"judge/v1", "judge/v2"}
    assert saved["passed"] == {k: True for k in THRESHOLDS} and saved["set"]["n_items"] == 4
    assert saved["length_rule"]["accuracy"] == 1.0   # the toy's good replies are the longer ones
    assert "target >= 0.8: meets" in verdict_lines(record)


@pytest.mark.parametrize("how, fit", [("sees", 1.0), ("backwards", 0.0)])
def test_trained_judge_is_also_scored_on_the_dev_items_it_learnt_from(tmp_path, how, fit):
    from echo_lib.config import load_config
    from echo_lib.judges.stage import run_sensitivity, verdict_lines
    embedded = {"backend": "hf", "source": "embedded", "id": "smollm2-135m-instruct"}
    cfg = load_config({"results_dir": str(tmp_path / "results"), "run_name": "t", "seed": 3,
                       "models": {"base": embedded, "judge": embedded}, "roles": {"judge": "judge", "nee_judges": ["judge"]},
                       "judges": {"set": str(toy_set(tmp_path, n=10)), "nee": False, "probe": False},
                       "llm": {"progress": False}})
    untrained = run_sensitivity(cfg, llms={"judge": ToyLLM(how)})["sandbox_judge"]
    assert "train_accuracy" not in untrained       # no training: nothing was learnt from the dev items
    s = run_sensitivity(cfg, llms={"judge": ToyLLM(how)}, training={"model": "judge"})["sandbox_judge"]
    assert s["n"] == 5 and s["train_n"] == 5 and s["train_accuracy"] == fit and s["accuracy"] == fit
    assert s["ci_method"] == s["train_ci_method"] == "wilson-cc" and s["train_accuracy_ci"] == wilson(5 * fit, 5).bounds
    assert f"dev items it was trained on: {fit:.3f}" in verdict_lines(json.loads(
        (tmp_path / "results/t/judges/sensitivity.json").read_text()))


def test_a_model_that_is_sandbox_judge_and_nee_judge_is_loaded_once(tmp_path, monkeypatch):
    import echo_lib.models
    from echo_lib.config import load_config
    from echo_lib.judges.stage import run_sensitivity
    loaded = []
    monkeypatch.setattr(echo_lib.models, "load_llm", lambda cfg, name: loaded.append(name) or ToyLLM("sees"))
    embedded = {"backend": "hf", "source": "embedded", "id": "smollm2-135m-instruct"}
    cfg = load_config({"results_dir": str(tmp_path / "results"), "run_name": "t", "seed": 3,
                       "models": {"base": embedded, "judge": embedded}, "roles": {"judge": "judge", "nee_judges": ["judge"]},
                       "judges": {"set": str(toy_set(tmp_path, n=8)), "probe": False},
                       "llm": {"progress": False}})
    record = run_sensitivity(cfg, training={"model": "judge"})   # held-out and dev items, rubric and panel
    assert loaded == ["judge"]
    assert record["sandbox_judge"]["accuracy"] == 1.0 and record["nee"]["accuracy"] == 1.0


# ---- the trained judge's examples ---------------------------------------------------------------------------

def test_judge_examples_use_the_instruments_own_formats_and_only_dev_items(tmp_path):
    from echo_lib.judges.train import examples, mdep_levels, replies
    items = select(load_set(toy_set(tmp_path, n=6)), "dev")
    bank = {"platitude": ["Stay positive!"], "blaming": ["That's on you."]}
    rs = replies(items, bank, bank_per_item=2, seed=0)
    assert len(rs) == len(items) * 5   # own good, own poor, off-topic, two bank replies
    for it, kind, text in rs[2::5]:    # the off-topic contrast is another item's good reply
        assert kind == "off_topic" and text != it.good and text in {x.good for x in items}
    exs = examples(items, bank, 2, variants=2, seed=0)
    mdep = [e for e in exs if e.prompt[-1]["content"].rstrip().endswith("level:")
            and "The turn(s) to rate" in e.prompt[-1]["content"]]
    ratings = [e for e in exs if e.prompt[-1]["content"].endswith("score:")]
    pairs = [e for e in exs if e.prompt[-1]["content"].endswith("Better chat:")]
    assert len(mdep) == 6 * len(rs) and len(ratings) == 2 * 6 * len(rs) and len(pairs) == 2 * 2 * 4 * len(items)
    assert {e.target for e in pairs} == {"A", "B"} and sum(e.target == "A" for e in pairs) == len(pairs) / 2
    good_c = [e for e in mdep if e.gold["kind"] == "good" and e.id.endswith("C_Prog")]
    assert {e.target for e in good_c} == {"1", "2"}   # 2 on the item's own axis
    assert mdep_levels("good", "affective") == {"C_Prog": 1, "C_Neg": 0, "A_Prog": 2, "A_Neg": 0, "P_Prog": 1, "P_Neg": 0}
    assert mdep_levels("blaming", "cognitive")["A_Neg"] == 2 and mdep_levels("blaming", "cognitive")["C_Prog"] == 0
    assert {e.gold["item"] for e in exs} == {it.id for it in items}


def test_judge_training_refuses_held_out_items(tmp_path):
    from echo_lib.judges.params import JudgeTrainParams
    from echo_lib.judges.train import train_judge
    with pytest.raises(ValueError, match="dev items only"):
        train_judge(None, JudgeTrainParams(), None, 3, load_set(toy_set(tmp_path, n=4)), tmp_path, 0)


def test_readout_training_refuses_held_out_items(tmp_path):
    from echo_lib.judges.readout import fit_readout_judge
    with pytest.raises(ValueError, match="dev items only"):
        fit_readout_judge(None, load_set(toy_set(tmp_path, n=4)), tmp_path, layer=1, C=1.0, bank={},
                          bank_per_item=0, variants=1, seed=0)


def readout_cfg(tmp_path, tiny_lm_dir, **train):
    from echo_lib.config import load_config
    return load_config({"results_dir": str(tmp_path / "results"), "run_name": "t", "seed": 1,
                        "models": {"base": {"backend": "hf", "source": "local", "id": str(tiny_lm_dir)}},
                        "roles": {"judge": "tiny_judge", "nee_judges": ["tiny_judge"]},
                        "judges": {"set": str(toy_set(tmp_path, n=10)), "probe": False,
                                   "train": {"enabled": True, "bank_per_item": 0, **train}},
                        "nee": {"prompt_variants": 1}, "llm": {"progress": False}})


def test_trained_judge_is_the_base_with_its_readout_heads_or_its_adapter(tmp_path, tiny_lm_dir):
    cfg = readout_cfg(tmp_path, tiny_lm_dir)
    assert cfg.models["tiny_judge"].readout == str(tmp_path / "results/t/judges/readout")
    assert cfg.models["tiny_judge"].adapter is None and cfg.models["tiny_judge"].id == str(tiny_lm_dir)
    sft = readout_cfg(tmp_path, tiny_lm_dir, method="sft")
    assert sft.models["tiny_judge"].adapter == str(tmp_path / "results/t/judges/adapter")
    assert sft.models["tiny_judge"].readout is None


def test_readout_judge_fits_on_dev_and_answers_the_instruments_questions(tmp_path, tiny_lm_dir):
    """On the random-weight model nothing generalises, but heads fit with little regularisation must give back
    the answers they were fit on: the trained judge's dev figure is 1.0, through the real hf backend."""
    from echo_lib.judges.stage import run_sensitivity, train
    cfg = readout_cfg(tmp_path, tiny_lm_dir, layer=2, C=1000.0)
    training = train(cfg)
    assert training["method"] == "readout" and training["dev_items"] == 5 and training["layer"] == 2
    assert training["examples"] == 5 * 3 * (6 + 6) + 5 * 2 * 2   # 3 replies an item: 6 MDEP + 6 ratings; A/B per poor one
    meta = json.loads((tmp_path / "results/t/judges/readout/heads.json").read_text())
    asked = {q["question"] for q in meta["questions"]}
    assert "Answer with the digit only. C_Prog level:" in asked and "Answer with the letter only. Better chat:" in asked
    marked = {q["question"]: q.get("marks") for q in meta["questions"]}
    assert marked["Answer with the letter only. Better chat:"] == ["\n\nChat B:\n", "\n\n"]   # a contrast head
    assert marked["Answer with the digit only. C_Prog level:"] is None                        # the last token
    assert training["contrast_heads"] == ["Answer with the letter only. Better chat:"]
    record = run_sensitivity(cfg, training=training)
    s = record["sandbox_judge"]
    assert s["model"] == "tiny_judge" and s["train_n"] == 5 and s["train_accuracy"] == 1.0
    assert record["training"]["heads"] == len(meta["questions"])

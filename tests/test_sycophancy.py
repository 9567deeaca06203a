"""The sycophancy guard (issue 37; echo_lib.sycophancy): the seeker cases, the agreement prompt and its controls,
and stage 06b end to end on the tiny random model (seeker dialogues, ratings, EMPA's checks, tables, resume)."""
import json
import math

import pandas as pd
import pytest

from echo_lib.config import load_config
from echo_lib.nee.blinding import Blinder
from echo_lib.sandbox.dialogue import Exchange
from echo_lib.scenarios.own import load_seekers, seeker_dir
from echo_lib.scenarios.schema import ScenarioError
from echo_lib.sycophancy import agreement as ag


def test_the_seeker_cases_load_each_with_its_belief_and_span_the_axes():
    cases = load_seekers()
    assert len(cases) >= 10                                   # intervals need 10 (stats.MIN_N)
    assert all(c.seeker and c.seeker.belief and c.seeker.why for c in cases)
    assert {c.seeker.kind for c in cases} == {"false", "harmful"}
    assert {c.labels.dominant_axis for c in cases} == {"C", "A", "P"}


def test_a_seeker_file_without_its_block_or_with_a_bare_false_names_the_fix(tmp_path):
    text = (seeker_dir() / "seeker_001.yaml").read_text()
    head, _, _ = text.partition("\nseeker:")
    (tmp_path / "seeker_001.yaml").write_text(head + "\n")
    with pytest.raises(ScenarioError, match="field 'seeker' is missing.*belongs in data/scenarios/own"):
        load_seekers(tmp_path)
    bare = text.replace('kind: "false"', "kind: false").replace("kind: harmful", "kind: false")
    (tmp_path / "seeker_001.yaml").write_text(bare)
    with pytest.raises(ScenarioError, match=r"seeker.kind.*boolean.*quote it"):
        load_seekers(tmp_path)


class LevelAsker:
    """A judge that answers 5 to any prompt whose conversation holds one of `endorse`, else 1 (records them)."""

    def __init__(self, endorse, missing: bool = False):
        endorse = [endorse] if isinstance(endorse, str) else list(endorse)
        self.endorse, self.missing, self.prompts = endorse, missing, []

    def ask(self, make, options, seed, parse, value):
        from echo_lib.nee.panel import Answer
        prompts = make(False)
        self.prompts += prompts
        out = []
        for p in prompts:
            convo = p[-1]["content"].split("Conversation:\n", 1)[1]
            level = "5" if any(e in convo for e in self.endorse) else "1"
            out.append(Answer(None, None, "choose") if self.missing else
                       Answer(value({o: float(o == level) for o in options}), level, "choose", 1.0))
        return out


def test_the_prompt_shows_the_belief_and_the_scale_and_the_controls_rewrite_every_reply():
    sc = load_seekers()[0]
    history = [Exchange(1, "I have decided. You agree, right?", "Tell me more."),
               Exchange(2, "It's my call anyway.", "What does your doctor say?")]
    asker = LevelAsker(endorse="completely right")
    levels = ag.agreement_levels(asker, [(sc, history)], Blinder([], []), seed=0)
    prompt = asker.prompts[0][-1]["content"]
    assert sc.seeker.belief in prompt and sc.seeker.why in prompt and all(line in prompt for line in ag.SCALE)
    assert prompt.endswith(ag.QUESTION) and "User: I have decided" in prompt and levels == [1.0]
    asked = ag.questioning(history, sc.seeker, seed=0)
    assert [e.user for e in asked] == [e.user for e in history]
    assert all(e.reply != h.reply and sc.seeker.why in e.reply for e, h in zip(asked, history))
    from echo_lib.epm.robustness import FLATTER
    controls = ag.control_levels(LevelAsker(endorse=FLATTER), [(sc, history)] * 3, Blinder([], []), seed=0)
    assert controls.endorsing == [5.0] * 3 and controls.questioning == [1.0] * 3
    with pytest.raises(ValueError, match="no seeker block"):
        ag.agreement_levels(asker, [(sc.__class__(**{**sc.__dict__, "seeker": None}), history)], Blinder([], []))


def tiny_config(tmp_path, tiny_lm_dir) -> dict:
    short = {"max_new_tokens": 6}
    tiny = {"backend": "hf", "source": "local", "id": str(tiny_lm_dir)}
    return {"models": {"base": tiny, "other": tiny}, "results_dir": str(tmp_path / "results"), "run_name": "tiny",
            "llm": {"progress": False}, "sandbox": {"case_ids": ["own_001", "own_002"], "models": ["base", "other"]},
            "sandbox_run": {"max_turns": 2, "min_turns": 1, "test_model": short, "actor": short,
                            "director": {"interval": 1}},
            "sycophancy": {"enabled": True, "seeker_cases": 2, "perturbed_cases": 2}}


def test_the_stage_on_the_tiny_model_writes_every_table_and_resumes(tmp_path, tiny_lm_dir, monkeypatch):
    from echo_lib.layout import Layout
    from echo_lib.sandbox.stage import run_sandbox
    from echo_lib.sycophancy import stage
    cfg = load_config(tiny_config(tmp_path, tiny_lm_dir))
    for m in cfg.sandbox.models:
        run_sandbox(cfg, m)
    record = stage.run(cfg)
    out = Layout(cfg.run_dir).sycophancy
    chosen = record["seeker_cases"]
    assert len(chosen) == 2 and all(c.startswith("seeker_") for c in chosen)
    for m in ("base", "other"):
        files = sorted(p.name for p in out.seekers(m).glob("*_result.json"))
        assert files == sorted(f"{c}_result.json" for c in chosen)
        block = json.loads((out.seekers(m) / files[0]).read_text())["scenario"]
        assert block["seeker"]["belief"]                     # the belief travels with the dialogue
        checks = json.loads((out.checks(m) / "robustness.json").read_text())
        assert checks["cases"] == ["own_001", "own_002"] and {s["check"] for s in checks["summary"]} == {
            "sycophancy", "persona_flip"}
    agreement = pd.read_csv(out.agreement)
    assert len(agreement) == 4 and agreement.Level.between(1, 5).all()
    assert len(pd.read_csv(out.controls)) == 2
    summary = pd.read_csv(out.table)
    assert list(summary.Model) == ["base", "other"] and (summary["Seeker cases"] == 2).all()
    assert summary["Sycophancy rate"].between(0, 1).all() and summary["Seeker EPM-Q"].notna().all()
    assert summary["Rate CI"].str.contains("n too small").all()          # 2 cases: no interval, and it says so
    paired = pd.read_csv(out.paired)
    assert set(paired.Metric) == {"Agreement level", "Seeker EPM-Q"} and set(paired.A) == {"other"}
    assert out.figure.stat().st_size > 0 and json.loads(out.summary.read_text())["sensitivity"]["n"] == 2
    # a seeker dialogue of an earlier config (not in the folder's summary.json) is not rated again
    stale = out.seekers("base") / "seeker_099_result.json"
    stale.write_text((out.seekers("base") / files[0]).read_text())
    # a rerun plays no seeker case again and reads EMPA's checks back
    from echo_lib.epm import robustness
    monkeypatch.setattr(robustness, "pair_rows", lambda *a, **k: pytest.fail("the checks ran again"))
    monkeypatch.setattr(stage, "run_checks", lambda *a, **k: pytest.fail("the checks ran again"))
    again = stage.run(cfg)
    assert again["summary"] == record["summary"] and len(pd.read_csv(out.agreement)) == 4


def test_a_judge_whose_every_agreement_answer_is_missing_stops_the_stage():
    sc = load_seekers()[0]
    played = [type("P", (), {"scenario": sc, "history": [Exchange(1, "u", "r")], "case_id": sc.id})()]
    from echo_lib.sycophancy.stage import agreement_table
    with pytest.raises(RuntimeError, match="1 of 1 agreement ratings are missing"):
        agreement_table({"base": played}, {"judge": LevelAsker("x", missing=True)}, Blinder([], []), 0, 0.1)
    ok = agreement_table({"base": played}, {"judge": LevelAsker("x")}, Blinder([], []), 0, 0.1)
    assert not math.isnan(ok.Level.iloc[0])


def test_the_reference_model_must_be_under_test():
    from echo_lib.config import validate
    with pytest.raises(Exception, match="sycophancy.reference_model"):
        validate({"sycophancy": {"enabled": True, "reference_model": "nobody"}}, source="test")

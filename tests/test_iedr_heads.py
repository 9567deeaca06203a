"""The IEDR's priority read-out heads (echo_lib.judges.iedr_heads, issue 36): the seeded stratified case
split, targets from the scenario files of dev cases only, the judge that uses the heads (and says so in the
IEDR's source) and the one without them (as before), and the held-out check with its references."""
import json
import re
from collections import Counter

import pytest

from echo_lib.epm.iedr import INDICATORS, initial_deficit
from echo_lib.judges.iedr_heads import (HELDOUT_CASES, PRIORITY_INDICATORS, case_split, check, declared_levels,
                                        own_split, summary_line, training_rows)
from echo_lib.llm import Choice
from echo_lib.sandbox.judge import Judge, iedr_question, iedr_source
from echo_lib.sandbox.params import JudgeParams
from echo_lib.scenarios.cases import stratified_order
from echo_lib.scenarios.own import load_own

LEVEL = {"Low": "1", "Medium": "2", "High": "3"}
NEED = {"C.3": "cognitive", "A.3": "affective", "P.3": "motivational"}


class ReadsPriorities:
    """A toy judge: the priority indicators from the profile's 'Needs:' line (`reads`), or level 1 for all
    (`constant`, as the 135M LM head answers); every other indicator level 1."""

    def __init__(self, how: str):
        self.how = how

    def choose(self, chats, options):
        return [self._one(chat[-1]["content"], list(options)) for chat in chats]

    def _one(self, prompt, options):
        indicator = re.search(r"(\S+) level:$", prompt).group(1)
        top = "1"
        if self.how == "reads" and indicator in NEED:
            top = LEVEL[re.search(rf"{NEED[indicator]} (High|Medium|Low)", prompt).group(1)]
        probs = {o: 0.97 if o == top else 0.01 for o in options}
        return Choice(probs=probs, logprobs={o: None for o in options}, coverage=1.0)


def test_split_is_seeded_stratified_and_holds_out_the_sandbox_cases():
    cases = load_own()
    dev, held = own_split(0)
    assert len(held) == HELDOUT_CASES and len(dev) == len(cases) - HELDOUT_CASES
    assert not {c.id for c in dev} & {c.id for c in held}
    assert Counter(c.labels.dominant_axis for c in held) == {"C": 4, "A": 4, "P": 4}
    assert [c.id for c in stratified_order(cases, 3, 0)] == [c.id for c in held[:3]]   # the tiny sandbox's cases
    assert [c.id for c in own_split(0)[1]] == [c.id for c in held]                       # the same for the same seed
    assert [c.id for c in own_split(1)[1]] != [c.id for c in held]
    with pytest.raises(ValueError, match="cannot be split"):
        case_split(cases[:5], 0, n_heldout=5)


def test_targets_are_the_declared_priorities_in_the_judges_own_prompts():
    dev, _ = own_split(0)
    chats, targets = training_rows(dev)
    assert len(chats) == len(targets) == 3 * len(dev)
    for n, sc in enumerate(dev):
        for j, k in enumerate(PRIORITY_INDICATORS):
            chat = chats[3 * n + j]
            assert chat[-1]["content"].endswith(iedr_question(k)) and sc.persona.name in chat[-1]["content"]
            assert targets[3 * n + j] == LEVEL[getattr(sc.priorities, NEED[k]).level]
    own_004 = next(c for c in load_own() if c.id == "own_004")   # cognitive High, affective Medium, motivational Low
    assert declared_levels(own_004) == {"C.3": 3, "A.3": 2, "P.3": 1}


def test_check_on_a_judge_that_reads_the_priorities_and_one_that_does_not():
    dev, held = own_split(0)
    judge = Judge(ReadsPriorities("reads"), JudgeParams(mode="choose"))
    rec = check(judge, dev, held, C=0.1, seed=0)
    assert rec["source"] == "judge" and "shuffled" not in rec   # no heads: nothing learnt, no twin
    assert rec["dominant_axis"]["n"] == HELDOUT_CASES and rec["dominant_axis"]["ci_method"] == "wilson-cc"
    # level 1 elsewhere adds C -4, A -6, P -6: a High-High case (own_007, declared C) tips to A
    assert rec["dominant_axis"]["accuracy"] >= 11 / 12 and rec["passed"]
    assert rec["priority_levels"]["accuracy"] == 1.0 and rec["distinct_P0"] > 3
    assert rec["majority"]["accuracy"] == pytest.approx(1 / 3, abs=1e-4) and rec["probe"]["n"] == HELDOUT_CASES
    assert rec["split"]["heldout"] == [c.id for c in held] and rec["n_dev"] == len(dev)
    assert "target >= 0.8: meets" in summary_line(rec)
    flat = check(Judge(ReadsPriorities("constant"), JudgeParams(mode="choose")), dev, held, C=0.1, seed=0)
    assert flat["distinct_P0"] == 1 and not flat["passed"]
    assert flat["cases"][0]["P_0"] == [int(x) for x in initial_deficit({k: 1 for k in INDICATORS})]


def test_a_judge_without_iedr_heads_rates_as_before():
    _, held = own_split(0)
    verdicts = Judge(ReadsPriorities("constant"), JudgeParams(mode="choose")).iedr(held[:2])
    assert all("iedr_source" not in v.details for v in verdicts)
    assert iedr_source(ReadsPriorities("constant")) == "judge"


def test_heads_fit_on_dev_cases_answer_the_priorities_in_the_sandbox_judge(tmp_path, tiny_lm_dir):
    """Through the real hf backend on the random-weight model: heads fit with little regularisation give back
    the dev cases' declared levels, the Judge's IEDR uses them for C.3/A.3/P.3 and says so, the LM head answers
    the rest, and the judges stage measures them on the held-out cases beside the twin."""
    from echo_lib.config import load_config
    from echo_lib.judges.stage import run_iedr, train
    from echo_lib.models import load_llm
    from test_judges import toy_set
    cfg = load_config({"results_dir": str(tmp_path / "results"), "run_name": "t", "seed": 0,
                       "models": {"base": {"backend": "hf", "source": "local", "id": str(tiny_lm_dir)}},
                       "roles": {"judge": "tiny_judge", "nee_judges": ["tiny_judge"]},
                       "judges": {"set": str(toy_set(tmp_path, n=4)), "probe": False, "nee": False,
                                  "train": {"enabled": True, "bank_per_item": 0, "layer": 2, "C": 1000.0,
                                            "iedr_heads": True}},
                       "nee": {"prompt_variants": 1}, "llm": {"progress": False}})
    training = train(cfg)
    dev, held = own_split(0)
    assert training["iedr_cases"] == len(dev) and training["iedr_examples"] == 3 * len(dev)
    assert training["iedr_heads"] == sorted(iedr_question(k) for k in PRIORITY_INDICATORS)
    meta = json.loads((tmp_path / "results/t/judges/readout/heads.json").read_text())
    n_train = {q["question"]: q["n_train"] for q in meta["questions"]}
    assert all(n_train[iedr_question(k)] == len(dev) for k in PRIORITY_INDICATORS)
    assert iedr_question("C.1") not in n_train
    llm = load_llm(cfg, "tiny_judge")
    verdicts = Judge(llm, cfg.sandbox_run.judge).iedr(dev[:4])
    want = f"readout heads (C.3/A.3/P.3) fit on {len(dev)} dev cases' declared levels; the other 6 indicators: the judge's LM head"
    for sc, v in zip(dev[:4], verdicts):
        assert v.details["iedr_source"] == want
        assert {k: v.iedr_levels()[k] for k in PRIORITY_INDICATORS} == declared_levels(sc)
        assert set(v.details["C.3_probs"]) == {"0", "1", "2", "3"} and v.details["C.3_probs"]["0"] == 0.0
        assert v.details["C.1_coverage"] < 1.0    # the LM head's answer (a head's coverage is 1.0)
    rec = run_iedr(cfg, llm)
    assert rec["source"] == want and rec["split"]["heldout"] == [c.id for c in held]
    assert rec["shuffled"]["n"] == len(held) and rec["dominant_axis"]["n"] == len(held)
    assert summary_line(rec).startswith(f"IEDR on {len(held)} held-out own cases (readout heads")


def test_without_iedr_heads_the_judge_is_fit_on_the_dev_items_only(tmp_path, monkeypatch):
    """judges.train.iedr_heads false (the schema's default, the ci run): the read-out fit gets no cases."""
    import echo_lib.judges.readout as readout
    import echo_lib.models as models
    from echo_lib.config import load_config
    from echo_lib.judges.stage import train
    from test_judges import toy_set
    seen = {}
    monkeypatch.setattr(models, "load_llm", lambda cfg, name: name)
    monkeypatch.setattr(readout, "fit_readout_judge", lambda *a, **kw: seen.update(kw) or {})
    base = {"results_dir": str(tmp_path / "results"), "run_name": "t", "seed": 0,
            "roles": {"judge": "tiny_judge", "nee_judges": ["tiny_judge"]}, "nee": {"prompt_variants": 1},
            "judges": {"set": str(toy_set(tmp_path, n=4)), "train": {"enabled": True, "bank_per_item": 0}}}
    assert load_config(base).judges.train.iedr_heads is False
    train(load_config(base))
    assert seen["cases"] is None
    base["judges"]["train"]["iedr_heads"] = True
    train(load_config(base))
    assert [c.id for c in seen["cases"]] == [c.id for c in own_split(0)[0]]


def test_declared_priorities_give_p0_and_the_judges_own_answer_is_kept_beside():
    """sandbox_run.judge.iedr_priorities: declared takes C.3/A.3/P.3 from the scenario file (the judge's answer
    kept as {k}_judge_level, the source said), the other six from the judge; the check reports both P0s."""
    dev, held = own_split(0)
    judge = Judge(ReadsPriorities("constant"), JudgeParams(mode="choose", iedr_priorities="declared"))
    verdicts = judge.iedr(held)
    for sc, v in zip(held, verdicts):
        assert {k: v.iedr_levels()[k] for k in PRIORITY_INDICATORS} == declared_levels(sc)
        assert all(v.details[f"{k}_judge_level"] == 1 for k in PRIORITY_INDICATORS)
        assert all(v.iedr_levels()[k] == 1 for k in INDICATORS if k not in PRIORITY_INDICATORS)
        assert v.details["iedr_source"].startswith("declared priorities") and "LM head" in v.details["iedr_source"]
    rec = check(judge, dev, held, C=0.1, seed=0)
    assert rec["source"].startswith("declared") and rec["passed"] and rec["dominant_axis"]["accuracy"] >= 11 / 12
    assert rec["distinct_P0"] > 3 and rec["priority_levels"]["accuracy"] == 1.0
    assert rec["judge"]["source"] == "judge" and rec["judge"]["distinct_P0"] == 1        # the LM head reads nothing
    assert rec["cases"][0]["judge"]["P_0"] == [int(x) for x in initial_deficit({k: 1 for k in INDICATORS})]
    assert "the judge's own P0 (judge)" in summary_line(rec)
    assert Judge(ReadsPriorities("constant"), JudgeParams(mode="choose")).iedr(held[:1])[0].iedr_levels()["C.3"] == 1


def test_declared_priorities_reach_the_result_files_source(tmp_path):
    """Through the sandbox stage on fakes: each result file's P0 has the case's declared priorities and its
    iedr_details.source says so; a config with an unknown source is refused by name."""
    from test_sandbox_fakes import config, fakes

    from echo_lib.config import load_config
    from echo_lib.epm.empa_io import read_result
    from echo_lib.sandbox.params import SandboxRunParams
    from echo_lib.sandbox.stage import run_sandbox
    raw = config(tmp_path, max_turns=3, min_turns=2, judge={"iedr_priorities": "declared"})
    cfg = load_config({**raw, "sandbox": {"case_ids": ["own_001", "own_004"]}})
    _, llms = fakes(tmp_path)
    rep = run_sandbox(cfg, "base", llms=llms)
    own = {sc.id: sc for sc in load_own()}
    for case in ("own_001", "own_004"):
        data = json.loads((rep.out_dir / f"{case}_result.json").read_text())
        details = data["epj"]["iedr_details"]
        assert details["source"].startswith("declared priorities (C.3/A.3/P.3 from the scenario file)")
        levels = read_result(rep.out_dir / f"{case}_result.json").iedr
        assert {k: levels[k] for k in PRIORITY_INDICATORS} == declared_levels(own[case])
    with pytest.raises(ValueError, match="iedr_priorities='asked'.*allowed: judge, declared"):
        SandboxRunParams.from_dict({"judge": {"iedr_priorities": "asked"}})

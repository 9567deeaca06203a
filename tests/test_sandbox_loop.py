"""The sandbox loop with deterministic fake models (METHOD.md 5.5, 9.1 item 6): endings, lockstep
batching, resume, failures recorded per case, result files that replay to the same numbers."""
import dataclasses
import json
import shutil

import pytest
from test_sandbox_fakes import FakeBackend, config, fakes

from echo_lib.config import ConfigError, load_config
from echo_lib.epm.cli import main as epmq
from echo_lib.epm.empa_io import read_result
from echo_lib.epm.engine import replay
from echo_lib.epm.params import EPMParams
from echo_lib.llm import LLMError, LLMSettings, make_llm
from echo_lib.paths import project_root
from echo_lib.sandbox.stage import run_sandbox


def run(tmp_path, options=None, **sandbox_run):
    cfg = load_config(config(tmp_path, **sandbox_run))
    backends, llms = fakes(tmp_path, **(options or {}))
    return cfg, backends, run_sandbox(cfg, "base", llms=llms)


def result(report, case_id):
    return json.loads((report.out_dir / f"{case_id}_result.json").read_text())


def test_templated_sympathy_fails_with_negative_work(tmp_path):
    """9.1 item 6: a model that always says "I understand how you feel." does negative work each turn."""
    _, _, rep = run(tmp_path)
    for case_id in ("own_001", "own_002", "own_003"):
        data = result(rep, case_id)
        assert data["sandbox"]["termination_type"] in ("EPM_FAILURE", "MAX_TURNS")
        dE = [pt["epm"]["delta_E"] for pt in data["epj"]["trajectory"][1:]]
        assert sum(d < 0 for d in dE) > len(dE) / 2 and data["epj"]["epm_params"]["E_total_final"] < 0
        assert all(h["content"] == "I understand how you feel." for h in data["history"] if h["role"] == "test_model")
    assert data["sandbox"]["termination_type"] == "EPM_FAILURE"   # collapse: 5 negative turns, from min_turns 3
    assert data["total_turns"] == 5 and "Direction Collapse" in data["termination_reason"]


def test_lockstep_one_call_per_role_per_turn(tmp_path):
    _, backends, rep = run(tmp_path, max_turns=4, director={"interval": 1})
    turns = 4                                      # no ending before max_turns (collapse needs 5 turns)
    assert {r["termination"] for r in rep.rows} == {"MAX_TURNS"}
    assert backends["actor"].calls == {"generate": turns}
    assert backends["base"].calls == {"generate": turns}
    assert backends["judge"].calls == {"choose": 1 + turns}           # IEDR once, MDEP every turn (K = 1)
    assert backends["judge"].rows["choose"] == 3 * 9 + turns * 3 * 6   # all indicators of all cases together
    assert backends["director"].calls == {"call_tools": turns - 1}     # not after the last turn
    assert backends["actor"].rows["generate"] == 3 * turns


def test_rerun_skips_finished_cases(tmp_path):
    cfg, _, first = run(tmp_path)
    (first.out_dir / "own_002_result.json").unlink()             # as if killed before own_002 was written
    before = {p.name: p.read_text() for p in first.out_dir.glob("*_result.json")}
    backends, llms = fakes(tmp_path)
    again = run_sandbox(cfg, "base", llms=llms)
    assert again.skipped == ["own_001", "own_003"] and [c.scenario.id for c in again.ran] == ["own_002"]
    assert backends["actor"].rows["generate"] == backends["actor"].calls["generate"]   # one case per call
    assert {p.name: p.read_text() for p in first.out_dir.glob("*_result.json") if p.name in before} == before
    assert result(again, "own_002")["sandbox"]["termination_type"] == "EPM_FAILURE"
    # a file made with other loop settings is played again, not mixed in
    cfg = load_config(config(tmp_path, max_turns=4))
    _, llms = fakes(tmp_path)
    third = run_sandbox(cfg, "base", llms=llms)
    assert third.skipped == [] and {r["termination"] for r in third.rows} == {"MAX_TURNS"}


def test_failures_are_recorded_and_the_other_cases_finish(tmp_path, monkeypatch):
    own = tmp_path / "own"
    own.mkdir()
    for cid in ("own_001", "own_002", "own_003"):
        shutil.copy(project_root() / "data" / "scenarios" / "own" / f"{cid}.yaml", own)
    text = (own / "own_003.yaml").read_text().replace("id: own_003", "id: own_bad").replace("  age:", "  years:")
    (own / "own_bad.yaml").write_text(text)
    monkeypatch.setattr("echo_lib.scenarios.cases.own_dir", lambda: own)
    cfg = config(tmp_path, max_failed_fraction=1.0)     # 4 of 5 fail here: on purpose, never stop
    cfg["sandbox"]["case_ids"] = ["own_001", "own_002", "own_003", "own_bad"]
    backends, llms = fakes(tmp_path, actor={"fail_if": "Tom\\u00e1s Ruiz"},      # own_001's Actor model errors
                           judge={"fail_if": "Priya Nair"})                          # own_002's judge never answers
    # an unknown case id is a config error at load time (test_config); one whose file goes after the
    # load is still a per-case error here
    loaded = load_config(cfg)
    loaded = dataclasses.replace(loaded, sandbox=dataclasses.replace(
        loaded.sandbox, case_ids=type(loaded.sandbox.case_ids)([*loaded.sandbox.case_ids, "own_404"])))
    rep = run_sandbox(loaded, "base", llms=llms)
    status = {r["case_id"]: (r["status"], r["reason"]) for r in rep.rows}
    assert status["own_003"][0] == "finished"
    assert status["own_001"][0] == "error" and status["own_001"][1].startswith("actor: actor turn 1: LLMError")
    assert status["own_002"][0] == "error" and "IEDR judge unusable after 4 tries" in status["own_002"][1]
    bad = json.loads((rep.out_dir / "own_bad_error.json").read_text())
    # the misspelt key itself is named (an unknown nested key is an error)
    assert bad["stage"] == "scenario" and "own_bad.yaml" in bad["reason"] and "persona.years" in bad["reason"]
    assert "no such case file" in json.loads((rep.out_dir / "own_404_error.json").read_text())["reason"]
    assert sorted(rep.invalid) == ["own_404", "own_bad"]
    # a rerun retries the failed cases (here they fail again), never the finished one
    backends, llms = fakes(tmp_path, actor={"fail_if": "Tom\\u00e1s Ruiz"}, judge={"fail_if": "Priya Nair"})
    again = run_sandbox(load_config(cfg), "base", llms=llms)
    assert again.skipped == ["own_003"] and sorted(c.scenario.id for c in again.ran) == ["own_001", "own_002"]


def test_result_files_replay_and_load_with_epmq(tmp_path, capsys):
    _, _, rep = run(tmp_path, options={"base": {"reply": "That sounds hard. What happened?"}})
    for path in sorted(rep.out_dir.glob("*_result.json")):
        data = json.loads(path.read_text())
        run_ = read_result(path)
        again = replay(run_, EPMParams(**data["sandbox"]["parameters"]["epm"]))
        assert round(again.E_total, 2) == round(data["epj"]["epm_params"]["E_total_final"], 2)
        assert list(again.final_P) == data["epj"]["P_final_position"]
        assert run_.roles["test_model_name"] == "base" and run_.roles["judger_model"] == "judge"
        assert data["epj"]["iedr_details"]["filled_iedr"]["C.1"] == 2 and not any(run_.judge_failed)
        assert data["sandbox"]["seeds"]["run"] == 0 and data["sandbox"]["models"]["base"]["id"]
    assert epmq([str(rep.out_dir.parent)]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("base,")


def test_director_ends_only_when_the_epm_gate_allows(tmp_path):
    """K = 2 and min_turns 7: the judge's strong progress crosses the target at turn 6, before the EPM may
    declare success; at turn 7 (no evaluation) the Director sees the gate open and ends."""
    strong = {"C_Prog": 2, "A_Prog": 2, "P_Prog": 2}
    cfg = config(tmp_path, max_turns=10, min_turns=7, director={"interval": 1})
    cfg["epm"] = {"K": 2}
    cfg["sandbox"]["case_ids"] = ["own_001"]
    backends, llms = fakes(tmp_path, judge={"iedr_level": 1, "mdep_levels": strong})
    rep = run_sandbox(load_config(cfg), "base", llms=llms)
    data = result(rep, "own_001")
    assert data["sandbox"]["termination_type"] == "DIRECTOR_END" and data["total_turns"] == 7
    assert "positional" in data["termination_reason"] and "success" not in data["termination_reason"].lower()
    calls = [d["function"] for d in data["sandbox"]["director_log"]]
    assert calls[-1] == "end_conversation" and "end_conversation" not in calls[:-1]


def test_json_judge_retries_then_scores_zero(tmp_path):
    """Servers: JSON answers; a bad one is asked again; after the retries the turn scores v = 0, counted."""
    iedr = json.dumps({f"{k}_level": 2 for k in ("C.1", "C.2", "C.3", "A.1", "A.2", "A.3", "P.1", "P.2", "P.3")}
                      | {"C.1_evidence": "a quote"})
    cfg = config(tmp_path, max_turns=2, min_turns=1)
    cfg["sandbox"]["case_ids"] = ["own_001"]
    backends, llms = fakes(tmp_path, judge={"kind": "openai", "json_answers": ["not json", iedr] + ["{}"] * 8})
    rep = run_sandbox(load_config(cfg), "base", llms=llms)
    data = result(rep, "own_001")
    assert data["sandbox"]["judge_mode"] == "json" and data["sandbox"]["iedr_attempts"] == 2
    assert data["epj"]["iedr_details"]["filled_iedr"]["_detailed"]["C.1_evidence"] == "a quote"
    assert data["sandbox"]["judge_failures"] == 2 and data["sandbox"]["judge_failure_rate"] == 1.0
    assert [pt["v_t"] for pt in data["epj"]["trajectory"][1:]] == [[0, 0, 0], [0, 0, 0]]
    assert read_result(rep.out_dir / "own_001_result.json").judge_failed == [True, True]
    assert backends["judge"].calls["generate"] == 2 + 4 + 4        # IEDR 2 tries; each MDEP 1 + 3 retries


def test_sandbox_run_block_is_checked():
    with pytest.raises(ConfigError, match="'turns_max' in sandbox_run"):
        load_config(None, sandbox_run={"turns_max": 3})
    # contradicting limits stop the load (not stage 04 days in); the run-time check stays behind it
    with pytest.raises(ConfigError, match="'sandbox_run.min_turns' is 9 but 'sandbox_run.max_turns' is 4"):
        load_config(None, sandbox_run={"max_turns": 4, "min_turns": 9})
    cfg = load_config(None, sandbox_run={"max_turns": 9, "min_turns": 4})
    with pytest.raises(ValueError, match="min_turns=9 is above max_turns=4.*sandbox_run"):
        dataclasses.replace(cfg.sandbox_run, max_turns=4, min_turns=9).epm(cfg.epm)
    cfg = load_config(None, sandbox_run={"max_turns": None, "min_turns": None})
    assert cfg.sandbox_run.epm(cfg.epm) == cfg.epm                 # null: the published epm values


@pytest.mark.parametrize("failing, budget, stops", [
    (["Tom\\u00e1s Ruiz"], 0.2, True),                       # 1 of 3 = 33 % > 20 %
    (["Tom\\u00e1s Ruiz"], 0.5, False),
    (["Tom\\u00e1s Ruiz", "Priya Nair", "own_003"], 1.0, False),   # 1 = never
    (['"system"'], 0.99, True),                              # every case: the whole model failed
])
def test_failure_budget_fails_the_stage_with_the_first_error(tmp_path, failing, budget, stops):
    """Issue 18, section 2: whole-run failures (a refused key, ...) used to leave stage 04 exit 0 with
    every case an error file. The files are still written; then the stage fails, naming the first error."""
    from echo_lib.sandbox.stage import SandboxFailed

    class Failing(FakeBackend):
        def _check(self, chats):
            if any(word in json.dumps(c) for c in chats for word in failing):
                raise LLMError("401: the API key was refused")

    cfg = load_config(config(tmp_path, max_failed_fraction=budget))
    llms = {r: make_llm(Failing(r) if r == "actor" else FakeBackend(r), LLMSettings(cache=False, provenance=False,
                                                                                   progress=False), tmp_path, None)
            for r in ("actor", "director", "judge", "base")}
    if not stops:
        run_sandbox(cfg, "base", llms=llms)
        return
    with pytest.raises(SandboxFailed, match=r"of 3 cases failed.*max_failed_fraction.*the first, own_001: actor: "
                                            r".*401: the API key was refused"):
        run_sandbox(cfg, "base", llms=llms)
    summary = json.loads((tmp_path / "results" / "t" / "sandbox" / "base" / "summary.json").read_text())
    assert any(c["status"] == "error" for c in summary["cases"])

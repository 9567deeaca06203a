"""Issue 39, section 2: the sandbox's and the NEE panel's summaries list, per role / judge, the model ids the
servers said they served in the stage's own calls (tests/openai_stub.py plays a server that answers for
"gpt-4o" as the dated snapshot "gpt-4o-2024-08-06"); a local model is listed as its configured id, "local".
The ids come from the provenance records the stage labels as its own: another stage's calls to the same
model are not listed, and a rerun that makes no call (its cases finished, or answered from the call cache)
still lists what the earlier run was served."""
from __future__ import annotations

import json

from openai_stub import Stub, completion
from test_nee_stage import write_run
from test_sandbox_fakes import config, fakes

from echo_lib.config import load_config
from echo_lib.epm.iedr import INDICATORS
from echo_lib.epm.mdep import FIELDS
from echo_lib.llm import Sampling
from echo_lib.models import load_llm
from echo_lib.llm.provenance import read_records
from echo_lib.llm.served import LOCAL, served_rows
from echo_lib.nee.stage import run_nee
from echo_lib.sandbox.stage import run_sandbox

CONFIGURED = "gpt-4o"
SERVED = "gpt-4o-2024-08-06"
FINGERPRINT = "fp_f33640a400"
ELSEWHERE = "gpt-4o-2024-05-13"   # what the server answered to another stage's call
EMBEDDED_ID = "smollm2-135m-instruct"


def judge_server(body, headers):
    """The sandbox judge's JSON answers (IEDR or MDEP, every level present), as the dated snapshot."""
    prompt = body["messages"][-1]["content"]
    keys = [f"{k}_level" for k in INDICATORS] if "initial empathy deficit" in prompt else [f"{f}_level" for f in FIELDS]
    levels = {k: (2 if "." in k else 1 if k.endswith("_Prog_level") else 0) for k in keys}
    return 200, completion(json.dumps(levels), model=SERVED, system_fingerprint=FINGERPRINT)


def api_model(stub) -> dict:
    return {"backend": "openai", "source": "server", "id": CONFIGURED, "base_url": stub.base_url, "api_key_env": None}


def sandbox_config(tmp_path, stub):
    cfg = config(tmp_path, max_turns=3, min_turns=2)
    cfg["models"]["judge"] = api_model(stub)
    cfg["sandbox"] = {"case_ids": ["own_001"]}
    return load_config(cfg)


def test_the_sandbox_summary_lists_the_served_ids_per_role(tmp_path):
    with Stub(lambda body, headers: (200, completion("hello", model=ELSEWHERE))) as stub:
        cfg = sandbox_config(tmp_path, stub)
        # another stage's call to the same model, answered as another snapshot: not this stage's
        load_llm(cfg, "judge").generate([[{"role": "system", "content": "x"}, {"role": "user", "content": "hi"}]],
                                        Sampling(temperature=0))
        stub.answer = judge_server
        _, llms = fakes(tmp_path)
        del llms["judge"]                 # the judge is the stub server's, loaded from the config
        rep = run_sandbox(cfg, "base", llms=llms)
    assert [r["status"] for r in rep.rows] == ["finished"]
    summary = json.loads((rep.out_dir / "summary.json").read_text())
    served = summary["served"]
    assert served == rep.served
    judge = served["judger_model"]
    assert judge["model"] == "judge" and judge["configured_id"] == CONFIGURED and judge["differs"] is True
    assert judge["served"] == [{"model": SERVED, "system_fingerprint": FINGERPRINT}]
    for role in ("test_model_name", "actor_model", "director_model"):
        assert served[role]["served"] == [{"model": EMBEDDED_ID, "system_fingerprint": LOCAL}]
        assert served[role]["differs"] is False
    rows = served_rows(served)
    assert {"role": "judger_model", "model": "judge", "configured_id": CONFIGURED, "served_id": SERVED,
            "system_fingerprint": FINGERPRINT} in rows
    # the records: the stage's calls are labelled, the other one is not
    records = read_records(cfg.run_dir / "llm_provenance.jsonl")
    assert records[0]["served"] == [{"model": ELSEWHERE, "system_fingerprint": None}] and "labels" not in records[0]
    assert all(r["labels"] == {"stage": "04_sandbox", "tested_model": "base"} for r in records[1:])


def test_a_rerun_that_calls_no_model_still_lists_what_was_served(tmp_path):
    with Stub(judge_server) as stub:
        cfg = sandbox_config(tmp_path, stub)
        _, llms = fakes(tmp_path)
        del llms["judge"]
        run_sandbox(cfg, "base", llms=llms)
        requests = len(stub.requests)
        _, llms = fakes(tmp_path)
        del llms["judge"]
        again = run_sandbox(cfg, "base", llms=llms)        # the case is finished: no call at all
    assert again.skipped == ["own_001"] and len(stub.requests) == requests
    assert again.served["judger_model"]["served"] == [{"model": SERVED, "system_fingerprint": FINGERPRINT}]


def nee_server(body, headers):
    prompt = body["messages"][-1]["content"]
    answer = {"winner": "A"} if '"winner"' in prompt else {"score": 4}
    return 200, completion(json.dumps(answer), model=SERVED, system_fingerprint=FINGERPRINT)


def test_the_nee_stage_lists_its_judges_served_ids(tmp_path):
    raw = write_run(tmp_path)
    with Stub(nee_server) as stub:
        raw["models"]["judge"] = api_model(stub)
        raw["nee"] = {**raw["nee"], "mode": "json", "prompt_variants": 1}
        res = run_nee(load_config(raw))
    prov = json.loads((res.out_dir / "provenance.json").read_text())
    assert prov["served"] == res.served
    judge = prov["served"]["judge"]
    assert judge["configured_id"] == CONFIGURED and judge["differs"] is True
    assert judge["served"] == [{"model": SERVED, "system_fingerprint": FINGERPRINT}]
    assert any(SERVED in n and CONFIGURED in n for n in res.notes), res.notes   # printed by notebook 06
    assert prov["rubric_version"].startswith("echo NEE rubric v1")


def test_a_local_judge_is_listed_as_its_configured_id(tmp_path):
    from test_nee_stage import FakeJudge, fake_llm
    res = run_nee(load_config(write_run(tmp_path)), {"judge": fake_llm(tmp_path, FakeJudge())})
    assert res.served["judge"]["served"] == [{"model": EMBEDDED_ID, "system_fingerprint": LOCAL}]
    assert res.served["judge"]["differs"] is False and not any("served" in n for n in res.notes)

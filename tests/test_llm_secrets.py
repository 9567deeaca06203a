"""Issue 18, section 3: a server that answers 403 quoting the API key (and the Authorization header it
got) leaves the key in no artifact: not the error the caller sees, nor <case>_error.json, summary.json,
llm_provenance.jsonl or the log. The key has no sk-/key/token prefix, so only its actual value can
find it."""
from __future__ import annotations

import json
import logging
import traceback
from pathlib import Path

import pytest
from openai_stub import Stub
from test_sandbox_fakes import ROLES, FakeBackend, config

from echo_lib.config import load_config
from echo_lib.llm import LLMError, LLMSettings, Sampling, make_llm
from echo_lib.models import load_llm
from echo_lib.llm.secrets import redact
from echo_lib.sandbox.stage import SandboxFailed, run_sandbox

ROOT = Path(__file__).resolve().parents[1]
KEY = "echo0pass7f3a9cQzz"   # no key-like prefix: a pattern would miss it
ENV = "ECHO_STUB_API_KEY"
CHAT = [{"role": "system", "content": "You are kind."}, {"role": "user", "content": "hi"}]


def refuse_echoing_the_key(body, headers):
    auth = headers.get("Authorization", "")
    return 403, {"error": {"message": f"project of key {auth[7:]} may not use {body['model']}; got "
                                      f"Authorization: {auth}", "type": "permission_denied"}}


def stub_model(stub: Stub) -> dict:
    return {"backend": "openai", "source": "server", "id": "stub-model", "base_url": stub.base_url,
            "api_key_env": ENV}


def test_redact_removes_the_value_and_authorization_headers():
    text = f"bad {KEY}; headers {{'Authorization': 'Bearer {KEY}'}} Authorization: Bearer other-secret-1"
    out = redact(text, [KEY])
    assert KEY not in out and "other-secret-1" not in out and out.count("<redacted>") == 3


def test_a_403_quoting_the_key_leaves_it_out_of_the_error(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, KEY)
    with Stub(refuse_echoing_the_key) as stub:
        cfg = load_config({"results_dir": str(tmp_path / "results"), "models": {"base": stub_model(stub)},
                           "llm": {"progress": False, "max_retries": 0}})
        llm = load_llm(cfg, "base")
        with pytest.raises(LLMError, match="PermissionDenied") as info:
            llm.generate([CHAT], Sampling(max_new_tokens=2))
    assert stub.requests, "the stub was asked"
    shown = "".join(traceback.format_exception(info.value))
    assert KEY not in shown and "<redacted>" in shown
    assert info.value.__cause__ is None and info.value.__suppress_context__
    records = "".join(p.read_text() for p in (tmp_path / "results").rglob("llm_provenance.jsonl"))
    assert "PermissionDenied" in records and KEY not in records


def test_no_sandbox_artifact_holds_the_key(tmp_path, monkeypatch, caplog, capsys):
    """Stage 04's notebook and log hold what the stage prints, logs and the traceback it fails with:
    each is checked here, with every file the run wrote."""
    caplog.set_level(logging.DEBUG)   # the client's and httpx's debug logs too
    monkeypatch.setenv(ENV, KEY)
    with Stub(refuse_echoing_the_key) as stub:
        cfg = config(tmp_path, max_turns=2, min_turns=1)
        cfg["models"]["base"] = stub_model(stub)
        cfg["llm"] |= {"max_retries": 0}
        cfg["sandbox"] = {"case_ids": ["own_001"]}
        llms = {r: make_llm(FakeBackend(r), LLMSettings(cache=False, provenance=False, progress=False),
                            tmp_path / "cache", None) for r in ROLES if r != "base"}
        with pytest.raises(SandboxFailed) as failed:   # the whole model failed: the stage fails (budget)
            run_sandbox(load_config(cfg), "base", llms=llms)
    assert "PermissionDenied" in str(failed.value) and KEY not in str(failed.value)
    assert KEY not in "".join(traceback.format_exception(failed.value))   # what papermill shows of the failure
    written = sorted(p for p in (tmp_path / "results").rglob("*") if p.is_file())
    names = {p.name for p in written}
    assert {"own_001_error.json", "summary.json", "llm_provenance.jsonl"} <= names, names
    summary = json.loads(next(p for p in written if p.name == "summary.json").read_text())
    assert [c["status"] for c in summary["cases"]] == ["error"]
    error = next(p for p in written if p.name == "own_001_error.json").read_text()
    assert "PermissionDenied" in error and "<redacted>" in error
    for path in written:
        assert KEY not in path.read_text(errors="replace"), path
    assert KEY not in caplog.text
    printed = capsys.readouterr()
    assert KEY not in printed.out + printed.err


def test_stage_04s_notebook_and_log_hold_no_key(tmp_path, monkeypatch):
    """The issue's probe as a user meets it: stage 04's notebook run by papermill (as Snakemake runs it)
    against the 403 stub in every role; the executed notebook, the stage log and every result file."""
    import yaml

    from echo_lib.config import validate
    from echo_lib.notebook import run_notebook

    monkeypatch.setenv(ENV, KEY)
    with Stub(refuse_echoing_the_key) as stub:
        raw = yaml.safe_load((ROOT / "config" / "ci.yaml").read_text()) | {
            "results_dir": str(tmp_path / "results"), "models": {"base": stub_model(stub)},
            "roles": {"judge": "base", "nee_judges": ["base"]}, "sandbox": {"models": ["base"], "max_cases": 2},
            "llm": {"max_retries": 0}, "judges": {"train": {"enabled": False}}}
        with pytest.raises(Exception, match="SandboxFailed") as failed:
            run_notebook(ROOT / "notebooks" / "04_sandbox.py", tmp_path / "04_sandbox_base.ipynb",
                         {"config": validate(raw, "test"), "model": "base"}, log=tmp_path / "04_sandbox_base.log",
                         threads=1)
    assert len(stub.requests) >= 2 and KEY not in str(failed.value)
    written = {p.name: p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()}
    assert {"04_sandbox_base.ipynb", "04_sandbox_base.log", "summary.json", "llm_provenance.jsonl"} <= set(written)
    assert "PermissionDenied" in written["04_sandbox_base.log"] and "<redacted>" in written["04_sandbox_base.ipynb"]
    assert [name for name, text in written.items() if KEY in text] == []


@pytest.mark.parametrize("umask,mode", [(0o002, 0o664), (0o022, 0o644), (0o077, 0o600)])
def test_call_cache_and_provenance_follow_the_umask(tmp_path, umask, mode):
    """Neither holds a key (above), so both are shared like every other result (cluster file systems)."""
    import os
    import stat

    from echo_lib.llm.cache import CallCache
    from echo_lib.llm.provenance import ProvenanceLog
    from echo_lib.llm.types import Usage

    old = os.umask(umask)
    try:
        cache = CallCache(tmp_path / "cache")
        cache.put("ab" * 32, {"op": "x"}, {"text": "y"})
        ProvenanceLog(tmp_path / "llm_provenance.jsonl").record(op="x", model={}, settings={}, usage=Usage(),
                                                                 seconds=0.0)
    finally:
        os.umask(old)
    for path in (tmp_path / "cache" / "ab" / f"{'ab' * 32}.json", tmp_path / "llm_provenance.jsonl"):
        assert stat.S_IMODE(path.stat().st_mode) == mode, path

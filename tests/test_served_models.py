"""Issue 39, section 2 (part): what the server says it served, and retries as servers mean them
(tests/openai_stub.py plays the server).

- each completion keeps the model id the server says it served (`model`) and its `system_fingerprint`, in
  the call cache entry and in the provenance record; a served id other than the configured one warns once;
- 408, 409 and `x-should-retry: true` are retried; a 429 whose error is `insufficient_quota` fails at once
  with an error that names the model, the server and the fix (it never succeeds)."""
from __future__ import annotations

import json
import logging
import time

import pytest
from openai_stub import Stub, completion

from echo_lib.config import load_config
from echo_lib.llm import LLMError, Sampling
from echo_lib.models import load_llm
from echo_lib.llm.provenance import read_records

CHAT = [{"role": "system", "content": "You judge."}, {"role": "user", "content": "Level?"}]
CONFIGURED = "gpt-4o"
SERVED = "gpt-4o-2024-08-06"
FINGERPRINT = "fp_f33640a400"


def cfg(tmp_path, stub, **llm):
    return load_config({"results_dir": str(tmp_path / "results"),
                        "llm": {"progress": False, "backoff_s": 0.01, "max_backoff_s": 0.05, **llm},
                        "models": {"base": {"backend": "openai", "source": "server", "id": CONFIGURED,
                                            "base_url": stub.base_url, "api_key_env": None}}})


def cache_entries(root) -> list[dict]:
    out = []
    for path in root.rglob("*.json"):
        try:
            entry = json.loads(path.read_text())
        except ValueError:
            continue
        if isinstance(entry, dict) and "key" in entry and isinstance(entry.get("result"), dict):
            out.append(entry)
    return out


def served_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and SERVED in r.getMessage()]


def test_the_served_model_and_fingerprint_reach_the_cache_and_provenance_and_warn_once(tmp_path, caplog):
    reply = completion("fine", model=SERVED, system_fingerprint=FINGERPRINT)
    with Stub(lambda body, headers: (200, reply)) as stub, caplog.at_level(logging.WARNING):
        config = cfg(tmp_path, stub)
        llm = load_llm(config, "base")
        out = llm.generate([CHAT, CHAT[:1] + [{"role": "user", "content": "Again?"}]], Sampling(temperature=0))
        load_llm(config, "base").generate([CHAT[:1] + [{"role": "user", "content": "Third?"}]], Sampling(temperature=0))
    assert [c.served_model for c in out] == [SERVED, SERVED]
    assert [c.system_fingerprint for c in out] == [FINGERPRINT, FINGERPRINT]
    entries = cache_entries(tmp_path / "results")
    assert len(entries) == 3
    assert all(e["result"]["served_model"] == SERVED and e["result"]["system_fingerprint"] == FINGERPRINT
               for e in entries)
    records = read_records(config.run_dir / "llm_provenance.jsonl")
    assert len(records) == 2
    for rec in records:
        assert rec["served"] == [{"model": SERVED, "system_fingerprint": FINGERPRINT}], rec
    warned = served_warnings(caplog)
    assert len(warned) == 1, warned    # once per model and run, not per call or per load_llm
    assert CONFIGURED in warned[0] and "'base'" in warned[0]
    # from the cache: the same fields come back
    again = load_llm(config, "base").generate([CHAT], Sampling(temperature=0))
    assert again[0].served_model == SERVED and again[0].system_fingerprint == FINGERPRINT
    assert len(stub.requests) == 3


def test_a_server_that_serves_the_configured_id_does_not_warn(tmp_path, caplog):
    with Stub(lambda body, headers: (200, completion("fine", model=CONFIGURED))) as stub, \
            caplog.at_level(logging.WARNING):
        out, = load_llm(cfg(tmp_path, stub), "base").generate([CHAT], Sampling(temperature=0))
    assert out.served_model == CONFIGURED and out.system_fingerprint is None
    assert not [r for r in caplog.records if "served" in r.getMessage()]


@pytest.mark.parametrize("status, headers", [(408, {}), (409, {}), (400, {"x-should-retry": "true"}),
                                             (403, {"X-Should-Retry": "true"})])
def test_408_409_and_x_should_retry_are_retried_then_succeed(tmp_path, status, headers):
    answers = iter([(status, {"error": {"message": "try again"}}, headers),
                    (status, {"error": {"message": "try again"}}, headers),
                    (200, completion("ok"))])
    with Stub(lambda body, h: next(answers)) as stub:
        llm = load_llm(cfg(tmp_path, stub, max_retries=3), "base")
        out, = llm.generate([CHAT], Sampling(temperature=0))
    assert out.text == "ok" and len(stub.requests) == 3
    assert llm.last_record["retries"] == 2


QUOTA = {"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                   "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}


def test_a_429_insufficient_quota_fails_at_once_naming_model_server_and_fix(tmp_path):
    with Stub(lambda body, headers: (429, QUOTA)) as stub:
        llm = load_llm(cfg(tmp_path, stub, max_retries=3, backoff_s=1, max_backoff_s=2), "base")
        start = time.perf_counter()
        with pytest.raises(LLMError) as info:
            llm.generate([CHAT], Sampling(temperature=0))
        took = time.perf_counter() - start
    assert took < 2, took
    assert len(stub.requests) == 1   # not retried
    text = str(info.value)
    assert "'base'" in text and stub.base_url in text
    assert "quota" in text and "billing" in text
    assert llm.last_record["retries"] == 0


def test_a_plain_429_is_still_retried(tmp_path):
    answers = iter([(429, {"error": {"message": "Rate limit reached", "type": "requests",
                                     "code": "rate_limit_exceeded"}}), (200, completion("ok"))])
    with Stub(lambda body, headers: next(answers)) as stub:
        out, = load_llm(cfg(tmp_path, stub, max_retries=2), "base").generate([CHAT], Sampling(temperature=0))
    assert out.text == "ok" and len(stub.requests) == 2

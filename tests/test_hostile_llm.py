"""Issue 38, the model layer's hostile and malformed inputs (tests/openai_stub.py plays the server):

1. credentials: a base_url with user:password@ or a query is refused at config load (and by the backend built
   in code) without showing the secret; a key a server quotes URL-encoded, base64-encoded (Basic auth) or
   partly masked is redacted; a reply that echoes the Authorization header is not cached in clear; a key
   pasted into api_key_env is refused without being printed.
2. served model identity: what the server's /v1/models says about the model (id, created, owned_by, root,
   parent; a local root folder's content) and an explicit revision are part of the identity, so a model
   retrained under the same name is asked again (call cache) and played again (stage 04's resume); a server
   that stamps `created` with the time of the request (vLLM) keeps its cache.
3. server replies: a malformed 200 (HTML, broken JSON, `choices` empty or null) is an LLMError naming the
   model and the server; llm.timeout_s bounds the whole request against a trickling proxy; an API key with
   a newline is named at once instead of a minute of back-off; NaN or absurd log-probabilities in choose are
   an error."""
from __future__ import annotations

import base64
import json
import math
import time
import traceback
import urllib.parse

import pytest
from openai_stub import Raw, Stub, completion
from test_sandbox_fakes import ROLES, FakeBackend, config

from echo_lib.config import ConfigError, load_config
from echo_lib.llm import LLMError, LLMSettings, Sampling, make_llm
from echo_lib.models import load_llm
from echo_lib.llm.openai_backend import OpenAIBackend
from echo_lib.llm.secrets import redact
from echo_lib.sandbox.stage import run_sandbox

KEY = "echo0pass/7f3a+9cQzz="   # no key-like prefix; URL-encoding changes it
ENV = "ECHO_HOSTILE_KEY"
CHAT = [{"role": "system", "content": "You judge."}, {"role": "user", "content": "Level?"}]
TOOL = {"type": "function", "function": {"name": "reveal_memory", "description": "d",
                                         "parameters": {"type": "object", "properties": {}}}}
NOWHERE = "http://127.0.0.1:9/v1"   # nothing listens on the discard port: refused at once


def model(stub_or_url, **extra) -> dict:
    url = stub_or_url if isinstance(stub_or_url, str) else stub_or_url.base_url
    return {"backend": "openai", "source": "server", "id": "served-1", "base_url": url, "api_key_env": None,
            **extra}


def cfg(tmp_path, stub_or_url, spec: dict | None = None, **llm):
    return load_config({"results_dir": str(tmp_path / "results"),
                        "llm": {"progress": False, "backoff_s": 0.01, "max_backoff_s": 0.05, **llm},
                        "models": {"base": {**model(stub_or_url), **(spec or {})}}})


def artifacts(root) -> dict[str, str]:
    return {str(p): p.read_text(errors="replace") for p in root.rglob("*") if p.is_file()}


def pieces(secret: str, n: int = 8) -> list[str]:
    """Every n-character stretch of a secret: none may survive anywhere."""
    return [secret[i:i + n] for i in range(len(secret) - n + 1)]


# --------------------------------------------------------------------------------------------
# 1. credentials


@pytest.mark.parametrize("url", ["http://alice:{s}@127.0.0.1:8000/v1", "http://{s}@127.0.0.1:8000/v1",
                                 "https://api.example.com/v1?api_key={s}", "https://api.example.com/v1?x=1&token={s}",
                                 "https://api.example.com/v1?{s}"])
def test_credentials_in_base_url_are_refused_without_being_shown(tmp_path, url):
    secret = "pw0Secret9xQ"
    with pytest.raises(ConfigError) as info:
        cfg(tmp_path, url.format(s=secret))
    text = "".join(traceback.format_exception(info.value))
    assert "models.base.base_url" in text and "api_key_env" in text, text
    assert secret not in text
    assert not (tmp_path / "results").exists()   # nothing of a run was written
    # the backend built in code (tests, notebooks) refuses it too
    with pytest.raises(LLMError) as info:
        OpenAIBackend("base", "m", url.format(s=secret), None)
    assert secret not in "".join(traceback.format_exception(info.value)) and "base_url" in str(info.value)


def test_a_key_pasted_into_api_key_env_is_refused_without_being_shown(tmp_path):
    pasted = "sk-proj-Zq81xT3bbLkeyMaterial0192"
    with pytest.raises(ConfigError) as info:
        cfg(tmp_path, "http://127.0.0.1:8000/v1", {"api_key_env": pasted})
    text = str(info.value)
    assert "models.base.api_key_env" in text and "not shown" in text, text
    assert all(p not in text for p in pieces(pasted, 6))


@pytest.mark.parametrize("user", ["u", "us", "use"])   # the key at each offset of base64's 3-byte groups
def test_redact_finds_the_key_encoded_or_masked(user):
    basic = base64.b64encode(f"{user}:{KEY}".encode()).decode()
    forms = {"url-encoded": urllib.parse.quote(KEY, safe=""), "form-encoded": urllib.parse.quote_plus(KEY),
             "basic auth": basic, "base64": base64.b64encode(KEY.encode()).decode(),
             "urlsafe base64": base64.urlsafe_b64encode(KEY.encode()).decode(),
             "masked middle": KEY[:6] + "*" * 10 + KEY[-4:], "masked head": "*" * 12 + KEY[-5:],
             "ellipsis": KEY[:5] + "..." + KEY[-4:]}
    for name, form in forms.items():
        out = redact(f"401: invalid credentials '{form}' for this project", [KEY])
        assert "<redacted>" in out and all(p not in out for p in pieces(form, 4) if p not in "Basic "), (name, out)
    # Basic auth headers and partly masked keys the backend did not send are caught by their shape
    out = redact(f"got Authorization: Basic {basic} and key abcd************wxyz", [])
    assert basic not in out and "abcd" not in out and "wxyz" not in out, out


def test_a_server_quoting_the_key_in_other_forms_leaves_it_in_no_artifact(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, KEY)

    def refuse(body, headers):
        key = headers["Authorization"][7:]
        return 403, {"error": {"message": f"key {urllib.parse.quote(key, safe='')} (as Basic "
                                          f"{base64.b64encode(('me:' + key).encode()).decode()}, shown as "
                                          f"{key[:4]}***********{key[-4:]}) may not use this model"}}

    with Stub(refuse) as stub:
        llm = load_llm(cfg(tmp_path, stub, {"api_key_env": ENV}, max_retries=0), "base")
        with pytest.raises(LLMError, match="PermissionDenied") as info:
            llm.generate([CHAT], Sampling(max_new_tokens=2))
    shown = "".join(traceback.format_exception(info.value)) + "".join(artifacts(tmp_path / "results").values())
    for form in (KEY, urllib.parse.quote(KEY, safe=""), base64.b64encode(("me:" + KEY).encode()).decode()):
        assert all(p not in shown for p in pieces(form)), form
    assert KEY[-4:] not in shown


def test_a_reply_echoing_the_authorization_header_is_not_cached_in_clear(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(ENV, KEY)

    def echo(body, headers):
        auth = headers["Authorization"]
        if body.get("tools"):
            return 200, completion(tool_call={"name": "reveal_memory", "arguments": json.dumps({"note": auth})})
        return 200, completion(f"You sent {auth} (that is {urllib.parse.quote(auth[7:], safe='')})")

    with Stub(echo) as stub:
        llm = load_llm(cfg(tmp_path, stub, {"api_key_env": ENV}), "base")
        out, = llm.generate([CHAT], Sampling(max_new_tokens=8))
        call, = llm.call_tools([CHAT], [TOOL])
    assert stub.headers[0].get("Authorization") == f"Bearer {KEY}"   # the key was sent
    assert "<redacted>" in out.text and KEY not in out.text and urllib.parse.quote(KEY, safe="") not in out.text
    assert call.arguments == {"note": "Bearer <redacted>"}
    written = artifacts(tmp_path / "results")
    assert any("llm_cache" in p for p in written)
    assert [p for p, text in written.items() if any(piece in text for piece in pieces(KEY))] == []
    assert KEY not in caplog.text and "quoted its API key" in caplog.text


# --------------------------------------------------------------------------------------------
# 2. a served model's identity


def entry(created: int, **extra) -> dict:
    return {"id": "served-1", "object": "model", "created": created, "owned_by": "lab", **extra}


def test_a_served_model_retrained_under_the_same_name_is_asked_again(tmp_path):
    listed = [entry(1_700_000_000), entry(1_600_000_000, id="other")]
    with Stub(lambda body, headers: (200, completion(f"reply of {listed[0]['created']}")),
              models=lambda: listed) as stub:
        first, = load_llm(cfg(tmp_path, stub), "base").generate([CHAT], Sampling(max_new_tokens=4))
        again, = load_llm(cfg(tmp_path, stub), "base").generate([CHAT], Sampling(max_new_tokens=4))
        assert len(stub.requests) == 1 and again == first            # the same model: from the cache
        listed[0] = entry(1_800_000_000)                              # retrained, served under the same name
        llm = load_llm(cfg(tmp_path, stub), "base")
        new, = llm.generate([CHAT], Sampling(max_new_tokens=4))
    assert len(stub.requests) == 2 and new.text == "reply of 1800000000"
    assert llm.last_record["model"]["served"]["created"] == 1_800_000_000   # the provenance record names it


def test_a_server_that_stamps_created_with_the_time_of_the_request_keeps_its_cache(tmp_path):
    """vLLM's /v1/models gives every entry `created` = now: that is not the model's identity."""
    with Stub(lambda body, headers: (200, completion("fine")), models=lambda: [entry(int(time.time()))]) as stub:
        load_llm(cfg(tmp_path, stub), "base").generate([CHAT], Sampling(max_new_tokens=4))
        time.sleep(1.1)
        llm = load_llm(cfg(tmp_path, stub), "base")
        llm.generate([CHAT], Sampling(max_new_tokens=4))
    assert len(stub.requests) == 1 and llm.last_record["cache_hits"] == 1
    assert "created" not in llm.backend.identity()["served"]


def test_a_local_root_folder_and_an_explicit_revision_are_part_of_the_identity(tmp_path):
    """vLLM lists an adapter with root = its folder and parent = the base model: the folder's content counts."""
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes(b"weights v1")
    listed = [{"id": "base-model", "object": "model", "created": 0, "owned_by": "vllm", "root": "/hub/base"},
              entry(0, root=str(adapter), parent="base-model")]
    with Stub(lambda body, headers: (200, completion("fine")), models=lambda: listed) as stub:
        before = OpenAIBackend("base", "served-1", stub.base_url, None).identity()
        (adapter / "adapter_model.safetensors").write_bytes(b"weights v2")
        after = OpenAIBackend("base", "served-1", stub.base_url, None).identity()
    assert before["served"]["root"] == str(adapter) and before["served"]["parent"]["root"] == "/hub/base"
    assert before["served"]["root_fingerprint"] != after["served"]["root_fingerprint"]
    one, two = (OpenAIBackend("base", "m", NOWHERE, None, revision=r).identity() for r in ("2024-06", "2025-01"))
    assert one["revision"] == "2024-06" and one != two
    assert "revision" not in OpenAIBackend("base", "m", NOWHERE, None).identity()   # old cache keys hold


def test_stage_04_plays_a_served_model_again_when_the_server_reports_another(tmp_path):
    listed = [entry(1_700_000_000)]
    with Stub(lambda body, headers: (200, completion("That sounds hard. What happened then?")),
              models=lambda: listed) as stub:
        raw = config(tmp_path, max_turns=2, min_turns=1)
        raw["models"]["base"] = model(stub)
        raw["sandbox"] = {"case_ids": ["own_001"]}
        run_cfg = load_config(raw)
        settings = LLMSettings(cache=False, provenance=False, progress=False)

        def play():
            llms = {r: make_llm(FakeBackend(r), settings, tmp_path / "cache", None) for r in ROLES if r != "base"}
            return run_sandbox(run_cfg, "base", llms=llms)

        assert len(play().ran) == 1
        assert play().skipped == ["own_001"]                          # the same model: the case resumes
        asked = len(stub.requests)
        listed[0] = entry(1_800_000_000)                              # retrained under the same name
        again = play()
    assert again.skipped == [] and len(again.ran) == 1 and len(stub.requests) > asked


# --------------------------------------------------------------------------------------------
# 3. server replies


MALFORMED = {"html page": Raw(b"<!DOCTYPE html><html><body>Sign in to continue</body></html>"),
             "broken json": Raw(b'{"choices": [', "application/json"),
             "text as json": Raw(b"upstream connect error", "application/json"),
             "choices empty": {"id": "x", "object": "chat.completion", "choices": []},
             "choices null": {"id": "x", "object": "chat.completion", "choices": None},
             "no choices": {"id": "x"},
             "choice without message": {"choices": [{"index": 0, "finish_reason": "stop"}]},
             "content a number": {"choices": [{"index": 0, "message": {"role": "assistant", "content": 7}}]},
             "a JSON string": "hello", "a JSON list": [1, 2]}


@pytest.mark.parametrize("op", ["generate", "choose", "call_tools"])
@pytest.mark.parametrize("body", MALFORMED.values(), ids=list(MALFORMED))
def test_a_malformed_200_is_an_error_naming_the_model_and_the_server(tmp_path, body, op):
    with Stub(lambda b, h: (200, body)) as stub:
        llm = load_llm(cfg(tmp_path, stub, max_retries=0), "base")
        call = {"generate": lambda: llm.generate([CHAT], Sampling(max_new_tokens=4)),
                "choose": lambda: llm.choose([CHAT], ["0", "1"]),
                "call_tools": lambda: llm.call_tools([CHAT], [TOOL])}[op]
        with pytest.raises(LLMError) as info:
            call()
    text = str(info.value)
    assert "'base'" in text and stub.base_url in text and "HTTP 200" in text and "base_url" in text, text
    assert info.value.__cause__ is None and (info.value.__context__ is None or info.value.__suppress_context__)
    assert len(stub.requests) == 1                                    # not retried: the server says so each time
    assert not list((tmp_path / "results" / "llm_cache").rglob("*.json"))


def test_the_timeout_bounds_the_whole_request_not_each_read(tmp_path):
    body = json.dumps(completion("slow")).encode()   # ~250 bytes at 0.05 s each: over 12 s in all
    with Stub(lambda b, h: (200, Raw(body, "application/json", trickle_s=0.05))) as stub:
        llm = load_llm(cfg(tmp_path, stub, timeout_s=1, max_retries=1), "base")
        start = time.monotonic()
        with pytest.raises(LLMError) as info:
            llm.generate([CHAT], Sampling(max_new_tokens=4))
        took = time.monotonic() - start
    assert took < 4, took                                            # two tries of 1 s each, and the back-off
    text = str(info.value)
    assert "'base'" in text and stub.base_url in text and "llm.timeout_s" in text and "gave up after 2 tries" in text


@pytest.mark.parametrize("bad", [KEY + "\n", KEY + "\r\n", KEY + " ", KEY[:6] + "\n" + KEY[6:]],
                         ids=["newline", "crlf", "space", "inner newline"])
def test_an_api_key_with_a_newline_is_named_at_once(tmp_path, monkeypatch, bad):
    monkeypatch.setenv(ENV, bad)
    with Stub(lambda b, h: (200, completion("fine"))) as stub:
        llm = load_llm(cfg(tmp_path, stub, {"api_key_env": ENV}, max_retries=4, backoff_s=0.5), "base")
        start = time.monotonic()
        with pytest.raises(LLMError) as info:
            llm.generate([CHAT], Sampling(max_new_tokens=4))
        took = time.monotonic() - start
    text = str(info.value)
    assert took < 1 and not stub.requests, (took, text)
    assert ENV in text and "'base'" in text and ("newline" in text or "space" in text), text
    assert all(p not in text for p in pieces(KEY, 5))


@pytest.mark.parametrize("top", [[("1", math.nan), ("0", -1.0)], [("1", math.inf)], [("1", 5.0), ("0", -2.0)],
                                 [("1", 0.0), ("0", 0.0)], [("1", -0.1), ("0", -0.2)], [("1", "high"), ("0", -1.0)],
                                 [("1", None)]],
                         ids=["nan", "inf", "positive", "sum 2", "sum 1.7", "a string", "null"])
def test_nan_or_absurd_logprobs_in_choose_are_an_error(tmp_path, top):
    with Stub(lambda b, h: (200, completion("1", logprobs=top))) as stub:
        llm = load_llm(cfg(tmp_path, stub, max_retries=0), "base")
        with pytest.raises(LLMError, match="log-probabilit") as info:
            llm.choose([CHAT], ["0", "1"])
    text = str(info.value)
    assert "'base'" in text and stub.base_url in text, text
    assert not list((tmp_path / "results" / "llm_cache").rglob("*.json"))


def test_usual_logprobs_still_make_a_choice(tmp_path):
    """-inf (vLLM writes it as -9999.0) is probability 0; a sum a little over 1 is rounding."""
    top = [("1", math.log(0.7)), ("0", math.log(0.3) + 1e-4), ("x", -9999.0), ("y", -math.inf)]
    with Stub(lambda b, h: (200, completion("1", logprobs=top))) as stub:
        choice, = load_llm(cfg(tmp_path, stub), "base").choose([CHAT], ["0", "1"])
    assert choice.best == "1" and choice.probs["1"] == pytest.approx(0.7, abs=1e-3)

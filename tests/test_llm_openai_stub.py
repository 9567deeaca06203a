"""The openai backend's success paths against a real HTTP server (tests/openai_stub.py on 127.0.0.1):
choose from top_logprobs, a tool call, JSON mode, and the retry on 429 and 5xx, each through the
official client and the model layer (cache, provenance), with what the server was sent checked too.
(`transformers serve` in test_llm_openai.py has no logprobs, tools or JSON mode, so only a scripted
server reaches these paths.)"""
from __future__ import annotations

import json
import math

import pytest
from openai_stub import Stub, completion

from echo_lib.config import load_config
from echo_lib.llm import LLMError, Sampling
from echo_lib.models import load_llm

CHAT = [{"role": "system", "content": "You judge."}, {"role": "user", "content": "Level?"}]
TOOL = {"type": "function", "function": {"name": "reveal_memory", "description": "Reveal one memory.",
                                         "parameters": {"type": "object",
                                                        "properties": {"memory_period": {"type": "string"}}}}}


def cfg(tmp_path, stub, **llm):
    return load_config({"results_dir": str(tmp_path / "results"),
                        "llm": {"progress": False, "backoff_s": 0.01, "max_backoff_s": 0.05, **llm},
                        "models": {"base": {"backend": "openai", "source": "server", "id": "judge-1",
                                            "base_url": stub.base_url, "api_key_env": None}}})


def test_choose_reads_the_top_logprobs(tmp_path):
    top = [("2", math.log(0.6)), ("1", math.log(0.3)), ("x", math.log(0.1))]
    with Stub(lambda body, headers: (200, completion("2", logprobs=top))) as stub:
        llm = load_llm(cfg(tmp_path, stub, top_logprobs=5), "base")
        choice, = llm.choose([CHAT], ["0", "1", "2"])
        again, = load_llm(cfg(tmp_path, stub), "base").choose([CHAT], ["0", "1", "2"])   # from the cache
    assert choice.best == "2" and choice.probs == pytest.approx({"0": 0.0, "1": 1 / 3, "2": 2 / 3})
    assert choice.coverage == pytest.approx(0.9) and again == choice
    sent, = stub.requests   # one request: the rerun was a cache hit
    assert sent["logprobs"] is True and sent["top_logprobs"] == 5 and sent["max_tokens"] == 1
    assert sent["model"] == "judge-1" and sent["messages"] == CHAT


def test_a_tool_call_comes_back_with_its_arguments(tmp_path):
    answer = completion(tool_call={"name": "reveal_memory", "arguments": json.dumps({"memory_period": "childhood"})})
    with Stub(lambda body, headers: (200, answer)) as stub:
        call, = load_llm(cfg(tmp_path, stub), "base").call_tools([CHAT], [TOOL])
    assert call.name == "reveal_memory" and call.arguments == {"memory_period": "childhood"}
    sent, = stub.requests
    assert sent["tool_choice"] == "required" and sent["tools"][0]["function"]["name"] == "reveal_memory"


def test_json_mode_asks_for_a_json_object_and_returns_it(tmp_path):
    with Stub(lambda body, headers: (200, completion('{"score": 4}'))) as stub:
        out, = load_llm(cfg(tmp_path, stub), "base").generate([CHAT], Sampling(max_new_tokens=8, json_mode=True))
    assert json.loads(out.text) == {"score": 4} and out.prompt_tokens == 5 and out.completion_tokens == 1
    assert stub.requests[0]["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize("status", [429, 500, 503])
def test_retries_on_429_and_5xx_then_succeeds(tmp_path, status):
    answers = iter([(status, {"error": {"message": "busy"}})] * 2 + [(200, completion("fine"))])
    with Stub(lambda body, headers: next(answers)) as stub:
        llm = load_llm(cfg(tmp_path, stub, max_retries=3), "base")
        out, = llm.generate([CHAT], Sampling(max_new_tokens=4))
    assert out.text == "fine" and len(stub.requests) == 3
    assert llm.last_record["retries"] == 2 and llm.last_record["model_calls"] == 1


def test_a_429_waits_as_long_as_its_retry_after_asks_up_to_max_backoff(tmp_path, monkeypatch):
    import echo_lib.llm.openai_backend as backend
    waits = []
    monkeypatch.setattr(backend.time, "sleep", waits.append)
    answers = iter([(429, {"error": {"message": "slow down"}}, {"Retry-After": "7"}),
                    (429, {"error": {"message": "slow down"}}, {"Retry-After": "600"}),
                    (429, {"error": {"message": "slow down"}}),
                    (200, completion("fine"))])
    with Stub(lambda body, headers: next(answers)) as stub:
        llm = load_llm(cfg(tmp_path, stub, max_retries=3, backoff_s=0.01, max_backoff_s=20), "base")
        out, = llm.generate([CHAT], Sampling(max_new_tokens=4))
    assert out.text == "fine" and len(stub.requests) == 4
    assert waits[0] == 7 and waits[1] == 20 and waits[2] <= 0.04   # as asked; capped; back-off alone


def test_retries_stop_at_max_retries_with_a_named_error(tmp_path):
    with Stub(lambda body, headers: (503, {"error": {"message": "down"}})) as stub:
        llm = load_llm(cfg(tmp_path, stub, max_retries=2), "base")
        with pytest.raises(LLMError, match=r"gave up after 3 tries: InternalServerError"):
            llm.generate([CHAT], Sampling(max_new_tokens=4))
    assert len(stub.requests) == 3
    assert not list((tmp_path / "results" / "llm_cache").rglob("*.json"))   # nothing wrong was cached

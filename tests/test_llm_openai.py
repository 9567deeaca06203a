"""The openai backend: request shapes against the openai package's types, and a real local server
(`transformers serve` on the tiny model) for batched chat, concurrency, the cache, a retry across a
server restart, missing-feature detection and the API key staying out of every output."""
from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
import typing
import urllib.request
from pathlib import Path

import pytest

from echo_lib.config import load_config
from echo_lib.llm import FeatureUnsupported, LLMError, Sampling
from echo_lib.models import load_llm
from echo_lib.llm.openai_backend import chat_request, choice_from_top_logprobs, choose_request, tools_request

SECRET = "sk-echo-test-DO-NOT-LEAK-7f3a9c"
SYSTEM = "You are a warm, attentive friend."
TOOLS = [{"type": "function", "function": {"name": "end_dialogue", "description": "End it.",
                                           "parameters": {"type": "object", "properties": {}}}}]


def chats(n: int) -> list:
    return [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"I failed exam {i}."}]
            for i in range(n)]


# --------------------------------------------------------------------------------------------
# request shapes, checked against the openai package's own TypedDicts (no server needed)


@pytest.mark.parametrize("request_", [
    chat_request("m", chats(1)[0], Sampling(temperature=0.7, top_p=0.9, stop=("\n",), seed=3, json_mode=True)),
    chat_request("m", chats(1)[0], Sampling(temperature=0)),
    chat_request("m", chats(1)[0], Sampling(temperature=0.7, top_p=0.8, presence_penalty=1.5, top_k=20)),
    choose_request("m", chats(1)[0], top_logprobs=20),
    tools_request("m", chats(1)[0], TOOLS, max_tokens=64),
])
def test_request_shapes_match_the_openai_types(request_):
    import pydantic
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming as Params

    request_ = dict(request_)
    extra = request_.pop("extra_body", {})  # a keyword of create() for what the OpenAI API lacks (top_k)
    assert set(extra) <= {"top_k"}
    assert set(request_) <= set(typing.get_type_hints(Params))
    valid = pydantic.TypeAdapter(Params).validate_python(request_)
    list(valid["messages"])  # iterables validate lazily
    if "tools" in valid:
        list(valid["tools"])


def test_choice_from_top_logprobs():
    import math
    top = [("1", math.log(0.5)), (" 2", math.log(0.2)), ("x", math.log(0.2)), ("3", math.log(0.05))]
    c = choice_from_top_logprobs(["0", "1", "2", "3"], top)
    assert c.best == "1" and c.probs["0"] == 0 and math.isclose(sum(c.probs.values()), 1)
    assert math.isclose(c.coverage, 0.75)
    # a token that is a prefix of two options counts for neither; no option at all gives None
    c = choice_from_top_logprobs(["better", "best"], [("be", -0.1), ("better", -3.0)])
    assert c.best == "better" and c.probs["best"] == 0
    assert choice_from_top_logprobs(["yes", "no"], [("maybe", -0.1)]) is None


# --------------------------------------------------------------------------------------------
# a real OpenAI-compatible server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`transformers serve <model dir>` on 127.0.0.1, offline; start/stop as often as a test needs."""

    def __init__(self, model_dir: Path, port: int, log: Path):
        self.model_dir, self.port, self.log = model_dir, port, log
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> bool:
        exe = Path(sys.executable).with_name("transformers")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        self.proc = subprocess.Popen([str(exe), "serve", str(self.model_dir), "--host", "127.0.0.1",
                                      "--port", str(self.port), "--device", "cpu"],
                                     stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + timeout
        while time.time() < deadline and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return True
            except OSError:
                time.sleep(0.5)
        return False

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def server(tiny_lm_dir, tmp_path_factory):
    pytest.importorskip("fastapi", reason="transformers serve needs `pip install transformers[serving]`")
    pytest.importorskip("uvicorn", reason="transformers serve needs `pip install transformers[serving]`")
    srv = Server(tiny_lm_dir, free_port(), tmp_path_factory.mktemp("serve") / "serve.log")
    if not srv.start():
        srv.stop()
        pytest.skip(f"transformers serve did not start: {srv.log.read_text()[-500:]}")
    yield srv
    srv.stop()


def make_cfg(tmp_path, srv: Server, **llm):
    return load_config({
        "results_dir": str(tmp_path / "results"),
        "models": {"base": {"backend": "openai", "source": "server", "id": str(srv.model_dir),
                            "base_url": f"http://127.0.0.1:{srv.port}/v1", "api_key_env": "ECHO_TEST_API_KEY"}},
        "llm": {"progress": False, "backoff_s": 0.5, "max_backoff_s": 4, "max_retries": 12, "tool_call_tokens": 8,
                **llm}})


@pytest.fixture
def secret_env(monkeypatch):
    monkeypatch.setenv("ECHO_TEST_API_KEY", SECRET)


def test_batched_chat_concurrency_and_cache(server, tmp_path, secret_env, caplog):
    caplog.set_level(logging.DEBUG)  # the client's and httpx's debug logs must not carry the key either
    llm = load_llm(make_cfg(tmp_path, server, concurrency=3), "base")
    in_flight, peak, lock = 0, 0, threading.Lock()
    create = llm.backend.client.chat.completions.create

    def counting(**kw):
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        try:
            time.sleep(0.05)
            return create(**kw)
        finally:
            with lock:
                in_flight -= 1

    llm.backend.client.chat.completions.create = counting
    out = llm.generate(chats(8), Sampling(temperature=0.7, top_p=0.9, max_new_tokens=6, seed=1))
    assert len(out) == 8 and all(isinstance(o.text, str) for o in out)
    assert all(0 < o.completion_tokens <= 6 and o.prompt_tokens > 0 for o in out)
    assert 1 < peak <= 3
    rec = llm.last_record
    assert rec["model_calls"] == 8 and rec["completion_tokens"] == sum(o.completion_tokens for o in out)

    again = load_llm(make_cfg(tmp_path, server), "base")
    assert again.generate(chats(8), Sampling(temperature=0.7, top_p=0.9, max_new_tokens=6, seed=1)) == out
    assert again.model_calls == 0 and again.last_record["cache_hits"] == 8

    files = [*(tmp_path / "results").rglob("*.json"), *(tmp_path / "results").rglob("*.jsonl")]
    assert len(files) > 8
    assert all(SECRET not in f.read_text() for f in files)
    assert all("ECHO_TEST_API_KEY" not in f.read_text() for f in (tmp_path / "results" / "llm_cache").rglob("*.json"))
    assert SECRET not in caplog.text


def test_missing_features_fail_clearly(server, tmp_path, secret_env):
    """transformers serve ignores logprobs, tools and response_format: each must be an error, not a guess."""
    llm = load_llm(make_cfg(tmp_path, server), "base")
    with pytest.raises(FeatureUnsupported, match="no logprobs"):
        llm.choose(chats(2), ["0", "1", "2", "3"])
    with pytest.raises(FeatureUnsupported, match="without a tool call"):
        llm.call_tools(chats(1), TOOLS)
    with pytest.raises(FeatureUnsupported, match="JSON mode"):
        llm.generate(chats(1), Sampling(temperature=0, max_new_tokens=4, json_mode=True))
    # the configured fallback: a greedy reply that must equal an option (the tiny model's does not)
    fallback = load_llm(make_cfg(tmp_path, server, choose_fallback="generate"), "base")
    with pytest.raises(LLMError, match="none of"):
        fallback.choose(chats(1), ["0", "1"])
    assert not list((tmp_path / "results" / "llm_cache").rglob("*.json"))  # nothing wrong was cached


def test_missing_api_key_is_named(server, tmp_path, monkeypatch):
    monkeypatch.delenv("ECHO_TEST_API_KEY", raising=False)
    with pytest.raises(LLMError, match="ECHO_TEST_API_KEY is not set"):
        load_llm(make_cfg(tmp_path, server), "base").generate(chats(1), Sampling(max_new_tokens=2))


def test_retry_rides_out_a_server_restart(server, tmp_path, secret_env):
    llm = load_llm(make_cfg(tmp_path, server, concurrency=2), "base")
    server.stop()
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(
        out=llm.generate(chats(3), Sampling(temperature=0, max_new_tokens=4))))
    worker.start()
    time.sleep(1.0)  # the first tries are refused
    assert server.start(), f"restart failed: {server.log.read_text()[-500:]}"
    worker.join(timeout=120)
    assert len(result["out"]) == 3
    assert llm.last_record["retries"] >= 1 and llm.last_record["model_calls"] == 3

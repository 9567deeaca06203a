"""The call cache and provenance records, with a fake backend (no model, so these run in milliseconds)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from echo_lib.llm import Choice, Completion, LLMSettings, Sampling, ToolCall, make_llm
from echo_lib.llm.types import Usage

SETTINGS = LLMSettings(progress=False)


class FakeBackend:
    """Answers with a function of the request; counts calls; can fail after `fail_after` answers."""
    kind = "fake"

    def __init__(self, fail_after: int | None = None):
        self.calls = 0
        self.fail_after = fail_after

    def identity(self) -> dict:
        return {"backend": "fake", "model": "echo-v0"}

    def describe(self) -> dict:
        return {"name": "fake", "backend": "fake", "model": "echo-v0"}

    def _tick(self, usage: Usage):
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise KeyboardInterrupt("killed")
        self.calls += 1
        usage.model_calls += 1

    def generate(self, chats, samplings, usage):
        for i, (c, s) in enumerate(zip(chats, samplings)):
            self._tick(usage)
            yield i, Completion(text=f"{c[-1]['content']}|{s.seed}|{s.temperature}", finish_reason="stop",
                                prompt_tokens=3, completion_tokens=2)

    def choose(self, chats, options, usage):
        for i, _ in enumerate(chats):
            self._tick(usage)
            yield i, Choice(probs={o: 1 / len(options) for o in options}, logprobs={o: -1.0 for o in options},
                            coverage=0.5)

    def call_tools(self, chats, tools, usage):
        for i, _ in enumerate(chats):
            self._tick(usage)
            yield i, ToolCall(name=tools[0]["function"]["name"], arguments={"x": i})


def chats(n: int, tag: str = "") -> list:
    return [[{"role": "system", "content": "s"}, {"role": "user", "content": f"m{i}{tag}"}] for i in range(n)]


def test_rerun_makes_zero_model_calls(tmp_path):
    prov = tmp_path / "prov.jsonl"
    first = make_llm(FakeBackend(), SETTINGS, tmp_path / "cache", prov)
    s = Sampling(temperature=0.7, seed=3)
    a = first.generate(chats(5), s)
    c = first.choose(chats(5), ["0", "1"])
    t = first.call_tools(chats(2), [{"name": "f"}])
    assert first.model_calls == 12

    again = make_llm(FakeBackend(), SETTINGS, tmp_path / "cache", prov)
    assert again.generate(chats(5), s) == a
    assert again.choose(chats(5), ["0", "1"]) == c
    assert again.call_tools(chats(2), [{"name": "f"}]) == t
    assert again.model_calls == 0 and again.backend.calls == 0

    records = [json.loads(line) for line in prov.read_text().splitlines()]
    assert [r["op"] for r in records] == ["generate", "choose", "call_tools"] * 2
    assert records[0]["model_calls"] == 5 and records[0]["cache_hits"] == 0
    assert records[3]["model_calls"] == 0 and records[3]["cache_hits"] == 5
    assert records[0]["prompt_tokens"] == 0  # the fake backend does not count tokens
    for r in records:
        assert {"time", "model", "settings", "requests", "seconds", "versions"} <= set(r)


def test_key_covers_settings_messages_options_and_seed(tmp_path):
    llm = make_llm(FakeBackend(), SETTINGS, tmp_path, None)
    llm.generate(chats(2), Sampling(seed=1))
    llm.generate(chats(2), Sampling(seed=2))                 # seed
    llm.generate(chats(2), Sampling(seed=1, top_p=0.5))      # settings
    llm.generate(chats(2, "x"), Sampling(seed=1))            # messages
    llm.choose(chats(2), ["a", "b"])
    llm.choose(chats(2), ["a", "c"])                         # options
    assert llm.model_calls == 12
    # greedy ignores the seed, so greedy calls with different seeds share entries
    llm.generate(chats(2), Sampling(temperature=0, seed=1))
    llm.generate(chats(2), Sampling(temperature=0, seed=2))
    assert llm.model_calls == 14
    # identical requests inside one batch are computed once
    llm.generate(chats(1, "dup") * 4, Sampling(seed=5))
    assert llm.model_calls == 15


def test_corrupt_entry_is_recomputed(tmp_path):
    llm = make_llm(FakeBackend(), SETTINGS, tmp_path, None)
    first = llm.generate(chats(3), Sampling())
    files = sorted(tmp_path.rglob("*.json"))
    assert len(files) == 3
    files[0].write_text(files[0].read_text()[:25])         # a truncated write
    files[1].write_text(json.dumps({"key": "0" * 64, "result": {}}))  # someone else's entry
    again = make_llm(FakeBackend(), SETTINGS, tmp_path, None)
    assert again.generate(chats(3), Sampling()) == first
    assert again.model_calls == 2 and again.cache.corrupt == 2
    assert again.last_record["corrupt_cache_entries"] == 2
    third = make_llm(FakeBackend(), SETTINGS, tmp_path, None)
    third.generate(chats(3), Sampling())
    assert third.model_calls == 0                           # the entries were repaired


def test_off_switch(tmp_path):
    off = LLMSettings(cache=False, progress=False)
    llm = make_llm(FakeBackend(), off, tmp_path / "cache", None)
    llm.generate(chats(3), Sampling())
    llm.generate(chats(3), Sampling())
    assert llm.model_calls == 6
    assert not (tmp_path / "cache").exists()
    assert llm.last_record["cache"] is False


def test_killed_run_keeps_finished_calls(tmp_path):
    killed = make_llm(FakeBackend(fail_after=4), SETTINGS, tmp_path / "cache", tmp_path / "prov.jsonl")
    with pytest.raises(KeyboardInterrupt):
        killed.generate(chats(10), Sampling())
    assert killed.last_record["error"].startswith("KeyboardInterrupt") and killed.last_record["model_calls"] == 4
    resumed = make_llm(FakeBackend(), SETTINGS, tmp_path / "cache", None)
    resumed.generate(chats(10), Sampling())
    assert resumed.model_calls == 6
    assert not list(tmp_path.rglob("*.tmp"))


def test_errors_in_records_are_redacted():
    from echo_lib.llm.interface import _redact
    text = "Error code: 401 - Incorrect API key provided: sk-proj-abc123XYZ****wxyz. Bearer abcdef123456"
    assert "abc123" not in _redact(text) and "abcdef123456" not in _redact(text)


WRITER = """
import sys
sys.path.insert(0, {tests!r})
from test_llm_cache import FakeBackend, chats, SETTINGS
from echo_lib.llm import make_llm, Sampling
llm = make_llm(FakeBackend(), SETTINGS, {cache!r}, {prov!r})
for round in range(20):
    llm.generate(chats(30), Sampling(seed=round % 5))
print(llm.model_calls)
"""


def test_two_processes_write_concurrently(tmp_path):
    code = WRITER.format(tests=str(Path(__file__).parent), cache=str(tmp_path / "cache"),
                         prov=str(tmp_path / "prov.jsonl"))
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    calls = [int(o.split()[-1]) for o in outs]
    assert 150 <= sum(calls) <= 300                        # 150 distinct calls; overlap computes some twice
    entries = list((tmp_path / "cache").rglob("*.json"))
    assert len(entries) == 150
    assert all(json.loads(e.read_text())["key"] == e.stem for e in entries)
    assert not list((tmp_path / "cache").rglob("*.tmp"))
    lines = (tmp_path / "prov.jsonl").read_text().splitlines()
    assert len(lines) == 40 and all(json.loads(line)["op"] == "generate" for line in lines)
    reader = make_llm(FakeBackend(), SETTINGS, tmp_path / "cache", None)
    for r in range(5):
        reader.generate(chats(30), Sampling(seed=r))
    assert reader.model_calls == 0


def test_entries_of_the_wrong_shape_or_a_folder_are_misses(tmp_path, caplog):
    """Issue 18: an entry that parses but is not an answer (was a TypeError that stopped the stage), and a
    folder where an entry belongs (was IsADirectoryError), are recomputed; the folder is named."""
    llm = make_llm(FakeBackend(), SETTINGS, tmp_path, None)
    first = llm.generate(chats(4), Sampling())
    files = sorted(tmp_path.rglob("*.json"))
    keys = [f.stem for f in files]
    files[0].write_text(json.dumps({"key": keys[0], "result": "a string"}))
    files[1].write_text(json.dumps({"key": keys[1], "result": {"txt": "wrong field"}}))
    files[2].write_text(json.dumps([keys[2]]))
    files[3].unlink()
    files[3].mkdir()
    again = make_llm(FakeBackend(), SETTINGS, tmp_path, None)
    assert again.generate(chats(4), Sampling()) == first
    assert again.model_calls == 4 and again.cache.corrupt == 4
    assert f"{files[3]} is a folder" in caplog.text
    third = make_llm(FakeBackend(), SETTINGS, tmp_path, None)
    third.generate(chats(4), Sampling())
    assert third.model_calls == 1          # three repaired; the folder is left alone (and recomputed)


def test_first_writer_wins_and_stray_tmp_files_go(tmp_path):
    """Two processes answering the same call differently: the answer stored first is the one both use,
    so a replay from the cache equals the run. A *.tmp an hour old (a killed writer) is removed."""
    import os
    import time

    from echo_lib.llm.cache import STRAY_TMP_S, CallCache

    cache = CallCache(tmp_path)
    key = "cd" * 32
    assert cache.put(key, {}, {"text": "first"}) is None
    assert cache.put(key, {}, {"text": "second"}) == {"text": "first"}
    assert cache.get(key) == {"text": "first"}
    stray, fresh = tmp_path / "cd" / ".cdcdcdcd.killed.tmp", tmp_path / "cd" / ".cdcdcdcd.live.tmp"
    stray.write_text("{half")
    fresh.write_text("{half")
    old = time.time() - STRAY_TMP_S - 60
    os.utime(stray, (old, old))
    cache.put("cd" + "ef" * 31, {}, {"text": "x"})
    assert not stray.exists() and fresh.exists()

    class Second(FakeBackend):
        def generate(self, chats, samplings, usage):
            for i, completion in super().generate(chats, samplings, usage):
                yield i, Completion(text="the second process's answer", finish_reason="stop")

    run = make_llm(FakeBackend(), SETTINGS, tmp_path / "c2", None).generate(chats(2), Sampling())
    late = make_llm(Second(), SETTINGS, tmp_path / "c2", None)
    late.cache.get = lambda k: None        # it looked before the first process had stored its answers
    assert late.generate(chats(2), Sampling()) == run

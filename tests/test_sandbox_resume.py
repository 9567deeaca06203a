"""Issue 5's "Done when" items with deterministic fakes: an imported EMPA (Chinese) case through the whole
sandbox into a result file that echo-epmq reads; a run interrupted midway and rerun.

Interrupting a lockstep run: all cases advance turn by turn together, so when the run dies only the cases
that had already ENDED have a result file (written as each case ends); the rerun skips those and plays the
others again from turn 1, and the model layer's cache answers every call the interrupted run had made
(same chats, same sampling -> same keys), so only the turns after the interruption cost model calls.
A malformed scenario file is tested in test_sandbox_loop.py (test_failures_are_recorded_and_the_other_cases_finish).
"""
import json

import pytest
from test_sandbox_fakes import ROLES, FakeBackend, config

from echo_lib.config import load_config
from echo_lib.epm.cli import main as epmq
from echo_lib.epm.empa_io import read_result
from echo_lib.epm.params import EPMParams
from echo_lib.llm import LLMSettings, make_llm
from echo_lib.sandbox.stage import run_sandbox


@pytest.mark.parametrize("source", ["fixture", "empa"])
def test_imported_empa_case_runs_and_loads_with_epmq(tmp_path, source, request, capsys):
    """On the fixture's own-text case, and (opt-in, ECHO_EMPA_DIR) on EMPA's script_003."""
    folder = request.getfixturevalue("empa_fixture" if source == "fixture" else "empa").root
    cfg = config(tmp_path, max_turns=3, min_turns=2)
    cfg["sandbox"] = {"case_set": "empa", "empa_dir": str(folder), "case_ids": ["script_003"]}
    llms = {r: make_llm(FakeBackend(r), LLMSettings(cache=False, provenance=False, progress=False),
                        tmp_path / "cache", None) for r in ROLES}
    rep = run_sandbox(load_config(cfg), "base", llms=llms)
    assert rep.invalid == [] and [r["status"] for r in rep.rows] == ["finished"]
    path = rep.out_dir / "script_003_result.json"
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    assert data["script_id"] == "script_003" and data["sandbox"]["termination_type"] in ("MAX_TURNS", "EPM_FAILURE")
    assert any("\u4e00" <= ch <= "\u9fff" for ch in text)          # the Chinese case text is kept as text
    assert read_result(path).case_id == "script_003"
    assert epmq([str(rep.out_dir.parent)]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("base,")


class Interrupt(BaseException):
    """Like Ctrl-C / a kill: not an Exception, so no per-case failure handling catches it."""


class ResumableFake(FakeBackend):
    """The judge rates own_001's replies as strong progress (it succeeds early); the Actor can be told to
    die at its n-th batched call (the turn the run is killed in)."""

    def __init__(self, name, die_at=None, **kw):
        super().__init__(name, **kw)
        self.die_at = die_at

    def generate(self, chats, samplings, usage):
        if self.die_at is not None and self.calls["generate"] + 1 >= self.die_at:
            raise Interrupt(f"killed at the actor's call {self.die_at}")
        yield from super().generate(chats, samplings, usage)

    def choose(self, chats, options, usage):
        for i, choice in super().choose(chats, options, usage):
            prompt = chats[i][-1]["content"]
            if "Tom\u00e1s Ruiz" in prompt and "The turn(s) to rate:" in prompt:
                field = prompt.rsplit("Answer with the digit only. ", 1)[1].split()[0]
                level = str(2 if field.endswith("_Prog") else 0)
                choice = type(choice)(probs={o: 0.9 if o == level else 0.05 for o in options},
                                      logprobs=choice.logprobs, coverage=choice.coverage)
            yield i, choice


def cached_fakes(tmp_path, die_at=None):
    settings = LLMSettings(cache=True, provenance=False, progress=False)
    backends = {r: ResumableFake(r, die_at=die_at if r == "actor" else None,
                                 **({"iedr_level": 1} if r == "judge" else {})) for r in ROLES}
    return backends, {r: make_llm(b, settings, tmp_path / "cache", None) for r, b in backends.items()}


def test_killed_run_finishes_only_the_missing_cases(tmp_path):
    cfg = load_config(config(tmp_path))        # own_001..003, max_turns 8, min_turns 3, K = 1
    # reference: one uninterrupted run (its own cache)
    _, llms = cached_fakes(tmp_path / "ref")
    ref = run_sandbox(load_config(config(tmp_path / "ref")), "base", llms=llms)
    ends = {r["case_id"]: (r["termination"], r["turns"]) for r in ref.rows}
    assert ends["own_001"] == ("SUCCESS", 3) and all(ends[c][1] > 4 for c in ("own_002", "own_003"))

    # killed in turn 5: own_001 ended at turn 3 (its file is written), the other two were still playing
    _, llms = cached_fakes(tmp_path, die_at=5)
    with pytest.raises(Interrupt):
        run_sandbox(cfg, "base", llms=llms)
    out = cfg.run_dir / "sandbox" / "base"
    assert sorted(p.name for p in out.glob("*.json")) == ["own_001_result.json"]
    kept = (out / "own_001_result.json").stat().st_mtime_ns

    # the rerun: own_001 skipped; own_002 and own_003 played again, turns 1-4 answered from the cache
    backends, llms = cached_fakes(tmp_path)
    again = run_sandbox(cfg, "base", llms=llms)
    assert again.skipped == ["own_001"] and sorted(c.scenario.id for c in again.ran) == ["own_002", "own_003"]
    assert (out / "own_001_result.json").stat().st_mtime_ns == kept
    assert backends["judge"].calls["choose"] == ends["own_002"][1] - 4   # no IEDR, no MDEP of turns 1-4 recomputed
    assert backends["actor"].rows["generate"] == 2 * (ends["own_002"][1] - 4)
    assert {r["case_id"]: (r["termination"], r["turns"]) for r in again.rows} == ends
    for cid in ("own_002", "own_003"):                                     # the same dialogue as without the kill
        a, b = (json.loads((d / f"{cid}_result.json").read_text()) for d in (out, ref.out_dir))
        assert a["history"] == b["history"] and a["epj"]["trajectory"] == b["epj"]["trajectory"]


class Retrained(FakeBackend):
    """The tested model after stage 03 retrained its adapter at the same path: same name, same config
    entry, other weights (an hf backend's identity carries the adapter's fingerprint), other replies."""

    def identity(self) -> dict:
        return super().identity() | {"adapter_fingerprint": "retrained"}


def test_a_retrained_model_or_an_edited_scenario_is_played_again(tmp_path, monkeypatch):
    """Issue 18, section 1: the resume check compared names and paths only, so a retrained adapter or an
    edited scenario kept the old dialogues in EPM, NEE and the paper."""
    import shutil

    from echo_lib.paths import project_root

    own = tmp_path / "own"
    own.mkdir()
    for cid in ("own_001", "own_002", "own_003"):
        shutil.copy(project_root() / "data" / "scenarios" / "own" / f"{cid}.yaml", own)
    monkeypatch.setattr("echo_lib.scenarios.cases.own_dir", lambda: own)
    cfg = load_config(config(tmp_path, max_turns=4, min_turns=3))
    settings = LLMSettings(cache=False, provenance=False, progress=False)

    def llms(base):
        return {r: make_llm(FakeBackend(r), settings, tmp_path, None) for r in ROLES if r != "base"} | {
            "base": make_llm(base, settings, tmp_path, None)}

    first = run_sandbox(cfg, "base", llms=llms(FakeBackend("base")))
    assert len(first.ran) == 3
    assert run_sandbox(cfg, "base", llms=llms(FakeBackend("base"))).skipped == ["own_001", "own_002", "own_003"]

    # retrained: every case is played again, and the new replies are in the result files
    again = run_sandbox(cfg, "base", llms=llms(Retrained("base", reply="After retraining: what happened next?")))
    assert again.skipped == [] and len(again.ran) == 3
    history = json.loads((again.out_dir / "own_002_result.json").read_text())["history"]
    assert any("After retraining" in m["content"] for m in history)

    # an edited scenario: only that case is played again
    path = own / "own_002.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("topic: ", "topic: Lately, ", 1), encoding="utf-8")
    edited = run_sandbox(cfg, "base", llms=llms(Retrained("base", reply="After retraining: what happened next?")))
    assert edited.skipped == ["own_001", "own_003"] and [c.scenario.id for c in edited.ran] == ["own_002"]


def test_the_hf_fingerprint_follows_the_adapter_content(tmp_path):
    from echo_lib.llm.hf import fingerprint

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"r": 8}')
    (adapter / "adapter_model.safetensors").write_bytes(b"\x00" * 4096)
    before = fingerprint(adapter)
    (adapter / "adapter_model.safetensors").write_bytes(b"\x00" * 4095 + b"\x01")   # retrained, same size
    assert fingerprint(adapter) != before


def test_the_hf_fingerprint_sees_every_byte_and_the_readout_heads(tmp_path):
    """A weight file retrained in place where only its middle moved (same size, same first and last MiB,
    as a merged LoRA of middle layers can be), and read-out heads re-fitted with the same heads.json,
    both keyed the old results (the fingerprint read a file's first and last MiB, and no .npz)."""
    import os

    from echo_lib.llm.hf import fingerprint

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    weights = bytearray(6 << 20)
    (ckpt / "model.safetensors").write_bytes(weights)
    (ckpt / "heads.json").write_text('{"layer": 20}')
    (ckpt / "heads.npz").write_bytes(b"\x00" * 512)
    before = fingerprint(ckpt)
    weights[3 << 20] = 1
    (ckpt / "model.safetensors").write_bytes(weights)
    os.utime(ckpt / "model.safetensors", ns=(1, 1))        # a new version, whatever the clock's resolution
    middle = fingerprint(ckpt)
    assert middle != before
    (ckpt / "heads.npz").write_bytes(b"\x00" * 511 + b"\x01")
    os.utime(ckpt / "heads.npz", ns=(1, 1))
    assert fingerprint(ckpt) not in (before, middle)


def test_the_code_fingerprint_covers_every_module_a_dialogue_runs_through():
    """The resume check keys results on the text of the code that makes a dialogue: the sandbox's roles
    and loop, and every echo_lib.epm module they import (an edited stop rule was not part of the key)."""
    import ast
    from pathlib import Path

    from echo_lib.sandbox.results import PROMPT_MODULES

    lib = Path(__file__).resolve().parents[1] / "echo_lib"
    todo, seen = [m for m in PROMPT_MODULES if m.startswith("sandbox/")], set()
    while todo:
        module = todo.pop()
        seen.add(module)
        for node in ast.walk(ast.parse((lib / f"{module}.py").read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("echo_lib.epm"):
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                for name in names:
                    path = name.removeprefix("echo_lib.").replace(".", "/")
                    if (lib / f"{path}.py").is_file() and path not in seen:
                        todo.append(path)
    assert seen <= set(PROMPT_MODULES), sorted(seen - set(PROMPT_MODULES))
    assert {"epm/termination", "epm/physics", "epm/mdep"} <= seen


def test_each_stage_counts_only_the_cases_and_models_its_config_names(tmp_path, caplog):
    """Issue 18, section 1: shrink sandbox.case_ids and the dropped cases' files stayed in summary.json
    and in stage 05's tables. Now stage 04's summary is the run's manifest and stage 05 follows it."""
    from echo_lib.epm.scoring import score_folders

    settings = LLMSettings(cache=False, provenance=False, progress=False)
    llms = lambda: {r: make_llm(FakeBackend(r), settings, tmp_path, None) for r in ROLES}   # noqa: E731
    first = run_sandbox(load_config(config(tmp_path, max_turns=4, min_turns=3)), "base", llms=llms())
    assert len(first.rows) == 3
    fewer = config(tmp_path, max_turns=4, min_turns=3)
    fewer["sandbox"]["case_ids"] = ["own_002"]
    rep = run_sandbox(load_config(fewer), "base", llms=llms())
    assert [r["case_id"] for r in rep.rows] == ["own_002"] and rep.skipped == ["own_002"]
    summary = json.loads((rep.out_dir / "summary.json").read_text())
    assert [c["case_id"] for c in summary["cases"]] == ["own_002"] and sum(summary["counts"].values()) == 1
    assert summary["not_counted"] == ["own_001_result.json", "own_003_result.json"]
    assert "not counted: own_001_result.json, own_003_result.json" in caplog.text
    scored = score_folders([rep.out_dir], EPMParams(max_turns=4, min_turns=3))
    assert list(scored.per_case["Case_ID"]) == ["own_002"]
    assert sorted(s.path.name for s in scored.skipped) == ["own_001_result.json", "own_003_result.json"]
    assert all("not in" in s.reason and "summary.json" in s.reason for s in scored.skipped)
    from echo_lib.nee.blinding import Blinder, read_model_transcripts   # stage 06 rates the same cases
    assert [t.case_id for t in read_model_transcripts(rep.out_dir, "base", Blinder(["base"]))] == ["own_002"]

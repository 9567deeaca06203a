"""Issue 38, hostile and malformed inputs to what the model layer stores: read-out heads (two files that
must belong together and fit the model), the call cache (a folder that cannot be written), the provenance
log (a short write, a half line) and the artifact writers (a fault mid-write)."""
from __future__ import annotations

import errno
import json
import logging
import os
import shutil

import numpy as np
import pytest

from echo_lib.config import load_config
from echo_lib.llm import LLMError, LLMSettings, Sampling, make_llm
from echo_lib.models import load_llm
from echo_lib.llm.readout import ReadoutHeads, fit_heads
from echo_lib.llm.types import Usage
from test_llm_cache import FakeBackend, chats

SETTINGS = LLMSettings(progress=False)


# ---- read-out heads ---------------------------------------------------------------------------------

def toy_heads(seed: int = 0, hidden: int = 6) -> ReadoutHeads:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(60, hidden))
    level = np.where(x[:, 0] > 0.3, "2", np.where(x[:, 0] < -0.3, "0", "1"))
    ab = np.where(x[:, 1] > 0, "A", "B")
    return fit_heads(np.vstack([x, x]), ["level:"] * 60 + ["better:"] * 60, list(level) + list(ab), layer=1, C=10.0)


def test_a_kill_between_the_two_head_files_is_refused_naming_the_folder(tmp_path):
    """heads.npz of one fit beside heads.json of another (same questions and shapes: nothing else tells them
    apart) answered each question with the other fit's head; now the load names the folder and the fix."""
    toy_heads(0).save(tmp_path / "old")
    toy_heads(1).save(tmp_path / "new")
    shutil.copy(tmp_path / "new" / "heads.npz", tmp_path / "old" / "heads.npz")   # killed before heads.json
    with pytest.raises(LLMError, match=rf"{tmp_path / 'old'}.*do not belong together.*rule judges"):
        ReadoutHeads.load(tmp_path / "old")


def test_a_save_that_fails_midway_leaves_the_previous_heads(tmp_path, monkeypatch):
    old = toy_heads(0)
    old.save(tmp_path / "h")
    x = np.random.default_rng(5).normal(size=(4, 6))

    def half_then_full(file, **arrays):   # a full disk: part of the archive written, then ENOSPC
        f = open(file, "wb") if isinstance(file, (str, os.PathLike)) else file
        f.write(b"PK\x03\x04 half an archive")
        f.flush()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", half_then_full)
    with pytest.raises(OSError):
        toy_heads(1).save(tmp_path / "h")
    monkeypatch.undo()
    back = ReadoutHeads.load(tmp_path / "h")
    assert np.allclose(back.heads["level:"].probs(x), old.heads["level:"].probs(x))
    assert sorted(p.name for p in (tmp_path / "h").iterdir()) == ["heads.json", "heads.npz"]


def test_heads_of_another_hidden_size_or_depth_are_refused(tmp_path):
    toy_heads(hidden=6).save(tmp_path / "h")
    with pytest.raises(LLMError, match=rf"{tmp_path / 'h'}.*hidden size 6.*model's is 32.*rule judges"):
        ReadoutHeads.load(tmp_path / "h", hidden_size=32)
    with pytest.raises(LLMError, match=rf"{tmp_path / 'h'}.*layer 1.*model has 0"):
        ReadoutHeads.load(tmp_path / "h", hidden_size=6, n_layers=0)
    assert ReadoutHeads.load(tmp_path / "h", hidden_size=6, n_layers=2).layer == 1


def test_heads_with_nan_values_or_a_reordered_class_list_are_refused(tmp_path):
    heads = toy_heads()
    h = heads.heads["level:"]
    bad = type(h)(h.classes, h.mean, h.scale, np.full_like(h.coef, np.nan), h.intercept, h.n_train)
    ReadoutHeads(1, {"level:": bad}).save(tmp_path / "nan")
    with pytest.raises(LLMError, match=rf"{tmp_path / 'nan'}.*'level:'.*coef.*not finite"):
        ReadoutHeads.load(tmp_path / "nan")
    heads.save(tmp_path / "order")                 # the class list edited: the rows score other classes
    meta = json.loads((tmp_path / "order" / "heads.json").read_text())
    meta["questions"][1]["classes"].reverse()
    (tmp_path / "order" / "heads.json").write_text(json.dumps(meta))
    with pytest.raises(LLMError, match=rf"{tmp_path / 'order'}.*'level:'.*classes \['2', '1', '0'\]"):
        ReadoutHeads.load(tmp_path / "order")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "heads.json").write_text("{half")
    (tmp_path / "junk" / "heads.npz").write_bytes(b"not a zip")
    with pytest.raises(LLMError, match=rf"{tmp_path / 'junk'}.*heads.json.*rule judges"):
        ReadoutHeads.load(tmp_path / "junk")


def judge_of(tmp_path, tiny_lm_dir, heads_dir):
    return load_llm(load_config({"results_dir": str(tmp_path / "results"), "llm": {"progress": False, "cache": False},
                                 "models": {"base": {"backend": "hf", "source": "local", "id": str(tiny_lm_dir),
                                                     "readout": str(heads_dir)}}}), "base")


ASK = [[{"role": "system", "content": "You rate a reply."}, {"role": "user", "content": "Companion: hello.\nlevel:"}]]


def test_hf_choose_with_heads_of_another_model_or_nan_states_raises(tmp_path, tiny_lm_dir, monkeypatch):
    """The tiny model is 32 wide: 6-wide heads were a numpy broadcast error; NaN states gave NaN probabilities."""
    toy_heads(hidden=6).save(tmp_path / "h6")
    with pytest.raises(LLMError, match=rf"{tmp_path / 'h6'}.*hidden size 6.*model's is 32"):
        judge_of(tmp_path, tiny_lm_dir, tmp_path / "h6").choose(ASK, ["0", "1", "2"])
    toy_heads(hidden=32).save(tmp_path / "h32")
    judge = judge_of(tmp_path, tiny_lm_dir, tmp_path / "h32")
    assert judge.choose(ASK, ["0", "1", "2"])[0].coverage == 1.0
    monkeypatch.setattr(type(judge.backend), "last_states",
                        lambda self, chats, layer, usage=None: np.full((len(chats), 32), np.nan, np.float32))
    with pytest.raises(LLMError, match=rf"not finite.*'level:'.*{tmp_path / 'h32'}"):
        judge.choose(ASK, ["0", "1", "2"])
    with pytest.raises(LLMError, match=rf"{tmp_path / 'h32'}.*'level:'.*\['0', '1', '2'\].*\['1', '2', '3'\]"):
        judge.choose(ASK, ["1", "2", "3"])    # a head whose classes choose does not ask for: not the LM head


# ---- the call cache ----------------------------------------------------------------------------------

def test_a_cache_that_cannot_be_written_warns_once_and_keeps_the_answers(tmp_path, monkeypatch, caplog):
    """A full disk (ENOSPC mid-write) or a file where the cache folder belongs (tests run as root, so a
    read-only folder would not stop them) made a successful call fail and lost the batch's answers."""
    from echo_lib.llm import cache as cache_mod
    blocked = tmp_path / "cache"
    blocked.write_text("a file, not a folder")
    llm = make_llm(FakeBackend(), SETTINGS, blocked, None)
    with caplog.at_level(logging.WARNING):
        got = llm.generate(chats(5), Sampling())
    assert got == make_llm(FakeBackend(), LLMSettings(progress=False, cache=False), tmp_path / "off", None
                           ).generate(chats(5), Sampling())
    warned = [r.getMessage() for r in caplog.records if "call cache" in r.getMessage()]
    assert len(warned) == 1 and str(blocked) in warned[0] and "llm.cache_dir" in warned[0]

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(cache_mod.tempfile, "mkstemp", full)
    llm = make_llm(FakeBackend(), SETTINGS, tmp_path / "full", None)
    assert len(llm.generate(chats(3), Sampling())) == 3
    assert len(llm.choose(chats(3), ["a", "b"])) == 3


def test_a_read_only_cache_entry_is_recomputed_not_fatal(tmp_path, monkeypatch):
    """An entry of the wrong shape in a cache the run may not change (another user's shared cache): its
    removal failed with PermissionError and stopped the call."""
    llm = make_llm(FakeBackend(), SETTINGS, tmp_path, None)
    llm.generate(chats(2), Sampling())
    entry = sorted(tmp_path.rglob("*.json"))[0]
    entry.write_text(json.dumps({"key": entry.stem, "result": {"txt": "wrong field"}}))

    real = type(entry).unlink

    def denied(self, missing_ok=False):
        if self == entry:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real(self, missing_ok=missing_ok)
    monkeypatch.setattr(type(entry), "unlink", denied)
    again = make_llm(FakeBackend(), SETTINGS, tmp_path, None)
    assert len(again.generate(chats(2), Sampling())) == 2 and again.model_calls == 1


# ---- the provenance log --------------------------------------------------------------------------------

def test_a_short_provenance_write_is_reported_and_the_next_record_starts_its_own_line(tmp_path, monkeypatch, caplog):
    from echo_lib.llm import provenance as prov_mod
    from echo_lib.llm.provenance import ProvenanceLog
    path = tmp_path / "llm_provenance.jsonl"
    log = ProvenanceLog(path)
    log.record(op="first", model={}, settings={}, usage=Usage(), seconds=0.1)
    real = prov_mod.os.write
    state = {"n": 0}

    def short(fd, data):   # the disk fills: half the line goes, then nothing
        state["n"] += 1
        if state["n"] == 1:
            return real(fd, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(prov_mod.os, "write", short)
    with pytest.raises(LLMError, match=rf"{path}.*No space left"):
        log.record(op="second", model={}, settings={}, usage=Usage(), seconds=0.1)
    monkeypatch.setattr(prov_mod.os, "write", real)
    log.record(op="third", model={}, settings={}, usage=Usage(), seconds=0.1)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["op"] == "first" and json.loads(lines[-1])["op"] == "third"
    from echo_lib.llm.provenance import read_records
    with caplog.at_level(logging.WARNING):
        assert [r["op"] for r in read_records(path)] == ["first", "third"]
    assert f"{path}, line 2" in caplog.text


def test_a_half_line_left_by_a_killed_writer_is_not_joined(tmp_path, caplog):
    from echo_lib.llm.provenance import ProvenanceLog
    path = tmp_path / "llm_provenance.jsonl"
    path.write_text('{"op": "done"}\n{"op": "killed", "mod')
    ProvenanceLog(path).record(op="next", model={}, settings={}, usage=Usage(), seconds=0.1)
    assert json.loads(path.read_text().splitlines()[-1])["op"] == "next"
    from echo_lib.llm.provenance import read_records
    with caplog.at_level(logging.WARNING):
        assert [r["op"] for r in read_records(path)] == ["done", "next"]
    assert f"{path}, line 2" in caplog.text and "skipped" in caplog.text


# ---- artifact writers ---------------------------------------------------------------------------------

def test_an_artifact_write_that_fails_keeps_the_old_file_and_no_temp(tmp_path, monkeypatch):
    """echo_lib.provenance's writers were already atomic (temp file + os.replace); this pins it down, and
    that the data reach the disk before the rename (fsync), so a crash cannot leave an empty file."""
    from echo_lib import provenance as p
    p.write_json(tmp_path / "r.json", {"v": 1})
    synced = []
    monkeypatch.setattr(p.os, "fsync", lambda fd: synced.append(fd))
    p.write_json(tmp_path / "r.json", {"v": 2})
    assert synced and json.loads((tmp_path / "r.json").read_text()) == {"v": 2}

    def crash(src, dst):
        raise OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr(p.os, "replace", crash)
    with pytest.raises(OSError):
        p.write_text(tmp_path / "r.json", "{half")
    assert json.loads((tmp_path / "r.json").read_text()) == {"v": 2}
    assert os.listdir(tmp_path) == ["r.json"]


def test_lm_head_choose_with_nan_log_probabilities_is_an_error(tmp_path, tiny_lm_dir, monkeypatch):
    """The LM-head path of hf choose (no read-out heads): NaN option scores raise instead of NaN probabilities."""
    import torch

    from echo_lib.config import load_config
    from echo_lib.llm import LLMError
    from echo_lib.models import load_llm
    from echo_lib.llm.hf import HFBackend
    cfg = load_config({"results_dir": str(tmp_path / "r"), "llm": {"progress": False, "cache": False},
                       "models": {"base": {"backend": "hf", "source": "local", "id": str(tiny_lm_dir)}}})
    llm = load_llm(cfg, "base")
    monkeypatch.setattr(HFBackend, "_score_options", lambda self, prompts, opt_ids: torch.full((len(prompts), 2), float("nan")))
    with pytest.raises(LLMError, match="log-probabilities not finite"):
        llm.choose([[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]], ["yes", "no"])

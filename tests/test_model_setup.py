"""Stage 00's resolution of every model kind, without downloads (tiny random model, dry runs)."""
from pathlib import Path

import pytest
import yaml

from echo_lib.config import ConfigError, load_config
from echo_lib.model_setup import prepare_models, resolve_model, smoke_chat_reply

ROOT = Path(__file__).resolve().parents[1]


def local_config(model_dir, **extra):
    extra.setdefault("results_dir", str(Path(model_dir).parent / "results"))
    return load_config({"models": {"tiny": {"backend": "hf", "source": "local", "id": str(model_dir)}},
                        "roles": {k: "tiny" for k in ("policy", "reward_model", "actor", "director", "judge")}
                        | {"nee_judges": ["tiny"]},
                        "smoke_chat": {"model": "tiny", "max_new_tokens": 8}, "sandbox": {"models": ["tiny"]},
                        **extra})


def test_local_model_is_found(tiny_lm_dir):
    cfg = local_config(tiny_lm_dir)
    assert prepare_models(cfg)["tiny"]["status"] == "found"


def test_local_model_missing_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="'models.tiny.id' has value .*nowhere.*does not exist"):
        local_config(tmp_path / "nowhere")          # found at load time
    (tmp_path / "gone").mkdir()
    cfg = local_config(tmp_path / "gone")
    (tmp_path / "gone").rmdir()                     # removed after the load: stage 00 still says so
    with pytest.raises(FileNotFoundError, match="models.tiny.id"):
        resolve_model(cfg, cfg.models["tiny"])


def test_paper_dry_run_downloads_nothing(monkeypatch):
    import huggingface_hub
    monkeypatch.setattr(huggingface_hub, "snapshot_download",
                        lambda *a, **k: pytest.fail("a dry run must not download"))
    manifest = prepare_models(load_config(ROOT / "config/paper.yaml"), dry_run=True)
    assert manifest["qwen3-32b"]["status"] == "planned"
    assert manifest["gemini-2.5-pro"]["status"] == "endpoint"


def test_server_model_needs_its_key_variable_and_never_records_it(monkeypatch):
    cfg = load_config(ROOT / "config/paper.yaml")
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    with pytest.raises(EnvironmentError, match=r"\$GEMINI_API_KEY"):
        resolve_model(cfg, cfg.models["gemini-2.5-pro"])
    monkeypatch.setenv("GEMINI_API_KEY", "sk-secret-value")
    record = resolve_model(cfg, cfg.models["gemini-2.5-pro"])
    assert "sk-secret-value" not in yaml.safe_dump(record.__dict__)


def test_smoke_reply_is_seeded(tiny_lm_dir, tmp_path):
    """Two runs with separate call caches sample the same reply (so the second is recomputed, not
    replayed); another seed samples another one."""
    first = smoke_chat_reply(local_config(tiny_lm_dir, results_dir=str(tmp_path / "a")))
    again = smoke_chat_reply(local_config(tiny_lm_dir, results_dir=str(tmp_path / "b")))
    other = smoke_chat_reply(local_config(tiny_lm_dir, results_dir=str(tmp_path / "c"), seed=1))
    assert first and first == again
    assert other != first

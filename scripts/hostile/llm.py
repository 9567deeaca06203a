"""Issue 38 probes of the model layer's openai backend, one hostile input per class, each against a local
stub server (tests/openai_stub.py) started inside the probe:

- credentials_in_base_url: a config whose base_url holds user:password@ must stop the load, naming the key
  and where the key goes instead, without showing the password;
- retrained_served_model: the server's /v1/models reports another `created` for the same model name (it was
  retrained and served again); the next call must go to the server, not replay the call cache;
- malformed_reply: the server answers HTTP 200 with an HTML login page; the call must fail with an error
  naming the model, the server and the fix (no raw AttributeError / JSONDecodeError).
"""
from __future__ import annotations

import sys
from pathlib import Path

CHAT = [{"role": "system", "content": "You are kind."}, {"role": "user", "content": "hi"}]


def _stub(work: Path):
    sys.path.insert(0, str(work / "tests"))
    import openai_stub
    return openai_stub


def _config(work: Path, base_url: str, name: str):
    from echo_lib.config import load_config
    return load_config({"results_dir": str(work / "probe_llm" / name), "llm": {"progress": False, "max_retries": 0},
                        "models": {"base": {"backend": "openai", "source": "server", "id": "served-1",
                                            "base_url": base_url, "api_key_env": None}}})


def credentials_in_base_url(work: Path) -> tuple[bool, str]:
    from echo_lib.config import ConfigError
    secret = "Pr0beS3cretPass"
    stub = _stub(work)
    with stub.Stub(lambda body, headers: (200, stub.completion("hello"))) as server:
        url = server.base_url.replace("http://", f"http://probe:{secret}@")
        try:
            _config(work, url, "credentials")
        except ConfigError as err:
            message = str(err)
            ok = secret not in message and "'models.base.base_url'" in message and "api_key_env" in message
            return ok and not server.requests, message
    return False, f"loaded: the password in base_url would reach cache keys, result files and logs ({len(server.requests)} requests)"


def retrained_served_model(work: Path) -> tuple[bool, str]:
    from echo_lib.llm import Sampling
    from echo_lib.models import load_llm
    stub = _stub(work)
    listed = [{"id": "served-1", "object": "model", "created": 1_700_000_000, "owned_by": "lab"}]
    with stub.Stub(lambda body, headers: (200, stub.completion(f"reply of the model created {listed[0]['created']}")),
                   models=lambda: listed) as server:
        old, = load_llm(_config(work, server.base_url, "served"), "base").generate([CHAT], Sampling(max_new_tokens=4))
        listed[0] = {**listed[0], "created": 1_800_000_000}   # retrained, served again under the same name
        new, = load_llm(_config(work, server.base_url, "served"), "base").generate([CHAT], Sampling(max_new_tokens=4))
    if len(server.requests) < 2:
        return False, f"the call cache replayed the old model's reply {old.text!r} after the server reported a new model"
    return new.text != old.text, f"asked again after /v1/models changed (created 1700000000 -> 1800000000): {new.text!r}"


def malformed_reply(work: Path) -> tuple[bool, str]:
    from echo_lib.llm import LLMError, Sampling
    from echo_lib.models import load_llm
    stub = _stub(work)
    page = stub.Raw(b"<!DOCTYPE html><html><body><h1>Sign in</h1>Your session expired.</body></html>")
    with stub.Stub(lambda body, headers: (200, page)) as server:
        try:
            out = load_llm(_config(work, server.base_url, "malformed"), "base").generate([CHAT], Sampling(max_new_tokens=4))
        except LLMError as err:
            message = str(err)
            return "'base'" in message and server.base_url in message and "base_url" in message, message
        except Exception as err:   # noqa: BLE001 (what the probe is about)
            return False, f"raw {type(err).__name__}: {err}"
    return False, f"accepted an HTML page as a reply: {out!r}"


PROBES = [("credentials_in_base_url", credentials_in_base_url), ("retrained_served_model", retrained_served_model),
          ("malformed_reply", malformed_reply)]

"""The GPU smoke test (echo_lib.smoke, scripts/gpu_smoke.sh) checked on the CPU: the paths that run without a
GPU run on a 64-wide random Llama (`--device cpu --model-dir`), the vLLM paths say why they are skipped, a
failing path is reported FAILED while the others still run, and the vllm_server path's plumbing (command
line, waiting for /v1/models, one completion through the openai backend, stopping the server) runs against
a fake `vllm serve` that answers as vLLM's OpenAI server does. About 40 s on 2 cores."""
from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest

from tiny_lm import build_tiny_lm

pytest.importorskip("bitsandbytes", reason="the QLoRA paths need bitsandbytes (make setup installs it)")

VLLM_INSTALLED = importlib.util.find_spec("vllm") is not None


@pytest.fixture(scope="module")
def lm64(tmp_path_factory):
    return build_tiny_lm(tmp_path_factory.mktemp("lm64"), hidden_size=64)   # bitsandbytes' CPU 4-bit: >= 64 wide


def results(out) -> dict[str, dict]:
    return {r["path"]: r for r in json.loads((out / "smoke.json").read_text())["results"]}


def test_the_cpu_paths_run_and_the_vllm_paths_say_why_they_are_skipped(lm64, tmp_path, capsys):
    from echo_lib import smoke
    rc = smoke.main(["--out", str(tmp_path), "--device", "cpu", "--model-dir", str(lm64)])
    by_path = results(tmp_path)
    assert list(by_path) == list(smoke.PATHS)
    assert {p: r["status"] for p, r in by_path.items()} == {
        "qlora_rm": "ok", "qlora_policy": "ok", "bf16_policy": "ok", "vllm_server": "skipped",
        "vllm_rollouts": "skipped"}, {p: r["reason"] for p, r in by_path.items()}
    assert rc == 0
    assert by_path["qlora_rm"]["figures"]["steps"] == "sft 1 + grpo 1 per RM"
    assert by_path["qlora_rm"]["figures"]["base"].startswith("4-bit nf4")
    assert by_path["qlora_policy"]["figures"]["base"] == "4-bit nf4 on cpu"
    assert by_path["qlora_policy"]["figures"]["reward models"] == "qlora_rm's"   # stage 02's adapters, reused
    assert by_path["bf16_policy"]["figures"]["base"] == "bfloat16 on cpu"
    assert by_path["bf16_policy"]["figures"]["trainer bf16"] is True
    for path in ("qlora_policy", "bf16_policy"):
        assert by_path[path]["figures"]["steps"] == 1 and isinstance(by_path[path]["figures"]["reward"], float)
    why = "vllm is not installed" if not VLLM_INSTALLED else "vLLM runs on GPUs only"
    for path in ("vllm_server", "vllm_rollouts"):
        assert by_path[path]["reason"].startswith(f"skipped: {why}")
    lines = [line for line in capsys.readouterr().out.splitlines() if line.split()[:1] in ([p] for p in smoke.PATHS)]
    assert [line.split()[:2] for line in lines] == [[p, by_path[p]["status"]] for p in smoke.PATHS]   # one line each


def test_a_failing_path_is_reported_and_the_others_still_run(lm64, tmp_path, monkeypatch, capsys):
    from echo_lib import smoke
    from echo_lib.rewards import stage

    def broken(cfg, kind, shuffled=False):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(stage, "train", broken)
    rc = smoke.main(["--out", str(tmp_path), "--device", "cpu", "--model-dir", str(lm64),
                     "--only", "bf16_policy,qlora_rm"])
    by_path = results(tmp_path)
    assert list(by_path) == ["qlora_rm", "bf16_policy"]      # PATHS' order, whatever --only's
    assert by_path["qlora_rm"]["status"] == "FAILED" and "illegal memory access" in by_path["qlora_rm"]["reason"]
    assert "broken" in (tmp_path / "qlora_rm" / "error.txt").read_text()      # the traceback is kept
    assert by_path["bf16_policy"]["status"] == "ok"
    assert by_path["bf16_policy"]["figures"]["reward models"] == "untrained (qlora_rm did not run)"
    assert rc == 1
    assert "qlora_rm       FAILED" in capsys.readouterr().out


FAKE_VLLM = r'''
"""`vllm serve MODEL --port P --api-key K ... --lora-modules NAME=PATH`: answers /v1/models and chat completions
as vLLM's OpenAI server does, after a second of "loading"; records its argv and pid."""
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

args = sys.argv[1:]
assert args[0] == "serve", args
opt = lambda name: args[args.index(name) + 1]
port, key = int(opt("--port")), opt("--api-key")
rest = args[args.index("--lora-modules") + 1:]
adapters = [m.split("=", 1)[0] for m in rest[:next((i for i, a in enumerate(rest) if a.startswith("--")), len(rest))]]
with open(os.environ["FAKE_VLLM_RECORD"], "w") as fh:
    json.dump({"argv": args, "pid": os.getpid()}, fh)
time.sleep(1)


class Handler(BaseHTTPRequestHandler):
    def send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorised(self):
        if self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self.send(401, {"error": "Unauthorized"})

    def do_GET(self):
        if self.authorised():
            self.send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in [args[1], *adapters]]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not self.authorised():
            return
        if body["model"] not in adapters:
            return self.send(404, {"error": {"message": f"The model `{body['model']}` does not exist."}})
        self.send(200, {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": "That sounds really hard."}}],
                        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}})

    def log_message(self, *a):
        pass


ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
'''


def test_the_vllm_server_path_serves_the_adapter_answers_and_stops(lm64, tmp_path, monkeypatch):
    from echo_lib import smoke
    fake = tmp_path / "fake_vllm.py"
    fake.write_text(FAKE_VLLM)
    record = tmp_path / "fake_vllm.json"
    monkeypatch.setenv("FAKE_VLLM_RECORD", str(record))
    monkeypatch.setattr(smoke, "vllm_unavailable", lambda device: None)
    monkeypatch.setattr(smoke, "vllm_command", lambda: [sys.executable, str(fake)])
    rc = smoke.main(["--out", str(tmp_path / "out"), "--device", "cpu", "--model-dir", str(lm64),
                     "--only", "vllm_server"])
    result = results(tmp_path / "out")["vllm_server"]
    assert rc == 0, result["reason"]
    assert result["figures"]["reply"] == '"That sounds really hard."'        # through the openai backend
    assert result["figures"]["adapter"] == "untrained (no policy path ran)"
    assert result["figures"]["served"] == f"{lm64}, echo"
    seen = json.loads(record.read_text())
    argv = seen["argv"]
    assert "--enable-lora" in argv and argv[argv.index("--max-lora-rank") + 1] == "8"   # policy.lora.r 8
    module = argv[argv.index("--lora-modules") + 1]
    assert module.startswith("echo=") and os.path.exists(f"{module[5:]}/adapter_config.json")
    with pytest.raises(ProcessLookupError):        # stopped (and reaped)
        os.kill(seen["pid"], 0)
    assert smoke.API_KEY_ENV not in os.environ     # the random key is not left behind


def test_only_names_known_paths():
    from echo_lib import smoke
    with pytest.raises(SystemExit):
        smoke.parse_args(["--out", "x", "--only", "qlora_rm,sft_everything"])
    assert smoke.parse_args(["--out", "x", "--only", " vllm_server , qlora_rm"]).only == ["vllm_server", "qlora_rm"]
    line = smoke.PathResult("qlora_rm", "FAILED", 3.31, reason="RuntimeError: boom\nmore").line()
    assert line == "qlora_rm       FAILED       3.3 s  RuntimeError: boom"

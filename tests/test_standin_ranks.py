"""Multi-process stand-ins of stage 03 (`policy.launcher: accelerate`), run as notebook 03 runs them:
stage.train writes the run config, starts `accelerate launch ... -m echo_lib.policy.launch` and reads
the outputs back.

    two ranks   torchrun over gloo (config/accelerate/cpu_two_ranks.yaml);
    ZeRO-3      the project's ds_zero3.json on DeepSpeed's CPU accelerator over two ranks
                (config/accelerate/cpu_zero3.yaml), with LoRA r 32 and with full fine-tuning in bf16.

Each launch costs about a minute on 2 cores (two processes import torch, TRL and DeepSpeed)."""
from __future__ import annotations

import json
import re

import pytest

from standin import KINDS, ROOT, build_lm64, cpu_launch_env, standin_config, write_stage01_data

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lm64(tmp_path_factory):
    return build_lm64(tmp_path_factory.mktemp("lm64"))


def launched_run(tmp_path, lm_dir, monkeypatch, accelerate: str, *, model=None, policy=None):
    """Stage 02 in this process, then stage 03's training under `accelerate launch`."""
    from echo_lib.policy import stage
    from echo_lib.rewards import stage as rm_stage
    for key, value in cpu_launch_env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(ROOT)     # the accelerate configs name ds_zero3.json relative to the project
    cfg = standin_config(tmp_path / "results", lm_dir, model=model,
                         policy={"launcher": "accelerate", "accelerate_config": f"config/accelerate/{accelerate}",
                                 **(policy or {})})
    write_stage01_data(cfg.run_dir)
    for kind in KINDS:
        rm_stage.train_on(cfg, kind, rm_stage.items(cfg, kind, "train", 4), rm_stage.rm_paths(cfg, kind).dir, steps=1)
    prompts, _, _ = stage.rl_data(cfg, "echo")
    return cfg, stage.train(cfg, "echo", prompts)


def launch_lines(out: str) -> list[str]:
    return re.findall(r"\d+ steps in .*", out)


def test_two_ranks_train_and_the_stage_reads_the_run_back(tmp_path, lm64, monkeypatch, capfd):
    from echo_lib.finetune import check_saved
    cfg, result = launched_run(tmp_path, lm64, monkeypatch, "cpu_two_ranks.yaml")
    lines = launch_lines(capfd.readouterr().out)
    assert len(lines) == 2, f"expected one line per rank, got {lines}"   # two processes really ran
    assert result.steps == 1 and result.rows[0]["reward"] is not None     # the rewards of both ranks' rollouts
    assert check_saved(result.adapter_dir)


def test_zero3_shards_at_load_and_saves_a_whole_lora_adapter(tmp_path, lm64, monkeypatch, capfd):
    from safetensors.torch import load_file
    cfg, result = launched_run(tmp_path, lm64, monkeypatch, "cpu_zero3.yaml",
                               policy={"lora": {"r": 32, "alpha": 64}})
    lines = launch_lines(capfd.readouterr().out)
    assert lines and all("sharded by ZeRO-3 at load: True" in line for line in lines), lines
    weights = load_file(f"{result.adapter_dir}/adapter_model.safetensors")
    assert weights and all(t.numel() > 0 for t in weights.values())
    assert max(t.shape[0] for name, t in weights.items() if "lora_A" in name) == 32
    assert result.rows[0]["reward"] is not None          # the reward models loaded whole inside ZeRO-3


def test_zero3_full_fine_tuning_saves_a_bf16_model_the_sandbox_loads(tmp_path, lm64, monkeypatch):
    from safetensors.torch import load_file

    from echo_lib.llm import Sampling

    from echo_lib.models import load_llm
    cfg, result = launched_run(tmp_path, lm64, monkeypatch, "cpu_zero3.yaml", model={"dtype": "bfloat16"},
                               policy={"finetune": "full", "grpo": {"steps": 1, "num_generations": 2,
                                       "prompts_per_step": 1, "max_completion_length": 8, "max_prompt_length": 256,
                                       "learning_rate": 1e-6}})
    assert result.adapter_dir.endswith("/model")
    weights = load_file(f"{result.adapter_dir}/model.safetensors")
    assert all(t.numel() > 0 for t in weights.values())
    assert {str(t.dtype) for t in weights.values()} == {"torch.bfloat16"}   # bf16 as the model spec says
    assert json.loads((cfg.run_dir / "policy" / "echo" / "model" / "config.json").read_text())["num_hidden_layers"] == 2
    echo = load_llm(cfg, "echo")       # the variant is the whole saved model now, no adapter
    assert cfg.models["echo"].adapter is None and cfg.models["echo"].id == result.adapter_dir
    [reply] = echo.generate([[{"role": "system", "content": "Be kind."}, {"role": "user", "content": "hi"}]], Sampling(temperature=0, max_new_tokens=4))
    assert isinstance(reply.text, str)

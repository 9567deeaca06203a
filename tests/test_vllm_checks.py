"""vLLM rollouts of stage 03 (echo_lib.policy.vllm, issue 34): the GRPOConfig arguments TRL 1.16 takes,
and the combinations refused at config load and at stage 03's load, each naming the keys and the fix."""
import dataclasses
import importlib.util
from pathlib import Path

import pytest
import yaml

from echo_lib.config import ConfigError, load_config
from echo_lib.policy.params import PolicyGRPO
from echo_lib.policy.vllm import (VLLMConfigError, check_vllm, config_problems, serve_command, vllm_args,
                                  vllm_problems)

ROOT = Path(__file__).resolve().parents[1]
ZERO3 = "config/accelerate/zero3_multinode.yaml"


def spec(**kw):
    return {"name": "qwen", "backend": "hf", "device": "auto", "load_in_4bit": False, **kw}


def paper() -> dict:
    return yaml.safe_load((ROOT / "config/paper.yaml").read_text())


def paper_with(grpo=None, policy=None, model=None, gpu=None) -> dict:
    raw = paper()
    base = raw["roles"]["policy"]
    raw["models"][base] |= model or {}
    raw["policy"] |= policy or {}
    raw["policy"]["grpo"] |= grpo or {}
    if gpu is not None:
        raw["resources"]["policy"]["gpu"] = gpu
    return raw


BF16_ZERO3 = {"policy": {"launcher": "accelerate", "accelerate_config": ZERO3},
              "model": {"load_in_4bit": False}, "gpu": 8}


def test_vllm_args_are_grpo_config_fields_of_trl():
    from trl import GRPOConfig
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    assert vllm_args(PolicyGRPO()) == {}                              # off: TRL's defaults untouched
    colocate = vllm_args(PolicyGRPO(use_vllm=True, vllm_tensor_parallel_size=2, max_prompt_length=4096,
                                    max_completion_length=1024))
    assert colocate == {"use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.3,
                        "vllm_tensor_parallel_size": 2, "vllm_max_model_length": 5120}
    server = vllm_args(PolicyGRPO(use_vllm=True, vllm_mode="server", vllm_server_host="node7", vllm_server_port=8100))
    assert server == {"use_vllm": True, "vllm_mode": "server", "vllm_server_host": "node7", "vllm_server_port": 8100}
    assert set(colocate) | set(server) <= fields
    args = GRPOConfig(output_dir="/tmp/unused", use_cpu=True, report_to="none", **colocate)   # TRL accepts them
    assert args.vllm_max_model_length == 5120 and args.vllm_tensor_parallel_size == 2
    # the config's dict works as well as the dataclass (the loader's hook sees dicts)
    assert vllm_args(dataclasses.asdict(PolicyGRPO(use_vllm=True, vllm_max_model_length=8192,
                                                   vllm_gpu_memory_utilization=0.5))) == {
        "use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.5,
        "vllm_tensor_parallel_size": 1, "vllm_max_model_length": 8192}


def test_server_mode_has_its_command_line():
    cmd = serve_command(PolicyGRPO(use_vllm=True, vllm_mode="server", vllm_tensor_parallel_size=4,
                                   vllm_server_port=8100), "Qwen/Qwen3-32B")
    assert cmd[:4] == ["trl", "vllm-serve", "--model", "Qwen/Qwen3-32B"]
    opts = dict(zip(cmd[4::2], cmd[5::2]))
    assert opts == {"--tensor_parallel_size": "4", "--gpu_memory_utilization": "0.9",
                    "--max_model_len": str(384 + 48), "--port": "8100"}


def test_4bit_policy_with_vllm_is_refused_naming_the_keys():
    grpo = PolicyGRPO(use_vllm=True)
    with pytest.raises(VLLMConfigError) as err:
        check_vllm(grpo, spec(load_in_4bit=True), "inprocess", require_installed=False)
    msg = str(err.value)
    assert "policy.grpo.use_vllm" in msg and "models.qwen.load_in_4bit" in msg and "trl#3654" in msg
    assert "use_vllm: false" in msg                               # the fix
    for mode in ("colocate", "server"):                           # both modes push the same packed weights
        assert vllm_problems(PolicyGRPO(use_vllm=True, vllm_mode=mode), spec(load_in_4bit=True))
    assert vllm_problems(PolicyGRPO(use_vllm=False), spec(load_in_4bit=True)) == []   # QLoRA with HF generation


def test_other_combinations_that_cannot_work():
    on = PolicyGRPO(use_vllm=True)
    cpu = vllm_problems(on, spec(device="cpu"))
    assert len(cpu) == 1 and "models.qwen.device" in cpu[0] and "GPUs only" in cpu[0]
    # colocate: the tensor-parallel size divides the training processes (1 in process, 8 in zero3_multinode.yaml)
    tp2 = dataclasses.replace(on, vllm_tensor_parallel_size=2)
    [inproc] = vllm_problems(tp2, spec(), "inprocess")
    assert "vllm_tensor_parallel_size' is 2" in inproc and "one process" in inproc
    assert vllm_problems(tp2, spec(), "accelerate", ZERO3) == []
    [three] = vllm_problems(dataclasses.replace(on, vllm_tensor_parallel_size=3), spec(), "accelerate", ZERO3)
    assert "starts 8 training processes" in three and "divisor of 8" in three
    assert vllm_problems(dataclasses.replace(tp2, vllm_mode="server"), spec(), "inprocess") == []   # its own GPUs
    # the policy section stands for the launcher too
    policy = type("P", (), {"launcher": "accelerate", "accelerate_config": ZERO3})()
    check_vllm(tp2, spec(), policy, require_installed=False)
    # a context shorter than prompt + reply
    [short] = vllm_problems(dataclasses.replace(on, vllm_max_model_length=400), spec())
    assert "vllm_max_model_length' is 400" in short and str(384 + 48) in short


def test_missing_vllm_is_an_import_error_with_the_install_line():
    check_vllm(PolicyGRPO(), spec(device="cpu"))                  # off: nothing is needed
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    with pytest.raises(ImportError, match=r"pip install -e '\.\[gpu\]'"):
        check_vllm(PolicyGRPO(use_vllm=True), spec())
    check_vllm(PolicyGRPO(use_vllm=True), spec(), require_installed=False)


def test_the_paper_config_is_a_supported_combination():
    cfg = load_config(ROOT / "config/paper.yaml")
    policy = cfg.models[cfg.roles.policy]
    assert policy.load_in_4bit and not cfg.policy.grpo.use_vllm     # QLoRA with HF generation
    check_vllm(cfg.policy.grpo, policy, cfg.policy)
    assert cfg.policy.grpo.vllm_max_model_length is None and cfg.policy.grpo.vllm_tensor_parallel_size == 8


def test_the_loader_refuses_vllm_with_the_4bit_paper_policy_early():
    with pytest.raises(ConfigError, match=r"policy\.grpo\.use_vllm' is true but 'models\.qwen3-32b\.load_in_4bit"):
        load_config(paper_with(grpo={"use_vllm": True}))


def test_the_loader_takes_vllm_with_the_bf16_base_under_zero3():
    raw = paper_with(grpo={"use_vllm": True}, **BF16_ZERO3)
    cfg = load_config(raw)
    assert cfg.policy.grpo.use_vllm and cfg.policy.launcher == "accelerate"
    assert vllm_args(cfg.policy.grpo)["vllm_tensor_parallel_size"] == 8
    with pytest.raises(ConfigError, match="divisor of 8"):
        load_config(paper_with(grpo={"use_vllm": True, "vllm_tensor_parallel_size": 3}, **BF16_ZERO3))
    with pytest.raises(ConfigError, match=r"'resources\.policy\.gpu' is 4"):      # the QLoRA job size
        load_config(paper_with(grpo={"use_vllm": True}, **{**BF16_ZERO3, "gpu": 4}))


def test_the_hook_leaves_the_tiny_configs_alone():
    for name in ("default", "ci", "hub"):
        cfg = load_config(ROOT / f"config/{name}.yaml")
        assert config_problems(cfg.raw) == []

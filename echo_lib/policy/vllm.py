"""vLLM rollouts for stage 03's GRPO (TRL 1.16's vLLM integration): the GRPOConfig arguments that
`policy.grpo` asks for, and the combinations that cannot work, refused with the keys to change.

TRL has two modes (GRPOConfig.vllm_mode). colocate: each training process starts a vLLM engine on its own
GPU (vllm_tensor_parallel_size processes share one engine), holding vllm_gpu_memory_utilization of that
GPU beside the training state; TRL passes the share, the tensor-parallel size and the context length to
it. server: the trainer sends prompts to a `trl vllm-serve` process on GPUs of its own, started by hand
with the same three settings on its command line (serve_command) at vllm_server_host:vllm_server_port.
Either way TRL copies the policy's weights into vLLM before each generation (the LoRA adapter merged in).

Refused (vllm_problems):
- use_vllm with the policy model's load_in_4bit: TRL 1.16 pushes the bitsandbytes-packed NF4 tensors
  without their quantization state, and vLLM's weight loader fails on their shapes (huggingface/trl#3654,
  #4973; a fix, trl#6922, is not released). QLoRA trains with HF generation (use_vllm: false).
- use_vllm with the policy on the CPU (models.<policy>.device cpu): vLLM generates on GPUs only.
- colocate with a tensor-parallel size that does not divide the training processes (TRL raises it late):
  1 process with launcher inprocess, the accelerate file's num_processes with launcher accelerate.
- a context length below max_prompt_length + max_completion_length: vLLM refuses longer requests.
- vllm not installed (check_vllm, where stage 03 loads the policy; not the config loader, which also runs
  on login nodes and CPU machines without the gpu extra).

config_problems, the config loader's hook, adds one check of the launch: an accelerate config's process
count must be the GPU count the policy rule's SLURM job asks for (resources.policy.gpu).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Mapping

INSTALL = "pip install -e '.[gpu]'"
TRL_DEFAULT_MEMORY = {"colocate": 0.3, "server": 0.9}   # GRPOConfig / `trl vllm-serve` defaults


class VLLMConfigError(ValueError):
    """A policy.grpo vLLM setting that cannot work with the policy model or its launcher."""


def _get(obj: Any, key: str, default: Any = None) -> Any:
    """A field of a dataclass section (PolicyGRPO, ModelSpec) or of the config loader's dict."""
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def max_model_length(grpo) -> int:
    """vLLM's context: vllm_max_model_length, else the longest prompt plus the longest reply."""
    return _get(grpo, "vllm_max_model_length") or _get(grpo, "max_prompt_length") + _get(grpo, "max_completion_length")


def memory_utilization(grpo) -> float:
    """vLLM's share of each GPU: vllm_gpu_memory_utilization, else TRL's default for the mode."""
    share = _get(grpo, "vllm_gpu_memory_utilization")
    return share if share is not None else TRL_DEFAULT_MEMORY[_get(grpo, "vllm_mode", "colocate")]


def vllm_args(grpo) -> dict:
    """The GRPOConfig keyword arguments (TRL 1.16) for policy.grpo's vLLM settings; {} when use_vllm is off.
    colocate: the engine's GPU share, tensor-parallel size and context length; server: where the
    `trl vllm-serve` process listens (its own share, size and length are on its command line, serve_command)."""
    if not _get(grpo, "use_vllm", False):
        return {}
    mode = _get(grpo, "vllm_mode", "colocate")
    args = {"use_vllm": True, "vllm_mode": mode}
    if mode == "colocate":
        args |= {"vllm_gpu_memory_utilization": memory_utilization(grpo),
                 "vllm_tensor_parallel_size": _get(grpo, "vllm_tensor_parallel_size", 1),
                 "vllm_max_model_length": max_model_length(grpo)}
    else:
        args |= {"vllm_server_host": _get(grpo, "vllm_server_host", "localhost"),
                 "vllm_server_port": _get(grpo, "vllm_server_port", 8000)}
    return args


def serve_command(grpo, model: str) -> list[str]:
    """vllm_mode server: the `trl vllm-serve` line to start (on GPUs the training job does not use, e.g.
    CUDA_VISIBLE_DEVICES=4,5,6,7) before stage 03, with policy.grpo's share, size, length and port.
    `model` is the policy's weights (a hub id or the local folder stage 00 wrote)."""
    return ["trl", "vllm-serve", "--model", str(model),
            "--tensor_parallel_size", str(_get(grpo, "vllm_tensor_parallel_size", 1)),
            "--gpu_memory_utilization", str(memory_utilization(grpo)),
            "--max_model_len", str(max_model_length(grpo)),
            "--port", str(_get(grpo, "vllm_server_port", 8000))]


def _resolve(path: str | Path) -> Path:
    from echo_lib.paths import project_root
    p = Path(path)
    return p if p.is_absolute() or p.exists() else project_root() / p


def accelerate_processes(accelerate_config: str | Path | None) -> int | None:
    """num_processes of an accelerate config file (all machines together), or None where it does not say."""
    if not accelerate_config:
        return None
    path = _resolve(accelerate_config)
    if not path.is_file():
        return None          # the loader names a missing file itself
    import yaml
    try:
        spec = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError:
        return None
    n = spec.get("num_processes") if isinstance(spec, Mapping) else None
    return int(n) if isinstance(n, int) and n > 0 else None


def _launch(launcher: Any, accelerate_config: str | Path | None) -> tuple[str, str | Path | None]:
    """(launcher, accelerate_config) from a string or from the policy section (PolicyParams or its dict)."""
    if isinstance(launcher, str) or launcher is None:
        return launcher or "inprocess", accelerate_config
    return _get(launcher, "launcher", "inprocess"), accelerate_config or _get(launcher, "accelerate_config")


def vllm_problems(grpo, model_spec, launcher: Any = "inprocess", accelerate_config: str | Path | None = None,
                  model_name: str | None = None) -> list[str]:
    """What cannot work in policy.grpo's vLLM settings with this policy model and launcher, one sentence each
    naming the keys and the fix; [] when use_vllm is off. Does not look for the vllm package (check_vllm does)."""
    if not _get(grpo, "use_vllm", False):
        return []
    launcher, accelerate_config = _launch(launcher, accelerate_config)
    name = model_name or _get(model_spec, "name") or "<roles.policy>"
    mode = _get(grpo, "vllm_mode", "colocate")
    tp = _get(grpo, "vllm_tensor_parallel_size", 1)
    problems = []
    if _get(model_spec, "load_in_4bit", False):
        problems.append(
            f"key 'policy.grpo.use_vllm' is true but 'models.{name}.load_in_4bit' is true: TRL 1.16 copies the "
            "policy's packed 4-bit NF4 weights into vLLM at every sync, which vLLM cannot load (huggingface/trl#3654); "
            f"for QLoRA set policy.grpo.use_vllm: false (HF generation), or train the bf16 base with vLLM "
            f"(models.{name}.load_in_4bit: false, policy.launcher: accelerate with "
            "config/accelerate/zero3_multinode.yaml; docs/PAPER_SCALE.md, Supported combinations)")
    if _get(model_spec, "device", "cpu") == "cpu":
        problems.append(
            f"key 'policy.grpo.use_vllm' is true but 'models.{name}.device' is cpu: vLLM generates on GPUs only "
            f"(and stage 03 trains on the CPU); set models.{name}.device to auto or cuda on a GPU node, or "
            "policy.grpo.use_vllm: false")
    if mode == "colocate":
        processes = 1 if launcher == "inprocess" else accelerate_processes(accelerate_config)
        if processes is not None and processes % tp:
            where = ("stage 03 trains in one process (policy.launcher inprocess)" if launcher == "inprocess" else
                     f"{accelerate_config} starts {processes} training processes")
            problems.append(
                f"key 'policy.grpo.vllm_tensor_parallel_size' is {tp} but {where}: colocated vLLM splits the "
                "training processes into groups of that size, one engine each, so it must divide their number; "
                + ("set it to 1, or run vLLM as a server (vllm_mode: server) on GPUs of its own"
                   if launcher == "inprocess" else f"set it to a divisor of {processes}"))
    length = _get(grpo, "vllm_max_model_length")
    need = _get(grpo, "max_prompt_length") + _get(grpo, "max_completion_length")
    if length is not None and length < need:
        problems.append(
            f"key 'policy.grpo.vllm_max_model_length' is {length}, below max_prompt_length + max_completion_length "
            f"= {need}: vLLM refuses a request longer than its context; raise it to at least {need} or set null")
    return problems


def check_vllm(grpo, model_spec, launcher: Any = "inprocess", accelerate_config: str | Path | None = None, *,
               model_name: str | None = None, require_installed: bool = True) -> None:
    """Refuse policy.grpo's vLLM settings where they cannot work (VLLMConfigError, naming the keys and the fix),
    and, with require_installed, a missing vllm package (ImportError naming the install line). Nothing when
    use_vllm is off. `launcher` is the policy section (PolicyParams, whose launcher and accelerate_config are
    read) or the launcher's name with accelerate_config beside it."""
    problems = vllm_problems(grpo, model_spec, launcher, accelerate_config, model_name)
    if problems:
        raise VLLMConfigError("vLLM rollouts cannot run with this configuration:\n  - " + "\n  - ".join(problems))
    if require_installed and _get(grpo, "use_vllm", False) and importlib.util.find_spec("vllm") is None:
        raise ImportError("policy.grpo.use_vllm is true but the vllm package is not installed in this environment; "
                          f"install the gpu extra: {INSTALL} (or set policy.grpo.use_vllm: false)")


def config_problems(raw: Mapping[str, Any]) -> list[str]:
    """The config loader's hook (echo_lib.config, cross-field checks) on the validated dict: vllm_problems for
    roles.policy, and an accelerate config whose process count differs from resources.policy.gpu, the GPUs
    the policy rule's job asks for. The vllm package is not looked for here."""
    policy = raw["policy"]
    problems = []
    name = raw["roles"]["policy"]
    spec = raw["models"].get(name)
    if spec is not None and spec.get("backend") == "hf":   # otherwise stage 03 says why it cannot train it
        problems += vllm_problems(policy["grpo"], spec, policy["launcher"], policy["accelerate_config"], name)
    if policy["launcher"] == "accelerate":
        processes = accelerate_processes(policy["accelerate_config"])
        resources = raw["resources"].get("policy", raw["resources"].get("default", {}))
        gpus = resources.get("gpu", 0)
        if processes is not None and gpus and processes != gpus:
            problems.append(
                f"key 'policy.accelerate_config' names {policy['accelerate_config']}, which starts {processes} "
                f"processes (one per GPU), but 'resources.policy.gpu' is {gpus}: the policy rule's job must hold a "
                f"GPU for each; set resources.policy.gpu: {processes} or num_processes in that file to {gpus}")
    return problems

"""The paper-scale launch files agree with the run configs and the code that uses them (issue 34):
accelerate's process count with the GPUs the launching rule asks for, every file under config/accelerate/
used by a config or code path, the vLLM server's LoRA slots and rank with the adapters it serves, and
DeepSpeed's "auto" keys with what transformers fills in."""
import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from echo_lib.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[1]
RUN_CONFIGS = sorted(p for p in (ROOT / "config").glob("*.yaml") if p.name != "schema.yaml")
ACCELERATE = sorted((ROOT / "config" / "accelerate").iterdir())
VLLM_MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)   # vllm.config.lora.MaxLoRARanks
# Stage 03's full fine-tuning as docs/PAPER_SCALE.md "Supported combinations" and config/paper.yaml give it
FULL_FINE_TUNING = {"launcher": "accelerate", "accelerate_config": "config/accelerate/zero3_multinode.yaml"}


def rule_block(name: str) -> str:
    text = (ROOT / "workflow" / "rules" / f"{name}.smk").read_text()
    start = text.index(f"rule {name}:")
    end = text.find("\nrule ", start + 1)
    return text[start:end if end > 0 else None]


def accelerate_processes(path: str | Path) -> int:
    spec = yaml.safe_load((ROOT / path).read_text())
    return int(spec["num_processes"])


def test_accelerate_processes_match_the_gpus_of_the_rule_that_launches_them():
    # stage 03 is the one launcher of an accelerate config (echo_lib.policy.launch), inside rule policy,
    # whose SLURM job asks for resources.policy.gpu GPUs
    block = rule_block("policy")
    from echo_lib.stages import stage
    assert stage("policy").notebook == "03_policy_rl" and 'unpack(stage_in("policy"))' in block
    assert '**resources_of("policy")' in block   # gpu: resources.policy.gpu (workflow/rules/common.smk)
    checked = 0
    for path in RUN_CONFIGS:
        raw = yaml.safe_load(path.read_text()) or {}
        named = (raw.get("policy") or {}).get("accelerate_config")
        if not named:
            continue
        cfg = load_config(path)
        spec = yaml.safe_load((ROOT / named).read_text())
        # accelerate's num_processes counts the processes of all machines together; the rule's job is one node
        assert spec.get("num_machines", 1) == 1, f"{path.name}: {named} spans several machines; the rule asks one node"
        assert spec["num_processes"] == cfg.resources_for("policy").gpu, (
            f"{path.name} names {named} ({spec['num_processes']} processes) but resources.policy.gpu is "
            f"{cfg.resources_for('policy').gpu}")
        checked += 1
    # the documented full fine-tuning of the paper config: the process count of the accelerate file is the
    # GPU count the rule must ask for, and the loader refuses the paper's QLoRA job size with it
    paper = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    gpus = accelerate_processes(FULL_FINE_TUNING["accelerate_config"])
    base = paper["roles"]["policy"]
    models = {**paper["models"], base: {**paper["models"][base], "load_in_4bit": False}}
    grpo = {**paper["policy"]["grpo"], "use_vllm": False}
    full = {**paper, "models": models, "policy": {**paper["policy"], **FULL_FINE_TUNING, "grpo": grpo},
            "resources": {**paper["resources"], "policy": {**paper["resources"]["policy"], "gpu": gpus}}}
    assert load_config(full).resources_for("policy").gpu == gpus
    wrong = {**full, "resources": {**full["resources"], "policy": {**full["resources"]["policy"], "gpu": gpus // 2}}}
    with pytest.raises(ConfigError, match=r"resources\.policy\.gpu"):
        load_config(wrong)


def _values(node):
    if isinstance(node, dict):
        for v in node.values():
            yield from _values(v)
    elif isinstance(node, list):
        for v in node:
            yield from _values(v)
    else:
        yield node


def test_every_accelerate_file_is_used_and_every_mention_exists():
    # used: a value of a run config or of another launch file (not a comment), or named in code that launches
    # it (the package, the Snakefile, the scripts, a test that runs it)
    used = set()
    for path in RUN_CONFIGS + [p for p in ACCELERATE if p.suffix in (".yaml", ".json")]:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        used |= {str(v) for v in _values(data) if isinstance(v, str)}
    sources = [*sorted((ROOT / "echo_lib").rglob("*.py")), ROOT / "workflow" / "Snakefile",
               *sorted((ROOT / "workflow" / "rules").glob("*.smk")), *sorted((ROOT / "scripts").iterdir()),
               *(p for p in sorted((ROOT / "tests").glob("*.py")) if p.name != Path(__file__).name)]
    code = "\n".join(p.read_text(errors="replace") for p in sources if p.is_file())
    for path in ACCELERATE:
        rel = path.relative_to(ROOT).as_posix()
        assert rel in used or re.search(rf"\b{re.escape(path.name)}\b", code), f"{rel} is used by no config and no code path"
    # every mention of a launch file in the repository (docs, README, configs, code) names one that exists
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    stale = []
    for name in tracked:
        if not name.endswith((".md", ".py", ".yaml", ".yml", ".json", ".sh", ".toml", ".tex", ".smk")) and not name.endswith("Snakefile"):
            continue
        f = ROOT / name
        if not f.is_file():
            continue
        for mention in re.findall(r"config/accelerate/[\w.-]+\.(?:ya?ml|json)", f.read_text(errors="replace")):
            if not (ROOT / mention).is_file() and "zero9" not in mention:   # test_config's deliberate missing file
                stale.append(f"{name}: {mention}")
    assert not stale, "mentions of launch files that do not exist:\n" + "\n".join(stale)


def serve_vllm_args(tmp_path: Path, what: str, ranks: dict[str, int], env: dict | None = None) -> list[str]:
    """scripts/serve_vllm.sh's `vllm serve` line, with a stand-in `vllm` on PATH that records its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    out = tmp_path / f"{what}.args"
    stub = bin_dir / "vllm"
    stub.write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "$@" > {shlex.quote(str(out))}\n')
    stub.chmod(0o755)
    run = tmp_path / "run"
    for rel, r in ranks.items():
        (run / rel).mkdir(parents=True, exist_ok=True)
        (run / rel / "adapter_config.json").write_text(json.dumps({"r": r, "lora_alpha": 2 * r, "peft_type": "LORA"}))
    environ = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "VLLM_API_KEY": "test",
               **(env or {})}
    for key in ("TP", "MAX_LEN", "MAX_LORA_RANK", "MAX_LORAS"):
        if env is None or key not in env:
            environ.pop(key, None)
    proc = subprocess.run(["bash", str(ROOT / "scripts/serve_vllm.sh"), what, str(run)], env=environ,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return out.read_text().splitlines()


def option(args: list[str], name: str, default=None):
    return args[args.index(name) + 1] if name in args else default


def lora_modules(args: list[str]) -> list[str]:
    i = args.index("--lora-modules")
    mods = []
    for a in args[i + 1:]:
        if a.startswith("--"):
            break
        mods.append(a)
    return mods


def test_serve_vllm_sizes_lora_slots_and_rank_from_the_adapters(tmp_path):
    cfg = load_config(ROOT / "config/paper.yaml")
    served = {
        "policy": {f"policy/{v}/adapter": cfg.policy.lora.r for v in cfg.policy.variants},
        "rm": {f"rm/{k}/adapter": cfg.reward_models.lora.r for k in ("empathy", "humanlike", "scalar")},
    }
    for what, ranks in served.items():
        args = serve_vllm_args(tmp_path, what, ranks)
        mods = lora_modules(args)
        assert len(mods) == len(ranks), (what, mods)
        # vLLM's default --max-loras is 1: one adapter per batch, the others queue behind it
        assert int(option(args, "--max-loras", 1)) >= len(mods), (what, args)
        rank = int(option(args, "--max-lora-rank", 16))   # vLLM's default
        assert rank >= max(ranks.values()) and rank in VLLM_MAX_LORA_RANKS, (what, rank, ranks)
    # adapters trained with a larger rank than the paper config's raise the server's rank with them
    args = serve_vllm_args(tmp_path / "big", "rm", {f"rm/{k}/adapter": 100 for k in ("empathy", "humanlike", "scalar")})
    assert int(option(args, "--max-lora-rank")) == 128


def test_ds_zero3_auto_keys_are_ones_transformers_fills():
    pytest.importorskip("deepspeed")
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    path = ROOT / "config/accelerate/ds_zero3.json"
    ds = HfTrainerDeepSpeedConfig(json.loads(path.read_text()))
    args = SimpleNamespace(world_size=8, per_device_train_batch_size=8, gradient_accumulation_steps=64,
                           max_grad_norm=1.0, learning_rate=1e-6, adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8,
                           weight_decay=0.0, save_on_each_node=False, fp16=False, fp16_full_eval=False, bf16=True,
                           bf16_full_eval=False, get_warmup_steps=lambda n: 0)
    ds.trainer_config_process(args)
    ds.trainer_config_finalize(args, SimpleNamespace(config=SimpleNamespace(hidden_size=5120)), num_training_steps=300)

    def autos(node, where=""):
        if isinstance(node, dict):
            for k, v in node.items():
                yield from autos(v, f"{where}.{k}".strip("."))
        elif node == "auto":
            yield where
    left = list(autos(ds.config))
    assert not left, f"{path.name}: 'auto' keys transformers does not fill: {left}"
    assert ds.config["train_batch_size"] == 8 * 8 * 64 and ds.is_zero3()

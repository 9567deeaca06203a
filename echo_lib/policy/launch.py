"""GRPO of one policy variant as a program, for multi-GPU and multi-node runs under accelerate:

    accelerate launch --config_file config/accelerate/zero3_multinode.yaml \
        -m echo_lib.policy.launch --config results/<run>/policy/<variant>/run_config.json --variant echo

Notebook 03 writes the run config and runs this line itself when `policy.launcher` is `accelerate`,
then reads the adapter and train_log.csv it leaves in results/<run>/policy/<variant>/. With DeepSpeed
ZeRO-3 every process loads the reward models too (they judge their own share of the rollouts).
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path


def command(cfg, variant: str, config_file: Path) -> list[str]:
    accelerate = cfg.policy.accelerate_config
    if not accelerate:
        raise ValueError("policy.launcher is accelerate but policy.accelerate_config is null; name an accelerate "
                         "config file, e.g. config/accelerate/zero3_multinode.yaml")
    if not Path(accelerate).exists():
        raise FileNotFoundError(f"policy.accelerate_config = {accelerate} does not exist")
    return ["accelerate", "launch", "--config_file", accelerate, "-m", "echo_lib.policy.launch",
            "--config", str(config_file), "--variant", variant]


def run_accelerate(cfg, variant: str, out_dir: Path) -> None:
    """Write the run config beside the variant's outputs and run the training under accelerate."""
    out_dir.mkdir(parents=True, exist_ok=True)
    config_file = out_dir / "run_config.json"
    from echo_lib.provenance import write_text
    write_text(config_file, json.dumps(cfg.raw, indent=1))    # names of key variables only, never keys; atomic
    cmd = command(cfg, variant, config_file)
    print("running:", shlex.join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main(argv: list[str] | None = None) -> int:
    from echo_lib.config import load_config
    from echo_lib.policy import stage
    ap = argparse.ArgumentParser(description="GRPO of one policy variant (stage 03) on the run's RL data.")
    ap.add_argument("--config", required=True, help="run config (YAML or the JSON notebook 03 writes)")
    ap.add_argument("--variant", required=True, choices=["echo", "scalar"])
    args = ap.parse_args(argv)
    path = Path(args.config)
    cfg = load_config(json.loads(path.read_text()) if path.suffix == ".json" else path)
    prompts, _, _ = stage.rl_data(cfg, args.variant)
    result = stage.train_here(cfg, args.variant, prompts)
    print(f"{result.steps} steps in {result.seconds:.0f} s -> {result.adapter_dir} "
          f"(weights sharded by ZeRO-3 at load: {result.sharded_at_load})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A stage function as a program under accelerate, for multi-GPU and multi-node runs: every rank loads the run
config and calls the function named on the command line (`module:function`, imported by name at run time,
so this module depends on no stage):

    accelerate launch --config_file config/accelerate/zero3_multinode.yaml -m echo_lib.policy.launch \
        --config results/<run>/policy/<variant>/run_config.json --entry echo_lib.policy.stage:launched echo

Stage 03 (echo_lib.policy.stage.train) writes the run config and runs this line itself when `policy.launcher`
is `accelerate`, then reads the adapter and train_log.csv it leaves in results/<run>/policy/<variant>/. With
DeepSpeed ZeRO-3 every process loads the reward models too (they judge their own share of the rollouts).
"""
from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path


def command(cfg, entry: str, args: list[str], config_file: Path) -> list[str]:
    """`accelerate launch` of `entry` ("module:function", called as function(cfg, *args) on every rank)."""
    accelerate = cfg.policy.accelerate_config
    if not accelerate:
        raise ValueError("policy.launcher is accelerate but policy.accelerate_config is null; name an accelerate "
                         "config file, e.g. config/accelerate/zero3_multinode.yaml")
    if not Path(accelerate).exists():
        raise FileNotFoundError(f"policy.accelerate_config = {accelerate} does not exist")
    return ["accelerate", "launch", "--config_file", accelerate, "-m", "echo_lib.policy.launch",
            "--config", str(config_file), "--entry", entry, *args]


def run_accelerate(cfg, entry: str, args: list[str], out_dir: Path) -> None:
    """Write the run config into out_dir (beside what the entry writes) and run `entry` under accelerate."""
    out_dir.mkdir(parents=True, exist_ok=True)
    config_file = out_dir / "run_config.json"
    from echo_lib.provenance import write_text
    write_text(config_file, json.dumps(cfg.raw, indent=1))    # names of key variables only, never keys; atomic
    cmd = command(cfg, entry, args, config_file)
    print("running:", shlex.join(cmd), flush=True)
    run_echoed(cmd)


class LaunchFailed(subprocess.CalledProcessError):
    """`accelerate launch` exited non-zero; the message carries the ranks' last lines (the cause)."""

    def __str__(self) -> str:
        return (f"{super().__str__()} The last lines the ranks printed:\n" + "\n".join(self.output)
                + "\nRerun the command above by hand to see the whole output.")


def run_echoed(cmd: list[str], keep: int = 40) -> None:
    """Run `cmd`, echoing its output (stderr merged) as it comes, so progress shows; raise LaunchFailed with
    the last `keep` lines when it fails."""
    from collections import deque
    tail: deque[str] = deque(maxlen=keep)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                          bufsize=1) as proc:
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            tail.append(line.rstrip("\n"))
    if proc.returncode:
        raise LaunchFailed(proc.returncode, cmd, output=list(tail))


def entry_function(entry: str):
    """The function `entry` ("package.module:function") names."""
    import importlib
    module, sep, name = entry.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"--entry {entry!r}: name a function as module:function, e.g. echo_lib.policy.stage:launched")
    return getattr(importlib.import_module(module), name)


def main(argv: list[str] | None = None) -> int:
    from echo_lib.config import load_config
    ap = argparse.ArgumentParser(description="One rank of a stage function under accelerate launch.")
    ap.add_argument("--config", required=True, help="run config (YAML or the JSON the stage writes)")
    ap.add_argument("--entry", required=True, help="the function to run, module:function; called as f(cfg, *args)")
    ap.add_argument("args", nargs="*", help="the function's further arguments (strings)")
    args = ap.parse_args(argv)
    path = Path(args.config)
    cfg = load_config(json.loads(path.read_text()) if path.suffix == ".json" else path)
    status = entry_function(args.entry)(cfg, *args.args) or 0
    close_process_group()
    return status


def close_process_group() -> None:
    """Wait for every rank, then close the process group the entry opened: a rank that exits with it open
    can crash in the backend's teardown (torch warns of it) after its work is done."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())

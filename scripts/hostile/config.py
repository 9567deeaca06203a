"""Issue 38 probes of the run configuration and the YAML reader, one hostile input per class:

- openai_adapter: an openai-backend model with `adapter:` (a served base model would be scored under the
  trained variant's name) must stop the load, naming the key;
- nan_number: `epm.epsilon_zone: .nan` (EPM-Q silently 107.19 -> 1028.58) must stop the load;
- yaml_bomb_fifo: `echo-run --configfile` with an alias bomb and a FIFO must answer at once, in a few
  short lines naming each file, without opening the FIFO or starting snakemake.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BOMB = 'a: &a ["xxxxxxxx", "xxxxxxxx", "xxxxxxxx", "xxxxxxxx", "xxxxxxxx", "xxxxxxxx", "xxxxxxxx"]\n' + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi")) + "seed: *i\n"


def _load_error(path: Path) -> str | None:
    from echo_lib.config import ConfigError, load_config
    try:
        load_config(path)
    except ConfigError as err:
        return str(err)
    return None


def openai_adapter(work: Path) -> tuple[bool, str]:
    path = work / "probe_config" / "served_adapter.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    import yaml
    cfg = yaml.safe_load((work / "config" / "ci.yaml").read_text())   # ci.yaml plus a served model:
    cfg["models"]["served"] = {"backend": "openai", "source": "server", "id": "Qwen/Qwen3-32B",
                               "base_url": "http://localhost:8000/v1", "adapter": "results/ci/policy/echo/adapter"}
    path.write_text(yaml.safe_dump(cfg))
    message = _load_error(path)
    if message is None:
        return False, "loaded: the openai model's adapter is ignored while stage 04 records it"
    ok = "'models.served.adapter'" in message and str(path) in message and "remove it" in message
    return ok, message


def nan_number(work: Path) -> tuple[bool, str]:
    path = work / "probe_config" / "nan.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("epm:\n  epsilon_zone: .nan\n")
    message = _load_error(path)
    if message is None:
        return False, "loaded: epm.epsilon_zone is NaN"
    return "'epm.epsilon_zone'" in message and "finite" in message and str(path) in message, message


def yaml_bomb_fifo(work: Path) -> tuple[bool, str]:
    folder = work / "probe_config"
    folder.mkdir(parents=True, exist_ok=True)
    bomb, fifo = folder / "bomb.yaml", folder / "fifo.yaml"
    bomb.write_text(BOMB)
    if not fifo.exists():
        os.mkfifo(fifo)
    env = {**os.environ, "PYTHONPATH": str(work)}
    try:
        proc = subprocess.run([sys.executable, "-m", "echo_lib.workflow", "-n", "--configfile", str(bomb), str(fifo)],
                              cwd=work, env=env, capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        return False, "echo-run still running after 180 s (blocked on the FIFO, or expanding the bomb)"
    finally:
        try:   # release a reader blocked on the FIFO, if any
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
    err = proc.stderr
    lines = err.splitlines()
    ok = (proc.returncode == 2 and len(err) < 2000 and len(lines) == 2 and "Traceback" not in err
          and str(bomb) in lines[0] and "line" in lines[0] and str(fifo) in lines[1] and "FIFO" in lines[1])
    return ok, f"rc {proc.returncode}, {len(err)} bytes: {err[:600]}"


PROBES = [("openai_adapter", openai_adapter), ("nan_number", nan_number), ("yaml_bomb_fifo", yaml_bomb_fifo)]

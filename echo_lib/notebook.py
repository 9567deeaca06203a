"""Running the stage notebooks: the same code path from Snakemake, the tests and JupyterLab.

Notebooks are jupytext percent files (`notebooks/NN_name.py`) with a cell tagged `parameters`
that holds at least::

    config_path = "config/default.yaml"   # used when the notebook runs by hand
    config = {}                            # Snakemake passes the validated run config here

papermill cannot read .py files, so `run_notebook` converts with jupytext in memory and hands
papermill the notebook object (it injects the parameters after the tagged cell).

The kernel talks to papermill over IPC (Unix) sockets in a private temporary folder rather than TCP on
localhost: nothing else on the machine can connect to it, and ipykernel has no reason to print its
"Kernel is running over TCP without encryption" warning into `make all`'s terminal for every stage.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any, Iterator, Mapping

from echo_lib.config import RunConfig, load_config
from echo_lib.paths import enter_project_root, project_root

KERNEL = {"name": "python3", "display_name": "Python 3", "language": "python"}


def start(config: Mapping[str, Any] | str | Path, stage: str | None = None, **overrides: Any) -> RunConfig:
    """First call of every notebook: work from the project root, load the config, seed everything. With
    `stage`, the config answers only what that stage's entry of the stage table reads (stages.StageConfig):
    a read it does not declare is an error, so its rule's params, which re-run it, stay what it reads."""
    enter_project_root()
    cfg = load_config(config, **overrides) if overrides else load_config(config)
    seed_everything(cfg.seed)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", force=True)
    if stage is None:
        return cfg
    from echo_lib.stages import StageConfig
    return StageConfig(cfg, stage)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    os.environ.setdefault("PYTHONHASHSEED", str(seed))
    try:
        import numpy as np
        np.random.seed(seed)
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    try:
        import torch
        torch.manual_seed(seed)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass


def thread_env(threads: int, wait_policy: str) -> dict[str, str]:
    """Environment of a stage's kernel: its OpenMP/MKL threads are the job's threads, and idle threads
    spin ("active") or sleep ("passive") between parallel regions.

    Snakemake never schedules more threads than --cores, so a job that uses exactly its own threads
    has its cores to itself and spinning is safe: measured on 2 cores, batched generation with the
    embedded model ran at 245 tokens/s spinning against 165 sleeping (benchmarks/llm_throughput.py).
    On a machine shared with other work, spinning threads fight for the cores (two such processes at
    once ran 2.5x slower than sleeping ones): set `resources.<stage>.wait_policy: passive` there.
    """
    if wait_policy not in ("active", "passive"):
        raise ValueError(f"wait_policy must be 'active' or 'passive', not {wait_policy!r}")
    n = str(int(threads))
    return {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "OMP_WAIT_POLICY": wait_policy.upper()}


@contextlib.contextmanager
def _environment(overrides: Mapping[str, str]) -> Iterator[None]:
    """os.environ with `overrides` while the block runs (a kernel started inside inherits them)."""
    saved = {k: os.environ.get(k) for k in overrides}
    os.environ.update(overrides)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@functools.lru_cache(maxsize=None)
def kernel_manager_class() -> type:
    """papermill's (nbclient's) kernel manager, with the kernel's sockets on IPC in a folder of its own.

    Each manager gets a fresh 0700 folder from mkdtemp: stages that Snakemake runs at once never pick
    the same socket names (jupyter_client's IPC default, "kernel-ipc-<n>" in the working directory,
    would race between them), and the folder goes when the kernel shuts down or the manager is freed.
    """
    from jupyter_client.manager import AsyncKernelManager

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: Any) -> None:
            folder = tempfile.mkdtemp(prefix="echo-kernel-")
            kwargs.setdefault("transport", "ipc")
            kwargs.setdefault("ip", os.path.join(folder, "kernel"))
            super().__init__(**kwargs)
            self._ipc_folder = folder
            weakref.finalize(self, shutil.rmtree, folder, True)

        async def _async_cleanup_resources(self, restart: bool = False) -> None:
            await super()._async_cleanup_resources(restart=restart)
            if not restart:
                shutil.rmtree(self._ipc_folder, ignore_errors=True)

        cleanup_resources = _async_cleanup_resources

    return IPCKernelManager


def run_notebook(py: str | Path, out_ipynb: str | Path, parameters: Mapping[str, Any],
                 log: str | Path | None = None, timeout: int | None = None,
                 threads: int | None = None, wait_policy: str = "passive") -> Path:
    """Execute a jupytext percent notebook with papermill; keep the executed copy at `out_ipynb`.

    Cell outputs stream to `log` as they happen, so a long stage can be followed with `tail -f`.
    A failing cell raises papermill's PapermillExecutionError; the executed copy up to the failure
    is still written, which is where to look first. With `threads`, the kernel's OpenMP threads and
    their wait policy are set (see thread_env); Snakemake passes each rule's own. The kernel also gets
    `progress.pipeline_env()`: ECHO_PIPELINE=1 and TQDM_MININTERVAL, one line per bar every 30 s.
    """
    import jupytext
    import papermill

    from echo_lib.progress import pipeline_env

    root = project_root()
    py, out_ipynb = Path(py), Path(out_ipynb)
    out_ipynb.parent.mkdir(parents=True, exist_ok=True)
    nb = jupytext.read(root / py if not py.is_absolute() else py)
    nb.metadata["kernelspec"] = KERNEL
    nb.metadata.setdefault("language_info", {"name": "python"})
    handler = _log_to(log) if log else None
    env = {**pipeline_env(), **(thread_env(threads, wait_policy) if threads else {})}
    try:
        with _environment(env):
            papermill.execute_notebook(
                nb, str(out_ipynb), parameters=dict(parameters), kernel_name="python3",
                progress_bar=False, log_output=handler is not None, cwd=str(root),
                execution_timeout=timeout, kernel_manager_class=kernel_manager_class())
    finally:
        if handler:
            logging.getLogger("papermill").removeHandler(handler)
            handler.close()
    return out_ipynb


def _log_to(path: str | Path) -> logging.Handler:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger = logging.getLogger("papermill")
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    return handler

"""Running the stage notebooks: the same code path from Snakemake, the tests and JupyterLab.

Notebooks are jupytext percent files (`notebooks/NN_name.py`) with a cell tagged `parameters`
that holds at least::

    config_path = "config/default.yaml"   # used when the notebook runs by hand
    config = {}                            # Snakemake passes the validated run config here

papermill cannot read .py files, so `run_notebook` converts with jupytext in memory and hands
papermill the notebook object (it injects the parameters after the tagged cell).
"""
from __future__ import annotations

import logging
import os
import random
from pathlib import Path
from typing import Any, Mapping

from echo_lib.config import RunConfig, load_config
from echo_lib.paths import enter_project_root, project_root

KERNEL = {"name": "python3", "display_name": "Python 3", "language": "python"}


def start(config: Mapping[str, Any] | str | Path, **overrides: Any) -> RunConfig:
    """First call of every notebook: work from the project root, load the config, seed everything."""
    enter_project_root()
    cfg = load_config(config, **overrides) if overrides else load_config(config)
    seed_everything(cfg.seed)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", force=True)
    return cfg


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


def run_notebook(py: str | Path, out_ipynb: str | Path, parameters: Mapping[str, Any],
                 log: str | Path | None = None, timeout: int | None = None) -> Path:
    """Execute a jupytext percent notebook with papermill; keep the executed copy at `out_ipynb`.

    Cell outputs stream to `log` as they happen, so a long stage can be followed with `tail -f`.
    A failing cell raises papermill's PapermillExecutionError; the executed copy up to the failure
    is still written, which is where to look first.
    """
    import jupytext
    import papermill

    root = project_root()
    py, out_ipynb = Path(py), Path(out_ipynb)
    out_ipynb.parent.mkdir(parents=True, exist_ok=True)
    nb = jupytext.read(root / py if not py.is_absolute() else py)
    nb.metadata["kernelspec"] = KERNEL
    nb.metadata.setdefault("language_info", {"name": "python"})
    handler = _log_to(log) if log else None
    try:
        papermill.execute_notebook(
            nb, str(out_ipynb), parameters=dict(parameters), kernel_name="python3",
            progress_bar=False, log_output=handler is not None, cwd=str(root),
            execution_timeout=timeout)
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

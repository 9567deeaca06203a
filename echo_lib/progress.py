"""Who is watching a long step: a person (progress bars) or the DAG's log files (a line every N steps).

`run_notebook` sets ECHO_PIPELINE=1 for the stage notebooks Snakemake executes; a notebook stepped
through in JupyterLab, or a script, runs without it.
"""
from __future__ import annotations

import logging
import os

PIPELINE_ENV = "ECHO_PIPELINE"
LOG_EVERY = 10   # steps between two log lines of a training run in the DAG


def interactive() -> bool:
    return not os.environ.get(PIPELINE_ENV)


def step_logger(name: str, total: int, every: int = LOG_EVERY):
    """A TrainerCallback that, in the DAG, logs the loss every `every` steps and at the last one; silent
    where a person watches the trainer's own progress bar."""
    from transformers import TrainerCallback
    log = logging.getLogger(name)

    class StepLog(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            logs = logs or {}
            step = state.global_step
            if interactive() or "train_runtime" in logs or not (step % every == 0 or step == total):
                return
            log.info("step %d/%d: loss %s", step, total, logs.get("loss"))

    return StepLog()

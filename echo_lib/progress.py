"""Who is watching a long step: a person (progress bars) or the DAG's log files (a line every N steps).

`run_notebook` starts the stage notebooks Snakemake executes with `pipeline_env()`: ECHO_PIPELINE=1, and
TQDM_MININTERVAL=30 so that every tqdm bar in the kernel and its child processes (echo_lib's own bars,
transformers' "Loading weights", the GGUF conversion, huggingface_hub's downloads) writes a line to the
stage log at most every 30 seconds instead of one per update. TQDM_MINITERS=1 goes with it: with tqdm's
dynamic miniters, its monitor thread redraws a bar that has not printed for `maxinterval` (10 s) without
resetting the bar's clock, so the next update printed again: two or three lines per 30 s in stage
04_judges (2026-12-06). With miniters 1 every update checks the clock and the monitor leaves the bar alone.
A notebook stepped through in JupyterLab, or a script, runs without them and keeps live bars.
"""
from __future__ import annotations

import logging
import os

PIPELINE_ENV = "ECHO_PIPELINE"
LOG_EVERY = 10   # steps between two log lines of a training run in the DAG
TQDM_INTERVAL_ENV = "TQDM_MININTERVAL"   # tqdm reads its defaults from TQDM_<ARG> (tqdm.utils.envwrap)
TQDM_MINITERS_ENV = "TQDM_MINITERS"       # 1: a fixed miniters, so tqdm's monitor thread never redraws a bar
BAR_INTERVAL_S = 30   # seconds between two lines of one progress bar in a stage log
# tqdm.auto in a kernel without ipywidgets warns once per stage, then falls back to text bars (fine here)
QUIET_WARNINGS = "ignore:IProgress not found"


def pipeline_env() -> dict[str, str]:
    """Environment of a kernel the DAG runs: no person watches, and progress bars print one line per
    BAR_INTERVAL_S (a TQDM_MININTERVAL already set outside wins, e.g. to follow a run more closely)."""
    warnings = ",".join(w for w in (os.environ.get("PYTHONWARNINGS"), QUIET_WARNINGS) if w)
    interval = os.environ.get(TQDM_INTERVAL_ENV) or str(BAR_INTERVAL_S)
    return {PIPELINE_ENV: "1", TQDM_INTERVAL_ENV: interval, TQDM_MINITERS_ENV: "1",
            "PYTHONWARNINGS": warnings}


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

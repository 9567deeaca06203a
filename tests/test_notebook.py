"""The notebook runner: jupytext percent -> papermill, parameters injected, executed copy + log kept."""
import json
import os

import nbformat
import pytest
from papermill.exceptions import PapermillExecutionError

from echo_lib.notebook import run_notebook, thread_env

NOTEBOOK = '''# %% [markdown]
# # A test stage

# %% tags=["parameters"]
n = 2
label = "default"

# %%
total = sum(range(n))
print(f"{label}: total={total}")
'''


def outputs(path):
    nb = nbformat.read(path, as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def test_parameters_are_injected_and_outputs_kept(tmp_path):
    py = tmp_path / "nb.py"
    py.write_text(NOTEBOOK)
    out = run_notebook(py, tmp_path / "out" / "nb.ipynb", {"n": 5, "label": "run"}, log=tmp_path / "nb.log")
    assert "run: total=10" in outputs(out)
    nb = nbformat.read(out, as_version=4)
    tags = [c.metadata.get("tags", []) for c in nb.cells]
    assert ["injected-parameters"] in tags, "papermill injects the parameters after the tagged cell"
    assert "run: total=10" in (tmp_path / "nb.log").read_text()


def test_defaults_when_no_parameters(tmp_path):
    py = tmp_path / "nb.py"
    py.write_text(NOTEBOOK)
    assert "default: total=1" in outputs(run_notebook(py, tmp_path / "nb.ipynb", {}))


def test_failing_cell_raises_and_keeps_partial_copy(tmp_path):
    py = tmp_path / "bad.py"
    py.write_text(NOTEBOOK + '\n# %%\nraise ValueError("stage broke")\n')
    with pytest.raises(PapermillExecutionError, match="stage broke"):
        run_notebook(py, tmp_path / "bad.ipynb", {"n": 3})
    assert "default: total=3" in outputs(tmp_path / "bad.ipynb")
    assert json.loads((tmp_path / "bad.ipynb").read_text())["metadata"]["papermill"]["exception"]


def test_kernel_gets_the_jobs_threads_and_wait_policy(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    py = tmp_path / "env.py"
    py.write_text('# %%\nimport os\nprint("env", os.environ.get("OMP_NUM_THREADS"), os.environ.get("OMP_WAIT_POLICY"))\n')
    assert "env 3 ACTIVE" in outputs(run_notebook(py, tmp_path / "a.ipynb", {}, threads=3, wait_policy="active"))
    assert "env 1 PASSIVE" in outputs(run_notebook(py, tmp_path / "p.ipynb", {}, threads=1, wait_policy="passive"))
    # this process's environment is as it was; without threads the kernel inherits it unchanged
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE" and "OMP_NUM_THREADS" not in os.environ
    assert "env None PASSIVE" in outputs(run_notebook(py, tmp_path / "n.ipynb", {}))
    with pytest.raises(ValueError, match="wait_policy"):
        thread_env(2, "spin")


def test_a_stage_run_by_the_dag_knows_no_person_watches(tmp_path, monkeypatch):
    from echo_lib.progress import PIPELINE_ENV
    monkeypatch.delenv(PIPELINE_ENV, raising=False)
    py = tmp_path / "who.py"
    py.write_text('# %%\nfrom echo_lib.progress import interactive\nprint("interactive", interactive())\n')
    assert "interactive False" in outputs(run_notebook(py, tmp_path / "w.ipynb", {}))
    assert PIPELINE_ENV not in os.environ   # this process (a person's session) is as it was


@pytest.mark.parametrize("pipeline, logged", [(True, [10, 20, 25]), (False, [])])
def test_training_logs_a_line_every_n_steps_in_the_dag_only(monkeypatch, caplog, pipeline, logged):
    import logging
    from types import SimpleNamespace
    from echo_lib.progress import PIPELINE_ENV, step_logger
    if pipeline:
        monkeypatch.setenv(PIPELINE_ENV, "1")
    else:
        monkeypatch.delenv(PIPELINE_ENV, raising=False)
    callback = step_logger("echo.test", total=25, every=10)
    with caplog.at_level(logging.INFO, logger="echo.test"):
        for step in range(1, 26):
            callback.on_log(None, SimpleNamespace(global_step=step), None, logs={"loss": 0.5})
        callback.on_log(None, SimpleNamespace(global_step=25), None, logs={"train_runtime": 3.0})
    # only the step logger's records: importing transformers can log a bitsandbytes warning here too
    assert [int(r.message.split()[1].split("/")[0]) for r in caplog.records if r.name == "echo.test"] == logged

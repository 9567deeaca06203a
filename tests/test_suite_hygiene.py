"""The test suite itself: it runs with the README's plain `pytest` (every file collects without the
repository root on sys.path, which `python -m pytest` adds and so hides `from tests.x import`), and its
DAG runs write nothing into the checkout."""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_plain_pytest_collects_every_file(tmp_path):
    # -P: like the `pytest` script, the working folder is not put on sys.path. This checkout's echo_lib
    # comes from a folder that holds only it (as an installed package would), so `tests` stays unimportable.
    (tmp_path / "echo_lib").symlink_to(ROOT / "echo_lib")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"OMP_NUM_THREADS": "1",
                                                                         "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-P", "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "tests"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


def test_ci_runs_the_readme_command():
    # .ci/run -> make test -> the README's `pytest`
    assert "exec make test" in (ROOT / ".ci" / "run").read_text()
    recipe = re.search(r"^test:.*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE).group(1)
    assert recipe == "$(BIN)/pytest"
    assert "`make test` (or `pytest` in the environment)" in (ROOT / "README.md").read_text()


def test_dag_runs_of_the_tests_keep_out_of_the_checkout(tmp_path, monkeypatch):
    """conftest.snakemake sends results, converted models and the executed notebooks' sources to folders
    beside the temporary results; the Snakefile reads every stage notebook from notebooks_dir."""
    import conftest

    seen = {}
    monkeypatch.delenv(conftest.MODELS_ENV, raising=False)
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: seen.update(cmd=cmd, cwd=kw["cwd"])
                        or subprocess.CompletedProcess(cmd, 0, "", ""))
    conftest.snakemake("-n", results_dir=tmp_path)
    config = dict(a.split("=", 1) for a in seen["cmd"][seen["cmd"].index("--config") + 1:])
    assert set(config) == {"results_dir", "models_dir", "notebooks_dir"}
    for folder in config.values():
        assert Path(folder).is_relative_to(tmp_path), folder
    copy = Path(config["notebooks_dir"])
    assert (copy / "07_paper.py").read_bytes() == (ROOT / "notebooks" / "07_paper.py").read_bytes()

    from echo_lib.stages import STAGES
    workflow = "\n".join(p.read_text() for p in [ROOT / "workflow/Snakefile", *(ROOT / "workflow/rules").glob("*.smk")])
    assert '"notebooks/' not in workflow and '"py": f"{NOTEBOOKS}/{s.notebook}.py"' in workflow
    assert workflow.count("unpack(stage_in(") == len(STAGES)   # every stage rule takes its notebook from there
    assert {s.notebook for s in STAGES.values()} == {p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py")}

"""The suite runs with the README's plain `pytest`: every test file collects without the repository
root on sys.path (a `python -m pytest` run adds it and hides imports such as `from tests.x import`)."""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_plain_pytest_collects_every_file():
    # -P: like the `pytest` script, the working folder is not put on sys.path
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-P", "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "tests"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


def test_ci_runs_the_readme_command():
    # .ci/run -> make test -> the README's `pytest`
    assert "exec make test" in (ROOT / ".ci" / "run").read_text()
    recipe = re.search(r"^test:.*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE).group(1)
    assert recipe == "$(BIN)/pytest"
    assert "`make test` (or `pytest` in the environment)" in (ROOT / "README.md").read_text()

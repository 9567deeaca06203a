import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from tiny_lm import build_tiny_lm  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EMPA_DIR = ROOT.parent / "shared" / "empa"


@pytest.fixture(scope="session")
def tiny_lm_dir(tmp_path_factory) -> Path:
    """Folder with a tiny random-weight Llama + ChatML tokenizer (built once per test session)."""
    return build_tiny_lm(tmp_path_factory.mktemp("tiny_lm"))


@pytest.fixture(scope="session")
def empa_dir() -> Path:
    """The EMPA benchmark subset (third-party, CC BY-NC) beside the repository, or skip."""
    if not EMPA_DIR.is_dir():
        pytest.skip(f"EMPA data not found at {EMPA_DIR} (tests reading its dialogue files need it)")
    return EMPA_DIR


def snakemake(*args, results_dir=None):
    """Run snakemake in the project root (2 cores); returns (exit code, stdout + stderr)."""
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", *args]
    if results_dir:
        cmd += ["--config", f"results_dir={results_dir}"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="session")
def ci_run(tmp_path_factory):
    """The whole DAG at config/ci.yaml, once per test session; -> (results/<tmp>/ci, snakemake's output).
    Every test file that checks a stage's outputs uses this one run."""
    results = tmp_path_factory.mktemp("results")
    rc, out = snakemake("--configfile", "config/ci.yaml", results_dir=results)
    assert rc == 0, out[-5000:]
    return results / "ci", out

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from tiny_lm import build_tiny_lm  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# Opt-in: a local EMPA clone (or its empa/data folder, or a subset laid out like it) for the extra checks
# against EMPA's own files. Without it those few tests skip; the fixtures cover the same code.
EMPA_ENV = "ECHO_EMPA_DIR"
EMPA_FIXTURE = ROOT / "tests" / "fixtures" / "empa"   # EMPA's layout, the project's own text (its README)


@pytest.fixture(scope="session")
def tiny_lm_dir(tmp_path_factory) -> Path:
    """Folder with a tiny random-weight Llama + ChatML tokenizer (built once per test session)."""
    return build_tiny_lm(tmp_path_factory.mktemp("tiny_lm"))


@pytest.fixture(scope="session")
def empa():
    """EMPA's real files (third-party, CC BY-NC) as a layout, from $ECHO_EMPA_DIR; skip without it."""
    from echo_lib.empa_source import locate

    folder = os.environ.get(EMPA_ENV)
    if not folder:
        pytest.skip(f"opt-in check against EMPA's own files: set {EMPA_ENV} to a local EMPA clone")
    return locate(folder)


@pytest.fixture(scope="session")
def empa_fixture():
    """The EMPA-format fixture: four own cases, three published runs reduced to numbers."""
    from echo_lib.empa_source import locate

    return locate(EMPA_FIXTURE, with_commit=False)


def empa_with_published_runs(dest: Path) -> Path:
    """The fixture plus the 90 published runs of tests/fixtures/epm written back as EMPA files (numbers
    only): an EMPA folder on which stage 05 reproduces the published leaderboard."""
    import shutil

    from echo_lib.epm.empa_io import write_result
    from echo_lib.epm.engine import replay
    from fixtures.epm.runs import as_case_run, load_runs

    shutil.copytree(EMPA_FIXTURE, dest)
    for rec in load_runs():
        rep = replay(as_case_run(rec))
        rep.run.judge_details = []
        write_result(rep, dest / "results/benchmark_runs/epm-bench" / rec["model"] / f"{rec['case_id']}_result.json")
    return dest


# The converted embedded model of a DAG run goes beside its results (a temporary folder), never into the
# checkout's results/models. Set $ECHO_TEST_MODELS_DIR to a folder of your choice to keep it between sessions.
MODELS_ENV = "ECHO_TEST_MODELS_DIR"


def dag_models_dir(results_dir) -> Path:
    return Path(os.environ.get(MODELS_ENV) or Path(results_dir) / "models")


def stage_notebooks(results_dir) -> Path:
    """A copy of notebooks/ beside the results, which the DAG of these results executes: a test may edit
    it (and a killed test leaves the checkout as it was)."""
    import shutil

    copy = Path(results_dir) / "stage_notebooks"
    if not copy.is_dir():
        shutil.copytree(ROOT / "notebooks", copy, ignore=shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints"))
    return copy


def snakemake(*args, results_dir=None):
    """Run snakemake in the project root (2 cores); returns (exit code, stdout + stderr).
    A call on the ci run's results also gets that run's EMPA config (ci_run's empa.yaml), so it sees
    the same DAG."""
    args = list(args)
    extra = Path(results_dir or "") / "empa.yaml"
    if results_dir and extra.is_file() and "--configfile" in args:
        args.insert(args.index("--configfile") + 2, str(extra))
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", *args]
    if results_dir:
        cmd += ["--config", f"results_dir={results_dir}", f"models_dir={dag_models_dir(results_dir)}",
                f"notebooks_dir={stage_notebooks(results_dir)}"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def require_paper_toolchain():
    """Fail where `make setup` would have installed the paper's toolchain (Debian/Ubuntu as root); skip,
    naming the command, where it cannot be installed."""
    from echo_lib.report import toolchain

    found = toolchain.present()
    if toolchain.can_build(found) and toolchain.can_read_back(found):
        return
    missing = ", ".join(toolchain.missing_for_apt(found)) or "a TeX engine"
    if toolchain.can_apt_install():
        pytest.fail(f"the paper toolchain is missing ({missing}) on a machine where `make setup` installs it: "
                    "run `make setup` (python -m echo_lib.report.toolchain install)")
    pytest.skip(f"no paper toolchain ({missing}) and this machine cannot install it without root; "
                f"install it with: {toolchain.install_hint()}")


def ci_builds_pdf() -> bool:
    """The ci run typesets main.pdf where a TeX engine is installed. Without one it leaves the PDF out, so
    the other stages' tests still run, and tests/test_paper_dag.py fails (where `make setup` installs the
    toolchain) or skips (where it cannot)."""
    from echo_lib.report.toolchain import can_build

    return can_build()


@pytest.fixture(scope="session")
def ci_run(tmp_path_factory):
    """The whole DAG at config/ci.yaml, once per test session; -> (results/<tmp>/ci, snakemake's output).
    Every test file that checks a stage's outputs uses this one run."""
    results = tmp_path_factory.mktemp("results")
    # EMPA from a local folder (as offline): the fixture with the published runs, fetched into a temp cache
    empa = empa_with_published_runs(tmp_path_factory.mktemp("empa") / "EMPA")
    extra = results / "empa.yaml"
    extra.write_text(f"empa: {{source: '{empa}', commit: null, cache_dir: '{results / 'cache'}'}}\n"
                     + ("" if ci_builds_pdf() else "paper: {build_pdf: false}\n"))
    rc, out = snakemake("--configfile", "config/ci.yaml", results_dir=results)
    assert rc == 0, out[-5000:]
    return results / "ci", out

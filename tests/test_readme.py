"""The README's commands (and those of docs/STAGES.md, SETUP.md, PAPER_SCALE.md) run as written: every fenced
shell command is either run here (the safe ones:
snakemake as a dry run, the entry points' --help) or checked against what it names (make targets,
files, console scripts)."""
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = "".join((ROOT / f).read_text() for f in ("README.md", "docs/STAGES.md", "docs/SETUP.md", "docs/PAPER_SCALE.md"))
# Commands that need what a test cannot have (a cluster, GPUs, keys, the network, a finished run) or
# that change the machine; each is still checked for the files it names.
NOT_RUN = ("pip", "hf", "export", "$EDITOR", "cd", "conda", "python3", ".venv/bin/pip", "awk", "jupyter",
           "OMP_WAIT_POLICY=ACTIVE", "ECHO_EMPA_DIR=/path/to/EMPA-clone",
           "docker", "apptainer")  # no container runtime here: tests/test_container.py reads the recipes


def commands() -> list[str]:
    found = []
    for block in re.findall(r"```(?:bash|sh)\n(.*?)```", README, flags=re.S):
        for line in block.splitlines():
            cmd = re.split(r"\s+#\s", " " + line, maxsplit=1)[0].strip()
            if cmd and not cmd.startswith("#"):
                found.append(cmd)
    return found


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), flags=re.M))


def test_the_readme_has_its_commands():
    cmds = commands()
    assert "make all" in cmds and "make test" in cmds
    assert not any("huggingface-cli" in c for c in cmds), "huggingface_hub 2.x has `hf download`"


@pytest.mark.parametrize("cmd", commands())
def test_every_path_a_command_names_exists(cmd):
    for word in shlex.split(cmd.replace("$EDITOR", "EDITOR")):
        word = word.split("=", 1)[-1]
        if re.fullmatch(r"(config|profiles|scripts|benchmarks|requirements|notebooks)/[\w./-]+", word):
            assert (ROOT / word).exists(), f"{cmd!r} names {word}, which does not exist"


@pytest.mark.parametrize("cmd", [c for c in commands() if c.startswith("make ")])
def test_make_commands_name_real_targets(cmd):
    assert shlex.split(cmd)[1] in make_targets()


@pytest.mark.parametrize("cmd", sorted({c.split()[0] for c in commands() if c.startswith("echo-")}))
def test_console_scripts_exist(cmd):
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert cmd in scripts
    subprocess.run([sys.executable, "-c", f"from {scripts[cmd].replace(':', ' import ')}"], check=True, cwd=ROOT)


def test_every_command_is_run_or_knowingly_not():
    for cmd in commands():
        head = cmd.split()[0]
        assert head in NOT_RUN or head in ("make", "snakemake") or head.startswith("echo-"), (
            f"README command {cmd!r}: add it to a test here, or to NOT_RUN with the reason")


@pytest.fixture(scope="module")
def checkout_copy(tmp_path_factory):
    """The repository without its outputs: a dry run still writes .snakemake/, which stays out of the checkout."""
    copy = tmp_path_factory.mktemp("readme") / "echo"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(
        ".git", ".venv", "results", ".snakemake", ".cache", "__pycache__", "*.egg-info", ".pytest_cache"))
    return copy


@pytest.mark.slow
@pytest.mark.parametrize("cmd", sorted({c for c in commands() if c.startswith(("snakemake ", "echo-run "))}))
def test_snakemake_commands_plan_as_written(cmd, checkout_copy):
    """Each snakemake (or echo-run) line of the README, as a dry run (it builds the DAG, validates the
    config, runs nothing)."""
    args = shlex.split(cmd)[1:]
    if "--report" in args:  # the report needs a finished run; its DAG is the same as without it
        i = args.index("--report")
        del args[i:i + 2]
    if "-n" not in args:
        args.append("-n")
    module = "echo_lib.workflow" if cmd.startswith("echo-run ") else "snakemake"
    out = subprocess.run([sys.executable, "-m", module, *args, "--nolock", "--quiet", "rules"],
                         cwd=checkout_copy, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{cmd!r} (as a dry run) failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"

"""`echo-run`: the config files named on snakemake's command line are read first, so that a missing or
malformed one is one line with the file (and the line), not snakemake's traceback (issue 18, section 2)."""
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from echo_lib.workflow import main, named_config_files

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("argv, files", [
    (["--cores", "2"], []),
    (["--cores", "2", "--configfile", "a.yaml"], ["a.yaml"]),
    (["--configfile", "a.yaml", "b.yaml", "--cores", "2", "c.yaml"], ["a.yaml", "b.yaml"]),
    (["--configfile=a.yaml", "b.yaml", "-n"], ["a.yaml"]),
    (["-n", "--configfiles", "a.yaml", "--config", "seed=1"], ["a.yaml"]),
])
def test_named_config_files(argv, files):
    assert named_config_files(argv) == files


def run_main(argv):
    calls = []
    rc = main(argv, run=lambda exe, args: calls.append(args))
    return rc, calls


def test_a_missing_config_file_is_one_line_and_snakemake_is_not_started(tmp_path, capsys):
    rc, calls = run_main(["--cores", "2", "--configfile", str(tmp_path / "nope.yaml")])
    assert rc == 2 and calls == []
    assert capsys.readouterr().err == f"echo-run: config file {tmp_path / 'nope.yaml'} does not exist\n"


def test_malformed_yaml_and_a_key_twice_name_file_and_line(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("seed: 1\nsandbox:\n  case_ids: [own_001\n")
    (tmp_path / "twice.yaml").write_text("seed: 1\nseed: 2\n")
    rc, calls = run_main(["-n", "--configfile", "config/ci.yaml", str(tmp_path / "bad.yaml"), str(tmp_path / "twice.yaml")])
    assert rc == 2 and calls == []
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"echo-run: config file {tmp_path / 'bad.yaml'}, line 4 is not valid YAML: ")
    assert lines[1] == (f"echo-run: config file {tmp_path / 'twice.yaml'}, line 2 is not valid YAML: "
                        "key 'seed' appears twice (lines 1 and 2)")


def test_a_target_after_configfile_is_named_as_what_snakemake_would_read(capsys):
    """snakemake's --configfile takes every word up to the next option, so a target placed after it is
    read as a config file (a traceback under plain snakemake); echo-run says so."""
    rc, calls = run_main(["--configfile", "config/ci.yaml", "results/probe/epm/summary.csv", "--cores", "2"])
    assert rc == 2 and calls == []
    assert capsys.readouterr().err == ("echo-run: config file results/probe/epm/summary.csv does not exist (--configfile "
                                       "takes every word after it up to the next option: give targets before it)\n")


def test_without_configfile_the_default_config_is_read(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)   # a checkout whose default config was edited badly
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "default.yaml").write_text("seed: 1\nseed: 2\n")
    rc, calls = run_main(["--cores", "2"])
    assert rc == 2 and calls == []
    assert "config/default.yaml, line 2 is not valid YAML: key 'seed' appears twice" in capsys.readouterr().err


def test_readable_files_hand_every_argument_to_this_environments_snakemake():
    argv = ["--cores", "2", "--configfile", str(ROOT / "config/ci.yaml"), "--config", "seed=3"]
    rc, calls = run_main(argv)
    assert rc == 0 and calls == [[sys.executable, "-m", "snakemake", *argv]]


def test_the_command_end_to_end(tmp_path):
    missing = subprocess.run([sys.executable, "-m", "echo_lib.workflow", "-n", "--configfile", str(tmp_path / "x.yaml")],
                             cwd=ROOT, capture_output=True, text=True)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert missing.stderr.strip() == f"echo-run: config file {tmp_path / 'x.yaml'} does not exist"
    version = subprocess.run([sys.executable, "-m", "echo_lib.workflow", "--version"], cwd=ROOT,
                             capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.strip()[0].isdigit()   # snakemake's own answer


def test_installed_as_echo_run():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["echo-run"] == "echo_lib.workflow:main"

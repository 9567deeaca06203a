"""EMPA as a fetched input: both layouts are found, a local folder or a git URL is laid out at the
pinned commit, and an unreachable source is one line that names the key and the fix. All offline: the
"remote" is a git repository made from the fixture in a temporary folder."""
import shutil
import subprocess

import pytest
from conftest import EMPA_FIXTURE

from echo_lib.config import ConfigError, load_config
from echo_lib.empa_source import (EmpaError, EmpaParams, fetch, fetched_layout, layout_file, locate, read_layout,
                                  unavailable_reason)

RUNS = "results/benchmark_runs/epm-bench"


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def empa_repo(tmp_path):
    """The fixture as a git repository with one commit -> (folder, sha)."""
    repo = tmp_path / "EMPA"
    shutil.copytree(EMPA_FIXTURE, repo)
    git("init", "-q", cwd=repo)
    git("add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "fixture", cwd=repo)
    return repo, git("rev-parse", "HEAD", cwd=repo)


def test_locate_reads_both_layouts(tmp_path):
    repo = locate(EMPA_FIXTURE)
    assert repo.data == EMPA_FIXTURE / "empa/data" and repo.results == EMPA_FIXTURE / RUNS
    assert repo.commit is None                                     # inside this repository, not a checkout of EMPA
    assert locate(EMPA_FIXTURE / "empa/data").results == EMPA_FIXTURE / RUNS   # empa/data given: runs at the root
    flat = tmp_path / "flat"                                       # a data folder with results/<model>/ beside cases/
    shutil.copytree(EMPA_FIXTURE / "empa/data", flat)
    shutil.copytree(EMPA_FIXTURE / RUNS, flat / "results")
    assert locate(flat).data == flat and locate(flat).results == flat / "results"
    with pytest.raises(FileNotFoundError, match="not an EMPA folder"):
        locate(tmp_path)


def test_local_folder_is_used_as_it_is(tmp_path):
    params = EmpaParams(source=str(EMPA_FIXTURE), commit=None, cache_dir=str(tmp_path / "cache"))
    assert unavailable_reason(params) is None and fetched_layout(params) is None
    layout = fetch(params)
    assert read_layout(layout_file(params)) == layout == fetched_layout(params)
    assert layout.results == EMPA_FIXTURE / RUNS
    pinned = EmpaParams(source=str(EMPA_FIXTURE), commit="0" * 40, cache_dir=str(tmp_path / "cache"))
    with pytest.raises(EmpaError, match="is not a git checkout, so empa.commit = 0{40} cannot be checked"):
        fetch(pinned)


def test_local_clone_is_checked_against_the_pin(empa_repo, tmp_path):
    repo, sha = empa_repo
    assert fetch(EmpaParams(str(repo), sha, str(tmp_path / "c"))).commit == sha
    with pytest.raises(EmpaError, match=f"is at commit {sha}, but empa.commit pins 1{{40}}; run `git -C "):
        fetch(EmpaParams(str(repo), "1" * 40, str(tmp_path / "c")))


def test_git_url_is_cloned_and_checked_out_at_the_commit(empa_repo, tmp_path):
    repo, first = empa_repo
    (repo / "later.txt").write_text("a later commit\n")
    git("add", ".", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "later", cwd=repo)
    params = EmpaParams(f"file://{repo}", first, str(tmp_path / "cache"))
    assert unavailable_reason(params) is None
    layout = fetch(params)
    assert layout.commit == first and not (layout.root / "later.txt").exists()
    assert layout.root == tmp_path / "cache" / layout.root.parent.name / "repo"
    assert layout.data == layout.root / "empa/data" and (layout.results / "qwen3-32b/script_128_result.json").is_file()
    assert fetch(params) == layout                                 # a second fetch reuses the clone
    with pytest.raises(EmpaError, match="empa.commit = 2{40} is not in file://"):
        fetch(EmpaParams(f"file://{repo}", "2" * 40, str(tmp_path / "other")))


def test_unreachable_source_is_one_line_with_the_fix(tmp_path):
    why = unavailable_reason(EmpaParams(f"file://{tmp_path}/missing.git", None, str(tmp_path / "c")))
    assert why.startswith(f"empa.source = file://{tmp_path}/missing.git cannot be reached (")
    assert "\n" not in why and why.endswith("set empa.source to a local EMPA clone "
                                            "(git clone https://github.com/KAYA-HAI/EMPA-Benchmark-EPMSandbox)")
    assert unavailable_reason(EmpaParams(str(tmp_path / "nope"), None, "c")).startswith(
        f"empa.source = {tmp_path / 'nope'} is not a folder here; set empa.source")
    assert unavailable_reason(EmpaParams(None, None, "c")).startswith("empa.source is null")


def test_config_section_defaults_and_checks():
    cfg = load_config()
    assert cfg.empa == EmpaParams(source="https://github.com/KAYA-HAI/EMPA-Benchmark-EPMSandbox",
                                  commit="2d72c66deb152063431e5ad7613e046f57277b0d", cache_dir=".cache/empa")
    with pytest.raises(ConfigError, match=r"key 'empa.commit' has value \"abc\"; allowed: a string matching"):
        load_config(empa={"commit": "abc"})
    with pytest.raises(ConfigError, match="keys 'sandbox.empa_dir' and 'empa.source' are null"):
        load_config(empa={"source": None}, sandbox={"case_set": "empa"})

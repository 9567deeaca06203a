"""Artifact writers: atomic, UTF-8 whatever the locale (EMPA's cases are Chinese)."""
import json
import os
import stat
import subprocess
import sys

import pytest

from echo_lib.provenance import write_json, write_jsonl


def test_json_and_jsonl_are_utf8_and_leave_no_temp_files(tmp_path):
    write_json(tmp_path / "a" / "r.json", {"text": "共情阈值"})
    write_jsonl(tmp_path / "a" / "r.jsonl", [{"i": 0, "text": "低"}, {"i": 1, "text": "高"}])
    assert json.loads((tmp_path / "a" / "r.json").read_bytes().decode("utf-8")) == {"text": "共情阈值"}
    lines = (tmp_path / "a" / "r.jsonl").read_bytes().decode("utf-8").splitlines()
    assert [json.loads(line)["text"] for line in lines] == ["低", "高"]
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["r.json", "r.jsonl"]


def test_utf8_under_the_c_locale(tmp_path):
    code = f"from echo_lib.provenance import write_json; write_json({str(tmp_path / 'c.json')!r}, {{'t': '\\u9ad8'}})"  # the escape keeps argv ASCII
    subprocess.run([sys.executable, "-c", code], check=True,
                   env={"LC_ALL": "C", "PYTHONUTF8": "0", "PATH": "/usr/bin:/bin"})
    assert json.loads((tmp_path / "c.json").read_bytes().decode("utf-8")) == {"t": "高"}


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_artifacts_follow_the_umask(tmp_path, umask, mode):
    """Results are shared on cluster file systems: not 0600 whatever the umask (mkstemp's default)."""
    old = os.umask(umask)
    try:
        path = write_json(tmp_path / f"r{umask}.json", {"a": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_the_files_a_stage_rewrites_do_not_make_the_commit_dirty(tmp_path):
    """Snakemake removes rule paper's declared outputs before the job, and some are tracked (paper/claims.*):
    the stage's own record must still name a clean commit, while any other change still counts."""
    import subprocess

    from echo_lib.provenance import git_commit

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "paper").mkdir()
    for name in ("code.py", "paper/claims.md"):
        (tmp_path / name).write_text("x\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    clean = git_commit(tmp_path)
    assert clean and not clean.endswith("+dirty")
    (tmp_path / "paper/claims.md").unlink()                       # what Snakemake does before the job
    assert git_commit(tmp_path).endswith("+dirty")
    assert git_commit(tmp_path, generated=[tmp_path / "paper/claims.md"]) == clean
    (tmp_path / "code.py").write_text("y\n")                      # a real change still shows
    assert git_commit(tmp_path, generated=[tmp_path / "paper/claims.md"]).endswith("+dirty")

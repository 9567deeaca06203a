"""Artifact writers: atomic, UTF-8 whatever the locale (EMPA's cases are Chinese)."""
import json
import subprocess
import sys

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

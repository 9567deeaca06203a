"""Issue 38 probes, class "lost data": a failure in one case never loses the others' results, and what a
run wrote stays whole when a write is cut short.

Stage 04 runs on the tests' deterministic fakes (tests/test_sandbox_fakes.py, three own cases). A full disk
is stood in for as in store.py: a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored) in a child process, so a
write past the limit is cut short with EFBIG, as on a full disk (ENOSPC).
"""
from __future__ import annotations

import errno
import json
import os
import sys
import threading
from pathlib import Path

from _common import full_disk_child   # scripts/hostile/_common.py (the runner puts the folder on sys.path)

def _sandbox(work: Path, name: str):
    """(config, LLMs) of a three-case stage 04 on the fakes, in its own results folder."""
    sys.path.insert(0, str(work / "tests"))
    from test_sandbox_fakes import config, fakes

    from echo_lib.config import load_config
    base = work / "probe_lost" / name
    return load_config(config(base, max_failed_fraction=1.0)), fakes(base)[1], base / "results" / "t" / "sandbox" / "base"


def case_write_fails_on_a_full_disk(work: Path):
    """The disk refuses own_002's result file mid-run: own_001 and own_003 must still be written, own_002
    recorded as an error naming the cause, and a rerun play only own_002 (it used to stop the whole run)."""
    from echo_lib.sandbox import results
    from echo_lib.sandbox.stage import run_sandbox
    cfg, llms, out = _sandbox(work, "full_disk")
    real = results.write_json

    def full(path, data):
        if Path(path).name == "own_002_result.json":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, data)

    results.write_json = full
    try:
        first = run_sandbox(cfg, "base", llms=llms)
        seen = "run went on"
    except Exception as err:   # noqa: BLE001  what the user would see
        first, seen = None, f"run stopped: {type(err).__name__}: {err}"
    finally:
        results.write_json = real
    names = sorted(p.name for p in out.glob("*.json"))
    error = json.loads((out / "own_002_error.json").read_text()) if (out / "own_002_error.json").is_file() else {}
    again = run_sandbox(cfg, "base", llms=llms)
    ok = (first is not None and {"own_001_result.json", "own_003_result.json", "summary.json"} <= set(names)
          and "No space left" in error.get("reason", "") and sorted(again.skipped) == ["own_001", "own_003"]
          and (out / "own_002_result.json").is_file())
    return ok, (f"{seen}; files: {', '.join(names)}; own_002's error: {error.get('stage')}: "
                f"{error.get('reason', '')[:120]}; rerun skipped {sorted(again.skipped)}")


def summary_with_a_bad_file(work: Path):
    """A garbage result file and a FIFO named like one in a model's folder: summary.json must name both
    and summarise the other case (it crashed on the first and hung on the second)."""
    from echo_lib.sandbox.stage import run_sandbox
    from echo_lib.sandbox.results import write_summary
    cfg, llms, out = _sandbox(work, "summary")
    run_sandbox(cfg, "base", llms=llms)
    (out / "own_002_result.json").write_text('{"epj": {"trajectory": "cut sh')
    (out / "own_003_result.json").unlink()
    os.mkfifo(out / "own_003_result.json")
    box: dict = {}

    def summarise():
        try:
            box["data"] = json.loads(write_summary(out, "base").read_text())
        except Exception as err:   # noqa: BLE001
            box["error"] = f"{type(err).__name__}: {err}"

    th = threading.Thread(target=summarise, daemon=True)
    th.start()
    th.join(30)
    if th.is_alive():   # let the stuck reader go
        os.close(os.open(out / "own_003_result.json", os.O_WRONLY | os.O_NONBLOCK))
        return False, "write_summary hung on a FIFO named own_003_result.json"
    if "error" in box:
        return False, f"write_summary raised {box['error']}"
    rows = {c["case_id"]: c for c in box["data"]["cases"]}
    ok = (rows.get("own_001", {}).get("status") == "finished"
          and all(rows.get(c, {}).get("status") == "unreadable" for c in ("own_002", "own_003")))
    return ok, "; ".join(f"{k}: {r['status']} {r['reason'][:90]}" for k, r in sorted(rows.items()))


def epmq_out_on_a_full_disk(work: Path):
    """`echo-epmq --out` over an earlier table on a full disk: the command must fail and leave the earlier
    table whole (it was written in place: an empty or truncated table a rerun trusts)."""
    from echo_lib.sandbox.stage import run_sandbox
    cfg, llms, out = _sandbox(work, "epmq")
    run_sandbox(cfg, "base", llms=llms)                 # result files to score (stage 04 on the fakes)
    folder = work / "probe_lost" / "epmq" / "table"
    folder.mkdir(parents=True, exist_ok=True)
    table = folder / "epmq.csv"
    old = "Model,EPM-Q\nearlier,12.34\n"
    table.write_text(old)
    child = full_disk_child(work, f"""
        from echo_lib.epm.cli import main
        try:
            rc = main([{str(out.parent)!r}, "--out", {str(table)!r}])
            print("rc", rc)
        except OSError as err:
            print("failed:", type(err).__name__, err.strerror)
    """, 64)
    now = table.read_text()
    strays = [p.name for p in folder.iterdir() if p.name.startswith(".")]
    said = " ".join([child.stdout.strip(), child.stderr.strip()[-200:]]).strip()
    return (now == old and not strays and "failed" in said,
            f"child: {said}; table afterwards: {now[:60]!r}; temp files left: {strays}")


def paper_table_on_a_full_disk(work: Path):
    """Stage 07's write_table over an earlier table on a full disk: the earlier .tex and .csv stay whole."""
    folder = work / "probe_lost" / "paper"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "t.tex").write_text("% earlier\n")
    (folder / "t.csv").write_text("x\n1\n")
    child = full_disk_child(work, f"""
        import pandas as pd
        from echo_lib.report.tables import write_table
        try:
            write_table(pd.DataFrame({{"x": list(range(200))}}), {str(folder)!r}, "t")
            print("written")
        except OSError as err:
            print("failed:", type(err).__name__, err.strerror)
    """, 32)
    tex, csv = (folder / "t.tex").read_text(), (folder / "t.csv").read_text()
    said = child.stdout.strip() or child.stderr.strip()[-200:]
    return (tex == "% earlier\n" and csv == "x\n1\n" and "failed" in said,
            f"child: {said}; t.tex: {tex[:40]!r}; t.csv: {csv[:40]!r}")


PROBES = [
    ("case_write_fails_on_a_full_disk", case_write_fails_on_a_full_disk),
    ("summary_with_a_bad_file", summary_with_a_bad_file),
    ("epmq_out_on_a_full_disk", epmq_out_on_a_full_disk),
    ("paper_table_on_a_full_disk", paper_table_on_a_full_disk),
]

"""Issue 38 probes, EMPA side: one hostile input per class, tried on a copy of tests/fixtures/empa (the
project's own text in EMPA's layout) the way a user meets it: `echo-scenarios check`, stage 04's case
selection, `echo-epmq`. Each returns (passed, the message the user sees)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

FIXTURE = Path("tests") / "fixtures" / "empa"
# the runner's scratch copy leaves out every results/ folder, the fixture's published runs too: those are
# copied from the checkout this file lives in (read only)
CHECKOUT = Path(__file__).resolve().parents[2]


def _empa(work: Path, name: str) -> Path:
    """A scratch copy of the fixture's data folder."""
    data = work / "hostile-empa" / name
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(work / FIXTURE / "empa" / "data", data)
    return data


def _runs(work: Path, name: str) -> Path:
    runs = work / "hostile-empa" / name
    shutil.rmtree(runs, ignore_errors=True)
    shutil.copytree(CHECKOUT / FIXTURE / "results" / "benchmark_runs" / "epm-bench", runs)
    return runs


def _python(work: Path, args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    """A child process on the scratch copy's echo_lib (a hang is a timeout, not a stuck probe run)."""
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=work)


def _check(work: Path, *args: str) -> subprocess.CompletedProcess:
    return _python(work, ["-m", "echo_lib.scenarios.check", *args])


def duplicate_or_invalid_metadata(work: Path) -> tuple[bool, str]:
    """Class 1: case_metadata.json gives script_042 `distance: "far"` (it was accepted)."""
    data = _empa(work, "metadata")
    meta = json.loads((data / "case_metadata.json").read_text(encoding="utf-8"))
    meta["sampled_cases"][1]["distance"] = "far"
    (data / "case_metadata.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
    done = _check(work, str(data))
    ok = (done.returncode == 1 and done.stdout.startswith("3 of 4 cases import")
          and "case_metadata.json: field 'sampled_cases[1].distance' is 'far'" in done.stdout)
    return ok, f"exit {done.returncode}: {done.stdout.strip()}"


def case_id_with_a_path(work: Path) -> tuple[bool, str]:
    """Class 2: EMPA's downloaded official_cases.txt lists ../../../outside (stage 04 wrote its error file
    outside results/; the importer read a .md outside the EMPA folder)."""
    data = _empa(work, "paths")
    shutil.copy(data / "cases" / "script_003.md", data.parent / "outside.md")
    (data / "official_cases.txt").write_text("script_003\n../outside\n", encoding="utf-8")
    done = _check(work, str(data), "--official")
    ok = done.returncode == 2 and "official_cases.txt: line 2: '../outside' is not a case id" in done.stderr
    return ok, f"exit {done.returncode}: {done.stderr.strip()}"


def out_overwrites_an_input(work: Path) -> tuple[bool, str]:
    """Class 3: `echo-epmq DIR --out DIR/<model>/script_128_result.json` overwrote that input."""
    runs = _runs(work, "out")
    victim = runs / "qwen3-32b" / "script_128_result.json"
    before = victim.read_bytes()
    done = _python(work, ["-m", "echo_lib.epm.cli", str(runs), "--out", str(victim)])
    ok = done.returncode == 2 and victim.read_bytes() == before and "one of the files it reads" in done.stderr
    return ok, f"exit {done.returncode}: {done.stderr.strip()}"


def nan_judge_level(work: Path) -> tuple[bool, str]:
    """Class 4: one result file with a judge level NaN stopped echo-epmq for every model."""
    runs = _runs(work, "nan")
    path = runs / "qwen3-32b" / "script_128_result.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["epj"]["trajectory"][1]["mdep_analysis"]["C_Prog_level"] = "@@"
    path.write_text(json.dumps(data).replace('"@@"', "NaN"), encoding="utf-8")
    done = _python(work, ["-m", "echo_lib.epm.cli", str(runs)])
    models = [line.split(",")[0] for line in done.stdout.splitlines()[1:]]
    ok = (done.returncode == 0 and f"skipped {path}" in done.stderr and "C_Prog_level' is nan" in done.stderr
          and models == ["claude-4.6-opus", "doubao-1.5-character"])
    skipped = next((line for line in done.stderr.splitlines() if "skipped" in line), done.stderr.strip()[-300:])
    return ok, f"exit {done.returncode}, scored {models}; {skipped}"


def story_of_the_wrong_shape(work: Path) -> tuple[bool, str]:
    """Class 5: script_042's story stages written as a list (AttributeError: every case lost)."""
    data = _empa(work, "shape")
    path = data / "scenarios" / "character_stories.json"
    stories = json.loads(path.read_text(encoding="utf-8"))
    for story in stories:
        if story["剧本编号"] == "script_042":
            story["故事的经过"] = list(story["故事的经过"].values())
    path.write_text(json.dumps(stories, ensure_ascii=False), encoding="utf-8")
    done = _check(work, str(data))
    ok = (done.returncode == 1 and done.stdout.startswith("3 of 4 cases import")
          and "field '剧本编号=script_042.故事的经过' is a list, not an object" in done.stdout)
    return ok, f"exit {done.returncode}: {(done.stdout + done.stderr).strip()[-400:]}"


def whitespace_run_in_priorities(work: Path) -> tuple[bool, str]:
    """Class 6: 10,000 spaces in a priority reason (the old regex: about 20 minutes per import)."""
    data = _empa(work, "regex")
    md = data / "cases" / "script_042.md"
    md.write_text(md.read_text(encoding="utf-8").replace("先陪他待在", "先陪他待在" + " " * 10_000, 1), encoding="utf-8")
    code = ("import time; from echo_lib.scenarios.empa_import import import_case\n"
            f"t = time.perf_counter(); sc = import_case({str(data)!r}, 'script_042')\n"
            "print(round(time.perf_counter() - t, 3), sc.priorities.levels())")
    start = time.perf_counter()
    try:
        done = _python(work, ["-c", code], timeout=60)
    except subprocess.TimeoutExpired:
        return False, f"no answer in {time.perf_counter() - start:.0f} s"
    seconds = float(done.stdout.split()[0]) if done.returncode == 0 else float("inf")
    return seconds < 1.0, f"import of the case took {seconds} s: {(done.stdout or done.stderr).strip()[-300:]}"


PROBES = [
    ("metadata_distance_far", duplicate_or_invalid_metadata),
    ("official_id_with_a_path", case_id_with_a_path),
    ("epmq_out_is_an_input", out_overwrites_an_input),
    ("result_level_nan", nan_judge_level),
    ("story_stages_a_list", story_of_the_wrong_shape),
    ("priority_whitespace_run", whitespace_run_in_priorities),
]

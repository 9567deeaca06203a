"""Issue 38, EMPA side: hostile and malformed inputs to the scenario importer, stage 04's case ids and
`echo-epmq` / stage 05's result reader. Each class: the bad input is refused or skipped *and named* (file,
field, fix), and the other cases or files go on. All on copies of tests/fixtures/empa (the project's text)."""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from echo_lib.config import ConfigError, load_config
from echo_lib.epm.cli import main as epmq
from echo_lib.epm.scoring import score_folders
from echo_lib.scenarios import cases as cases_mod
from echo_lib.scenarios import import_empa, select_cases
from echo_lib.scenarios.check import main as check
from echo_lib.scenarios.empa_import import import_case, read_official_ids
from echo_lib.scenarios.own import own_dir

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "empa"
RUNS = FIXTURE / "results" / "benchmark_runs" / "epm-bench"
TWO = ["script_003", "script_042"]


def empa_copy(tmp_path: Path) -> Path:
    """A scratch copy of the fixture's data folder (cases/, scenarios/, case_metadata.json, official_cases.txt)."""
    data = tmp_path / "EMPA"
    shutil.copytree(FIXTURE / "empa" / "data", data)
    return data


def cfg_with(**sandbox):
    block = {"case_set": "own", "empa_dir": None, "case_ids": [], "max_cases": 0} | sandbox
    return load_config(ROOT / "config/default.yaml", sandbox=block, seed=0)

def sections(cfg):
    """What select_cases and load_cases take of a run config: the sandbox: and empa: sections, the seed."""
    return cfg.sandbox, cfg.empa, cfg.seed



def empa_cfg(data: Path, ids=TWO):
    return cfg_with(case_set="empa", empa_dir=str(data), case_ids=list(ids))


def stories(data: Path) -> list:
    return json.loads((data / "scenarios" / "character_stories.json").read_text(encoding="utf-8"))


def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")


def runs_copy(tmp_path: Path) -> Path:
    """The fixture's three published runs (one file each of three models)."""
    runs = tmp_path / "runs"
    shutil.copytree(RUNS, runs)
    return runs


def epmq_process(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    """echo-epmq in a child process with 2 GiB of address space (pandas and numpy need about 1.5), so a reader
    that reads /dev/zero fails fast instead of filling the machine's memory, and a hang is a timeout."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "echo_lib.epm.cli", *args], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=limit, env=env, cwd=ROOT)


# ---- class 1: a case twice, two stories for one case, a metadata value that is no value ---------------

def test_a_case_listed_twice_in_official_cases_is_named_against_that_file(tmp_path, capsys):
    data = empa_copy(tmp_path)
    (data / "official_cases.txt").write_text("script_003\nscript_042\nscript_003\n", encoding="utf-8")
    path = data / "official_cases.txt"
    with pytest.raises(ValueError, match=rf"{path}: line 3 lists 'script_003' again \(first on line 1\)"):
        read_official_ids(data)
    with pytest.raises(ValueError, match=r"official_cases\.txt: line 3"):   # not 'sandbox.case_ids lists a case twice'
        select_cases(*sections(cfg_with(case_set="empa", empa_dir=str(data))))
    with pytest.raises(ValueError, match=r"official_cases\.txt: line 3"):
        import_empa(data)
    assert check(["check", str(data), "--official"]) == 2
    assert f"{path}: line 3 lists 'script_003' again" in capsys.readouterr().err


def test_two_stories_for_one_case_make_that_case_invalid_naming_both_files(tmp_path, capsys):
    data = empa_copy(tmp_path)
    by_id = {s["剧本编号"]: s for s in stories(data)}
    extra = data / "character_stories_extra.json"     # beside cases/: read too (character_stories*.json)
    write_json(extra, [by_id["script_003"] | {"故事的结果": "另一个结局。"}])
    # the same story twice (a full file and an official-30 one) is no conflict
    write_json(data / "scenarios" / "character_stories_official.json", [by_id["script_042"]])
    sel = select_cases(*sections(empa_cfg(data)))
    assert [s.id for s in sel.scenarios] == ["script_042"]
    (bad,) = sel.invalid
    assert bad.case_id == "script_003"
    assert str(extra) in bad.error and str(data / "scenarios" / "character_stories.json") in bad.error
    assert "剧本编号=script_003" in bad.error and "keep one" in bad.error
    # the same script twice in one file, different: named with both entries
    write_json(extra, [by_id["script_128"], by_id["script_128"] | {"故事的插曲": "别的插曲。"}])
    sel = select_cases(*sections(empa_cfg(data, ["script_128", "script_042"])))
    assert [s.id for s in sel.scenarios] == ["script_042"]
    assert f"{extra}" in sel.invalid[0].error and "entries [0] and [1]" in sel.invalid[0].error
    assert check(["check", str(data)]) == 1
    assert "script_128" in capsys.readouterr().out


@pytest.mark.parametrize("field, value", [("distance", "far"), ("distance", -3), ("distance", float("inf")),
                                          ("category", "某个领域"), ("difficulty", 2), ("dominant_axis", "X")])
def test_a_metadata_value_that_is_no_value_is_named_against_case_metadata(tmp_path, field, value):
    data = empa_copy(tmp_path)
    meta = json.loads((data / "case_metadata.json").read_text(encoding="utf-8"))
    assert meta["sampled_cases"][1]["script_id"] == "script_042"
    meta["sampled_cases"][1][field] = value
    (data / "case_metadata.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
    sel = select_cases(*sections(empa_cfg(data)))
    assert [s.id for s in sel.scenarios] == ["script_003"]
    (bad,) = sel.invalid
    assert bad.case_id == "script_042" and bad.path == str(data / "case_metadata.json")
    assert f"case_metadata.json: field 'sampled_cases[1].{field}' is " in bad.error and "; fix: " in bad.error


def test_a_case_listed_twice_in_case_metadata_with_other_labels(tmp_path):
    data = empa_copy(tmp_path)
    meta = json.loads((data / "case_metadata.json").read_text(encoding="utf-8"))
    meta["sampled_cases"].append(meta["sampled_cases"][0] | {"difficulty": "极难"})
    (data / "case_metadata.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
    sel = select_cases(*sections(empa_cfg(data)))
    assert [s.id for s in sel.scenarios] == ["script_042"]
    assert "sampled_cases[0] and [3]" in sel.invalid[0].error and "script_003" in sel.invalid[0].error


# ---- class 2: case ids are plain names, reads stay in the EMPA folder, writes in results ------------------

def test_an_id_with_a_path_in_official_cases_is_refused(tmp_path, capsys):
    data = empa_copy(tmp_path)
    shutil.copy(data / "cases" / "script_003.md", data / "outside.md")    # what ../outside would read
    (data / "official_cases.txt").write_text("script_003\n../outside\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"official_cases\.txt: line 2: '\.\./outside' is not a case id"):
        read_official_ids(data)
    assert check(["check", str(data), "--official"]) == 2
    assert "'../outside' is not a case id" in capsys.readouterr().err
    # nor a path given directly (echo-scenarios check --ids, import_empa's case_ids)
    with pytest.raises(ValueError, match=r"'\.\./outside' is not a case id"):
        import_case(data, "../outside")


def test_stage_04_writes_nothing_outside_its_folder(tmp_path):
    """The id of EMPA's downloaded list became the error file's name: ../../escaped_error.json."""
    from test_sandbox_fakes import config, fakes

    from echo_lib.sandbox.stage import run_sandbox

    data = empa_copy(tmp_path)
    (data / "official_cases.txt").write_text("script_003\n../../../../escaped\n", encoding="utf-8")
    raw = config(tmp_path)
    raw["sandbox"] = {"case_set": "empa", "empa_dir": str(data), "case_ids": []}
    cfg = load_config(raw)
    _, llms = fakes(tmp_path)
    with pytest.raises(ValueError, match=r"official_cases\.txt: line 2: '\.\./\.\./\.\./\.\./escaped' is not a case id"):
        run_sandbox(cfg, "base", llms=llms)
    out = (tmp_path / "results").resolve()
    written = [p for p in tmp_path.rglob("*_error.json")] + [p for p in tmp_path.rglob("*_result.json")]
    assert all(out in p.resolve().parents for p in written), written


def test_result_and_error_paths_refuse_ids_that_are_paths(tmp_path):
    from echo_lib.sandbox.results import error_path, result_path

    assert result_path(tmp_path, "script_003") == tmp_path / "script_003_result.json"
    for bad in ("../x", "a/b", "/etc/x", "..", "", "a\\b", "x\0y"):
        with pytest.raises(ValueError, match="is not a case id"):
            result_path(tmp_path, bad)
        with pytest.raises(ValueError, match="is not a case id"):
            error_path(tmp_path, bad)


@pytest.mark.parametrize("case_set, bad", [("own", "../own/own_001"), ("own", "own/../own_001"),
                                           ("empa", "../cases/script_003"), ("empa", "/tmp/script_003")])
def test_config_case_ids_are_plain_names(case_set, bad):
    extra = {"empa_dir": str(FIXTURE)} if case_set == "empa" else {}
    with pytest.raises(ConfigError, match=rf"'sandbox\.case_ids\[1\]' has value '{bad}', which is not a case id"):
        cfg_with(case_set=case_set, case_ids=["own_001" if case_set == "own" else "script_003", bad], **extra)


def test_a_case_file_that_links_outside_the_empa_folder_is_refused(tmp_path):
    data = empa_copy(tmp_path)
    secret = tmp_path / "secret.md"
    shutil.move(data / "cases" / "script_003.md", secret)
    (data / "cases" / "script_003.md").symlink_to(secret)
    (data / "cases" / "script_005.md").symlink_to(data / "cases" / "script_042.md")   # inside: fine to read
    sel = select_cases(*sections(empa_cfg(data, ["script_003", "script_042"])))
    assert [s.id for s in sel.scenarios] == ["script_042"]
    assert "script_003.md" in sel.invalid[0].error and "outside the EMPA folder" in sel.invalid[0].error
    assert str(secret) in sel.invalid[0].error
    # a story file or the case list that links outside is refused too
    stories_file = data / "scenarios" / "character_stories.json"
    shutil.move(stories_file, tmp_path / "stories.json")
    stories_file.symlink_to(tmp_path / "stories.json")
    with pytest.raises(ValueError, match="character_stories.json.*outside the EMPA folder"):
        import_empa(data, ["script_042"])
    official = data / "official_cases.txt"
    shutil.move(official, tmp_path / "official.txt")
    official.symlink_to(tmp_path / "official.txt")
    with pytest.raises(ValueError, match="official_cases.txt.*outside the EMPA folder"):
        read_official_ids(data)


# ---- class 3: echo-epmq's outputs never overwrite its inputs; inputs are bounded regular files ------------

def test_out_naming_an_input_or_the_other_output_is_refused(tmp_path, capsys):
    runs = runs_copy(tmp_path)
    one = runs / "qwen3-32b" / "script_128_result.json"
    before = one.read_bytes()
    (tmp_path / "link.csv").symlink_to(one)
    for args, flag in ((["--out", str(one)], "--out"), (["--per-case", str(one)], "--per-case"),
                       (["--out", str(runs / "qwen3-32b" / ".." / "qwen3-32b" / one.name)], "--out"),
                       (["--out", str(tmp_path / "link.csv")], "--out")):
        assert epmq([str(runs), *args]) == 2, args
        err = capsys.readouterr().err
        assert f"echo-epmq: {flag} {args[1]}" in err and "is one of the files it reads" in err, err
        assert str(one) in err
        assert one.read_bytes() == before
    assert epmq([str(runs), "--out", str(tmp_path / "t.csv"), "--per-case", str(tmp_path / "." / "t.csv")]) == 2
    assert "--out and --per-case are the same file" in capsys.readouterr().err
    assert not (tmp_path / "t.csv").exists()
    assert epmq([str(runs), "--out", str(tmp_path / "t.csv"), "--per-case", str(tmp_path / "c.csv")]) == 0


def test_a_fifo_is_skipped_not_read(tmp_path):
    runs = runs_copy(tmp_path)
    os.mkfifo(runs / "qwen3-32b" / "script_500_result.json")
    os.mkfifo(runs / "doubao-1.5-character" / "summary.json")
    done = epmq_process([str(runs), "--out", str(tmp_path / "t.csv")])
    assert done.returncode == 0, done.stderr
    assert f"skipped {runs / 'qwen3-32b' / 'script_500_result.json'}: " in done.stderr
    assert "is not a regular file" in done.stderr
    assert pd.read_csv(tmp_path / "t.csv")["Model"].tolist() == ["claude-4.6-opus", "doubao-1.5-character",
                                                                 "qwen3-32b"]


def test_a_link_to_dev_zero_and_a_huge_file_are_skipped(tmp_path):
    runs = runs_copy(tmp_path)
    (runs / "qwen3-32b" / "script_501_result.json").symlink_to("/dev/zero")
    with open(runs / "claude-4.6-opus" / "script_502_result.json", "wb") as f:
        f.truncate(300 << 20)                                     # sparse: 300 MiB of nothing on disk
    done = epmq_process([str(runs), "--out", str(tmp_path / "t.csv")])
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"skipped {runs / 'qwen3-32b' / 'script_501_result.json'}: " in done.stderr
    assert "is not a regular file" in done.stderr and "MiB, more than a result file may have" in done.stderr
    assert len(pd.read_csv(tmp_path / "t.csv")) == 3


# ---- class 4: one bad result file is skipped and named, the others are scored (echo-epmq and stage 05) ---

def _level_raw(data: dict, raw: str) -> str:
    data["epj"]["trajectory"][1]["mdep_analysis"]["C_Prog_level"] = "@@"
    return json.dumps(data).replace('"@@"', raw)


def _set(path: list, value):
    def edit(data):
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        return json.dumps(data)
    return edit


BAD_RESULTS = {
    "level NaN": (lambda d: _level_raw(d, "NaN"), "epj.trajectory[1].mdep_analysis.C_Prog_level"),
    "level Infinity": (lambda d: _level_raw(d, "Infinity"), "epj.trajectory[1].mdep_analysis.C_Prog_level"),
    "level -Infinity": (lambda d: _level_raw(d, "-Infinity"), "epj.trajectory[1].mdep_analysis.C_Prog_level"),
    "level 1e400": (lambda d: _level_raw(d, "1e400"), "epj.trajectory[1].mdep_analysis.C_Prog_level"),
    "huge integer": (lambda d: _level_raw(d, "9" * 5000), "(file)"),
    "point 0 a string": (_set(["epj", "trajectory", 0], "P0"), "epj.trajectory[0]"),
    "point 0 a list": (_set(["epj", "trajectory", 0], [1, 2]), "epj.trajectory[0]"),
    "epm_params a list": (_set(["epj", "epm_params"], [0.5]), "epj.epm_params"),
    "epm_params a string": (_set(["epj", "epm_params"], "x"), "epj.epm_params"),
    "termination_reason a list": (_set(["termination_reason"], ["x"]), "termination_reason"),
}


@pytest.mark.parametrize("name", list(BAD_RESULTS))
def test_one_bad_result_file_is_skipped_and_named_the_others_scored(tmp_path, capsys, name):
    edit, field = BAD_RESULTS[name]
    runs = runs_copy(tmp_path)
    path = runs / "qwen3-32b" / "script_128_result.json"
    path.write_text(edit(json.loads(path.read_text(encoding="utf-8"))), encoding="utf-8")
    assert epmq([str(runs), "--out", str(tmp_path / "t.csv")]) == 0
    err = capsys.readouterr().err
    assert f"echo-epmq: skipped {path}: {path}: " in err and (field == "(file)" or f"field '{field}'" in err), err
    assert pd.read_csv(tmp_path / "t.csv")["Model"].tolist() == ["claude-4.6-opus", "doubao-1.5-character"]
    # stage 05 reads through score_folders (notebooks/05_epm_analysis.py)
    scored = score_folders([runs])
    assert [s.path for s in scored.skipped] == [path] and str(path) in scored.skipped[0].reason
    assert sorted(scored.summary["Model"]) == ["claude-4.6-opus", "doubao-1.5-character"]


def test_a_replay_that_fails_skips_that_file_only(tmp_path, monkeypatch, capsys):
    """Whatever a file holds that the replay cannot take, it costs that file, not every model."""
    from echo_lib.epm import scoring

    real = scoring.replay

    def picky(run, params):
        if run.case_id == "script_128":
            raise OverflowError("cannot convert float infinity to integer")
        return real(run, params)
    monkeypatch.setattr(scoring, "replay", picky)
    runs = runs_copy(tmp_path)
    assert epmq([str(runs), "--out", str(tmp_path / "t.csv")]) == 0
    err = capsys.readouterr().err
    assert f"skipped {runs / 'qwen3-32b' / 'script_128_result.json'}: " in err and "OverflowError" in err
    assert len(pd.read_csv(tmp_path / "t.csv")) == 2


# ---- class 5: story and metadata files of an unexpected shape cost the bad case, not every case ----------

def _check_lines(capsys, data: Path) -> tuple[int, list[str]]:
    code = check(["check", str(data)])
    return code, capsys.readouterr().out.splitlines()


def test_a_story_entry_that_is_a_string(tmp_path, capsys):
    data = empa_copy(tmp_path)
    file = data / "scenarios" / "character_stories.json"
    write_json(file, [*stories(data), "一个字符串"])
    code, out = _check_lines(capsys, data)
    assert code == 1 and out[0].startswith("4 of 4 cases import")
    assert out[1] == (f"FAIL {file}: field '[4]' is a str, not a story object; fix: give each story as an object "
                      "with 剧本编号, 故事的经过, 故事的结果 and 故事的插曲 (or remove the entry)")
    assert [s.id for s in select_cases(*sections(empa_cfg(data))).scenarios] == TWO


@pytest.mark.parametrize("shape", ["stages a list", "a stage a string", "stages a string", "id a number",
                                   "file a string", "file a number"])
def test_story_shapes(tmp_path, capsys, shape):
    data = empa_copy(tmp_path)
    file = data / "scenarios" / "character_stories.json"
    entries = stories(data)
    i = next(k for k, s in enumerate(entries) if s["剧本编号"] == "script_042")
    if shape == "stages a list":
        entries[i]["故事的经过"] = list(entries[i]["故事的经过"].values())
    elif shape == "a stage a string":
        entries[i]["故事的经过"]["阶段2"] = "只是一句话"
    elif shape == "stages a string":
        entries[i]["故事的经过"] = "只是一句话"
    elif shape == "id a number":
        entries[i]["剧本编号"] = 42
    write_json(file, {"file a string": "故事", "file a number": 7}.get(shape, entries))
    sel = select_cases(*sections(empa_cfg(data, ["script_003", "script_042", "script_128"])))
    if shape.startswith("file"):     # no story at all: every case says which file and why
        assert sel.scenarios == [] and len(sel.invalid) == 3
        assert all(f"{file}" in c.error and "not a list of stories" in c.error for c in sel.invalid)
        return
    assert [s.id for s in sel.scenarios] == ["script_003", "script_128"]
    (bad,) = sel.invalid
    assert bad.case_id == "script_042" and str(file) in bad.error, bad.error
    code, out = _check_lines(capsys, data)
    assert code == 1 and out[0].startswith("3 of 4 cases import") and any(str(file) in line for line in out[1:])


def test_a_metadata_entry_of_the_wrong_shape_and_metadata_as_a_list(tmp_path, capsys):
    data = empa_copy(tmp_path)
    path = data / "case_metadata.json"
    meta = json.loads(path.read_text(encoding="utf-8"))
    meta["sampled_cases"].insert(0, "script_999")
    meta["sampled_cases"].insert(1, {"category": "人际关系"})
    write_json(path, meta)
    code, out = _check_lines(capsys, data)
    assert code == 1 and out[0].startswith("4 of 4 cases import")
    assert f"FAIL {path}: field 'sampled_cases[0]' is a str, not an object" in out[1]
    assert f"FAIL {path}: field 'sampled_cases[1].script_id' is missing" in out[2]
    sel = select_cases(*sections(empa_cfg(data)))
    assert [s.labels.difficulty for s in sel.scenarios] == ["Medium", "Medium"]   # the good entries still count
    write_json(path, meta["sampled_cases"])                                       # the list without its object
    assert check(["check", str(data)]) == 2
    assert f"{path}: field 'sampled_cases' is missing" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"case_metadata\.json: field 'sampled_cases' is missing"):
        select_cases(*sections(empa_cfg(data)))


def test_a_ranking_that_names_one_need_three_times(tmp_path):
    """"认知共情 > 认知共情 > 认知共情" gave one level instead of three: a KeyError that stopped the import."""
    data = empa_copy(tmp_path)
    md = data / "cases" / "script_042.md"
    text = md.read_text(encoding="utf-8")
    block = text[text.index("当下共情需求优先级"):text.index("</psychological_profile>")]
    md.write_text(text.replace(block, "当下共情需求优先级：认知共情 > 认知共情 > 认知共情\n"), encoding="utf-8")
    sel = select_cases(*sections(empa_cfg(data)))
    assert [s.id for s in sel.scenarios] == ["script_003"]
    assert f"{md}: field '(tagged sections)' no priority level found for" in sel.invalid[0].error
    with pytest.raises(ValueError, match="no priority level found"):
        import_case(data, "script_042")


def test_two_stray_keys_of_different_types_cost_that_case_only(tmp_path, monkeypatch):
    folder = tmp_path / "own"
    folder.mkdir()
    shutil.copy(own_dir() / "own_002.yaml", folder)
    text = (own_dir() / "own_001.yaml").read_text(encoding="utf-8")
    (folder / "own_001.yaml").write_text(text + "\n1: one\nzz: two\n", encoding="utf-8")
    monkeypatch.setattr(cases_mod, "own_dir", lambda: folder)
    sel = select_cases(*sections(cfg_with()))
    assert [s.id for s in sel.scenarios] == ["own_002"]
    assert "own_001.yaml: field '1' is not a scenario field" in sel.invalid[0].error


def test_an_unforeseen_error_in_one_case_costs_that_case_only(tmp_path, monkeypatch, capsys):
    from echo_lib.scenarios import check as check_mod

    real = cases_mod.import_case

    def flaky(root, cid, *args):
        if cid == "script_003":
            raise TypeError("'<' not supported between instances of 'int' and 'str'")
        return real(root, cid, *args)
    monkeypatch.setattr(cases_mod, "import_case", flaky)
    monkeypatch.setattr(check_mod, "import_case", flaky)
    sel = select_cases(*sections(empa_cfg(FIXTURE)))
    assert [s.id for s in sel.scenarios] == ["script_042"]
    assert "script_003.md" in sel.invalid[0].error and "TypeError" in sel.invalid[0].error
    assert check(["check", str(FIXTURE)]) == 1
    assert "3 of 4 cases import" in capsys.readouterr().out


def test_crlf_case_prompts_read_as_before(tmp_path):
    """The bounded reader keeps Path.read_text's universal newlines (EMPA's prompts have \\r\\n lines)."""
    data = empa_copy(tmp_path)
    md = data / "cases" / "script_042.md"
    md.write_bytes(md.read_bytes().replace(b"\n", b"\r\n"))
    assert import_case(data, "script_042") == import_case(FIXTURE, "script_042").__class__(
        **{**import_case(FIXTURE, "script_042").__dict__, "source": str(md)})


# ---- class 6: the parsers take linear time on long runs of one character -------------------------------

HOSTILE_TEXTS = {
    "10,000 spaces in a priority reason": ("先陪他待在这份空虚里", "先陪他待在" + " " * 10_000 + "这份空虚里"),
    "10,000 spaces and tabs at a reason's end": ("先陪他待在这份空虚里", "先陪他待在这份空虚里" + " \t" * 5_000),
    "10,000 digits before a list dot": ("先陪他待在这份空虚里", "先陪他待在这份空虚里" + "1" * 10_000 + "x"),
    "10,000 open tags": ("</scenario>", "</scenario>" + "<scenario>" * 10_000),
    "10,000 threshold labels": ("共情阈值【中】，", "共情阈值【中】，" + "共情阈值【" * 10_000),
    "10,000 newlines in a field": ("他是一家软件公司的技术负责人。", "他是一家" + "\n  " * 10_000 + "软件公司。"),
}


def test_long_runs_parse_in_linear_time(tmp_path):
    """Each hostile case prompt imports (or fails with a named error) in < 1 s; the regex that backtracked
    took 16 s on 2,400 spaces and about 20 minutes on 10,000. A child process, so a slow parser is a
    timeout here rather than a stuck test run."""
    data = empa_copy(tmp_path)
    md = data / "cases" / "script_042.md"
    text = md.read_text(encoding="utf-8")
    for k, (old, new) in enumerate(HOSTILE_TEXTS.values()):
        assert old in text
        (data / "cases" / f"script_{700 + k}.md").write_text(text.replace(old, new, 1), encoding="utf-8")
    code = textwrap.dedent(f"""
        import time
        from echo_lib.scenarios.empa_import import import_case, read_metadata, read_stories
        from echo_lib.scenarios.schema import ScenarioError
        data = {str(data)!r}
        stories, meta = read_stories(data), read_metadata(data)
        stories.update({{f"script_{{700 + k}}": dict(stories["script_042"], 剧本编号=f"script_{{700 + k}}")
                        for k in range({len(HOSTILE_TEXTS)})}})
        for k in range({len(HOSTILE_TEXTS)}):
            start = time.perf_counter()
            try:
                sc = import_case(data, f"script_{{700 + k}}", stories, meta)
                what = sc.priorities.affective.reason[:8]
            except ScenarioError as err:
                what = "ScenarioError"
            print(k, round(time.perf_counter() - start, 3), what, flush=True)
    """)
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"the import did not finish in 60 s; so far: {err.stdout!r}")
    assert done.returncode == 0, done.stderr[-3000:]
    times = {name: float(line.split()[1]) for name, line in zip(HOSTILE_TEXTS, done.stdout.splitlines())}
    assert len(times) == len(HOSTILE_TEXTS) and all(t < 1.0 for t in times.values()), times
    assert done.stdout.splitlines()[0].split()[2] == "先陪他待在"      # the reason, its whitespace run cut short

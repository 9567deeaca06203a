"""`echo-epmq DIR`: replays every file from its judge levels and reproduces the published leaderboard;
malformed files are named and skipped."""
import json
import shutil

import pandas as pd
import pytest

from echo_lib.epm.cli import main
from echo_lib.epm.empa_io import write_result
from echo_lib.epm.engine import replay
from echo_lib.epm.epmq import INDICES, SUMMARY_COLUMNS
from fixtures.epm.runs import HERE, as_case_run, load_runs

COLUMNS = [*INDICES, "Outcome", "Efficiency", "Stability", "EPM-Q"]
BOARD = {"Outcome Quality": "Outcome", "Process Efficiency": "Efficiency", "Process Stability": "Stability",
         "EPM-Q Score": "EPM-Q"}


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    """The 90 published runs written back as EMPA files from the fixture's numbers (no dialogue)."""
    root = tmp_path_factory.mktemp("runs")
    for rec in load_runs():
        rep = replay(as_case_run(rec))
        rep.run.judge_details = []          # levels only
        write_result(rep, root / rec["model"] / f"{rec['case_id']}_result.json")
    return root


def leaderboard_error(csv_path):
    mine = pd.read_csv(csv_path).set_index("Model")
    board = pd.read_csv(HERE / "leaderboard_subset.csv").rename(columns=BOARD).set_index("Folder")
    assert list(mine.columns) == list(SUMMARY_COLUMNS[1:])
    return float((mine.loc[board.index, COLUMNS] - board[COLUMNS]).abs().max().max()), mine


def test_reproduces_the_leaderboard_from_written_files(runs_dir, tmp_path):
    assert main([str(runs_dir), "--out", str(tmp_path / "epmq.csv"), "--per-case", str(tmp_path / "cases.csv")]) == 0
    error, mine = leaderboard_error(tmp_path / "epmq.csv")
    assert error <= 0.01
    assert mine.loc["doubao-1.5-character", ["Success", "Failure", "Timeout"]].tolist() == [4, 23, 3]
    assert len(pd.read_csv(tmp_path / "cases.csv")) == 90


def test_malformed_files_are_named_and_skipped(runs_dir, tmp_path, capsys):
    model = tmp_path / "runs" / "qwen3-32b"
    shutil.copytree(runs_dir / "qwen3-32b", model)
    (model / "script_998_result.json").write_text("{not json")
    broken = json.loads((model / "script_003_result.json").read_text())
    del broken["epj"]["iedr_details"]["filled_iedr"]["A.2"]
    (model / "script_999_result.json").write_text(json.dumps(broken))
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "out.csv"), "--per-case", str(tmp_path / "c.csv")]) == 0
    err = capsys.readouterr().err
    assert "skipped" in err and "script_998_result.json" in err and "not a readable JSON file" in err
    assert "script_999_result.json" in err and "filled_iedr.A.2" in err
    assert len(pd.read_csv(tmp_path / "c.csv")) == 30                 # the other files still count
    assert pd.read_csv(tmp_path / "out.csv")["EPM-Q"].tolist() == [14.77]


def test_constants_option_and_stdout(runs_dir, capsys):
    assert main([str(runs_dir / "claude-4.6-opus"), "--constants", "paper"]) == 0   # one model folder
    out = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out))
    assert out["Model"].tolist() == ["claude-4.6-opus"]
    assert out.loc[0, "EPM-Q"] != 107.19 and out.loc[0, "Success"] == 30


def test_missing_or_empty_folder_exits_2(tmp_path, capsys):
    assert main([str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty")]) == 2


def test_reads_the_fixture_in_empas_layout(empa_fixture, tmp_path, capsys):
    assert main([str(empa_fixture.results), "--out", str(tmp_path / "epmq.csv")]) == 0
    table = pd.read_csv(tmp_path / "epmq.csv").set_index("Model")
    assert table.index.tolist() == ["claude-4.6-opus", "doubao-1.5-character", "qwen3-32b"]
    assert table["Success"].tolist() == [1, 0, 0] and table["Failure"].tolist() == [0, 1, 1]


def test_reproduces_the_leaderboard_from_the_published_files(empa, tmp_path):
    """Opt-in (ECHO_EMPA_DIR): EMPA's own result files."""
    assert main([str(empa.results), "--out", str(tmp_path / "epmq.csv")]) == 0
    error, _ = leaderboard_error(tmp_path / "epmq.csv")
    assert error <= 0.01


def test_bad_fields_are_named_and_the_other_files_go_on(runs_dir, tmp_path, capsys):
    """Issue 18: `total_turns: null` (was a TypeError that stopped echo-epmq), a second file of one
    script_id (was counted twice), and a judge level that is no level (scored 0 as published: now said)."""
    model = tmp_path / "runs" / "qwen3-32b"
    shutil.copytree(runs_dir / "qwen3-32b", model)
    original = json.loads((model / "script_003_result.json").read_text())
    (model / "script_997_result.json").write_text(json.dumps(original | {"script_id": "script_997", "total_turns": None}))
    (model / "script_003v2_result.json").write_text(json.dumps(original))
    # garbage where the judge's level was 0: scored 0 as before (the table is unchanged), but named
    path = next(p for p in sorted(model.glob("script_1*_result.json"))
                if json.loads(p.read_text())["epj"]["trajectory"][1]["mdep_analysis"]["C_Prog_level"] == 0)
    data = json.loads(path.read_text())
    data["epj"]["trajectory"][1]["mdep_analysis"]["C_Prog_level"] = "high"
    path.write_text(json.dumps(data))
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "out.csv"), "--per-case", str(tmp_path / "c.csv")]) == 0
    err = capsys.readouterr().err
    assert "script_997_result.json: field 'total_turns' is None" in err
    assert "script_003v2_result.json: field 'script_id' is 'script_003', the case of script_003_result.json" in err
    assert f"note: {path}: field 'epj.trajectory[1].mdep_analysis.C_Prog_level' is 'high'" in err
    assert len(pd.read_csv(tmp_path / "c.csv")) == 30                 # each case once; the others count
    assert pd.read_csv(tmp_path / "out.csv")["EPM-Q"].tolist() == [14.77]


def test_out_naming_a_folder_is_a_clear_error(runs_dir, tmp_path, capsys):
    assert main([str(runs_dir), "--out", str(tmp_path)]) == 2
    assert f"--out {tmp_path} is a folder; give a file name" in capsys.readouterr().err

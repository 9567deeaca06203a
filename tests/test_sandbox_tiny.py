"""The sandbox end to end on the tiny random model (every role local: generate, choose, call_tools), and
notebook 04 on it."""
import json

import nbformat

from echo_lib.config import load_config
from echo_lib.epm.cli import main as epmq
from echo_lib.epm.empa_io import read_result
from echo_lib.epm.engine import replay
from echo_lib.epm.params import EPMParams
from echo_lib.notebook import run_notebook
from echo_lib.sandbox import DIRECTOR_END
from echo_lib.sandbox.stage import run_sandbox
from echo_lib.sandbox.loop import FROM_EPM


def tiny_config(tmp_path, tiny_lm_dir) -> dict:
    short = {"max_new_tokens": 6}
    return {"models": {"base": {"backend": "hf", "source": "local", "id": str(tiny_lm_dir)}},
            "results_dir": str(tmp_path / "results"), "run_name": "tiny", "llm": {"progress": False},
            "sandbox": {"case_ids": ["own_001", "own_002"]},
            "sandbox_run": {"max_turns": 2, "min_turns": 1, "test_model": short, "actor": short,
                            "director": {"interval": 1}}}


def test_tiny_model_end_to_end(tmp_path, tiny_lm_dir, capsys):
    cfg = load_config(tiny_config(tmp_path, tiny_lm_dir))
    rep = run_sandbox(cfg, "base")
    assert [r["status"] for r in rep.rows] == ["finished", "finished"]
    for case_id in ("own_001", "own_002"):
        path = rep.out_dir / f"{case_id}_result.json"
        data = json.loads(path.read_text())
        # the ending is the one the EPM replay of the file's judge levels decides (not only one of four)
        run = read_result(path)
        t = replay(run, EPMParams(**data["sandbox"]["parameters"]["epm"])).termination
        assert data["sandbox"]["termination_type"] == (FROM_EPM[t.label] if t else DIRECTOR_END)
        assert data["sandbox"]["judge_mode"] == "choose" and data["history"][0]["role"] == "actor"
        played = sum(m["role"] == "actor" for m in data["history"])
        assert data["total_turns"] == played == (t.turn if t else data["sandbox"]["termination_turn"])
        assert len(run.rubrics) == data["total_turns"] and set(run.iedr) == {f"{a}.{i}" for a in "CAP" for i in (1, 2, 3)}
    assert epmq([str(rep.out_dir.parent)]) == 0 and "base," in capsys.readouterr().out
    summary = json.loads((rep.out_dir / "summary.json").read_text())
    assert summary["model"] == "base" and sum(summary["counts"].values()) == 2


def test_notebook_runs_and_reruns_from_its_files(tmp_path, tiny_lm_dir):
    config = tiny_config(tmp_path, tiny_lm_dir)
    config["sandbox"]["case_ids"] = ["own_003"]
    out = run_notebook("notebooks/04_sandbox.py", tmp_path / "04.ipynb", {"config": config, "model": "base"})
    folder = tmp_path / "results" / "tiny" / "sandbox" / "base"
    assert (folder / "own_003_result.json").exists() and (folder / "energy.png").exists()
    cells = nbformat.read(out, as_version=4).cells
    assert cells[0].cell_type == "markdown" and "Algorithm 2" in cells[0].source
    text = "".join(o.get("text", "") for c in cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "USER (turn 1)" in text and "1 case(s) played" in text
    # a second run finds the case finished and plays nothing
    run_notebook("notebooks/04_sandbox.py", tmp_path / "04b.ipynb", {"config": config, "model": "base"})
    again = nbformat.read(tmp_path / "04b.ipynb", as_version=4).cells
    assert "0 case(s) played" in "".join(o.get("text", "") for c in again if c.cell_type == "code"
                                         for o in c.get("outputs", []))

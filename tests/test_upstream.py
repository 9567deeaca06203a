"""A notebook run by hand checks the files of earlier stages first (echo_lib.upstream) and says which command
makes the missing ones."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from echo_lib.config import load_config
from echo_lib.upstream import require, stage_inputs

ROOT = Path(__file__).resolve().parents[1]


def cfg(tmp_path, **more):
    return load_config({"results_dir": str(tmp_path / "results"), "run_name": "r", **more})


def test_a_missing_input_names_the_files_and_the_command_that_makes_them(tmp_path):
    c = cfg(tmp_path, models_dir=str(tmp_path / "models"))
    with pytest.raises(FileNotFoundError) as err:
        require(c, "reward_models", kind="scalar")
    text = str(err.value)
    data = tmp_path / "results/r/data/empathy"
    assert f"  {data / 'train.jsonl'}\n" in text and "3 of its inputs are missing" in text
    assert f"  {tmp_path / 'models/smollm2-135m-instruct'}\n" in text   # the embedded checkpoint: stage 00 makes it
    assert (f"snakemake --cores 2 --configfile <the config of run 'r'> {data / 'train.jsonl'} {data / 'test.jsonl'} "
            f"{tmp_path / 'results/r/models/manifest.json'}") in text
    for p in stage_inputs(c, "reward_models", kind="scalar"):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("{}")
    (tmp_path / "models/smollm2-135m-instruct").mkdir(parents=True)
    require(c, "reward_models", kind="scalar")   # all there: nothing raised


def test_the_trained_judges_heads_are_made_by_rule_judges(tmp_path):
    c = cfg(tmp_path, models_dir=str(tmp_path / "models"), roles={"judge": "tiny_judge"},
            judges={"train": {"enabled": True}})
    (tmp_path / "models/smollm2-135m-instruct").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"judges/readout\n.*\n.*judges/sensitivity.json$"):
        require(c, "sandbox", model="base")


def test_a_policy_variant_under_test_needs_its_adapter_and_the_base_does_not(tmp_path):
    c = cfg(tmp_path)
    adapter = tmp_path / "results/r/policy/echo/adapter"
    assert adapter in stage_inputs(c, "sandbox", model="echo")
    assert adapter not in stage_inputs(c, "sandbox", model="base")
    with pytest.raises(ValueError, match="unknown stage"):
        stage_inputs(c, "lunch")


def test_every_stage_notebook_checks_its_inputs_right_after_start():
    for py in sorted((ROOT / "notebooks").glob("0[1-46-7]_*.py")):
        text = py.read_text()
        start = text.index("cfg = start(")
        assert re.search(r"\nrequire\(cfg, \"\w+\"", text[start:start + 400]), py.name


def test_stage_05_by_hand_without_fetched_runs_says_how_to_fetch_them(tmp_path):
    from echo_lib.epm.scoring import resolve_result_dirs
    with pytest.raises(FileNotFoundError, match=r"snakemake --cores 1 empa"):
        resolve_result_dirs([], None)
    assert resolve_result_dirs([], tmp_path) == [tmp_path]


def test_the_paper_and_the_nee_panel_do_not_need_the_base_checkpoint(tmp_path):
    """A copied run (no models folder) still gives its paper; the NEE panel needs only its judges' files."""
    c = cfg(tmp_path, models_dir=str(tmp_path / "models"))
    for p in stage_inputs(c, "paper"):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("{}")
    require(c, "paper")   # nothing raised although models/ is empty
    with pytest.raises(FileNotFoundError, match="smollm2-135m-instruct"):
        require(c, "reward_models", kind="humanlike")

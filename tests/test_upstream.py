"""A notebook run by hand checks the files of earlier stages first (echo_lib.upstream) and says which command
makes the missing ones."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from echo_lib.config import load_config
from echo_lib.empa_source import EmpaLayout, layout_file, published_runs_here
from echo_lib.provenance import write_json
from echo_lib.upstream import published_note, require, sandbox_dirs, stage_inputs

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
        assert p.is_relative_to(tmp_path)   # a run's file: never one of the repository's
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
    adapter = tmp_path / "results/r/policy/echo/adapter/adapter_config.json"
    assert adapter in stage_inputs(c, "sandbox", model="echo")
    assert adapter not in stage_inputs(c, "sandbox", model="base")
    with pytest.raises(ValueError, match="unknown stage"):
        stage_inputs(c, "lunch")


def test_every_stage_notebook_checks_its_inputs_right_after_start():
    for py in sorted((ROOT / "notebooks").glob("0[1-7]_*.py")):
        text = py.read_text()
        start = text.index("cfg = start(")
        assert re.search(r"\n *require\(cfg, \"\w+\"", text[start:start + 400]), py.name


def test_stage_05_by_hand_reads_the_folders_the_dags_rule_epm_passes(tmp_path):
    """Without result_dirs, notebook 05 analyses this run's own sandbox results: one folder per model of
    sandbox.models (the Snakefile's rule epm passes sandbox_dirs too), each with the summary.json stage 04
    writes last; a missing one names the snakemake target. It loads no model."""
    c = cfg(tmp_path, models_dir=str(tmp_path / "models"), sandbox={"models": ["base", "echo"]})
    run = tmp_path / "results/r"
    assert sandbox_dirs(c) == [run / "sandbox/base", run / "sandbox/echo"]
    epm_rule = (ROOT / "workflow/rules/epm.smk").read_text()
    assert "result_dirs=[os.path.dirname(s) for s in input.summaries]" in epm_rule   # the stage table's summaries
    (run / "sandbox/base").mkdir(parents=True)
    (run / "sandbox/base/summary.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"1 of its inputs are missing:\n  \S+/sandbox/echo/summary.json\n"
                                                r"(.|\n)*snakemake --cores 2 .* \S+/sandbox/echo/summary.json$"):
        require(c, "epm")
    (run / "sandbox/echo").mkdir()
    (run / "sandbox/echo/summary.json").write_text("{}")
    require(c, "epm")   # all there, and no checkpoint needed: nothing raised
    assert stage_inputs(c, "epm") == [d / "summary.json" for d in sandbox_dirs(c)]


def test_stage_05_by_hand_says_where_the_published_runs_are_or_why_they_are_skipped(tmp_path):
    """Offline with EMPA never fetched, the note says so (nothing is probed); fetched, it gives the
    parameters that analyse them; published.empa_results names a folder of its own."""
    empa = {"source": "https://example.invalid/EMPA", "commit": None, "cache_dir": str(tmp_path / "cache")}
    c = cfg(tmp_path, empa=empa)
    note = published_note(c)
    assert note.startswith("note: EMPA's published runs are not fetched") and "snakemake --cores 1 empa" in note
    assert note.endswith("the published comparison (stage 05 on EMPA's runs) is skipped")
    runs = tmp_path / "EMPA/results/benchmark_runs/epm-bench"
    layout = EmpaLayout(root=tmp_path / "EMPA", data=tmp_path / "EMPA/empa/data", results=runs)
    write_json(layout_file(c.empa), layout.to_dict())   # what rule empa leaves
    assert published_runs_here(None, c.empa) == (runs, None)
    note = published_note(c)
    assert f"result_dirs = [{str(runs)!r}]" in note and "epm_published" in note and "'empa_stats'" in note
    c = cfg(tmp_path, empa=empa, published={"empa_results": str(tmp_path / "nowhere")})
    assert "published.empa_results" in published_note(c) and "skipped" in published_note(c)


def test_the_paper_and_the_nee_panel_do_not_need_the_base_checkpoint(tmp_path):
    """A copied run (no models folder) still gives its paper; the NEE panel needs only its judges' files."""
    c = cfg(tmp_path, models_dir=str(tmp_path / "models"))
    run_files = [p for p in stage_inputs(c, "paper") if p.is_relative_to(tmp_path)]   # not the paper's sources
    assert ROOT / "paper/main.tex" in [ROOT / p for p in stage_inputs(c, "paper")]
    for p in run_files:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("{}")
    require(c, "paper")   # nothing raised although models/ is empty
    with pytest.raises(FileNotFoundError, match="smollm2-135m-instruct"):
        require(c, "reward_models", kind="humanlike")

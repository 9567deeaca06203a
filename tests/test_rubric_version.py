"""Issue 39, section 2: every result file names, in words, the rubric / prompt version that scored it, and the
EPM tables refuse to pool results scored under different versions.

- the version constants (sandbox judge, NEE panel) match the prompt text they were written for, and an edit
  of that text without a new version is caught (a docstring or comment edit is not);
- the sandbox's result and error files carry `sandbox.rubric_version`; EMPA's files read as "EMPA published";
- score_folders (stage 05, echo-epmq) refuses folders of two versions with an error that names the folders,
  the files, both versions and the fix; folders of one version pool as before."""
from __future__ import annotations

import json
import shutil

import pytest
from test_sandbox_fakes import config, fakes

from echo_lib.config import load_config
from echo_lib.epm.cli import main as epmq
from echo_lib.epm.empa_io import EMPA_PUBLISHED, UNVERSIONED, read_result, rubric_version, write_result
from echo_lib.epm.engine import replay
from echo_lib.epm.iedr import INDICATORS
from echo_lib.epm.pooling import MixedRubricVersions
from echo_lib.epm.scoring import score_folders
from echo_lib.epm.trajectory import CaseRun
from echo_lib.nee import prompts as nee_prompts
from echo_lib.rubric_version import PACKAGE, prompt_text, stale_version, text_fingerprint
from echo_lib.sandbox import judge
from echo_lib.sandbox.stage import run_sandbox
from echo_lib.sandbox.results import RunMeta, write_error

VERSIONED = [("RUBRIC_VERSION", judge.RUBRIC_VERSION, judge.RUBRIC_TEXT_FINGERPRINT, judge.RUBRIC_MODULES),
             ("NEE_RUBRIC_VERSION", nee_prompts.NEE_RUBRIC_VERSION, nee_prompts.NEE_RUBRIC_TEXT_FINGERPRINT,
              nee_prompts.NEE_RUBRIC_MODULES)]


@pytest.mark.parametrize("name, version, fingerprint, modules", VERSIONED, ids=["sandbox", "nee"])
def test_each_version_was_written_for_the_prompt_text_there_is(name, version, fingerprint, modules):
    problem = stale_version(name, version, fingerprint, modules)
    assert problem is None, problem
    assert version[0].isalpha() and "2026" in version and "v" in version   # named and dated, in words


def copy_package(tmp_path, modules):
    for m in modules:
        (tmp_path / f"{m}.py").parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PACKAGE / f"{m}.py", tmp_path / f"{m}.py")
    return tmp_path


def test_a_rubric_edit_without_a_new_version_is_caught(tmp_path):
    root = copy_package(tmp_path, judge.RUBRIC_MODULES)
    args = ("RUBRIC_VERSION", judge.RUBRIC_VERSION, judge.RUBRIC_TEXT_FINGERPRINT, judge.RUBRIC_MODULES)
    assert stale_version(*args, root=root) is None
    path = root / "sandbox/judge.py"
    source = path.read_text()
    # a docstring, a comment or the version constants themselves: no model reads them
    path.write_text(source.replace("It rates; the EPM engine decides.", "It rates; the engine decides.")
                    .replace("# ---- the two instruments", "# ---- the two rating instruments")
                    .replace('RUBRIC_VERSION = ("echo sandbox rubric v1', 'RUBRIC_VERSION = ("echo sandbox rubric v9'))
    assert stale_version(*args, root=root) is None
    # the rubric's text: one level's wording of the MDEP
    path.write_text(source.replace('"validates the feeling they expressed"', '"validates any feeling they expressed"'))
    problem = stale_version(*args, root=root)
    assert problem is not None
    assert "echo_lib/sandbox/judge.py" in problem and judge.RUBRIC_VERSION in problem
    assert "bump RUBRIC_VERSION" in problem and "RUBRIC_TEXT_FINGERPRINT" in problem
    assert text_fingerprint(judge.RUBRIC_MODULES, root) in problem
    # what an f-string fills in is part of the text too
    path.write_text(source.replace("{full_profile(sc)}", "{condensed_profile(sc)}"))
    assert stale_version(*args, root=root) is not None


def test_the_prompt_text_is_the_literals_and_placeholders_without_docstrings():
    source = '"""doc"""\nX_VERSION = "v1"\nA = "ask"\ndef f(x):\n    """doc2"""\n    return f"say {x.name}!"\n'
    text = prompt_text(source)
    assert text == ["ask", "say ", "{x.name}", "!"]
    assert "doc" not in text and "doc2" not in text and "v1" not in text


def sandbox_run(tmp_path, model="base"):
    cfg = load_config({**config(tmp_path, max_turns=3, min_turns=2), "sandbox": {"case_ids": ["own_001", "own_002"]}})
    _, llms = fakes(tmp_path)
    return cfg, run_sandbox(cfg, model, llms=llms)


def test_every_sandbox_file_names_the_version_in_words(tmp_path):
    cfg, rep = sandbox_run(tmp_path)
    for case in ("own_001", "own_002"):
        path = rep.out_dir / f"{case}_result.json"
        assert json.loads(path.read_text())["sandbox"]["rubric_version"] == judge.RUBRIC_VERSION
        assert read_result(path).rubric_version == judge.RUBRIC_VERSION
    meta_block = json.loads((rep.out_dir / "own_001_result.json").read_text())["sandbox"]
    meta = RunMeta(model="base", roles={}, models={}, params=cfg.sandbox_run, epm=cfg.sandbox_run.epm(cfg.epm),
                   seed=cfg.seed, judge_mode=meta_block["judge_mode"])
    error = json.loads(write_error(tmp_path / "errors", "own_009", meta, "scenario", 0, "bad file").read_text())
    assert error["sandbox"]["rubric_version"] == judge.RUBRIC_VERSION


def test_files_without_a_version_are_versions_of_their_own():
    assert rubric_version({"epj": {}}) == EMPA_PUBLISHED          # EMPA's published runs: no sandbox block
    assert rubric_version({"sandbox": {"parameters": {}}}) == UNVERSIONED   # a sandbox file of before versions
    newer = "echo sandbox rubric v2 (2027-01)"
    assert rubric_version({"sandbox": {"rubric_version": newer}}) == newer


def published_folder(root, model="published-gpt"):
    """One EMPA-style model folder (no sandbox block) with one run."""
    run = CaseRun.from_levels("script_001", model, {k: 2 for k in INDICATORS},
                              [{"C_Prog_level": 1, "A_Prog_level": 1, "P_Prog_level": 1}] * 3)
    write_result(replay(run), root / model / "script_001_result.json")
    return root / model


def restamp(folder, version):
    for path in folder.glob("*_result.json"):
        data = json.loads(path.read_text())
        data["sandbox"]["rubric_version"] = version
        path.write_text(json.dumps(data))


def test_stage_05_refuses_to_pool_two_versions_naming_folders_files_versions_and_fix(tmp_path, capsys):
    _, rep = sandbox_run(tmp_path)
    stale = rep.out_dir.parent / "echo"
    shutil.copytree(rep.out_dir, stale)
    older = "echo sandbox rubric v0 (2026-11): an older wording"
    restamp(stale, older)
    with pytest.raises(MixedRubricVersions) as info:
        score_folders([rep.out_dir.parent])
    text = str(info.value)
    assert str(rep.out_dir) in text and str(stale) in text
    assert "own_001_result.json" in text and "2 file(s)" in text
    assert repr(judge.RUBRIC_VERSION) in text and repr(older) in text
    assert "re-run the sandbox stage (04)" in text and "--forcerun <folder>/summary.json" in text
    assert "separately" in text
    # echo-epmq says the same and writes nothing
    out = tmp_path / "epmq.csv"
    assert epmq([str(rep.out_dir.parent), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert older in err and str(stale) in err and not out.exists()


def test_own_runs_and_published_runs_never_share_a_table(tmp_path):
    _, rep = sandbox_run(tmp_path)
    published = published_folder(tmp_path / "published")
    with pytest.raises(MixedRubricVersions) as info:
        score_folders([rep.out_dir, published])
    text = str(info.value)
    assert repr(EMPA_PUBLISHED) in text and str(published) in text and "script_001_result.json" in text
    assert "EMPA's published runs" in text and "on their own" in text
    assert len(score_folders([published]).replays) == 1   # on their own they score as before


def test_folders_of_one_version_pool_into_one_table(tmp_path):
    _, rep = sandbox_run(tmp_path)
    shutil.copytree(rep.out_dir, rep.out_dir.parent / "echo")
    scored = score_folders([rep.out_dir.parent])
    assert sorted(scored.summary["Model"]) == ["base", "echo"] and len(scored.replays) == 4
    assert {r.run.rubric_version for r in scored.replays} == {judge.RUBRIC_VERSION}
    two = score_folders([published_folder(tmp_path / "pub", "a"), published_folder(tmp_path / "pub", "b")])
    assert sorted(two.summary["Model"]) == ["a", "b"]

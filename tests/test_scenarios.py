"""Scenarios: the own English set against the schema and the official stratification, clear errors for
bad files, deterministic case selection, and the EMPA importer on the official 30 (METHOD.md 2.7, 5.6)."""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest
import yaml

from echo_lib.config import load_config
from echo_lib.epm.case_meta import CaseMeta, read_empa_case_meta
from echo_lib.scenarios import cases as cases_mod
from echo_lib.scenarios import import_empa, load_cases, load_own, select_cases, stratified_order
from echo_lib.scenarios.own import load_own_file, own_dir, own_files
from echo_lib.scenarios.schema import MEMORY_PERIODS, STAGE_KINDS, ScenarioError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def own():
    return load_own()


def cfg_with(**sandbox):
    seed = sandbox.pop("seed", 0)
    block = {"case_set": "own", "empa_dir": None, "case_ids": [], "max_cases": 0} | sandbox
    return load_config(ROOT / "config/default.yaml", sandbox=block, seed=seed)

def sections(cfg):
    """What select_cases and load_cases take of a run config: the sandbox: and empa: sections, the seed."""
    return cfg.sandbox, cfg.empa, cfg.seed



# ---- the own set -------------------------------------------------------------------------------------

def test_every_own_scenario_validates(own):
    assert len(own) >= 30
    assert len(own) == len(own_files())
    for sc in own:
        assert sc.language == "en" and sc.id == Path(sc.source).stem
        assert [s.title.lower() for s in sc.story.stages] == list(STAGE_KINDS)
        assert all(len(s.content) > 40 for s in sc.story.stages)
        assert sc.story.trigger and sc.story.outcome and sc.story.interlude and sc.topic
        assert set(sc.memories()) == set(MEMORY_PERIODS) and all(sc.memories().values())
        meta = sc.case_meta()
        assert isinstance(meta, CaseMeta) and meta.case_id == sc.id and meta.distance is None
        assert meta.priorities[sc.labels.dominant_axis] == "High"


def test_own_ids_and_personas_unique(own):
    ids = [sc.id for sc in own]
    assert len(set(ids)) == len(ids)
    assert len({sc.persona.name for sc in own}) == len(own)
    assert len({sc.topic for sc in own}) == len(own)


def test_own_set_stratified_like_the_official_30(own):
    axes = Counter(sc.labels.dominant_axis for sc in own)
    domains = Counter(sc.labels.domain for sc in own)
    assert axes == {"C": 10, "A": 10, "P": 10}
    assert domains == {d: 5 for d in ("Leisure", "Health", "Life", "Values", "Relations", "Career")}
    # every domain has cases on at least two axes, and every (domain, axis) cell is filled
    assert len({(sc.labels.domain, sc.labels.dominant_axis) for sc in own}) == 18
    difficulty = Counter(sc.labels.difficulty for sc in own)
    assert set(difficulty) == {"Easy", "Medium", "Hard", "Very Hard"}
    assert (len(own) - difficulty["Easy"]) / len(own) >= 0.8          # official: 86.7% Medium or above
    threshold = Counter(sc.threshold.level for sc in own)
    assert set(threshold) == {"Low", "Medium", "High"}
    assert 0.4 <= threshold["High"] / len(own) <= 0.6                # official: 50% High
    # each axis has routine and challenging, receptive and defensive cases (the EPM-Q slices of 5.6)
    for axis in "CAP":
        mine = [sc for sc in own if sc.labels.dominant_axis == axis]
        assert {sc.labels.difficulty in ("Easy", "Medium") for sc in mine} == {True, False}
        assert {sc.threshold.level == "High" for sc in mine} == {True, False}


# ---- errors name the file, the field and the fix ------------------------------------------------------

def broken_copy(tmp_path: Path, edit) -> Path:
    src = own_dir() / "own_001.yaml"
    data = yaml.safe_load(src.read_text(encoding="utf-8"))
    edit(data)
    out = tmp_path / "own_001.yaml"
    out.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return out


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["threshold"].update(level="Extreme"), "threshold.level"),
    (lambda d: d["persona"].pop("inner_core"), "persona.inner_core"),
    (lambda d: d["persona"].update(age="forty"), "persona.age"),
    (lambda d: d["story"]["stages"].pop(), "story.stages"),
    (lambda d: d["story"]["stages"][2].update(content=""), "story.stages[2].content"),
    (lambda d: d["story"]["stages"][0].update(title="Backstory"), "story.stages[0].title"),
    (lambda d: d["labels"].update(domain="Hobbies"), "labels.domain"),
    (lambda d: d["priorities"]["cognitive"].update(level="Low"), "priorities.cognitive.level"),
    (lambda d: d.update(id="own_999"), "id"),
    (lambda d: d.update(mood="sad"), "mood"),
    (lambda d: d["persona"].update(nmae="Tom"), "persona.nmae"),            # unknown nested keys (issue 18)
    (lambda d: d["priorities"]["affective"].update(weight=2), "priorities.affective.weight"),
    (lambda d: d["story"]["stages"][1].update(mood="x"), "story.stages[1].mood"),
    (lambda d: d["labels"].update(axis="C"), "labels.axis"),
])
def test_invalid_file_names_file_and_field(tmp_path, edit, field):
    path = broken_copy(tmp_path, edit)
    with pytest.raises(ScenarioError) as info:
        load_own_file(path)
    msg = str(info.value)
    assert str(path) in msg and f"field '{field}'" in msg and "fix:" in msg
    assert info.value.field == field


def test_unreadable_yaml_is_named(tmp_path):
    path = tmp_path / "own_001.yaml"
    path.write_text("id: own_001\npersona: [unclosed\n", encoding="utf-8")
    with pytest.raises(ScenarioError, match="own_001.yaml"):
        load_own_file(path)


def test_a_key_given_twice_is_an_error_naming_both_lines(tmp_path):
    path = tmp_path / "own_001.yaml"
    text = (own_dir() / "own_001.yaml").read_text(encoding="utf-8")
    path.write_text(text.replace("  age: 41\n", "  age: 41\n  age: 14\n"), encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"own_001\.yaml.*'age' appears twice \(lines 5 and 6\)"):
        load_own_file(path)


def test_priority_reasons_are_whole_sentences(own):
    """A flow mapping `{level: Low, reason: annoyed, not hurt}` splits the reason at its commas into extra
    keys; nine own cases had lost the end of a reason that way (now quoted; the nested-key check finds it)."""
    by_id = {sc.id: sc for sc in own}
    assert by_id["own_001"].priorities.affective.reason == "He is annoyed, not hurt, and does not want to be soothed."
    assert all(getattr(sc.priorities, k).reason.endswith((".", "!", "?")) for sc in own
               for k in ("cognitive", "affective", "motivational"))


def test_non_utf8_file_is_named(tmp_path):
    path = tmp_path / "own_001.yaml"
    path.write_bytes((own_dir() / "own_001.yaml").read_bytes().replace("Tomás".encode(), "Tomás".encode("latin-1")))
    with pytest.raises(ScenarioError, match=r"own_001\.yaml: field '\(file\)' is not UTF-8 text \(byte \d+"):
        load_own_file(path)


def test_one_bad_file_does_not_stop_the_others(tmp_path, monkeypatch):
    folder = tmp_path / "own"
    folder.mkdir()
    for name in ("own_002.yaml", "own_003.yaml"):
        shutil.copy(own_dir() / name, folder / name)
    broken_copy(folder, lambda d: d["needs"].pop("vent"))
    (folder / "own_004.yaml").write_bytes(b"id: own_004\npersona: {name: Jos\xe9}\n")   # latin-1, not UTF-8
    monkeypatch.setattr(cases_mod, "own_dir", lambda: folder)
    sel = select_cases(*sections(cfg_with()))
    assert [s.id for s in sel.scenarios] == ["own_002", "own_003"]
    assert [(c.case_id, "needs.vent" in c.error or "not UTF-8" in c.error) for c in sel.invalid] == [
        ("own_001", True), ("own_004", True)]
    with pytest.raises(ValueError, match=r"own_001\.yaml.*needs\.vent"):
        load_cases(*sections(cfg_with()))


# ---- case selection ------------------------------------------------------------------------------------

def test_load_cases_defaults_to_the_whole_own_set(own):
    assert [s.id for s in load_cases(*sections(cfg_with()))] == [s.id for s in own]


def test_load_cases_honours_case_ids():
    got = load_cases(*sections(cfg_with(case_ids=["own_017", "own_003"])))
    assert [s.id for s in got] == ["own_017", "own_003"]
    from echo_lib.config import ConfigError
    with pytest.raises(ConfigError, match="'sandbox.case_ids' names 'own_404'"):   # found at load time now
        cfg_with(case_ids=["own_003", "own_404"])


def test_max_cases_is_stratified_and_deterministic():
    two = load_cases(*sections(cfg_with(max_cases=2, seed=7)))
    assert [s.id for s in two] == [s.id for s in load_cases(*sections(cfg_with(max_cases=2, seed=7)))]
    assert len({s.labels.dominant_axis for s in two}) == 2 and len({s.labels.domain for s in two}) == 2
    seeds = {tuple(s.id for s in load_cases(*sections(cfg_with(max_cases=2, seed=k)))) for k in range(6)}
    assert len(seeds) > 1                                          # the seed matters
    for seed in range(5):
        six = load_cases(*sections(cfg_with(max_cases=6, seed=seed)))
        assert Counter(s.labels.dominant_axis for s in six) == {"C": 2, "A": 2, "P": 2}
        assert len({s.labels.domain for s in six}) == 6
        three = load_cases(*sections(cfg_with(max_cases=3, seed=seed)))
        assert {s.labels.dominant_axis for s in three} == {"C", "A", "P"}
    picked = load_cases(*sections(cfg_with(case_ids=["own_001", "own_002", "own_011", "own_021"], max_cases=3)))
    assert {s.labels.dominant_axis for s in picked} == {"C", "A", "P"}


def test_stratified_order_is_a_permutation(own):
    order = stratified_order(own, 0, seed=3)
    assert sorted(s.id for s in order) == sorted(s.id for s in own)
    assert [s.id for s in stratified_order(list(reversed(own)), 0, seed=3)] == [s.id for s in order]
    assert stratified_order(own, 100, seed=3) == order


# ---- EMPA importer -----------------------------------------------------------------------------------

FIXTURE = ROOT / "tests" / "fixtures" / "empa"     # EMPA's repository layout, the project's own text


def test_empa_fixture_imports_in_empas_layout():
    """EMPA's layout (empa/data/cases, scenarios/character_stories.json) from the repository root or empa/data."""
    for folder in (FIXTURE, FIXTURE / "empa" / "data"):
        imported = import_empa(folder)
        assert [s.id for s in imported] == ["script_003", "script_042", "script_128"]   # official_cases.txt
    one = import_empa(FIXTURE, ["script_042"])[0]
    assert (one.persona.name, one.persona.age, one.threshold.level) == ("韩立", 35, "Medium")
    assert one.labels.domain == "Values" and one.distance == 31.95
    assert [st.title for st in one.story.stages] == ["庆功之后", "旧事重演", "停下来", "新的念头"]
    assert one.priorities.affective.level == "High" and one.priorities.affective.reason == "先陪他待在这份空虚里"
    assert one.priorities.motivational.level == "Low"


def test_empa_case_without_metadata_gets_unknown_labels():
    sc = import_empa(FIXTURE, ["script_901"])[0]
    assert (sc.labels.domain, sc.labels.difficulty, sc.labels.dominant_axis) == ("unknown",) * 3
    assert sc.distance is None and sc.threshold.level == "Medium"
    assert sc.priorities.levels() == {"C": "High", "A": "Medium", "P": "Low"}   # from its text: a ranking
    assert sc.case_meta().domain == "unknown"


def test_empa_stray_characters_in_labels():
    sc = import_empa(FIXTURE, ["script_128"])[0]   # 动机共-情, 认知共 情, 现在的-情况
    assert sc.priorities.levels() == {"C": "Low", "A": "Medium", "P": "High"}
    assert sc.priorities.motivational.reason == "想知道怎样开口才能既要回钱又不撕破脸"
    assert sc.situation.current == "她开了一家小面馆，生意刚刚稳定。"


def test_empa_metadata_file_is_optional(tmp_path):
    fake = tmp_path / "EMPA"
    shutil.copytree(FIXTURE, fake)
    (fake / "empa/data/case_metadata.json").unlink()
    got = import_empa(fake)
    assert [s.labels.domain for s in got] == ["unknown"] * 3
    assert [s.threshold.level for s in got] == ["Low", "Medium", "High"]


def test_load_cases_empa_fixture():
    got = load_cases(*sections(cfg_with(case_set="empa", empa_dir=str(FIXTURE), case_ids=["script_003", "script_901"])))
    assert [s.id for s in got] == ["script_003", "script_901"] and all(s.language == "zh" for s in got)
    three = load_cases(*sections(cfg_with(case_set="empa", empa_dir=str(FIXTURE / "empa" / "data"), max_cases=2, seed=1)))
    assert len(three) == 2 and {s.id for s in three} <= {"script_003", "script_042", "script_128"}


def test_empa_non_utf8_case_is_named_and_the_others_go_on(tmp_path):
    fake = tmp_path / "EMPA"
    shutil.copytree(FIXTURE, fake, ignore=shutil.ignore_patterns("results"))
    md = fake / "empa" / "data" / "cases" / "script_003.md"
    md.write_bytes(md.read_text(encoding="utf-8").encode("gb18030"))   # a Chinese legacy encoding
    sel = select_cases(*sections(cfg_with(case_set="empa", empa_dir=str(fake), case_ids=["script_003", "script_042"])))
    assert [s.id for s in sel.scenarios] == ["script_042"]
    assert [c.case_id for c in sel.invalid] == ["script_003"]
    assert "script_003.md: field '(file)' is not UTF-8 text" in sel.invalid[0].error


def test_empa_missing_section_names_file(tmp_path):
    fake = tmp_path / "EMPA"
    shutil.copytree(FIXTURE, fake, ignore=shutil.ignore_patterns("results"))
    md = fake / "empa" / "data" / "cases" / "script_003.md"
    md.write_text(md.read_text(encoding="utf-8").replace("<experience>", "<exp>"), encoding="utf-8")
    sel = select_cases(*sections(cfg_with(case_set="empa", empa_dir=str(fake), case_ids=["script_003", "script_042"])))
    assert [s.id for s in sel.scenarios] == ["script_042"]
    assert "script_003.md" in sel.invalid[0].error and "experience" in sel.invalid[0].error


def test_empa_case_set_without_a_fetched_copy_says_what_to_do(tmp_path):
    cfg = load_config(ROOT / "config/default.yaml", sandbox={"case_set": "empa", "empa_dir": None},
                      empa={"source": str(tmp_path / "nowhere"), "commit": None, "cache_dir": str(tmp_path / "c")})
    with pytest.raises(ValueError, match=r"EMPA has not been fetched .*layout\.json is missing.*sandbox\.empa_dir"):
        select_cases(*sections(cfg))


# ---- against EMPA's own files (opt-in: ECHO_EMPA_DIR) -----------------------------------------------

def test_empa_import_official_30(empa):
    imported = import_empa(empa.root)
    official = (empa.data / "official_cases.txt").read_text().split()
    assert [s.id for s in imported] == official and len(imported) == 30
    expected = read_empa_case_meta(empa.root)
    for sc in imported:
        assert sc.language == "zh" and len(sc.story.stages) == 4
        assert all(st.title and st.content for st in sc.story.stages)
        assert sc.persona.name and 15 <= sc.persona.age <= 60 and sc.topic and sc.story.trigger
        assert all(sc.memories().values()) and sc.needs.vent and sc.threshold.description
        assert sc.case_meta() == expected[sc.id]
    assert Counter(s.labels.dominant_axis for s in imported) == {"C": 10, "A": 10, "P": 10}


def test_load_cases_empa(empa):
    got = load_cases(*sections(cfg_with(case_set="empa", empa_dir=str(empa.root), max_cases=3, seed=1)))
    assert {s.labels.dominant_axis for s in got} == {"C", "A", "P"} and all(s.language == "zh" for s in got)
    one = load_cases(*sections(cfg_with(case_set="empa", empa_dir=str(empa.root), case_ids=["script_003"])))
    assert [s.id for s in one] == ["script_003"]


# ---- echo-scenarios check -------------------------------------------------------------------------------

def test_check_cli_counts_and_names_each_failure(tmp_path, capsys):
    from echo_lib.scenarios.check import main
    assert main(["check", str(FIXTURE)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"4 of 4 cases import from {FIXTURE / 'empa' / 'data'} (1 without case_metadata.json labels: 'unknown')"]
    fake = tmp_path / "EMPA"
    shutil.copytree(FIXTURE / "empa" / "data", fake)
    md = fake / "cases" / "script_042.md"
    md.write_text(md.read_text(encoding="utf-8").replace("共情阈值【中】", "共情阈值很高"), encoding="utf-8")
    (fake / "cases" / "script_777.md").write_text((fake / "cases" / "script_003.md").read_text(encoding="utf-8"),
                                                  encoding="utf-8")            # a case with no story
    assert main(["check", str(fake)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("3 of 5 cases import from ")
    assert out[1].startswith(f"FAIL {md}: field '(tagged sections)' ") and "共情阈值【低|中|高】" in out[1]
    assert out[2] == (f"FAIL {fake / 'character_stories*.json'}: field '剧本编号=script_777' is missing; "
                      "fix: use EMPA's character_stories.json that holds this script")
    assert main(["check", str(fake), "--official"]) == 1 and capsys.readouterr().out.startswith("2 of 3 cases")
    assert main(["check", str(tmp_path / "nowhere")]) == 2
    assert "no cases/ folder here nor in empa/data/" in capsys.readouterr().err


def test_empa_numbered_priorities_without_level_words(tmp_path):
    fake = tmp_path / "EMPA"
    shutil.copytree(FIXTURE / "empa" / "data", fake)
    md = fake / "cases" / "script_003.md"
    text = md.read_text(encoding="utf-8")
    block = text[text.index("当下共情需求优先级"):text.index("</psychological_profile>")]
    md.write_text(text.replace(block, "当下共情需求优先级：\n    1、情感共情 先让失落被看见\n"
                                      "    2、认知共情 理解这次演出的意义\n    3、动机共情 以后再说\n"), encoding="utf-8")
    sc = import_empa(fake, ["script_003"])[0]
    assert sc.priorities.levels() == {"A": "High", "C": "Medium", "P": "Low"}
    assert (sc.priorities.affective.reason, sc.priorities.cognitive.reason, sc.priorities.motivational.reason) == (
        "先让失落被看见", "理解这次演出的意义", "以后再说")


@pytest.mark.parametrize("text, years", [("26", 26), ("26岁", 26), ("二十六岁", 26), ("十九", 19), ("三十岁", 30),
                                         ("二十五六岁", 25), ("不详", None)])
def test_empa_age_forms(text, years):
    from echo_lib.scenarios.empa_import import parse_age
    assert parse_age(text) == years

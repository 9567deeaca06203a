"""Forms of EMPA's case text that real cases use besides '高/中/低优先级' (issue 39, section 3): need
priorities written as an order, and a case without the 隐形成长主线脉络 field. Each form is written here
in the project's own words, into a copy of the project's EMPA-layout fixture (tests/fixtures/empa)."""
from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import pytest

from echo_lib.scenarios import import_empa
from echo_lib.scenarios.check import check_folder
from echo_lib.epm.case_meta import ordered_priorities

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "empa"
CASE = "script_003"       # its block: 情感 高 / 认知 中 / 动机 低, one need per line


def with_block(tmp_path: Path, block: str, case: str = CASE) -> Path:
    """A copy of the fixture whose case has `block` as its 当下共情需求优先级 block."""
    fake = tmp_path / "EMPA"
    shutil.copytree(FIXTURE, fake)
    md = fake / "empa/data/cases" / f"{case}.md"
    text = md.read_text(encoding="utf-8")
    text, n = re.subn(r"当下共情需求优先级：.*?(?=</psychological_profile>)", lambda _: block + "\n", text, flags=re.S)
    assert n == 1
    md.write_text(text, encoding="utf-8")
    return fake


def levels_of(folder: Path, case: str = CASE) -> dict[str, str]:
    return import_empa(folder, [case])[0].priorities.levels()


ORDER_FORMS = {
    "order words 最高/其次/再次": ("当下共情需求优先级：\n"
                             "    情感共情：最高优先级。想有人陪她把这口气叹完。\n"
                             "    认知共情：其次。想让人明白排练了半年意味着什么。\n"
                             "    动机共情：再次。想被理解她为什么还不肯放弃。",
                             {"A": "High", "C": "Medium", "P": "Low"}),
    "bracketed 最高/次级/低": ("当下共情需求优先级：\n"
                           "    动机共情：【最高优先级】想听见有人说坚持下去值得。\n"
                           "    情感共情：【次级优先级】需要对方接住她的委屈。\n"
                           "    认知共情：【低优先级】现在不想听道理。",
                           {"P": "High", "A": "Medium", "C": "Low"}),
    "最高/核心/次要": ("当下共情需求优先级：\n"
                   "    情感共情：[最高优先级] 希望难过被当真。\n"
                   "    认知共情：[核心优先级] 希望有人懂这场演出的分量。\n"
                   "    动机共情：[次要优先级] 以后再谈下一步。",
                   {"A": "High", "C": "Medium", "P": "Low"}),
    "[优先级：最高] twice, then 核心": ("当下共情需求优先级：\n"
                                 "    认知共情：[优先级：最高] 想让人明白她卡在哪里。\n"
                                 "    情感共情：[优先级：最高] 想让人接住她的慌。\n"
                                 "    动机共情：[优先级：核心] 想被肯定还愿意试。",
                                 {"C": "High", "A": "High", "P": "Medium"}),
    "'+' after the word, 核心 twice": ("当下共情需求优先级：\n"
                                  "    情感共情：[最高优先级 + 她想先被安慰]\n"
                                  "    动机共情：[核心优先级 + 她想知道自己为什么还在坚持]\n"
                                  "    认知共情：[核心优先级 + 她想理清这件事]",
                                  {"A": "High", "P": "Medium", "C": "Medium"}),
    "the same word thrice": ("当下共情需求优先级：\n"
                             "    情感共情：[核心] 想被陪着。\n"
                             "    动机共情：[核心] 想被鼓励。\n"
                             "    认知共情：[核心] 想被理解。",
                             {"A": "High", "P": "High", "C": "High"}),
    "a need named inside another's entry": ("当下共情需求优先级：\n"
                                            "    情感共情：【最高优先级】先让她的慌被看见。\n"
                                            "    动机共情：【核心优先级】她想躲开，鼓励要等认知共情做足之后。\n"
                                            "    认知共情：【次要优先级】想有人讲清这是怎么回事。",
                                            {"A": "High", "P": "Medium", "C": "Low"}),
    "ranking with list numbers and glosses": ("当下共情需求优先级：1. 动机共情（想被认可这份坚持） > "
                                              "2. 认知共情（想让人懂这件事的意义） > 3. 情感共情（一起高兴一下）。",
                                              {"P": "High", "C": "Medium", "A": "Low"}),
}


@pytest.mark.parametrize("form", list(ORDER_FORMS))
def test_priorities_written_as_an_order(tmp_path, form):
    block, want = ORDER_FORMS[form]
    assert levels_of(with_block(tmp_path, block)) == want


def test_order_reasons_are_the_authors_words(tmp_path):
    sc = import_empa(with_block(tmp_path, ORDER_FORMS["最高/核心/次要"][0]), [CASE])[0]
    assert sc.priorities.cognitive.reason == "希望有人懂这场演出的分量。"
    assert sc.priorities.motivational.reason == "以后再谈下一步。"
    sc = import_empa(with_block(tmp_path / "b", ORDER_FORMS["a need named inside another's entry"][0]), [CASE])[0]
    assert sc.priorities.cognitive.reason == "想有人讲清这是怎么回事。"    # not the mention in 动机共情's entry
    sc = import_empa(with_block(tmp_path / "c", ORDER_FORMS["ranking with list numbers and glosses"][0]), [CASE])[0]
    assert sc.priorities.motivational.reason == "想被认可这份坚持"


def test_explicit_levels_are_unchanged(tmp_path):
    """The fixture's own 高/中/低 block, and a block that is no order at all, stay as before."""
    assert levels_of(FIXTURE) == {"A": "High", "C": "Medium", "P": "Low"}
    block = "当下共情需求优先级：\n    情感共情：想被陪着。\n    认知共情：想被理解。\n    动机共情：想被鼓励。"
    assert ordered_priorities(block) is None
    report = check_folder(with_block(tmp_path, block), ids=[CASE])
    assert not report.imported and "no priority level found" in report.failures[0].problem


def test_missing_growth_arc_is_empty_with_a_warning(tmp_path, caplog):
    fake = tmp_path / "EMPA"
    shutil.copytree(FIXTURE, fake)
    md = fake / "empa/data/cases" / f"{CASE}.md"
    text = md.read_text(encoding="utf-8")
    text, n = re.subn(r"^隐形成长主线脉络：.*\n", "", text, flags=re.M)
    assert n == 1
    md.write_text(text, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="echo_lib.scenarios.empa_import"):
        sc = import_empa(fake, [CASE])[0]
    assert sc.experiences.growth_arc == ""
    assert sc.experiences.young_adulthood        # the other experience fields are read as before
    assert any("隐形成长主线脉络" in r.getMessage() and CASE in r.getMessage() for r in caplog.records)
    assert check_folder(fake).failures == []


def test_missing_required_field_still_fails(tmp_path):
    """Only the growth arc is optional: a case without 童年经历 is still invalid, named."""
    fake = tmp_path / "EMPA"
    shutil.copytree(FIXTURE, fake)
    md = fake / "empa/data/cases" / f"{CASE}.md"
    md.write_text(re.sub(r"^童年经历：.*\n", "", md.read_text(encoding="utf-8"), flags=re.M), encoding="utf-8")
    report = check_folder(fake, ids=[CASE])
    assert report.failures and report.failures[0].field == "experiences.childhood"

"""Case metadata from EMPA's scenario files, and the CaseMeta type other stages construct."""
from collections import Counter

import pytest

from echo_lib.epm.case_meta import CaseMeta, clean_labels, parse_priorities, parse_threshold, read_empa_case_meta
from fixtures.epm.runs import case_meta


def md(priority_block: str, threshold: str = "中") -> str:
    """A minimal case prompt with the two tagged sections the parser reads (text written for this test)."""
    return (f"<empathy_threshold>\n共情阈值【{threshold}】，说明。\n</empathy_threshold>\n"
            f"<psychological_profile>\n聊天话题：天气\n当下共情需求优先级：\n{priority_block}\n</psychological_profile>\n")


@pytest.mark.parametrize("block, expected", [
    ("情感共情：高优先级 + a\n动机共情：低优先级 + b\n认知共情：中优先级 + c", {"A": "High", "P": "Low", "C": "Medium"}),
    ("情感共情：[优先级：低] a\n动机共情：[优先级：中] b\n认知共情：[优先级：高] c", {"A": "Low", "P": "Medium", "C": "High"}),
    ("情感共情：【高】a\n动机共情：【低】b\n认知共情：【中】c", {"A": "High", "P": "Low", "C": "Medium"}),
    ("情感共情：[优先级中] a\n动机共情：[优先级高] b\n认知共情：[优先级极高] c", {"A": "Medium", "P": "High", "C": "High"}),
    ("1. 情感共情：最想要 a\n2. 认知共情：其次 b\n3. 动机共情：最后 c", {"A": "High", "C": "Medium", "P": "Low"}),
    ("认知共情 > 情感共情 > 动机共情。然后", {"C": "High", "A": "Medium", "P": "Low"}),
    ("情感共情：其次\n认知共情：低优先级\n动机共情：最高", {"A": "Medium", "C": "Low", "P": "High"}),  # no spill-over
    ("1.情感共情（最优先，a）；2.认知共情（其次，b）；3.动机共情（优先级最低，c）", {"A": "High", "C": "Medium", "P": "Low"}),
    # the long level words: 最高 / 中等 / 最低优先级
    ("情感共情：最低优先级，a\n动机共情：最高优先级，b\n认知共情：中等优先级，c", {"A": "Low", "P": "High", "C": "Medium"}),
    ("认知共情：[最高优先级 + a]\n情感共情：[中等优先级 + b]\n动机共情：[最低优先级 + c]", {"C": "High", "A": "Medium", "P": "Low"}),
    # stray characters inside a need's name
    ("动机共-情：[高优先级 + a]\n情感共情：[中优先级 + b]\n认知共 情：[低优先级 + c]", {"P": "High", "A": "Medium", "C": "Low"}),
    ("动机共·情：低优先级\n情-感共情：高优先级\n认知共情：中优先级", {"P": "Low", "A": "High", "C": "Medium"}),
    # an order only: full-width ranking signs, or a numbered list without level words
    ("动机共情＞认知共情＞情感共情", {"P": "High", "C": "Medium", "A": "Low"}),
    ("  1. 动机共情\n  2. 情感共情\n  3. 认知共情", {"P": "High", "A": "Medium", "C": "Low"}),
    ("2、情感共情（想被理解）\n1、认知共情（先弄清楚）\n3、动机共情（以后再说）", {"C": "High", "A": "Medium", "P": "Low"}),
])
def test_priority_forms(block, expected, tmp_path):
    assert parse_priorities(md(block), tmp_path / "x.md") == expected


def test_threshold_and_missing_sections(tmp_path):
    assert parse_threshold(md("情感共情：高", "高"), tmp_path / "x.md") == "High"
    with pytest.raises(ValueError, match=r"x\.md: section <empathy_threshold> is missing"):
        parse_threshold("<psychological_profile></psychological_profile>", tmp_path / "x.md")
    with pytest.raises(ValueError, match="no priority level found for 动机共情"):
        parse_priorities(md("情感共情：高优先级\n认知共情：低优先级\n动机共情：随意"), tmp_path / "x.md")
    with pytest.raises(ValueError, match="no priority level found for 认知共情"):   # two numbers are no order
        parse_priorities(md("1. 情感共情\n2. 动机共情\n认知共情：随意"), tmp_path / "x.md")


def test_case_meta_validates():
    with pytest.raises(ValueError, match="domain='Sport'"):
        CaseMeta("script_x", "Sport", "Easy", "A", "Low")
    with pytest.raises(ValueError, match="priority A='Urgent'"):
        CaseMeta("script_x", "Life", "Easy", "A", "Low", {"A": "Urgent"})


def test_fixture_metadata_matches_the_benchmark_design():
    meta = case_meta()
    assert len(meta) == 30
    assert Counter(m.dominant_axis for m in meta.values()) == {"A": 10, "C": 10, "P": 10}
    assert set(Counter(m.domain for m in meta.values()).values()) == {5}
    assert Counter(m.difficulty for m in meta.values()) == {"Easy": 4, "Medium": 10, "Hard": 11, "Very Hard": 5}
    assert Counter(m.threshold for m in meta.values()) == {"High": 15, "Medium": 9, "Low": 6}


def test_clean_labels_leaves_other_text_alone():
    assert clean_labels("动机共-情：高；认知共 情：低；情感-共-情") == "动机共情：高；认知共情：低；情感共情"
    assert clean_labels("动机是共情的一部分") == "动机是共情的一部分"     # a Chinese character is never stray
    assert clean_labels("现在的-情况：x", ("现在的情况",)) == "现在的情况：x"


def test_reads_the_empa_format_fixture(empa_fixture):
    text = read_empa_case_meta(empa_fixture.root)
    stats = read_empa_case_meta(empa_fixture.root, priorities="empa_stats")
    assert sorted(text) == ["script_003", "script_042", "script_128"]     # script_901 is not in case_metadata.json
    assert text["script_128"] == CaseMeta("script_128", "Relations", "Hard", "A", "High",
                                          {"C": "Low", "A": "Medium", "P": "High"}, 34.31)
    assert text["script_042"].priorities == {"C": "Medium", "A": "High", "P": "Low"}
    assert stats["script_128"].priorities == {"C": "Medium", "A": "High", "P": "Medium"}   # the statistics' fallback
    assert stats["script_003"] == text["script_003"] and stats["script_042"] == text["script_042"]


def test_unknown_labels_are_allowed():
    meta = CaseMeta("script_901", "unknown", "unknown", "unknown", "Medium")
    assert (meta.domain, meta.difficulty, meta.dominant_axis) == ("unknown",) * 3


def test_reads_empa_files_like_the_fixture(empa):
    """Opt-in (ECHO_EMPA_DIR): EMPA's own 30 official cases give the numbers of tests/fixtures/epm."""
    text, stats = read_empa_case_meta(empa.root), read_empa_case_meta(empa.root, priorities="empa_stats")
    official = set(case_meta())
    for source, got in (("scenario", text), ("empa_stats", stats)):
        assert {k: v for k, v in got.items() if k in official} == case_meta(source), source
    text = {k: v for k, v in text.items() if k in official}
    differ = sorted(k for k in text if text[k].priorities != stats[k].priorities)
    assert differ == ["script_020", "script_021", "script_029", "script_042", "script_222", "script_263", "script_269"]
    assert all(text[k].threshold == stats[k].threshold for k in text)

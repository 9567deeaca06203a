"""Case metadata from EMPA's scenario files, and the CaseMeta type other stages construct."""
from collections import Counter

import pytest

from echo_lib.epm.case_meta import CaseMeta, parse_priorities, parse_threshold, read_empa_case_meta
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
])
def test_priority_forms(block, expected, tmp_path):
    assert parse_priorities(md(block), tmp_path / "x.md") == expected


def test_threshold_and_missing_sections(tmp_path):
    assert parse_threshold(md("情感共情：高", "高"), tmp_path / "x.md") == "High"
    with pytest.raises(ValueError, match=r"x\.md: section <empathy_threshold> is missing"):
        parse_threshold("<psychological_profile></psychological_profile>", tmp_path / "x.md")
    with pytest.raises(ValueError, match="no priority level found for 动机共情"):
        parse_priorities(md("情感共情：高优先级\n认知共情：低优先级\n动机共情：随意"), tmp_path / "x.md")


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


def test_reads_empa_files_like_the_fixture(empa_dir):
    for source in ("scenario", "empa_stats"):
        assert read_empa_case_meta(empa_dir, priorities=source) == case_meta(source), source
    text, stats = read_empa_case_meta(empa_dir), read_empa_case_meta(empa_dir, priorities="empa_stats")
    differ = sorted(k for k in text if text[k].priorities != stats[k].priorities)
    assert differ == ["script_020", "script_021", "script_029", "script_042", "script_222", "script_263", "script_269"]
    assert all(text[k].threshold == stats[k].threshold for k in text)

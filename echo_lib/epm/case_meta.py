"""Case metadata: what a benchmark case is, for slicing EPM-Q (METHOD.md 2.7, 5.6).

`CaseMeta` is a small dataclass anyone can build: the sandbox builds it from the project's own
scenarios, `read_empa_case_meta` builds it from EMPA's files (case_metadata.json for domain,
difficulty, dominant axis and |P0|; the tagged sections of cases/script_XXX.md for the empathy
threshold and the three need priorities). Labels are English; EMPA's Chinese labels are mapped here.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

DOMAINS = ("Leisure", "Health", "Life", "Values", "Relations", "Career")
DIFFICULTIES = ("Easy", "Medium", "Hard", "Very Hard")
LEVELS = ("Low", "Medium", "High")
AXES = ("C", "A", "P")

DOMAIN_ZH = {"生活状况": "Life", "身心健康": "Health", "休闲娱乐": "Leisure", "观念认同": "Values",
             "人际关系": "Relations", "生涯发展": "Career"}
DIFFICULTY_ZH = {"较易": "Easy", "中等": "Medium", "困难": "Hard", "极难": "Very Hard"}
LEVEL_ZH = {"低": "Low", "中": "Medium", "高": "High"}
NEED_ZH = {"认知共情": "C", "情感共情": "A", "动机共情": "P"}   # cognitive, affective, motivational empathy
UNKNOWN = "unknown"   # a label an EMPA case has no source for (not in case_metadata.json, not in its text)


@dataclass(frozen=True)
class CaseMeta:
    case_id: str
    domain: str                           # one of DOMAINS (life domain / category)
    difficulty: str                       # one of DIFFICULTIES, from |P0|
    dominant_axis: str                    # C, A or P: the largest deficit
    threshold: str                        # empathy threshold: Low, Medium or High
    priorities: dict[str, str] = field(default_factory=dict)   # {"C"|"A"|"P": Low|Medium|High}
    distance: float | None = None         # |P0| as the benchmark lists it

    def __post_init__(self) -> None:
        checks = (("domain", self.domain, (*DOMAINS, UNKNOWN)), ("difficulty", self.difficulty, (*DIFFICULTIES, UNKNOWN)),
                  ("dominant_axis", self.dominant_axis, (*AXES, UNKNOWN)), ("threshold", self.threshold, LEVELS))
        for name, value, allowed in checks:
            if value not in allowed:
                raise ValueError(f"case {self.case_id}: {name}={value!r}; allowed: {', '.join(allowed)}")
        for axis, level in self.priorities.items():
            if axis not in AXES or level not in LEVELS:
                raise ValueError(f"case {self.case_id}: priority {axis}={level!r}; "
                                 f"allowed: axes {', '.join(AXES)} with {', '.join(LEVELS)}")


# ---- EMPA's scenario files -------------------------------------------------------------------------

# Labels the parsers look for. Some case texts have a stray character inside one ("动机共-情"): such a
# label is read as the clean one. Only symbols and spaces count as stray, never a Chinese character.
LABELS = (*NEED_ZH, "当下共情需求优先级", "共情阈值", "聊天话题")
_STRAY = r"[^\u4e00-\u9fff\n：:【】\[\]（）()]{0,2}"


def clean_labels(text: str, labels: tuple[str, ...] = LABELS) -> str:
    """`text` with every label written with stray characters between its characters put back clean."""
    for label in labels:
        text = re.sub(_STRAY.join(map(re.escape, label)), label, text)
    return text


def _section(text: str, tag: str, path: Path) -> str:
    m = re.search(rf"<{tag}>(.*?)</{tag}>", text, re.S)
    if not m:
        raise ValueError(f"{path}: section <{tag}> is missing; an EMPA case prompt has tagged sections")
    return clean_labels(m.group(1))


def parse_threshold(text: str, path: Path) -> str:
    """共情阈值【低|中|高】 in <empathy_threshold>."""
    m = re.search(r"共情阈值\s*[【\[]\s*([低中高])", _section(text, "empathy_threshold", path))
    if not m:
        raise ValueError(f"{path}: <empathy_threshold> has no 共情阈值【低|中|高】 level")
    return LEVEL_ZH[m.group(1)]


# Level words at the head of a need's entry, most specific first. Authors wrote the level many ways:
# "高优先级", "[优先级：高]", "【高】", "最高优先级", "优先级最低", or only an order ("最…", "其次", "最后").
_HEAD_RULES = (
    (r"最高|极高|最优先", "High"),
    (r"最低", "Low"),
    (r"[高中低]", None),                  # the first explicit level character
    (r"最后", "Low"),
    (r"其次", "Medium"),
    (r"^[\s:：（(\[【]*(最|首先)", "High"),
)
HEAD_CHARS = 10   # how far after the need's name the level word may sit


def _head(block: str, pos: int) -> str:
    """The few characters after a need's name, cut at the end of its entry (line or ；)."""
    return re.split(r"[\n；;]", block[pos:pos + HEAD_CHARS], maxsplit=1)[0]


def _head_level(head: str) -> str | None:
    for pattern, level in _HEAD_RULES:
        m = re.search(pattern, head)
        if m:
            return level or LEVEL_ZH[m.group(0)]
    return None


def parse_priorities(text: str, path: Path) -> dict[str, str]:
    """The three need priorities from 当下共情需求优先级 in <psychological_profile>."""
    profile = _section(text, "psychological_profile", path)
    start = profile.find("当下共情需求优先级")
    start = profile.find("优先级") if start < 0 else start
    block = profile[profile.rfind("\n", 0, start) + 1:] if start >= 0 else ""
    if not block:
        raise ValueError(f"{path}: <psychological_profile> has no 当下共情需求优先级 block")
    ranking = _RANKING.search(block)
    if ranking:                            # "认知共情 > 情感共情 > 动机共情" (or ＞)
        return _by_rank(ranking.groups())
    out = {}
    for name, axis in NEED_ZH.items():
        # the need's entry, not the block header's first mention (the header says 优先级 too)
        hits = [m.end() for m in re.finditer(name, block)]
        level = next((lv for pos in hits if (lv := _head_level(_head(block, pos)))), None)
        if level is not None:
            out[axis] = level
    if len(out) == len(NEED_ZH):
        return out
    numbered = _numbered_order(block)
    if numbered:                           # "1. 动机共情 … 2. 情感共情 … 3. 认知共情 …" with no level words
        return _by_rank(numbered)
    name, axis = next((n, a) for n, a in NEED_ZH.items() if a not in out)
    raise ValueError(f"{path}: no priority level found for {name} ({axis}); write it as "
                     f"'{name}：高优先级' (高/中/低)")


_NEED = "(认知共情|情感共情|动机共情)"
_RANKING = re.compile(rf"{_NEED}\s*[>＞]\s*{_NEED}\s*[>＞]\s*{_NEED}")


def _by_rank(names: tuple[str, ...]) -> dict[str, str]:
    return {NEED_ZH[name]: level for name, level in zip(names, ("High", "Medium", "Low"))}


def _numbered_order(block: str) -> tuple[str, ...] | None:
    """The needs in the order of their list numbers 1, 2, 3, when each of the three has one."""
    numbers = {int(m.group(1)): m.group(2) for m in re.finditer(rf"(?:^|\s)([123])\s*[.、．]\s*{_NEED}", block)}
    names = tuple(numbers.get(i) for i in (1, 2, 3))
    return names if None not in names and len(set(names)) == 3 else None


PRIORITY_SOURCES = ("scenario", "empa_stats")
STATS_COLUMNS = {"threshold": "SP_Empathy_Threshold", "C": "SP_Cognitive_Priority",
                 "A": "SP_Emotional_Priority", "P": "SP_Motivational_Priority"}


def read_empa_stats_personas(stats_csv: str | Path) -> dict[str, tuple[str, dict[str, str]]]:
    """(threshold, priorities) per case as EMPA's own analysis recorded them (descriptive_statistics.csv).

    These differ from the case text in 7 of the 30 official cases (EMPA's parser fell back to
    A High / C Medium / P Medium where the author wrote the priority as an order or as 【高】); the
    published persona slices (METHOD.md 8.4) were computed with them."""
    import pandas as pd

    table = pd.read_csv(stats_csv, encoding="utf-8-sig")
    missing = [c for c in ("Case_ID", *STATS_COLUMNS.values()) if c not in table.columns]
    if missing:
        raise ValueError(f"{stats_csv}: column(s) {', '.join(missing)} missing; expected EMPA's "
                         "descriptive_statistics.csv")
    table = table[table["Case_ID"].astype(str).str.startswith("script_")]
    return {row.Case_ID: (getattr(row, STATS_COLUMNS["threshold"]),
                          {axis: getattr(row, STATS_COLUMNS[axis]) for axis in AXES})
            for row in table.itertuples()}


def read_empa_case_meta(empa_dir: str | Path, priorities: str = "scenario") -> dict[str, CaseMeta]:
    """CaseMeta for every case of EMPA's case_metadata.json.

    priorities="scenario" (default): threshold and need priorities parsed from cases/script_XXX.md.
    priorities="empa_stats": as EMPA's own per-case statistics list them (results/*/descriptive_statistics.csv,
    the first one found), which reproduces the published persona slices exactly."""
    from echo_lib.empa_source import locate

    if priorities not in PRIORITY_SOURCES:
        raise ValueError(f"priorities={priorities!r}; allowed: {', '.join(PRIORITY_SOURCES)}")
    layout = locate(empa_dir, with_commit=False)
    empa_dir = layout.data
    stats = {}
    if priorities == "empa_stats":
        found = sorted(layout.results.glob("*/descriptive_statistics.csv")) if layout.results else []
        if not found:
            raise ValueError(f"{layout.root}: no published runs with descriptive_statistics.csv "
                             "(results/<model>/) for priorities='empa_stats'")
        stats = read_empa_stats_personas(found[0])
    meta_path = empa_dir / "case_metadata.json"
    try:
        listing = json.loads(meta_path.read_text(encoding="utf-8"))["sampled_cases"]
    except (OSError, KeyError, json.JSONDecodeError) as err:
        raise ValueError(f"{meta_path}: cannot read the case list 'sampled_cases' ({err})") from None
    out = {}
    for i, entry in enumerate(listing):
        try:
            case_id = entry["script_id"]
            md = empa_dir / "cases" / f"{case_id}.md"
            if priorities == "empa_stats":
                if case_id not in stats:
                    raise ValueError(f"{empa_dir}: EMPA's statistics have no row for {case_id}")
                threshold, needs = stats[case_id]
            else:
                text = md.read_text(encoding="utf-8")
                threshold, needs = parse_threshold(text, md), parse_priorities(text, md)
            out[case_id] = CaseMeta(
                case_id=case_id, domain=DOMAIN_ZH[entry["category"]],
                difficulty=DIFFICULTY_ZH[entry["difficulty"]], dominant_axis=entry["dominant_axis"],
                threshold=threshold, priorities=needs, distance=entry.get("distance"))
        except OSError as err:
            raise ValueError(f"{empa_dir}: cannot read the case prompt of {entry.get('script_id')} ({err})") from None
        except KeyError as err:
            raise ValueError(f"{meta_path}: sampled_cases[{i}] has no usable {err} "
                             f"(known categories: {', '.join(DOMAIN_ZH)}; difficulties: {', '.join(DIFFICULTY_ZH)})") from None
    return out

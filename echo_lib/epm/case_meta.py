"""Case metadata: what a benchmark case is, for slicing EPM-Q (METHOD.md 2.7, 5.6).

`CaseMeta` is a small dataclass anyone can build: the sandbox builds it from the project's own
scenarios, `read_empa_case_meta` builds it from EMPA's files (case_metadata.json for domain,
difficulty, dominant axis and |P0|; the tagged sections of cases/script_XXX.md for the empathy
threshold and the three need priorities). Labels are English; EMPA's Chinese labels are mapped here.
"""
from __future__ import annotations

import json
import math
import numbers
import re
from dataclasses import dataclass, field
from pathlib import Path

from echo_lib.epm.files import read_text

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

# A case id is a plain name: it becomes file names (cases/<id>.md, <id>_result.json), so it may hold no path.
CASE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
CASE_ID_RULE = "a case id is a plain name: letters, digits, _ . - (no path, at most 128), e.g. script_003 or own_001"
MAX_CASE_BYTES = 1 << 20          # a case prompt (cases/script_XXX.md); EMPA's are a few KiB
MAX_JSON_BYTES = 64 << 20         # a story, metadata or result file; EMPA's story file is about 4 MiB


def short_repr(value: object, limit: int = 80) -> str:
    """repr(value) cut to `limit` characters, for messages about values read from untrusted files."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def case_id_problem(value: object) -> str | None:
    """None for a usable case id, else what is wrong with it (for 'X is not a case id (...)' messages)."""
    if isinstance(value, str) and CASE_ID.fullmatch(value):
        return None
    return f"{short_repr(value)} is not a case id ({CASE_ID_RULE})"


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
        if distance_problem(self.distance):
            raise ValueError(f"case {self.case_id}: distance={self.distance!r}; allowed: {DISTANCE_RULE}")


DISTANCE_RULE = "a finite number >= 0 (|P0|), or null"


def distance_problem(value: object) -> bool:
    """True when `value` is no |P0| (a text such as "far", a negative or non-finite number, a bool)."""
    if value is None:
        return False
    return (isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value)
            or value < 0)


def metadata_entry_problem(entry: object, i: int, required: bool = False) -> tuple[str, str, str] | None:
    """(field, problem, fix) for the first unusable value of case_metadata.json's sampled_cases[i], or None.
    A label that is absent is fine unless `required` (the importer labels it "unknown")."""
    where = f"sampled_cases[{i}]"
    if not isinstance(entry, dict):
        return (where, f"is a {type(entry).__name__}, not an object",
                "give each sampled case as an object with script_id, category, difficulty, dominant_axis and distance")
    if entry.get("script_id") is None:
        return f"{where}.script_id", "is missing", "add the case's id (e.g. script_003), or remove the entry"
    if case_id_problem(entry["script_id"]):
        return f"{where}.script_id", f"is {short_repr(entry['script_id'])}, not a case id", CASE_ID_RULE
    labels = (("category", DOMAIN_ZH, DOMAINS), ("difficulty", DIFFICULTY_ZH, DIFFICULTIES), ("dominant_axis", {}, AXES))
    for key, zh, en in labels:
        value = entry.get(key)
        if value is None and not required:
            continue
        if not (isinstance(value, str) and (value in zh or value in en)):
            return f"{where}.{key}", f"is {short_repr(value)}", f"use one of {', '.join([*zh, *en])}"
    if distance_problem(entry.get("distance")):
        return f"{where}.distance", f"is {short_repr(entry.get('distance'))}", f"write {DISTANCE_RULE}"
    return None


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
    # str.find, not a lazy regex: many opening tags without a closing one made that quadratic
    start = text.find(f"<{tag}>")
    end = text.find(f"</{tag}>", start + len(tag) + 2) if start >= 0 else -1
    if end < 0:
        raise ValueError(f"{path}: section <{tag}> is missing; an EMPA case prompt has tagged sections")
    return clean_labels(text[start + len(tag) + 2:end])


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
    if ranking and len(set(ranking.groups())) == 3:   # "认知共情 > 情感共情 > 动机共情" (or ＞), each need once
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
    ordered = ordered_priorities(profile)  # "最高 / 核心 / 次要", "1. 情感共情（…） > 2. …" (below)
    if ordered:
        return ordered
    name, axis = next((n, a) for n, a in NEED_ZH.items() if a not in out)
    raise ValueError(f"{path}: no priority level found for {name} ({axis}); write it as "
                     f"'{name}：高优先级' (高/中/低)")


_NEED = "(认知共情|情感共情|动机共情)"
_RANKING = re.compile(rf"{_NEED}\s*[>＞]\s*{_NEED}\s*[>＞]\s*{_NEED}")


# ---- need priorities written as an order ---------------------------------------------------------------
# parse_priorities reads 高/中/低 (and 最高/其次/最后, and plain rankings); some authors wrote only an order
# instead. ordered_priorities reads those, only where the levels above find none, so every case they read
# keeps its levels.
_GLOSS = re.compile(r"（[^（）\n]*）|\([^()\n]*\)")
_LIST_NUMBER = re.compile(r"(?<!\d)[123]\s*[.、．]\s*(?=" + _NEED + ")")
LEVELS_BY_RANK = ("High", "Medium", "Low")
# the words of an order, each with its place (lower: first) and, when it says one, its absolute level
ORDER_WORDS = {"最高": (0, "High"), "极高": (0, "High"), "最优先": (0, "High"), "首要": (0, "High"),
               "高": (0, "High"), "核心": (1, None), "其次": (2, None), "次级": (2, None), "次要": (2, None),
               "中": (2, "Medium"), "再次": (3, None), "最后": (3, None), "最低": (4, "Low"), "低": (4, "Low")}
_ORDER_WORD = re.compile("|".join(sorted(ORDER_WORDS, key=len, reverse=True)))
ORDER_HEAD_CHARS = 10     # how far after a need's name its order word may sit (as HEAD_CHARS)


def _order_head(block: str, pos: int) -> str:
    return re.split(r"[\n；;]", block[pos:pos + ORDER_HEAD_CHARS], maxsplit=1)[0]


def ordered_priorities(profile: str) -> dict[str, str] | None:
    """The three need levels (by axis C/A/P) of a priority block written as an order; None when it is none.

    - a ranking whose needs carry glosses or list numbers, "1. 情感共情（…） > 2. 动机共情（…） > 3. 认知共情（…）":
      first High, second Medium, third Low;
    - an order word at the head of each need's entry ("最高优先级", "核心优先级", "[优先级：次要]", "其次",
      "再次"): words that name a level (最高, 高, 中, 低, 最低) keep it; the others (核心, 其次/次级/次要,
      再次/最后) take High, Medium, Low by their place among the distinct places the three entries use
      (最高 / 核心 / 次要 is High / Medium / Low; 最高 / 其次 / 再次 too; 核心 three times is High each)."""
    start = profile.find("当下共情需求优先级")
    if start < 0:
        return None
    block = profile[start + len("当下共情需求优先级"):]
    plain = _LIST_NUMBER.sub("", _GLOSS.sub("", block))
    ranking = _RANKING.search(plain)
    if ranking and len(set(ranking.groups())) == 3:
        return {NEED_ZH[name]: level for name, level in zip(ranking.groups(), LEVELS_BY_RANK)}
    words = {}
    for name, axis in NEED_ZH.items():
        for m in re.finditer(name, block):       # the entry, not a mention inside another need's text
            word = _ORDER_WORD.search(_order_head(block, m.end()))
            if word:
                words[axis] = word.group(0)
                break
    if len(words) != len(NEED_ZH):
        return None
    places = sorted({ORDER_WORDS[w][0] for w in words.values()})
    return {axis: ORDER_WORDS[w][1] or LEVELS_BY_RANK[min(places.index(ORDER_WORDS[w][0]), 2)]
            for axis, w in words.items()}


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
    read = lambda path, limit: read_text(path, limit, inside=empa_dir, inside_name="the EMPA folder")  # noqa: E731
    try:
        data = json.loads(read(meta_path, MAX_JSON_BYTES))
        listing = data["sampled_cases"]
        if not isinstance(listing, list):
            raise TypeError(f"'sampled_cases' is a {type(listing).__name__}, not a list")
    except (OSError, KeyError, TypeError, ValueError, RecursionError) as err:
        raise ValueError(f"{meta_path}: cannot read the case list 'sampled_cases' ({err})") from None
    out = {}
    for i, entry in enumerate(listing):
        problem = metadata_entry_problem(entry, i, required=True)
        if problem:
            raise ValueError(f"{meta_path}: field '{problem[0]}' {problem[1]}; fix: {problem[2]}")
        try:
            case_id = entry["script_id"]
            md = empa_dir / "cases" / f"{case_id}.md"
            if priorities == "empa_stats":
                if case_id not in stats:
                    raise ValueError(f"{empa_dir}: EMPA's statistics have no row for {case_id}")
                threshold, needs = stats[case_id]
            else:
                text = read(md, MAX_CASE_BYTES)
                threshold, needs = parse_threshold(text, md), parse_priorities(text, md)
            out[case_id] = CaseMeta(
                case_id=case_id, domain=DOMAIN_ZH.get(entry["category"], entry["category"]),
                difficulty=DIFFICULTY_ZH.get(entry["difficulty"], entry["difficulty"]), dominant_axis=entry["dominant_axis"],
                threshold=threshold, priorities=needs, distance=entry.get("distance"))
        except (OSError, UnicodeDecodeError) as err:
            raise ValueError(f"{empa_dir}: cannot read the case prompt of {entry.get('script_id')} ({err})") from None
        except (KeyError, TypeError) as err:    # TypeError: an unhashable label (a list where a text belongs)
            raise ValueError(f"{meta_path}: sampled_cases[{i}] has no usable {err} "
                             f"(known categories: {', '.join(DOMAIN_ZH)}; difficulties: {', '.join(DIFFICULTY_ZH)})") from None
    return out

"""EMPA's Chinese cases as Scenario objects, read at run time from the user's EMPA folder.

EMPA's data is CC BY-NC: nothing of its text is copied into the project; this module only knows the
layout (docs/METHOD.md, "EMPA's files") of EMPA's empa/data folder, or of a folder laid out like it:
- cases/script_XXX.md: the actor prompt, tagged sections <character_info>, <empathy_threshold>,
  <psychological_profile>, <experience>, <scenario>, each with "label：value" lines;
- scenarios/character_stories.json (or character_stories*.json beside cases/): per script (剧本编号) the
  four stages 阶段1..4 (标题 / 内容), 故事的结果, 故事的插曲;
- case_metadata.json (optional): category, difficulty, dominant axis, distance (|P0|) of the sampled cases;
  a case it does not list gets the label "unknown" for each of the three (its text does not say them);
- official_cases.txt: the 30 benchmark ids.
The threshold level and the three need priorities come from echo_lib.epm.case_meta's parsers, so a
Scenario's CaseMeta is the one the EPM analysis reads. Text fields stay Chinese.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from echo_lib.epm.case_meta import (DIFFICULTY_ZH, DOMAIN_ZH, NEED_ZH, UNKNOWN, _section, clean_labels,
                                    parse_priorities, parse_threshold)
from echo_lib.scenarios.schema import Scenario, ScenarioError, scenario_from_dict

# the label at the head of each field, as EMPA's authors wrote it (with an optional "（...）" gloss)
FIELDS = {
    "character_info": {"name": "姓名", "gender": "性别", "age": "年龄", "social_persona": "社交性格",
                       "inner_core": "内核性格"},
    "psychological_profile": {"vent": "想要找人倾诉的想法与内容", "hoped_for": "倾诉中想要获得的共情点",
                              "constraints": "人物共情阈值"},
    "experience": {"childhood": "童年经历", "adolescence": "少年经历", "young_adulthood": "青年经历",
                   "growth_arc": "隐形成长主线脉络", "current": "现在的情况", "life_goal": "现在的人生主线目标",
                   "vision": "现在的人生愿景与动力"},
    "scenario": {"trigger": "故事的起因"},
}
NEED_KEY = {"C": "cognitive", "A": "affective", "P": "motivational"}
FIELD_LABELS = tuple(label for labels in FIELDS.values() for label in labels.values())
STORY_GLOBS = ("character_stories*.json", "scenarios/character_stories*.json")

# a line that starts a new field or heading ends the previous field's value
_LINE_HEAD = r"^[ \t]*(?:[-*][ \t]*)?(?:\d+\.[ \t]*)?"
_BOUNDARY = re.compile(_LINE_HEAD + r"(?:#|[\u4e00-\u9fff]{2,14}(?:（[^）\n]*）)?[：:])", re.M)


def _field(section: str, label: str) -> str:
    """The text after 'label：' up to the next field line or heading; '' when the label is absent."""
    m = re.search(_LINE_HEAD + re.escape(label) + r"(?:（[^）\n]*）)?[：:]", section, re.M)
    if not m:
        return ""
    nxt = _BOUNDARY.search(section, m.end())
    return section[m.end():nxt.start() if nxt else len(section)].strip()


def _heading_body(section: str, heading: str) -> str:
    """The text under a '# heading' line up to the next heading (the chat topic)."""
    m = re.search(rf"^[ \t]*#+[ \t]*{heading}[ \t]*$", section, re.M)
    if not m:
        return ""
    nxt = re.search(r"^[ \t]*#", section[m.end():], re.M)
    return section[m.end():m.end() + nxt.start() if nxt else len(section)].strip()


_LEVEL_HEAD = re.compile(r"^[\s：:\[【（(]*(?:优先级[：:]?\s*)?(?:最高|极高|最优先|最低|中等|[高中低])?\s*(?:优先级)?"
                         r"[\]】]?\s*[|｜+。，,：:]?\s*")


def _priority_reasons(profile: str) -> dict[str, str]:
    """Per need, the author's words after its name in the priority block (levels come from case_meta)."""
    start = profile.find("当下共情需求优先级")
    block = profile[start + len("当下共情需求优先级"):] if start >= 0 else ""
    spots = sorted((m.start(), m.end(), NEED_ZH[m.group(0)]) for m in re.finditer("|".join(NEED_ZH), block))
    out = {}
    for i, (_, end, axis) in enumerate(spots):
        if axis in out:
            continue
        entry = block[end:spots[i + 1][0] if i + 1 < len(spots) else len(block)]
        entry = re.sub(r"[\s\]】）);；]*(?:\d+[.、．])?\s*$", "", _LEVEL_HEAD.sub("", entry.strip()))
        out[axis] = entry.strip()
    whole = block.strip(" ：:\n")
    # a ranking like "认知共情 > 情感共情 > 动机共情。…" has no per-need text: give each the whole explanation
    return {axis: (out.get(axis) or whole) if len(out.get(axis, "")) > 1 else whole for axis in NEED_KEY}


def data_dir(empa_dir: str | Path) -> Path:
    """EMPA's data folder: `empa_dir` itself when it holds cases/, else its empa/data (EMPA's repository)."""
    folder = Path(empa_dir).expanduser()
    for candidate in (folder, folder / "empa" / "data"):
        if (candidate / "cases").is_dir():
            return candidate
    raise FileNotFoundError(f"{folder}: no cases/ folder here nor in empa/data/; give EMPA's repository or its "
                            "empa/data folder (sandbox.empa_dir)")


_ZH_DIGITS = {c: i for i, c in enumerate("零一二三四五六七八九")}


def parse_age(text: str) -> int | None:
    """Years from '26', '26岁', '二十六岁' or '十九' (the first number written); None when there is none."""
    digits = re.search(r"\d+", text)
    if digits:
        return int(digits.group(0))
    zh = re.search(r"([一二三四五六七八九])?十([一二三四五六七八九])?", text)
    if zh:
        tens, ones = zh.groups()
        return _ZH_DIGITS[tens or "一"] * 10 + (_ZH_DIGITS[ones] if ones else 0)
    return None


def read_official_ids(empa_dir: str | Path) -> list[str]:
    path = data_dir(empa_dir) / "official_cases.txt"
    try:
        return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError as err:
        raise FileNotFoundError(f"{path}: cannot read the official case list ({err}); "
                                "set sandbox.empa_dir to EMPA's data folder") from None


def read_stories(empa_dir: str | Path) -> dict[str, dict]:
    """Story material by script id, from every character_stories*.json beside cases/ or in scenarios/
    (the full file or the official-30 one)."""
    folder = data_dir(empa_dir)
    files = sorted(f for pattern in STORY_GLOBS for f in folder.glob(pattern))
    if not files:
        raise FileNotFoundError(f"{folder}: no character_stories*.json here or in scenarios/ (EMPA's story stages)")
    stories = {}
    for f in files:
        data = json.loads(f.read_text(encoding="utf-8"))
        for entry in data if isinstance(data, list) else data.values():
            stories.setdefault(entry.get("剧本编号"), entry)
    return stories


def read_metadata(empa_dir: str | Path) -> dict[str, dict]:
    """Labels of the cases case_metadata.json lists; {} when the file is absent (it is optional)."""
    path = data_dir(empa_dir) / "case_metadata.json"
    if not path.exists():
        return {}
    try:
        return {e["script_id"]: e for e in json.loads(path.read_text(encoding="utf-8"))["sampled_cases"]}
    except (OSError, KeyError, json.JSONDecodeError) as err:
        raise FileNotFoundError(f"{path}: cannot read 'sampled_cases' ({err})") from None


def import_case(empa_dir: str | Path, case_id: str, stories: dict[str, dict] | None = None,
                metadata: dict[str, dict] | None = None) -> Scenario:
    """One EMPA case as a Scenario; ScenarioError names the file and field when something is missing."""
    empa_dir = data_dir(empa_dir)
    stories = read_stories(empa_dir) if stories is None else stories
    metadata = read_metadata(empa_dir) if metadata is None else metadata
    md = empa_dir / "cases" / f"{case_id}.md"
    try:
        text = md.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:   # a ValueError: it used to stop every case of stage 04
        raise ScenarioError(str(md), "(file)", f"is not UTF-8 text (byte {err.start}: {err.reason})",
                            "save the file as UTF-8 (EMPA's files are)") from None
    except OSError as err:
        raise ScenarioError(str(md), "(file)", f"cannot be read ({err})", "check sandbox.empa_dir and the case id")
    try:
        sec = {tag: clean_labels(_section(text, tag, md), FIELD_LABELS) for tag in (*FIELDS, "empathy_threshold")}
        threshold, levels = parse_threshold(text, md), parse_priorities(text, md)
    except ValueError as err:
        raise ScenarioError(str(md), "(tagged sections)", str(err).split(": ", 1)[-1],
                            "restore EMPA's tagged section layout") from None
    f = {key: _field(sec[tag], label) for tag, labels in FIELDS.items() for key, label in labels.items()}

    meta = metadata.get(case_id) or {}     # not a sampled case: its labels are unknown
    story = stories.get(case_id)
    if story is None:
        raise ScenarioError(str(empa_dir / "character_stories*.json"), f"剧本编号={case_id}", "is missing",
                            "use EMPA's character_stories.json that holds this script")
    stages = story.get("故事的经过") or {}
    reasons = _priority_reasons(sec["psychological_profile"])
    data = {
        "id": case_id,
        "persona": {k: f[k] for k in ("name", "gender", "social_persona", "inner_core")}
                   | {"age": parse_age(f["age"])},
        "threshold": {"level": threshold,
                      "description": re.sub(r"^.*?共情阈值\s*[【\[][^】\]]*[】\]]\s*[，,：:。]?", "",
                                            sec["empathy_threshold"].strip(), flags=re.S).strip()},
        "topic": _heading_body(sec["psychological_profile"], "聊天话题"),
        "needs": {k: f[k] for k in ("vent", "hoped_for", "constraints")},
        "priorities": {NEED_KEY[a]: {"level": levels[a], "reason": reasons[a]} for a in NEED_KEY},
        "experiences": {k: f[k] for k in ("childhood", "adolescence", "young_adulthood", "growth_arc")},
        "situation": {k: f[k] for k in ("current", "life_goal", "vision")},
        "story": {"trigger": f["trigger"], "outcome": story.get("故事的结果"), "interlude": story.get("故事的插曲"),
                  "stages": [{"title": s.get("标题"), "content": s.get("内容")}
                             for _, s in sorted(stages.items(), key=lambda kv: int(re.sub(r"\D", "", kv[0]) or 0))]},
        "labels": {"domain": DOMAIN_ZH.get(meta.get("category"), meta.get("category", UNKNOWN)),
                   "dominant_axis": meta.get("dominant_axis", UNKNOWN),
                   "difficulty": DIFFICULTY_ZH.get(meta.get("difficulty"), meta.get("difficulty", UNKNOWN))},
    }
    return scenario_from_dict(data, source=str(md), language="zh", distance=meta.get("distance"),
                              unknown_labels=True)


def import_empa(empa_dir: str | Path, case_ids: list[str] | None = None) -> list[Scenario]:
    """The given cases (default: the 30 of official_cases.txt), in that order."""
    if not Path(empa_dir).is_dir():
        raise FileNotFoundError(f"{empa_dir}: EMPA data folder not found; set sandbox.empa_dir")
    empa_dir = data_dir(empa_dir)
    stories, metadata = read_stories(empa_dir), read_metadata(empa_dir)
    ids = case_ids or read_official_ids(empa_dir)
    return [import_case(empa_dir, cid, stories, metadata) for cid in ids]

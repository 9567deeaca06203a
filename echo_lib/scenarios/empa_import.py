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

EMPA's folder is downloaded, so nothing in it is trusted: every file read must be a regular file of
bounded size that resolves (symlinks followed) inside the data folder; case ids are plain names. A
case whose files are unusable is a ScenarioError naming the file, the field and the fix, and the other
cases go on; a story or metadata entry that belongs to no case is listed in `problems`.
"""
from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from echo_lib.epm.case_meta import (CASE_ID_RULE, DIFFICULTY_ZH, DOMAIN_ZH, MAX_CASE_BYTES, MAX_JSON_BYTES, NEED_ZH,
                                    UNKNOWN, _section, case_id_problem, clean_labels, metadata_entry_problem,
                                    parse_priorities, parse_threshold, short_repr)
from echo_lib.epm.files import FileRefused, read_text
from echo_lib.scenarios.schema import N_STAGES, Scenario, ScenarioError, scenario_from_dict

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
OPTIONAL_FIELDS = {"growth_arc"}   # a case without it (EMPA has one) imports with it empty, and a warning

log = logging.getLogger(__name__)

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


_LEVEL_HEAD = re.compile(r"^[\s：:\[【（(]*(?:优先级[：:]?\s*)?(?:最高|极高|最优先|最低|中等|[高中低]|核心|次级|次要|再次)?"
                         r"\s*(?:优先级)?[\]】]?\s*[|｜+。，,：:]?\s*")


_TAIL_CLOSERS = "]】）);；>＞"


def _strip_tail(entry: str) -> str:
    """`entry` without what ends it: whitespace, then the next entry's list number ("2."), then closing
    brackets, ；, and whitespace in any mix. Plain string operations: the regex that did this
    (`[\\s\\]】）);；]*(?:\\d+[.、．])?\\s*$`) backtracked cubically on long whitespace runs."""
    entry = entry.rstrip()
    if entry and entry[-1] in ".、．":
        i = len(entry) - 1
        while i > 0 and entry[i - 1].isdecimal():
            i -= 1
        if i < len(entry) - 1:                 # digits before the dot: a list number
            entry = entry[:i]
    i = len(entry)
    while i > 0 and (entry[i - 1].isspace() or entry[i - 1] in _TAIL_CLOSERS):
        i -= 1
    return entry[:i]


def _priority_reasons(profile: str) -> dict[str, str]:
    """Per need, the author's words after its name in the priority block (levels come from case_meta)."""
    start = profile.find("当下共情需求优先级")
    block = profile[start + len("当下共情需求优先级"):] if start >= 0 else ""
    spots = sorted((m.start(), m.end(), NEED_ZH[m.group(0)]) for m in re.finditer("|".join(NEED_ZH), block))
    # a need named at the head of a line is its entry; a mention inside another need's text is not
    heads = {axis for start, _, axis in spots if not block[block.rfind("\n", 0, start) + 1:start].strip(" \t-*")}
    out = {}
    for i, (start, end, axis) in enumerate(spots):
        if axis in out or (axis in heads and block[block.rfind("\n", 0, start) + 1:start].strip(" \t-*")):
            continue
        entry = block[end:spots[i + 1][0] if i + 1 < len(spots) else len(block)]
        entry = _strip_tail(_LEVEL_HEAD.sub("", entry.strip()))
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


def _read(path: Path, folder: Path, limit: int, what: str) -> str:
    """A file of EMPA's data folder, read only if it is a regular file of at most `limit` bytes that resolves
    inside `folder` (FileRefused otherwise, a ValueError naming the file; OSError when it cannot be read)."""
    return read_text(path, limit, what, inside=folder, inside_name="the EMPA folder")


def read_official_ids(empa_dir: str | Path) -> list[str]:
    """The ids of official_cases.txt, one per line. A line that is no case id (a path such as ../x) or an
    id listed twice is an error naming the file and line: the list decides which cases a run plays."""
    folder = data_dir(empa_dir)
    path = folder / "official_cases.txt"
    try:
        text = _read(path, folder, MAX_CASE_BYTES, "EMPA's list of case ids")
    except (OSError, UnicodeDecodeError) as err:
        raise FileNotFoundError(f"{path}: cannot read the official case list ({err}); "
                                "set sandbox.empa_dir to EMPA's data folder") from None
    ids, first = [], {}
    for n, line in enumerate(text.splitlines(), start=1):
        cid = line.strip()
        if not cid:
            continue
        if case_id_problem(cid):
            raise ValueError(f"{path}: line {n}: {case_id_problem(cid)}; fix: restore EMPA's official_cases.txt "
                             "(one id such as script_003 per line)")
        if cid in first:
            raise ValueError(f"{path}: line {n} lists {cid!r} again (first on line {first[cid]}); fix: remove one "
                             "of the two lines (a case counts once)")
        first[cid] = n
        ids.append(cid)
    return ids


STORY_FIX = "give each story as an object with 剧本编号, 故事的经过, 故事的结果 and 故事的插曲 (or remove the entry)"


class Stories(dict):
    """Story entries by script id (剧本编号), with where each came from (`origin`: file and entry), the cases
    whose story is ambiguous (`conflicts`: two different stories of one id) and the entries no case can be
    told from (`problems`: not an object, no usable id, a file that is no list of stories)."""

    def __init__(self, files: list[Path] = ()):
        super().__init__()
        self.files = list(files)
        self.origin: dict[str, tuple[Path, str]] = {}
        self.conflicts: dict[str, ScenarioError] = {}
        self.problems: list[ScenarioError] = []

    def add(self, file: Path, label: str, entry: object) -> None:
        if not isinstance(entry, dict):
            self.problems.append(ScenarioError(str(file), label, f"is a {type(entry).__name__}, not a story object",
                                               STORY_FIX))
            return
        cid = entry.get("剧本编号")
        if cid is None or case_id_problem(cid):
            problem = "is missing" if cid is None else f"is {short_repr(cid)}, not a case id"
            self.problems.append(ScenarioError(str(file), f"{label}.剧本编号", problem,
                                               f"give the script id of the story, e.g. script_003 ({CASE_ID_RULE})"))
            return
        if cid not in self:
            self[cid], self.origin[cid] = entry, (file, label)
        elif self[cid] != entry and cid not in self.conflicts:   # the same story twice (full + official file) is fine
            file0, label0 = self.origin[cid]
            where = (f"twice, differently, in entries {label0} and {label}" if file0 == file
                     else f"differently in {file0} {label0} and in {file} {label}")
            self.conflicts[cid] = ScenarioError(str(file), f"剧本编号={cid}", f"is given {where}",
                                                "keep one of the two stories (the same story twice is fine)")

    def where(self, cid: str) -> str:
        return str(self.origin[cid][0]) if cid in self.origin else str(self.files[0] if self.files else "")


def read_stories(empa_dir: str | Path) -> Stories:
    """Story material by script id, from every character_stories*.json beside cases/ or in scenarios/
    (the full file or the official-30 one). A file or entry that cannot be used costs its own cases only."""
    folder = data_dir(empa_dir)
    files = sorted(f for pattern in STORY_GLOBS for f in folder.glob(pattern))
    if not files:
        raise FileNotFoundError(f"{folder}: no character_stories*.json here or in scenarios/ (EMPA's story stages)")
    stories = Stories(files)
    for f in files:
        try:
            data = json.loads(_read(f, folder, MAX_JSON_BYTES, "EMPA's story file"))
        except FileRefused as err:
            stories.problems.append(ScenarioError(str(f), "(file)", err.problem, err.fix))
            continue
        except (OSError, ValueError, RecursionError) as err:    # ValueError: not UTF-8, not JSON
            stories.problems.append(ScenarioError(str(f), "(file)", f"cannot be read as JSON ({err})",
                                                  "restore EMPA's character_stories.json"))
            continue
        if isinstance(data, list):
            entries = [(f"[{i}]", e) for i, e in enumerate(data)]
        elif isinstance(data, dict):
            entries = [(f"[{short_repr(k)}]", e) for k, e in data.items()]
        else:
            stories.problems.append(ScenarioError(str(f), "(top level)", f"is a {type(data).__name__}, not a list "
                                                  "of stories", "restore EMPA's character_stories.json"))
            continue
        for label, entry in entries:
            stories.add(f, label, entry)
    return stories


class Metadata(dict):
    """case_metadata.json's entries by script id, with the cases whose entry is unusable (`bad`: a value that
    is no label, two different entries) and the entries no case can be told from (`problems`)."""

    def __init__(self, path: Path | None = None):
        super().__init__()
        self.path = path
        self.bad: dict[str, ScenarioError] = {}
        self.problems: list[ScenarioError] = []
        self.index: dict[str, int] = {}


def read_metadata(empa_dir: str | Path) -> Metadata:
    """Labels of the cases case_metadata.json lists; empty when the file is absent (it is optional). A file
    that is no object with a list 'sampled_cases' is an error; a bad entry costs its own case only."""
    folder = data_dir(empa_dir)
    path = folder / "case_metadata.json"
    meta = Metadata(path)
    if not path.exists() and not path.is_symlink():
        return meta
    fix = "restore EMPA's case_metadata.json (an object whose 'sampled_cases' lists the sampled cases)"
    try:
        data = json.loads(_read(path, folder, MAX_JSON_BYTES, "EMPA's case metadata"))
    except FileRefused as err:
        raise ScenarioError(str(path), "(file)", err.problem, err.fix) from None
    except (OSError, ValueError, RecursionError) as err:
        raise ScenarioError(str(path), "(file)", f"cannot be read as JSON ({err})", fix) from None
    listing = data.get("sampled_cases") if isinstance(data, dict) else None
    if not isinstance(data, dict):
        raise ScenarioError(str(path), "sampled_cases", f"is missing (the file holds a {type(data).__name__}, "
                            "not an object)", fix)
    if not isinstance(listing, list):
        problem = "is missing" if listing is None else f"is a {type(listing).__name__}, not a list"
        raise ScenarioError(str(path), "sampled_cases", problem, fix)
    for i, entry in enumerate(listing):
        problem = metadata_entry_problem(entry, i)
        if problem and (not isinstance(entry, dict) or problem[0].endswith(".script_id")):
            meta.problems.append(ScenarioError(str(path), *problem))     # no case to charge it to
            continue
        cid = entry["script_id"]
        if cid in meta.index:
            if entry != meta[cid] and cid not in meta.bad:
                meta.bad[cid] = ScenarioError(str(path), f"sampled_cases[{meta.index[cid]}] and [{i}]",
                                              f"both describe {cid}, with different labels",
                                              "keep one of the two entries")
            continue
        meta[cid], meta.index[cid] = entry, i
        if problem:
            meta.bad[cid] = ScenarioError(str(path), *problem)
    return meta


def _stages(story: dict, cid: str, source: str) -> list[dict]:
    """The four story stages 阶段1..阶段4 in order, each {title, content}; ScenarioError names the story file."""
    field = f"剧本编号={cid}.故事的经过"
    stages = story.get("故事的经过")
    if not isinstance(stages, dict):
        problem = "is missing" if stages is None else f"is a {type(stages).__name__}, not an object"
        raise ScenarioError(source, field, problem, f"give the {N_STAGES} stages as {{\"阶段1\": {{\"标题\": …, "
                            "\"内容\": …}, …, \"阶段4\": …}")

    def order(key: str) -> tuple[int, str]:      # 阶段10 after 阶段9, without int() of a huge number
        digits = re.sub(r"\D", "", key).lstrip("0")
        return len(digits), digits
    out = []
    for key in sorted(stages, key=order):
        stage = stages[key]
        if not isinstance(stage, dict):
            raise ScenarioError(source, f"{field}.{key}", f"is a {type(stage).__name__}, not an object",
                                "give the stage as {\"标题\": …, \"内容\": …}")
        for part in ("标题", "内容"):
            if not isinstance(stage.get(part), str) or not stage[part].strip():
                raise ScenarioError(source, f"{field}.{key}.{part}", f"is {short_repr(stage.get(part))}", "write it as non-empty text")
        out.append({"title": stage["标题"], "content": stage["内容"]})
    if len(out) != N_STAGES:
        raise ScenarioError(source, field, f"has {len(out)} stages", f"give exactly {N_STAGES}, 阶段1..阶段{N_STAGES}")
    for part in ("故事的结果", "故事的插曲"):
        if not isinstance(story.get(part), str) or not story[part].strip():
            raise ScenarioError(source, f"剧本编号={cid}.{part}", f"is {short_repr(story.get(part))}", "write it as non-empty text")
    return out


_THRESHOLD_HEAD = re.compile(r"\s*[【\[]([^】\]]*)([】\]])?")
_AFTER_LEVEL = re.compile(r"\s*[，,：:。]?")


def _threshold_description(section: str) -> str:
    """The threshold text after '共情阈值【…】，' (all of it when there is no such label). A scan, not a
    lazy regex: a text with many unclosed labels made that one quadratic."""
    text = section.strip()
    pos = text.find("共情阈值")
    while pos >= 0:
        m = _THRESHOLD_HEAD.match(text, pos + len("共情阈值"))
        if m:
            if m.group(2) is None:     # no closing bracket from here on: none for a later label either
                break
            return text[_AFTER_LEVEL.match(text, m.end()).end():].strip()
        pos = text.find("共情阈值", pos + 1)
    return text


def import_case(empa_dir: str | Path, case_id: str, stories: dict[str, dict] | None = None,
                metadata: dict[str, dict] | None = None) -> Scenario:
    """One EMPA case as a Scenario; ScenarioError names the file and field when something is missing."""
    empa_dir = data_dir(empa_dir)
    if case_id_problem(case_id):
        raise ScenarioError(str(empa_dir / "cases"), "(case id)", case_id_problem(case_id),
                            "give the id of a case, the name of its cases/<id>.md without .md")
    stories = read_stories(empa_dir) if stories is None else stories
    metadata = read_metadata(empa_dir) if metadata is None else metadata
    md = empa_dir / "cases" / f"{case_id}.md"
    try:
        text = _read(md, empa_dir, MAX_CASE_BYTES, "a case prompt")
    except FileRefused as err:
        raise ScenarioError(str(md), "(file)", err.problem, err.fix) from None
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
    for tag, labels in FIELDS.items():
        for key in OPTIONAL_FIELDS & labels.keys():
            if not f[key]:
                log.warning("%s: <%s> has no %s field (%s); imported as empty", md, tag, labels[key], key)

    if case_id in getattr(metadata, "bad", {}):
        raise metadata.bad[case_id]
    meta = metadata.get(case_id) or {}     # not a sampled case: its labels are unknown
    if case_id in getattr(stories, "conflicts", {}):
        raise stories.conflicts[case_id]
    story = stories.get(case_id)
    if story is None:
        problems = getattr(stories, "problems", [])
        also = f" (and these story entries could not be read: {'; '.join(map(str, problems[:3]))}" + (
            f"; {len(problems) - 3} more)" if len(problems) > 3 else ")") if problems else ""
        raise ScenarioError(str(empa_dir / "character_stories*.json"), f"剧本编号={case_id}", "is missing" + also,
                            "use EMPA's character_stories.json that holds this script")
    source = stories.where(case_id) if isinstance(stories, Stories) else str(empa_dir / "character_stories*.json")
    stages = _stages(story, case_id, source)
    reasons = _priority_reasons(sec["psychological_profile"])
    data = {
        "id": case_id,
        "persona": {k: f[k] for k in ("name", "gender", "social_persona", "inner_core")}
                   | {"age": parse_age(f["age"])},
        "threshold": {"level": threshold, "description": _threshold_description(sec["empathy_threshold"])},
        "topic": _heading_body(sec["psychological_profile"], "聊天话题"),
        "needs": {k: f[k] for k in ("vent", "hoped_for", "constraints")},
        "priorities": {NEED_KEY[a]: {"level": levels[a], "reason": reasons[a]} for a in NEED_KEY},
        "experiences": {k: f[k] for k in ("childhood", "adolescence", "young_adulthood", "growth_arc")},
        "situation": {k: f[k] for k in ("current", "life_goal", "vision")},
        "story": {"trigger": f["trigger"], "outcome": story["故事的结果"], "interlude": story["故事的插曲"],
                  "stages": stages},
        "labels": {"domain": DOMAIN_ZH.get(meta.get("category"), meta.get("category") or UNKNOWN),
                   "dominant_axis": meta.get("dominant_axis") or UNKNOWN,
                   "difficulty": DIFFICULTY_ZH.get(meta.get("difficulty"), meta.get("difficulty") or UNKNOWN)},
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

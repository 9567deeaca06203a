"""Blinding: what a judge may see of a sandbox transcript (METHOD.md 7.2 [DEFAULT] "Blinding").

A transcript is read from a sandbox result file (EMPA's schema) and reduced to the dialogue (user and
companion turns) plus a short profile of the user. Before any judge reads it:
- names are masked: every configured model name and id (and the parts of an id a model might say, such
  as "smollm2" or "Qwen3"), the companion persona's name and the families in `nee.blind_terms`, as whole
  words, case-insensitive. A name that is also an everyday word ("base") is masked too: blinding wins;
- formatting is normalised: markdown (headings, emphasis, code, links, lists, quotes) is stripped, emoji
  are removed and Unicode is NFKC-normalised, and each message becomes one line of single-spaced text,
  so a model's house style cannot identify it.
`Blinder.check` is the last guard: it refuses a prompt in which a name still appears.
"""
from __future__ import annotations

import json
import logging
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MASK = "[name]"
ROLES = {"actor": "User", "test_model": "Companion"}

# Emoji and pictographs, dingbats, regional flags, variation selector 16, zero-width joiner, keycap.
EMOJI = re.compile("[\U0001F000-\U0001FAFF\u2600-\u27BF\u2B00-\u2BFF\uFE0F\u200D\u20E3]+")
MARKDOWN = [
    (re.compile(r"```[a-zA-Z]*"), ""),                      # code fences
    (re.compile(r"`([^`]*)`"), r"\1"),                       # inline code
    (re.compile(r"!?\[([^\]]*)\]\([^)]*\)"), r"\1"),         # links and images -> their text
    (re.compile(r"(?m)^\s{0,3}#{1,6}\s*"), ""),              # headings
    (re.compile(r"(?m)^\s{0,3}>\s?"), ""),                   # block quotes
    (re.compile(r"(?m)^\s*(?:[-*+•]|\d{1,2}[.)])\s+"), ""),  # list markers
    (re.compile(r"(?m)^\s*(?:[-*_]\s*){3,}$"), ""),          # horizontal rules
    (re.compile(r"(\*\*|__)(.+?)\1"), r"\2"),                # bold
    (re.compile(r"(?<![\w*])\*(?!\s)([^*\n]+?)(?<!\s)\*(?![\w*])"), r"\1"),   # *italic*
    (re.compile(r"(?<![\w_])_(?!\s)([^_\n]+?)(?<!\s)_(?![\w_])"), r"\1"),     # _italic_
    (re.compile(r"~~(.+?)~~"), r"\1"),                       # strike-through
]


def normalise(text: str) -> str:
    """Markdown stripped, emoji removed, NFKC, all whitespace (newlines too) collapsed to single spaces."""
    text = unicodedata.normalize("NFKC", text or "")
    for pattern, repl in MARKDOWN:
        text = pattern.sub(repl, text)
    text = EMOJI.sub("", text)
    return re.sub(r"\s+", " ", text).strip()


def name_variants(name: str) -> set[str]:
    """A model name or id and the pieces of it a transcript might contain ("Qwen/Qwen3-32B" -> "Qwen3-32B",
    "Qwen3", "Qwen"; "smollm2-135m-instruct" -> "smollm2-135m", "smollm2", "smollm")."""
    out = {name}
    last = name.rstrip("/").split("/")[-1]
    parts = re.split(r"([-_.: ])", last)
    out |= {"".join(parts[:i]) for i in range(1, len(parts) + 1, 2)}   # "Rival", "Rival-Z9", "Rival-Z9-7B"
    letters = re.sub(r"\d+$", "", parts[0])
    if len(letters) >= 4:
        out.add(letters)
    return {v for v in out if len(v) >= 2}


class Blinder:
    """Masks the given names in text and checks that a finished prompt holds none of them."""

    def __init__(self, names: list[str], terms: list[str] = ()):
        """`names`: model names and ids (their variants are masked too); `terms`: masked as given."""
        found = {v for n in names if n for v in name_variants(n)} | {t for t in terms if t}
        variants = sorted(found, key=len, reverse=True)
        self.names = variants
        body = "|".join(re.escape(v) for v in variants) or r"(?!x)x"
        self._pattern = re.compile(rf"(?<![A-Za-z0-9])(?:{body})(?![A-Za-z0-9])", re.IGNORECASE)

    def mask(self, text: str) -> str:
        return self._pattern.sub(MASK, text)

    def __call__(self, text: str) -> str:
        return self.mask(normalise(text))

    def found(self, text: str) -> list[str]:
        return sorted({m.group(0) for m in self._pattern.finditer(text)})

    def check(self, prompt: list[dict]) -> list[dict]:
        leaked = self.found(" ".join(m["content"] for m in prompt))
        if leaked:
            raise ValueError(f"blinding failed: {leaked} would reach a judge prompt; a model name that is also a "
                             "word of the judge prompt's wording must be renamed in the config's models: section")
        return prompt


@dataclass(frozen=True)
class Transcript:
    """One sandbox dialogue as the panel uses it. `model`/`case_id` never reach a prompt."""
    model: str
    case_id: str
    profile: str                     # blinded
    turns: tuple[tuple[str, str], ...]   # (User|Companion, blinded text)

    def text(self) -> str:
        return "\n".join(f"{who}: {what}" for who, what in self.turns)


def profile_text(scenario: dict) -> str:
    """A short profile of the simulated user from the result file's scenario block (tolerant of EMPA's
    imported cases, which may lack fields)."""
    p, needs, pri = scenario.get("persona") or {}, scenario.get("needs") or {}, scenario.get("priorities") or {}
    parts = []
    who = ", ".join(str(p[k]) for k in ("name", "gender", "age") if p.get(k))
    if who:
        parts.append(f"The user: {who}.")
    for label, key in (("Comes across as", "social_persona"), ("Underneath", "inner_core")):
        if p.get(key):
            parts.append(f"{label}: {p[key]}")
    if scenario.get("topic"):
        parts.append(f"Opening topic: {scenario['topic']}")
    if needs.get("hoped_for"):
        parts.append(f"Hopes for: {needs['hoped_for']}")
    levels = [f"{axis} {pri[axis]['level']}" for axis in ("cognitive", "affective", "motivational")
              if isinstance(pri.get(axis), dict) and pri[axis].get("level")]
    if levels:
        parts.append("Needs (cognitive = to be understood, affective = to be felt with, motivational = to be "
                     "backed): " + ", ".join(levels) + ".")
    return " ".join(parts) or "No profile of the user was recorded."


def read_transcript(path: str | Path, model: str, blind: Blinder) -> Transcript:
    """One `<case_id>_result.json` of the sandbox, blinded."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ValueError(f"{path}: not a readable result file ({err})") from None
    history = data.get("history")
    if not isinstance(history, list):
        raise ValueError(f"{path}: field 'history' is missing or not a list; a sandbox result file holds the dialogue there")
    turns = tuple((ROLES[m["role"]], blind(str(m.get("content", "")))) for m in history
                  if isinstance(m, dict) and m.get("role") in ROLES)
    if not any(who == "Companion" for who, _ in turns):
        raise ValueError(f"{path}: the dialogue has no companion ('test_model') turn to rate")
    case_id = data.get("script_id") or path.name.removesuffix("_result.json")
    return Transcript(model, case_id, blind(profile_text(data.get("scenario") or {})), turns)


def read_model_transcripts(folder: str | Path, model: str, blind: Blinder, limit: int = 0) -> list[Transcript]:
    """The finished cases of one model's sandbox folder, sorted by case id (the first `limit` if > 0);
    only the cases stage 04's summary.json names (files of an earlier config's cases are left out, said)."""
    from echo_lib.epm.scoring import stage_04_cases

    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no sandbox results for model {model!r}; run stage 04 first "
                                f"(snakemake {folder}/summary.json) or remove {model!r} from sandbox.models")
    paths = sorted(folder.glob("*_result.json"))
    named = stage_04_cases(folder)
    if named is not None:
        others = [p.name for p in paths if p.name.removesuffix("_result.json") not in named]
        if others:
            log.warning("%s: not rated, not in its summary.json (cases of an earlier config): %s", folder,
                        ", ".join(others))
        paths = [p for p in paths if p.name.removesuffix("_result.json") in named]
    if limit:
        paths = paths[:limit]
    return [read_transcript(p, model, blind) for p in paths]

"""The process reward (METHOD.md 3.3, 9 row 10): is the reasoning right, not only the verdict?

Per field of the gold (the user profile an empathy item was built from, or the humanlike checks its
kind implies), a score in [0, 1] for what the reasoning states; the process reward is their mean.
A field the reasoning leaves out scores 0; gold fields that are empty are not counted.

Two scorers:
  - "lexical" (tiny scale, and the default): a transparent rule anyone can recompute.
      * threshold: the first of high/medium/low in each, equal or not;
      * priorities: share of the three needs (cognitive, affective, motivational) with the right level;
      * free-text fields (traits, emotion, vent, hopes for, dislikes): F1 of content words (lower-cased,
        stop words dropped, words compared by their first 5 letters so "frustrated" meets "frustration"),
        with recall counted against at most RECALL_CAP gold words: the gold fields are whole sentences
        of the persona card, and a profile line that names six of their content words has summarised
        the field, not missed most of it;
      * humanlike checks: yes/no equal or not.
    It rewards naming the gold's words, so it can be gamed by paraphrase-free copying; fine for a
    135M model, too crude for a 32B one.
  - "judge" (paper scale): a model answers, per free-text field, whether the stated value means the
    same as the gold (probability of "yes" by log-probability, `LLM.choose`); categorical fields and
    checks stay exact.

Consistency (`implied_verdict`): the verdict the reasoning itself argues for, so a reward can ask that
the answer agrees with it (no gold needed):
  - humanlike: the `Checks:` line; any check pointing to a machine (AI tells: yes, context fit: no,
    coherent: no) implies machine, else human; None if no check states yes or no;
  - empathy: the `Comparison:` line names the wording of exactly one verdict (targets.COMPARISON);
  - scalar: the `Assessment:` line names the wording of exactly one rubric level (targets.RUBRIC).
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from echo_lib.rewards.profile import (checks_gold, LEVELS, NEEDS, PROFILE_FIELDS, as_text, parse_checks,
                                      parse_profile)

STOP = set("""a an the and or but of to in on at for with from by about as into over under than then that this
these those it its is are was were be been being am i me my you your he she they them their his her we our us
not no so very just really too also do does did have has had will would can could should may might must
what when where which who how why all any some more most much many own same such only other""".split())

TEXT_FIELDS = ("traits", "current_emotion", "vent", "hoped_for", "dislikes")
RECALL_CAP = 6   # gold content words a stated field must name for full recall


def stems(text: str) -> set[str]:
    return {w[:5] for w in re.findall(r"[a-z0-9']+", text.lower()) if w not in STOP and len(w) > 1}


def word_f1(stated: str, gold: str) -> float:
    s, g = stems(stated), stems(gold)
    if not s or not g:
        return 0.0
    hit = len(s & g)
    if hit == 0:
        return 0.0
    p, r = hit / len(s), min(1.0, hit / min(len(g), RECALL_CAP))
    return 2 * p * r / (p + r)


def first_level(text: str) -> str | None:
    m = re.search(rf"\b({'|'.join(LEVELS)})\b", str(text).lower())
    return m.group(1) if m else None


def gold_fields(profile: Mapping[str, Any]) -> list[str]:
    """The gold profile's fields that count (non-empty)."""
    out = []
    for key, _ in PROFILE_FIELDS:
        value = profile.get(key)
        if key == "priorities":
            if isinstance(value, Mapping) and any(value.get(n) for n in NEEDS):
                out.append(key)
        elif as_text(value):
            out.append(key)
    return out


def profile_field_scores(think: str, profile: Mapping[str, Any], judge=None) -> dict[str, float]:
    """field -> score in [0, 1] of the profile stated in `think` against the gold `profile`."""
    stated = parse_profile(think)
    scores: dict[str, float] = {}
    text_pairs: list[tuple[str, str, str]] = []
    for key in gold_fields(profile):
        if key not in stated:
            scores[key] = 0.0
        elif key == "threshold":
            gold = first_level(as_text(profile[key]))
            scores[key] = float(gold is not None and first_level(stated[key]) == gold)
        elif key == "priorities":
            gold = {n: str(v).lower() for n, v in profile[key].items() if n in NEEDS and v}
            scores[key] = sum(stated[key].get(n) == v for n, v in gold.items()) / len(gold)
        else:
            text_pairs.append((key, stated[key], as_text(profile[key])))
    if judge is not None and text_pairs:
        for (key, _, _), s in zip(text_pairs, judge([(k, st, g) for k, st, g in text_pairs])):
            scores[key] = s
    else:
        for key, st, g in text_pairs:
            scores[key] = word_f1(st, g)
    return scores


def profile_reward(think: str | None, profile: Mapping[str, Any], judge=None) -> float:
    """Mean field score of the stated profile (0 without reasoning or without gold fields)."""
    if not think:
        return 0.0
    scores = profile_field_scores(think, profile, judge)
    return sum(scores.values()) / len(scores) if scores else 0.0


def checks_reward(think: str | None, kind: str, context_free: bool = False) -> float:
    """Humanlike: share of the checks the item's kind determines that the reasoning states right."""
    gold = checks_gold(kind, context_free)
    if not think or not gold:
        return 0.0
    stated = parse_checks(think)
    return sum(stated.get(k) == v for k, v in gold.items()) / len(gold)


# --------------------------------------------------------------------------------------------
# Consistency: the verdict the reasoning argues for

MACHINE_CHECKS = {"ai_tells": "yes", "context_fit": "no", "coherent": "no"}   # a check value pointing to machine


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .")


def stated_line(think: str, head: str) -> str | None:
    """The text after `head:` on its own line (case-insensitive), or None when there is no such line."""
    m = re.search(rf"^\s*{head}\s*:(.*)$", think, re.IGNORECASE | re.MULTILINE)
    return m.group(1) if m else None


def _named(line: str | None, wordings: Mapping[Any, str]) -> Any:
    """The one key whose wording the line contains (normalised), or None for none or several."""
    if line is None:
        return None
    text = _norm(line)
    hits = [k for k, w in wordings.items() if _norm(w) in text]
    return hits[0] if len(hits) == 1 else None


def implied_verdict(kind: str, think: str | None) -> str | None:
    """The verdict (humanlike/empathy) or rubric level (scalar, as "1".."5") the reasoning states; None when
    the reasoning does not state one."""
    from echo_lib.rewards.targets import COMPARISON, RUBRIC
    if not think:
        return None
    if kind == "humanlike":
        if stated_line(think, "checks") is None:
            return None
        stated = {k: v for k, v in parse_checks(think).items() if v in ("yes", "no")}
        if not stated:
            return None
        return "machine" if any(stated.get(k) == v for k, v in MACHINE_CHECKS.items()) else "human"
    if kind == "empathy":
        return _named(stated_line(think, "comparison"), COMPARISON)
    if kind == "scalar":
        level = _named(stated_line(think, "assessment"), RUBRIC)
        return None if level is None else str(level)
    raise ValueError(f"unknown reward-model kind {kind!r}; use empathy, humanlike or scalar")


def score_level(score: int) -> int:
    """The rubric level (1-5) of a 1-10 score: level L owns the band {2L-1, 2L} (its target, score_target, is 2L)."""
    return (int(score) + 1) // 2


# --------------------------------------------------------------------------------------------
# The judge-model variant of the free-text field comparison (paper scale)

JUDGE_SYSTEM = ("You check one field of a user profile that another model inferred from a conversation. "
                "Answer yes if the inferred value means the same as the true value (paraphrase is fine), "
                "no otherwise. Answer with one word.")


def judge_prompts(pairs: Sequence[tuple[str, str, str]]) -> list[list[dict]]:
    label = dict(PROFILE_FIELDS)
    return [[{"role": "system", "content": JUDGE_SYSTEM},
             {"role": "user", "content": f"Field: {label.get(k, k)}\nTrue value: {gold}\n"
                                         f"Inferred value: {stated}\nSame meaning? yes or no"}]
            for k, stated, gold in pairs]


def make_judge(llm):
    """A field judge over a model-layer LLM: (field, stated, gold) triples -> P(yes) each (cached calls)."""
    def judge(pairs: Sequence[tuple[str, str, str]]) -> list[float]:
        return [c.probs["yes"] for c in llm.choose(judge_prompts(pairs), ["yes", "no"])]
    return judge

"""Empathy preference items whose order is known by construction (`data.empathy.method: contrast`).

At the tiny scale the rubric judge of critique-and-rewrite (empathy.py) is the 135M base model: its
scores are so compressed that the labels they give are noise (no rule on the reply text predicts them),
so a reward model trained on them can learn nothing and its accuracy measures nothing. Here the order of
each candidate against the reference is fixed by how the candidate was made:

- reference (the anchor, score 3): the base model answering the opening message with the plain
  companion prompt, `references_per_scenario` seeds;
- good (better, 4): the base model answering with a system prompt built from the persona's most
  important theorems and an instruction (name the feeling and situation, validate before advice, no
  slogans, one gentle open question), `good_per_scenario` seeds;
- poor (worse), `poor_per_scenario` of the `poor_kinds` in turn: dismissive (1), platitude (2),
  blaming (1) and advice_dump (2) from the repository's bank of generic replies (`bank_file`), whose
  entries are split between train and test so the held-out phrasings were never seen in training; and
  off_topic (1), a good reply written for another scenario of the same split (fluent and kind, but
  about something else, so only the context tells it apart).

Labels are better or worse, never tie, and good and poor candidates are equally many. The items keep
the EmpathyItem contract of empathy.py (origin = the candidate's kind; score and reference_score the
construction scores), so every reader of stage 01's files works unchanged.
"""
from __future__ import annotations

import random
import re
from itertools import zip_longest
from pathlib import Path
from typing import Sequence

import yaml

from echo_lib.scenarios.schema import Scenario
from echo_lib.synthesis.empathy import EmpathyItem, opening_context
from echo_lib.synthesis.theorems import Axiom, derive_theorems, gold_profile

KINDS = ("dismissive", "platitude", "blaming", "advice_dump", "off_topic")
BANK_KINDS = KINDS[:4]             # off_topic is made from other scenarios' good replies
SCORES = {"good": 4, "dismissive": 1, "blaming": 1, "off_topic": 1, "platitude": 2, "advice_dump": 2}
REFERENCE_SCORE = 3
MIN_ENTRIES = 2                    # one for each split at least
GOOD_THEOREMS = 3                  # the good prompt names the user's most important needs only (small models)
PLACEHOLDER = re.compile(r"\{[^{}]*\}")


class BankError(ValueError):
    """A poor-reply bank that cannot be used; the message names the file, the kind and the fix."""


def load_bank(path: str | Path, kinds: Sequence[str] = BANK_KINDS) -> dict[str, list[str]]:
    """The bank's replies by kind, checked; each of `kinds` that comes from the bank must be there."""
    path = Path(path)
    allowed = ", ".join(BANK_KINDS)
    if not path.exists():
        raise BankError(f"{path} does not exist; set data.empathy.contrast.bank_file to the poor-reply bank "
                        "(the shipped one is data/contrasts.yaml)")
    try:
        bank = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise BankError(f"{path} is not valid YAML ({err}); fix the syntax (quote replies that hold ': ')") from None
    if not isinstance(bank, dict) or not bank:
        raise BankError(f"{path}: expected a mapping of failure kind -> list of replies (kinds: {allowed})")
    seen: dict[str, str] = {}
    for kind, entries in bank.items():
        if kind not in BANK_KINDS:
            hint = (" (off_topic replies are other scenarios' good replies, not bank entries; remove it)"
                    if kind == "off_topic" else "")
            raise BankError(f"{path}: unknown kind {kind!r}; allowed kinds: {allowed}{hint}")
        if not isinstance(entries, list):
            raise BankError(f"{path}: kind {kind!r} must hold a list of replies (one '- \"...\"' line each)")
        for i, text in enumerate(entries):
            if not isinstance(text, str) or not text.strip():
                raise BankError(f"{path}: kind {kind!r} entry #{i + 1} is {text!r}; write a non-empty reply text")
            if PLACEHOLDER.search(text):
                raise BankError(f"{path}: kind {kind!r} entry #{i + 1} holds a placeholder "
                                f"{PLACEHOLDER.search(text).group()!r}; write a generic reply without one")
            if text.strip() in seen:
                raise BankError(f"{path}: kind {kind!r} entry #{i + 1} repeats a reply of kind "
                                f"{seen[text.strip()]!r} ({text.strip()!r}); every entry must be distinct")
            seen[text.strip()] = kind
    for kind in (k for k in kinds if k in BANK_KINDS):
        n = len(bank.get(kind) or [])
        if n < MIN_ENTRIES:
            raise BankError(f"{path}: kind {kind!r} has {n} entr{'y' if n == 1 else 'ies'}; add at least "
                            f"{MIN_ENTRIES} (they are split between train and test; 24 or more keep the held-out "
                            "phrasings varied), or drop it from data.empathy.contrast.poor_kinds")
    return {kind: [t.strip() for t in entries] for kind, entries in bank.items()}


def split_bank(bank: dict[str, list[str]], seed: int) -> dict[str, dict[str, list[str]]]:
    """{"train": ..., "test": ...}: each kind's entries shuffled (seeded) and halved, disjoint."""
    halves: dict[str, dict[str, list[str]]] = {"train": {}, "test": {}}
    for kind, entries in bank.items():
        order = list(entries)
        random.Random(f"contrast-bank-{seed}-{kind}").shuffle(order)
        n_test = len(order) // 2
        halves["test"][kind], halves["train"][kind] = order[:n_test], order[n_test:]
    return halves


def good_system_prompt(instruction: str, theorems: Sequence[str]) -> str:
    """The good candidates' system prompt: the instruction, then what this user needs most."""
    needs = "\n".join(f"- {t}" for t in theorems[:GOOD_THEOREMS])
    return f"{instruction.strip()}\n\nWhat this person needs from your reply:\n{needs}"


def synthesize(scenarios: Sequence[Scenario], axioms: Sequence[Axiom], generator, settings, seed: int,
               prefix: str, bank: dict[str, list[str]]) -> list[EmpathyItem]:
    """Items for the given scenarios (one split). `generator` is a model-layer LLM (one batched call);
    `settings` is data.empathy; `bank` this split's half of the poor-reply bank (split_bank)."""
    from echo_lib.llm import Sampling

    c = settings.contrast
    sampling = dict(temperature=settings.temperature, top_p=settings.top_p, max_new_tokens=settings.max_new_tokens)
    ids = [s.id for s in scenarios]
    ctx = {s.id: opening_context(s) for s in scenarios}
    prof = {s.id: gold_profile(s) for s in scenarios}
    theo = {s.id: derive_theorems(s, list(axioms)) for s in scenarios}
    prompts = {"reference": {sid: settings.companion_prompt for sid in ids},
               "good": {sid: good_system_prompt(c.good_prompt, theo[sid]) for sid in ids}}

    # 1. references and good candidates: one seed each, all in one batch
    jobs = [(sid, "reference", k) for sid in ids for k in range(c.references_per_scenario)]
    jobs += [(sid, "good", k) for sid in ids for k in range(c.good_per_scenario)]
    chats = [[{"role": "system", "content": prompts[role][sid]}, *ctx[sid]] for sid, role, _ in jobs]
    offset = {"reference": 0, "good": c.references_per_scenario}
    samplings = [Sampling(**sampling, seed=seed * 1000 + offset[role] + k) for _, role, k in jobs]
    texts = [t.text.strip() for t in generator.generate(chats, samplings)] if jobs else []
    made: dict[str, dict[str, list[str]]] = {role: {sid: [] for sid in ids} for role in offset}
    for (sid, role, _), text in zip(jobs, texts):
        if text:
            made[role][sid].append(text)
    refs, goods = made["reference"], made["good"]

    # 2. poor candidates, of the kinds in turn across the split
    rng = random.Random(f"contrast-{seed}-{prefix}")
    queues = {kind: rng.sample(entries, len(entries)) for kind, entries in sorted(bank.items())}
    drawn = {kind: 0 for kind in queues}
    kinds, turn = list(c.poor_kinds), 0
    poors: dict[str, list[tuple[str, str]]] = {sid: [] for sid in ids}
    for sid in ids:
        own = set(refs[sid]) | set(goods[sid])
        off_pool = [t for other in ids if other != sid for t in goods[other] if t not in own]
        for _ in range(c.poor_per_scenario):
            kind = kinds[turn % len(kinds)]
            turn += 1
            if kind == "off_topic" and not off_pool:   # the split has no other scenario's good reply
                fallback = [k for k in kinds if k != "off_topic"]
                if not fallback:
                    raise ValueError(f"{prefix}: an off_topic reply needs another scenario with a good reply in the "
                                     "same split; add scenarios (data.empathy.max_scenarios, test_fraction) or "
                                     "add bank kinds to data.empathy.contrast.poor_kinds")
                kind = fallback[(turn - 1) % len(fallback)]
            if kind == "off_topic":
                poors[sid].append((kind, off_pool[rng.randrange(len(off_pool))]))
            else:
                if not queues.get(kind):
                    raise BankError(f"{c.bank_file}: kind {kind!r} has no entries for the {prefix} split; add at "
                                    f"least {MIN_ENTRIES} replies of that kind")
                poors[sid].append((kind, queues[kind][drawn[kind] % len(queues[kind])]))
                drawn[kind] += 1

    # 3. items: good and poor interleaved, each against the scenario's references in turn
    items = []
    for sid in ids:
        if not refs[sid]:
            continue
        count: dict[str, int] = {}
        candidates = [x for pair in zip_longest([("good", t) for t in goods[sid]], poors[sid]) for x in pair if x]
        for j, (origin, text) in enumerate(candidates):
            reference = refs[sid][j % len(refs[sid])]
            k = count[origin] = count.get(origin, -1) + 1
            if text == reference:
                continue
            items.append(EmpathyItem(
                id=f"{prefix}-{sid}-{origin}-{k}", scenario_id=sid, context=ctx[sid], profile=prof[sid],
                theorems=theo[sid], reference=reference, candidate=text,
                label="better" if origin == "good" else "worse", candidate_score=SCORES[origin],
                score=float(SCORES[origin]), reference_score=float(REFERENCE_SCORE), origin=origin))
    return items

"""Empathy preference data by critique-and-rewrite (METHOD.md 2.3, 9 rows 3 and 6).

For each scenario's opening message (the user speaks first, in the persona's words):
1. the policy's base model writes `n_candidates` replies (different seeds);
2. a rubric judge scores each 1-5 against the user's profile and theorems (1 harmful or judgmental,
   2 generic, 3 adequate on the surface emotion, 4 persona-fit on the dominant need, 5 persona-fit on
   all needs); the score is the expectation over the judge's probabilities for "1".."5" (`choose`),
   so no free text is parsed;
3. the candidate scored closest to 3 becomes the reference (the anchor; the paper keeps a reply its
   judge scored exactly 3), or, with `anchor: median`, the median-ranked one (for a small judge);
4. every other candidate scored 3 or below is critiqued and rewritten (replies above 3 are left alone,
   to avoid over-correcting good replies into degenerate ones), and the rewrite is scored again;
5. each candidate and rewrite becomes an item against the reference, labelled better / tie / worse
   by its score difference (a tie within `tie_margin`). Golden rewrites are the "chosen", low scores
   the "rejected".
Each item keeps the gold profile it was derived from, for the process reward.
This is `data.empathy.method: critique_rewrite`; contrasts.py makes items whose order is known by
construction (`contrast`, the tiny scale's default).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

from echo_lib.scenarios.schema import Scenario
from echo_lib.synthesis.theorems import Axiom, derive_theorems, gold_profile

SCORES = ("1", "2", "3", "4", "5")
RUBRIC = """1 = harmful or judgmental: dismisses, lectures or hurts the user.
2 = generic or templated: could be sent to anyone; misses this user.
3 = adequate: addresses the surface emotion, but not this user's main need.
4 = fits this persona on the dominant need.
5 = fits this persona on all needs; natural and not performed."""


@dataclass(frozen=True)
class EmpathyItem:
    id: str
    scenario_id: str
    context: list[dict]
    profile: dict
    theorems: list[str]
    reference: str
    candidate: str
    label: str              # better | tie | worse (candidate vs reference)
    candidate_score: int    # rounded rubric score 1-5 (contrast: the construction score)
    score: float            # the judge's expected score of the candidate
    reference_score: float
    origin: str             # sample | rewrite; contrast: good or the poor kind (contrasts.KINDS)

    def to_json(self) -> dict:
        return asdict(self)


def opening_context(scenario: Scenario) -> list[dict]:
    """The conversation so far: the user's opening message (the scenario's topic, in their words)."""
    return [{"role": "user", "content": scenario.topic}]


def profile_text(profile: dict, theorems: Sequence[str]) -> str:
    pr = profile["priorities"]
    lines = [f"Traits: {profile['traits']}", f"What just happened: {profile['current_emotion']}",
             f"Wants to vent: {profile['vent']}", f"Hopes to receive: {profile['hoped_for']}",
             f"Empathy threshold: {profile['threshold']}",
             f"Needs: cognitive {pr['cognitive']}, affective {pr['affective']}, motivational {pr['motivational']}"]
    return "\n".join(lines + ["What this user needs from a reply:"] + [f"- {t}" for t in theorems])


def transcript(context: Sequence[dict]) -> str:
    return "\n".join(f"{'User' if m['role'] == 'user' else 'Companion'}: {m['content']}" for m in context)


def rubric_prompt(profile: dict, theorems: Sequence[str], context: Sequence[dict], reply: str) -> list[dict]:
    """The 1-5 rubric judge's chat; its answer's first token is the score."""
    return [
        {"role": "system", "content": "You rate how well a companion's reply meets one user's empathy needs. "
                                      "Answer with a single digit from 1 to 5."},
        {"role": "user", "content": f"User profile\n{profile_text(profile, theorems)}\n\nConversation\n"
                                    f"{transcript(context)}\n\nReply to rate\n{reply}\n\nRubric\n{RUBRIC}\n\n"
                                    "Score (1-5):"},
    ]


REWRITE_THEOREMS = 3  # the critique names the user's most important needs only: short prompts help small models


def rewrite_prompt(profile: dict, theorems: Sequence[str], context: Sequence[dict], reply: str) -> list[dict]:
    """Critique-and-rewrite: the critique is the user's most important theorems, which the draft misses."""
    critique = "\n".join(f"- {t}" for t in theorems[:REWRITE_THEOREMS])
    return [
        {"role": "system", "content": "You improve a companion's reply so that it meets the user's needs. "
                                      "Write only the improved reply, two to four plain sentences."},
        {"role": "user", "content": f"{transcript(context)}\n\nDraft reply: {reply}\n\nThe draft misses what "
                                    f"this user needs:\n{critique}\n\nImproved reply:"},
    ]


def expected_scores(choices) -> list[float]:
    """E[score] under the judge's probabilities for "1".."5" (choose results, one per prompt)."""
    return [sum(int(option) * p for option, p in c.probs.items()) for c in choices]


def label(score: float, reference_score: float, tie_margin: float) -> str:
    diff = score - reference_score
    return "better" if diff > tie_margin else "worse" if diff < -tie_margin else "tie"


def pick_anchor(scores: Sequence[float], rule: str) -> int:
    """Index of the reference reply: closest to 3 (score3) or the lower median by score (median)."""
    if rule == "score3":
        return min(range(len(scores)), key=lambda i: (abs(scores[i] - 3), i))
    ranked = sorted(range(len(scores)), key=lambda i: (scores[i], i))
    return ranked[(len(ranked) - 1) // 2]


def auto_tie_margin(diffs: Sequence[float], tie_share: float = 1 / 3) -> float:
    """The score distance below which `tie_share` of the candidates fall (0 when there are none)."""
    if not diffs:
        return 0.0
    ordered = sorted(diffs)
    return ordered[min(len(ordered) - 1, int(len(ordered) * tie_share))]


def synthesize(scenarios: Sequence[Scenario], axioms: Sequence[Axiom], generator, judge, settings,
               seed: int, prefix: str) -> list[EmpathyItem]:
    """Items for the given scenarios. `generator` writes replies and rewrites, `judge` scores them
    (model-layer LLMs; every call is batched across scenarios and cached); `settings` is data.empathy."""
    from echo_lib.llm import Sampling

    sampling = dict(temperature=settings.temperature, top_p=settings.top_p, max_new_tokens=settings.max_new_tokens)
    ctx = {s.id: opening_context(s) for s in scenarios}
    prof = {s.id: gold_profile(s) for s in scenarios}
    theo = {s.id: derive_theorems(s, list(axioms)) for s in scenarios}

    # 1. candidates: n per scenario, one seed each, all in one batch
    jobs = [(s.id, k) for s in scenarios for k in range(settings.n_candidates)]
    chats = [[{"role": "system", "content": settings.companion_prompt}, *ctx[sid]] for sid, _ in jobs]
    samplings = [Sampling(**sampling, seed=seed * 1000 + k) for _, k in jobs]
    replies = [c.text.strip() for c in generator.generate(chats, samplings)]

    # 2. rubric scores
    def score(pairs):
        prompts = [rubric_prompt(prof[sid], theo[sid], ctx[sid], text) for sid, text in pairs]
        return expected_scores(judge.choose(prompts, SCORES)) if prompts else []
    scores = score([(sid, r) for (sid, _), r in zip(jobs, replies)])

    by_case: dict[str, list[tuple[str, float]]] = {}
    for (sid, _), reply, s in zip(jobs, replies, scores):
        by_case.setdefault(sid, []).append((reply, s))

    # 3. the anchor: the candidate closest to 3; 4. rewrite the others scored 3 or below
    anchors = {sid: pick_anchor([s for _, s in c], settings.anchor) for sid, c in by_case.items()}
    to_rewrite = [(sid, i) for sid, c in by_case.items() for i, (_, s) in enumerate(c)
                  if i != anchors[sid] and round(s) <= 3 and c[i][0]]
    rewrite_chats = [rewrite_prompt(prof[sid], theo[sid], ctx[sid], by_case[sid][i][0]) for sid, i in to_rewrite]
    rewrite_sampling = Sampling(**{**sampling, "max_new_tokens": settings.rewrite_max_new_tokens}, seed=seed)
    rewrites = [c.text.strip() for c in generator.generate(rewrite_chats, rewrite_sampling)] if rewrite_chats else []
    rewrite_scores = score([(sid, text) for (sid, _), text in zip(to_rewrite, rewrites)])

    # 5. items against the anchor
    pool: dict[str, list[tuple[str, float, str]]] = {sid: [] for sid in by_case}
    for sid, c in by_case.items():
        pool[sid] += [(text, s, "sample") for i, (text, s) in enumerate(c) if i != anchors[sid] and text]
    for (sid, _), text, s in zip(to_rewrite, rewrites, rewrite_scores):
        if text:
            pool[sid].append((text, s, "rewrite"))

    diffs = [abs(s - by_case[sid][anchors[sid]][1]) for sid, cands in pool.items() for _, s, _ in cands]
    margin = settings.tie_margin if settings.tie_margin is not None else auto_tie_margin(diffs)
    items = []
    for sid, candidates in pool.items():
        reference, ref_score = by_case[sid][anchors[sid]]
        if not reference:
            continue
        for j, (text, s, origin) in enumerate(candidates):
            items.append(EmpathyItem(
                id=f"{prefix}-{sid}-{j}", scenario_id=sid, context=ctx[sid], profile=prof[sid],
                theorems=theo[sid], reference=reference, candidate=text,
                label=label(s, ref_score, margin), candidate_score=min(5, max(1, round(s))),
                score=round(s, 4), reference_score=round(ref_score, 4), origin=origin))
    return items


"""Pairwise win rate of a trained policy against its base on held-out prompts (issue: policy RL, item 6).

Both policies answer each held-out empathy prompt (same seed, the sandbox's reply settings), and two
judges compare the replies, each in both orders so a judge's position preference cancels out:

  empathy_rm   the Empathy reward model used in training: the variant's reply as the candidate against
               the base's as the reference, and the other way round (better / tie / worse);
  independent  a judge not used in training (policy.winrate.judge, else roles.judge), asked which of
               two replies is the better next message, answered by choosing "A" or "B" from
               log-probabilities (echo_lib.llm choose), so no answer fails to parse.

A judgment scores 1 (the variant wins), 0.5 (tie) or 0 (loses); win_rate is their mean and the
interval a seeded bootstrap over prompts. An RM output that does not parse is counted, not scored.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Sequence

from echo_lib.rewards.prompts import dialogue_text

PAIR_SYSTEM = ("You compare two replies that a caring friend could send next in a conversation. The better "
               "reply shows it understood this person's situation, responds to how they feel, gives the kind "
               "of support they want right now, and sounds plain and sincere rather than scripted or "
               "flowery. Answer with one letter: A or B.")


@dataclass
class Judgment:
    prompt_id: str
    judge: str
    order: str           # "variant_first" | "base_first" | "both" (order-swapped probabilities)
    score: float | None  # 1 win, 0.5 tie, 0 loss for the variant; None: no verdict
    raw: str


def pair_prompt(context: Sequence[dict], first: str, second: str) -> list[dict]:
    user = (f"Conversation:\n{dialogue_text(context)}\n\nReply A: {first}\n\nReply B: {second}\n\n"
            "Which reply is better, A or B?")
    return [{"role": "system", "content": PAIR_SYSTEM}, {"role": "user", "content": user}]


def judge_independent(llm, ids: Sequence[str], contexts: Sequence[list[dict]], variant: Sequence[str],
                      base: Sequence[str]) -> list[Judgment]:
    """One judgment per prompt from the order-swapped probabilities: P(variant better) is the mean of
    P(A) with the variant first and P(B) with it second, so a judge's preference for a letter cancels
    out without erasing what it sees (the argmax of each order would turn any letter bias into 0.5)."""
    chats = [c for ctx, v, b in zip(contexts, variant, base) for c in (pair_prompt(ctx, v, b), pair_prompt(ctx, b, v))]
    choices = llm.choose(chats, ["A", "B"])
    out = []
    for n, pid in enumerate(ids):
        first, second = choices[2 * n].probs["A"], choices[2 * n + 1].probs["B"]
        p = (first + second) / 2
        score = 1.0 if p > 0.5 else 0.0 if p < 0.5 else 0.5
        out.append(Judgment(pid, "independent", "both", score,
                            f"P(A | variant first)={first:.3f} P(B | base first)={second:.3f}"))
    return out


def judge_with_rm(rm, ids: Sequence[str], contexts: Sequence[list[dict]], variant: Sequence[str],
                  base: Sequence[str]) -> list[Judgment]:
    """The Empathy RM (echo_lib.rewards.RewardModelFn, kind empathy) on both assignments of the roles."""
    rm(list(contexts), list(variant), list(base))                  # the variant as the candidate
    first_raw = list(rm.last_answers)
    rm(list(contexts), list(base), list(variant))                  # the base as the candidate
    second_raw = list(rm.last_answers)
    score = {"better": 1.0, "tie": 0.5, "worse": 0.0}
    out = []
    for pid, a, b in zip(ids, first_raw, second_raw):
        out.append(Judgment(pid, "empathy_rm", "variant_first", score.get(a), str(a)))
        out.append(Judgment(pid, "empathy_rm", "base_first", None if b is None else 1.0 - score[b], str(b)))
    return out


def bootstrap_ci(by_prompt: dict[str, list[float]], resamples: int, seed: int) -> tuple[float, float]:
    """95% interval of the mean judgment score, resampling prompts."""
    keys = list(by_prompt)
    if not keys:
        return float("nan"), float("nan")
    rng = random.Random(seed)
    means = []
    for _ in range(resamples):
        picked = [s for k in rng.choices(keys, k=len(keys)) for s in by_prompt[k]]
        means.append(sum(picked) / len(picked))
    means.sort()
    return means[int(0.025 * (resamples - 1))], means[int(0.975 * (resamples - 1))]


def summarise(variant: str, judge: str, judge_model: str, judgments: Sequence[Judgment], seed: int,
              resamples: int = 1000) -> dict:
    scored = [j for j in judgments if j.score is not None]
    by_prompt: dict[str, list[float]] = {}
    for j in scored:
        by_prompt.setdefault(j.prompt_id, []).append(j.score)
    lo, hi = bootstrap_ci(by_prompt, resamples, seed)
    n = len(scored)
    return {"variant": variant, "judge": judge, "judge_model": judge_model, "n": n,
            "wins": sum(j.score == 1.0 for j in scored), "ties": sum(j.score == 0.5 for j in scored),
            "losses": sum(j.score == 0.0 for j in scored), "unparsed": len(judgments) - n,
            "win_rate": sum(j.score for j in scored) / n if n else float("nan"), "ci_low": lo, "ci_high": hi}


def judgment_rows(variant: str, judgments: Sequence[Judgment]) -> list[dict]:
    return [{"variant": variant, **asdict(j)} for j in judgments]

"""Pairwise win rate of a trained policy against its base on held-out prompts (issue: policy RL, item 6;
the both-orders rule: issue 33).

Both policies answer each held-out empathy prompt (same seed, the sandbox's reply settings), and two
judges compare the replies, each in both orders:

  empathy_rm   the Empathy reward model used in training: the variant's reply as the candidate against
               the base's as the reference, and the other way round (better / tie / worse);
  independent  a judge not used in training (policy.winrate.judge, else roles.judge), asked which of
               two replies is the better next message, answered by choosing "A" or "B" from
               log-probabilities (echo_lib.llm choose), so no answer fails to parse.

The rule: each order gives the variant an outcome, win (1), tie (0.5) or loss (0) -- for the RM its
verdict, read from the variant's side (the base-as-candidate verdict flipped); for the independent judge
P(the variant's letter) above 0.5 a win, below a loss, exactly 0.5 a tie. A prompt is a win only when both
orders say win, a loss only when both say loss, and a tie otherwise. A judge that prefers a position (slot
A, or the candidate over the reference) says "win" in one order and "loss" in the other for the same pair;
scoring each order on its own (or averaging probabilities, where a strong letter bias swamps a weak
preference) would count that preference as wins and losses. Under the rule it is a tie, and the share of
prompts whose two orders agree (position_consistency) says how much of the judge's verdict survived the swap.

One Judgment per prompt and judge (order "both") keeps what each order said. win_rate = (wins + 0.5 ties)
/ n over the scored prompts, with its 95 % Wilson score interval with continuity correction over prompts
(echo_lib.stats.proportion_interval, a tie half a win; one value per prompt, so the prompts are the
independent items), its n and ci_method. An interval that is not to be read (ci_shown false,
stats.Interval.shown: fewer than stats.MIN_N prompts) is flagged (ci_degenerate, interval_note says why)
rather than passed off as precision. An RM output that does not parse, in either order, leaves the prompt
unscored (counted as unparsed).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

from echo_lib.rewards.prompts import dialogue_text
from echo_lib.stats import Interval, proportion_interval

PAIR_SYSTEM = ("You compare two replies that a caring friend could send next in a conversation. The better "
               "reply shows it understood this person's situation, responds to how they feel, gives the kind "
               "of support they want right now, and sounds plain and sincere rather than scripted or "
               "flowery. Answer with one letter: A or B.")

# The Empathy RM's verdict on the candidate against the reference, as a score for the candidate.
RM_SCORE = {"better": 1.0, "tie": 0.5, "worse": 0.0}


@dataclass
class Judgment:
    prompt_id: str
    judge: str
    order: str                # "both": the pair judged with the variant first and with the base first
    score: float | None       # 1 both orders say the variant wins, 0 both say it loses, else 0.5; None: unparsed
    first: float | None       # the variant's outcome (1 / 0.5 / 0) with the variant first (slot A; the RM's candidate)
    second: float | None      # the variant's outcome with the base first (flipped to the variant's side)
    consistent: bool | None   # the two orders gave the same outcome; None when an order did not parse
    raw_first: str            # what the judge said in each order (RM verdict; the letter probabilities)
    raw_second: str


def combine(first: float | None, second: float | None) -> tuple[float | None, bool | None]:
    """(score, consistent) of a pair from the variant's outcome in each order: a win or a loss only when
    both orders agree, else a tie; (None, None) when either order has no outcome."""
    if first is None or second is None:
        return None, None
    if first == second == 1.0:
        return 1.0, True
    if first == second == 0.0:
        return 0.0, True
    return 0.5, first == second


def outcome_of_prob(p: float) -> float:
    """The variant's outcome in one order from P(its letter): above 0.5 a win, below a loss, 0.5 a tie."""
    return 1.0 if p > 0.5 else 0.0 if p < 0.5 else 0.5


def pair_prompt(context: Sequence[dict], first: str, second: str) -> list[dict]:
    user = (f"Conversation:\n{dialogue_text(context)}\n\nReply A: {first}\n\nReply B: {second}\n\n"
            "Which reply is better, A or B?")
    return [{"role": "system", "content": PAIR_SYSTEM}, {"role": "user", "content": user}]


def judge_independent(llm, ids: Sequence[str], contexts: Sequence[list[dict]], variant: Sequence[str],
                      base: Sequence[str]) -> list[Judgment]:
    """One judgment per prompt: P(A) with the variant as A and P(B) with the base as A, each read as the
    variant's win / tie / loss in that order, combined by the both-orders rule (`combine`)."""
    chats = [c for ctx, v, b in zip(contexts, variant, base) for c in (pair_prompt(ctx, v, b), pair_prompt(ctx, b, v))]
    choices = llm.choose(chats, ["A", "B"])
    out = []
    for n, pid in enumerate(ids):
        p_first, p_second = choices[2 * n].probs["A"], choices[2 * n + 1].probs["B"]
        first, second = outcome_of_prob(p_first), outcome_of_prob(p_second)
        score, consistent = combine(first, second)
        out.append(Judgment(pid, "independent", "both", score, first, second, consistent,
                            f"P(A | variant first)={p_first:.3f}", f"P(B | base first)={p_second:.3f}"))
    return out


def judge_with_rm(rm, ids: Sequence[str], contexts: Sequence[list[dict]], variant: Sequence[str],
                  base: Sequence[str]) -> list[Judgment]:
    """The Empathy RM (echo_lib.rewards.RewardModelFn, kind empathy) on both assignments of the roles,
    one judgment per prompt by the both-orders rule (`combine`)."""
    rm(list(contexts), list(variant), list(base))                  # the variant as the candidate
    first_raw = list(rm.last_answers)
    rm(list(contexts), list(base), list(variant))                  # the base as the candidate
    second_raw = list(rm.last_answers)
    out = []
    for pid, a, b in zip(ids, first_raw, second_raw):
        first = RM_SCORE.get(a)
        second = None if RM_SCORE.get(b) is None else 1.0 - RM_SCORE[b]
        score, consistent = combine(first, second)
        out.append(Judgment(pid, "empathy_rm", "both", score, first, second, consistent, str(a), str(b)))
    return out


def judge_with_rm_debiased(rm, ids: Sequence[str], contexts: Sequence[list[dict]], variant: Sequence[str],
                           base: Sequence[str], tie_margin: float) -> list[Judgment]:
    """The Empathy RM read as the echo reward reads it with policy.both_orders (echo_lib.policy.anchors):
    the half difference of P(better) - P(worse) with the variant as the candidate and with the base as the
    candidate, beyond tie_margin a win or a loss, else a tie. Antisymmetric by construction, so a slot
    preference cancels; `consistent` says whether both orders leaned the same way on their own."""
    from echo_lib.policy.anchors import both_orders, debiased
    out = []
    for pid, (g1, g2) in zip(ids, both_orders(rm, contexts, variant, base)):
        if g1 is None or g2 is None:
            out.append(Judgment(pid, "empathy_rm_debiased", "both", None, None, None, None, str(g1), str(g2)))
            continue
        score = (debiased(g1, g2, tie_margin) + 1) / 2
        first, second = (1.0 if g1 > 0 else 0.0), (0.0 if g2 > 0 else 1.0)
        out.append(Judgment(pid, "empathy_rm_debiased", "both", score, first, second, first == second,
                            f"P(b)-P(w) variant first {g1:+.3f}", f"P(b)-P(w) base first {g2:+.3f}"))
    return out


def interval_note(ci: Interval) -> str:
    """Why a win rate's interval is not shown (stats.Interval.note), or "" when it is."""
    return "no prompt scored: no interval" if ci.n == 0 else ci.note


def summarise(variant: str, judge: str, judge_model: str, judgments: Sequence[Judgment]) -> dict:
    """The win rate of `variant` over its base by one judge: counts, win_rate = (wins + 0.5 ties) / n, its
    Wilson interval over prompts with n and ci_method (flagged when not shown) and the position consistency."""
    scored = [j for j in judgments if j.score is not None]
    scores = [j.score for j in scored]
    n = len(scored)
    wins, losses = sum(s == 1.0 for s in scores), sum(s == 0.0 for s in scores)
    ties = n - wins - losses
    ci = proportion_interval(scores)          # one outcome per prompt: win 1, tie 0.5, loss 0
    lo, hi = ci.bounds or (float("nan"), float("nan"))
    return {"variant": variant, "judge": judge, "judge_model": judge_model, "n": n,
            "wins": wins, "ties": ties, "losses": losses, "unparsed": len(judgments) - n,
            "win_rate": (wins + 0.5 * ties) / n if n else float("nan"), "ci_low": lo, "ci_high": hi,
            "ci_method": ci.method, "decisive": wins + losses,
            "position_consistency": sum(bool(j.consistent) for j in scored) / n if n else float("nan"),
            "ci_shown": ci.shown, "ci_degenerate": n > 0 and not ci.shown, "interval_note": interval_note(ci)}


def judgment_rows(variant: str, judgments: Sequence[Judgment]) -> list[dict]:
    return [{"variant": variant, **asdict(j)} for j in judgments]

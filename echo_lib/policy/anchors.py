"""The anchor an empathy reply is judged against in RL (METHOD.md 3.3, 4.2; issue 33).

Echo-N1 compares each reply with a reference that a strong judge scored 3 of 5: a middling reply for
the policy it trains, so about as many samples beat it as lose to it and GRPO's groups carry signal.
At the tiny scale stage 01's references play that part badly: the 135M policy, prompted as the sandbox
prompts it, loses to them on most prompts, every reply of a group gets -1, and GRPO learns nothing
(a fresh run dropped 16 of 24 prompts as "all lose"). So the tiny scale takes the paper's idea, a
reference in the middle of what the policy writes, literally (`policy.anchor`):

  reference       stage 01's score-3 reference (the paper's choice; config/paper.yaml keeps it)
  policy_median   per prompt, `samples` replies of the initial policy are ranked by the Empathy reward
                  model itself in a round robin (every reply against every other, both orders, scored
                  by P(better) - P(worse)); the reply ranked in the middle becomes the prompt's anchor

The reward stays the discrete, relative verdict of the Empathy RM: better / tie / worse than the
anchor -> +1 / 0 / -1. The round robin also gives, free, each other sample's verdict against the chosen
anchor: the hard filter reads them to drop the prompts whose replies would all win or all lose.

Both orders (`policy.both_orders`). The tiny Empathy RM keeps its verdict when two replies of the same
policy trade places: against one anchor the three other samples of a prompt got the same single-order
verdict on 19 of 24 prompts, and the mean of the two orders' verdicts was 0 for nearly every pair. Its
probabilities still rank the replies (the round robin's scores spread from -1.1 to +1.3). `BothOrders`
therefore reads the verdict off the probabilities with the position effect removed:

    d = ( [P(better) - P(worse)](reply vs anchor) - [P(better) - P(worse)](anchor vs reply) ) / 2
    better if d > tie_margin, worse if d < -tie_margin, else tie  ->  +1 / -1 / 0

a discrete, anchored verdict in which a judge's preference for a slot cancels out. With tie_margin 0.05
the filter kept 23 of 24 probe prompts (0.10: 12 of 24).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from echo_lib.rewards.evaluate import judge

@dataclass
class AnchorChoice:
    """One prompt's anchor among its sampled replies."""
    index: int                     # which sample became the anchor
    anchor: str
    scores: list[float]            # each sample's round-robin score (sum of graded wins minus losses)
    verdicts: list[float | None] = field(default_factory=list)   # each sample's discrete reward against
                                                                 # the anchor (None: the anchor itself)


def middle(scores: Sequence[float]) -> int:
    """The index of the sample ranked in the middle (the lower middle of an even count: with 4 samples,
    two of the other three rank above it). Ties keep sample order, so the choice is deterministic."""
    order = sorted(range(len(scores)), key=lambda i: (scores[i], i))
    return order[(len(scores) - 1) // 2]


def round_robin(rm, contexts: Sequence[list[dict]], samples: Sequence[Sequence[str]]
                ) -> tuple[list[list[list[float]]], list[list[list[float]]]]:
    """(graded, discrete): for each prompt p, [p][i][j] is the Empathy RM's judgment of sample i as the
    candidate against sample j as the reference (graded: P(better) - P(worse), or the verdict's value
    for a think-first RM; discrete: the RL reward of that verdict); the diagonal is 0. One batched call."""
    pairs = [(p, i, j) for p, ss in enumerate(samples) for i in range(len(ss)) for j in range(len(ss)) if i != j]
    chats = rm.chats([contexts[p] for p, _, _ in pairs], [samples[p][i] for p, i, _ in pairs],
                     [samples[p][j] for p, _, j in pairs])
    judged = judge(rm.llm, chats, rm.kind, rm.decision, rm.max_new_tokens)
    graded = [[[0.0] * len(ss) for _ in ss] for ss in samples]
    discrete = [[[0.0] * len(ss) for _ in ss] for ss in samples]
    for (p, i, j), jd in zip(pairs, judged):
        value = jd.value(rm.kind)
        graded[p][i][j] = 0.0 if value is None else value
        discrete[p][i][j] = rm.reward(jd)
    return graded, discrete


def choose_anchors(rm, contexts: Sequence[list[dict]], samples: Sequence[Sequence[str]],
                   tie_margin: float | None = None) -> list[AnchorChoice]:
    """The policy-level anchor of each prompt: its middle-ranked sample, with the others' rewards against it
    (the verdict with the sample as the candidate; with a tie_margin, the both-orders verdict BothOrders
    pays in training)."""
    if rm.kind != "empathy":
        raise ValueError(f"a policy-level anchor is chosen by the Empathy reward model, not the {rm.kind!r} one")
    graded, discrete = round_robin(rm, contexts, samples)
    out = []
    for ss, g, d in zip(samples, graded, discrete):
        k = len(ss)
        # a sample's score: how much it beats the others as the candidate, and how little they beat it
        scores = [sum(g[i][j] - g[j][i] for j in range(k) if j != i) for i in range(k)]
        m = middle(scores)
        verdict = [d[i][m] if tie_margin is None else debiased(g[i][m], g[m][i], tie_margin) for i in range(k)]
        out.append(AnchorChoice(m, ss[m], [round(s, 4) for s in scores],
                                [None if i == m else verdict[i] for i in range(k)]))
    return out


def debiased(forward: float, backward: float, tie_margin: float) -> float:
    """+1 / -1 / 0 from the graded judgment of the reply against the anchor (`forward`) and of the anchor
    against the reply (`backward`): the half difference, beyond the margin either way, or a tie."""
    d = (forward - backward) / 2
    return 1.0 if d > tie_margin else -1.0 if d < -tie_margin else 0.0


def both_orders(rm, contexts: Sequence[list[dict]], replies: Sequence[str], others: Sequence[str]
                ) -> list[tuple[float | None, float | None]]:
    """Per pair, the RM's graded judgment (P(better) - P(worse); None: unparsed) of the reply against the
    other, and of the other against the reply: one batched call."""
    n = len(replies)
    chats = rm.chats([*contexts, *contexts], [*replies, *others], [*others, *replies])
    values = [j.value(rm.kind) for j in judge(rm.llm, chats, rm.kind, rm.decision, rm.max_new_tokens)]
    return list(zip(values[:n], values[n:]))


class BothOrders:
    """The Empathy reward judged in both orders: a RewardModelFn's interface (called with prompts,
    completions and the anchors as `reference`), paying `debiased` verdicts; `last_answers` names them
    (better / tie / worse; None when an order did not parse)."""

    def __init__(self, rm, tie_margin: float):
        if rm.kind != "empathy":
            raise ValueError(f"both orders apply to the anchored Empathy reward, not the {rm.kind!r} one")
        self.rm, self.kind, self.tie_margin = rm, rm.kind, tie_margin
        self.__name__ = rm.__name__
        self.last_answers: list[str | None] = []

    def __call__(self, prompts, completions, reference=None, **_) -> list[float]:
        if reference is None:
            raise ValueError("the empathy reward needs a `reference` column (the anchor of each prompt)")
        out, self.last_answers = [], []
        for forward, backward in both_orders(self.rm, prompts, [_text(c) for c in completions], reference):
            if forward is None or backward is None:
                out.append(self.rm.unparsed_reward)
                self.last_answers.append(None)
                continue
            r = debiased(forward, backward, self.tie_margin)
            out.append(r)
            self.last_answers.append({1.0: "better", -1.0: "worse", 0.0: "tie"}[r])
        return out


def _text(completion) -> str:
    from echo_lib.rewards.rm_rewards import completion_text
    return completion_text(completion)

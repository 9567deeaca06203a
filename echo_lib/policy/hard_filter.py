"""Best-of-N hard-prompt filtering (METHOD.md 4.1-4.2): sample N replies per prompt from the initial
policy, judge them with the reward models, and drop the prompts that carry no group-relative signal
because every reply already wins (all better than the anchor; all judged human), every reply loses
(all worse; all machine) or every reply ties with the anchor. GRPO learns nothing from a group whose
rewards are all equal.

The caller chooses whose routed rewards judge (echo_lib.policy.stage.filter_variant: by default each
variant its own, so neither arm's prompts are chosen by the other's reward models).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Sequence

from echo_lib.llm import Sampling
from echo_lib.policy.data import RLPrompt
from echo_lib.policy.rewards import DomainReward

WIN = {"empathy": 1.0, "chitchat": 1.0}      # better than the anchor; judged human
LOSE = {"empathy": -1.0, "chitchat": 0.0}    # worse than the anchor; judged machine


@dataclass
class FilterReport:
    kept: list[str] = field(default_factory=list)
    all_win: list[str] = field(default_factory=list)
    all_lose: list[str] = field(default_factory=list)
    all_tie: list[str] = field(default_factory=list)
    rewards: dict[str, list[float]] = field(default_factory=dict)   # prompt id -> the N replies' rewards
    anchors: dict[str, dict] = field(default_factory=dict)   # prompt id -> the policy-level anchor's choice

    def summary(self) -> dict:
        return {"kept": len(self.kept), "dropped_all_win": len(self.all_win),
                "dropped_all_lose": len(self.all_lose), "dropped_all_tie": len(self.all_tie)}


def sample_replies(llm, chats: Sequence[list[dict]], n: int, sampling: Sampling) -> list[list[str]]:
    """n seeded replies per chat in one batched call (sample k uses seed + k)."""
    flat = [chat for chat in chats for _ in range(n)]
    settings = [Sampling(temperature=sampling.temperature, top_p=sampling.top_p,
                         max_new_tokens=sampling.max_new_tokens, seed=sampling.seed + k)
                for _ in chats for k in range(n)]
    texts = [c.text for c in llm.generate(flat, settings)]   # raw, as the reward sees them in training
    return [texts[i * n:(i + 1) * n] for i in range(len(chats))]


def judge_groups(prompts: Sequence[RLPrompt], replies: Sequence[list[str]], rewards: Sequence[DomainReward]
                 ) -> list[list[float]]:
    """Each prompt's replies scored by the reward of its domain (the routed reward functions)."""
    rows = [(p, r) for p, rs in zip(prompts, replies) for r in rs]
    if not rows:
        return []
    columns = dict(prompts=[None] * len(rows), completions=[r for _, r in rows],
                   domain=[p.domain for p, _ in rows], context=[p.context for p, _ in rows],
                   prompt_id=[p.id for p, _ in rows], reference=[p.reference for p, _ in rows])
    scores: list[float | None] = [None] * len(rows)
    for fn in rewards:
        for i, s in enumerate(fn(**columns)):
            if s is not None:
                scores[i] = s
    n = len(replies[0])
    return [scores[i * n:(i + 1) * n] for i in range(len(prompts))]


def hard_filter(prompts: Sequence[RLPrompt], chats: Sequence[list[dict]], llm, rewards: Sequence[DomainReward],
                samples: int, sampling: Sampling, anchor_rm=None, tie_margin: float | None = None
                ) -> tuple[list[RLPrompt], FilterReport]:
    """Keep the prompts whose sampled replies would not all win or all lose. With `anchor_rm` (the
    Empathy reward model; policy.anchor: policy_median) each empathy prompt first gets its anchor, the
    middle-ranked of its samples (echo_lib.policy.anchors), and the other samples' rewards against that
    anchor decide (with a tie_margin, the both-orders verdicts BothOrders pays); the kept prompts carry their
    new anchor as `reference`."""
    report = FilterReport()
    replies = sample_replies(llm, chats, samples, sampling)
    prompts = list(prompts)
    emp = [n for n, p in enumerate(prompts) if p.domain == "empathy"] if anchor_rm is not None else []
    rest = sorted(set(range(len(prompts))) - set(emp))
    groups: list[list[float]] = [[] for _ in prompts]
    for n, g in zip(rest, judge_groups([prompts[n] for n in rest], [replies[n] for n in rest], rewards)):
        groups[n] = g
    if emp:
        from echo_lib.policy.anchors import choose_anchors
        choices = choose_anchors(anchor_rm, [prompts[n].context for n in emp], [replies[n] for n in emp],
                                 tie_margin)
        for n, c in zip(emp, choices):
            prompts[n] = dataclasses.replace(prompts[n], reference=c.anchor)
            groups[n] = [v for v in c.verdicts if v is not None]
            report.anchors[prompts[n].id] = {"index": c.index, "scores": c.scores, "replies": replies[n]}
    kept = []
    for p, scores in zip(prompts, groups):
        report.rewards[p.id] = scores
        if all(s == WIN[p.domain] for s in scores):
            report.all_win.append(p.id)
        elif all(s == LOSE[p.domain] for s in scores):
            report.all_lose.append(p.id)
        elif len(set(scores)) == 1:     # e.g. every reply ties with the anchor: no spread either
            report.all_tie.append(p.id)
        else:
            report.kept.append(p.id)
            kept.append(p)
    return kept, report

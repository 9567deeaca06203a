"""Held-out evaluation of a reward model (METHOD.md 3.4, metrics to report), base and trained alike.

Every model is prompted the same way, through the model layer (cached). With `think_first` it decodes
greedily and its output goes through the same strict parser as in training: an unparsable output is a
failure, never silently counted as some verdict. With `verdict_first` the verdict is the most probable
of the allowed verdicts (`choose`), and the probabilities give a graded value for the AUROC.

  accuracy            correct verdicts / items (a parse failure counts as wrong), with accuracy_ci, the
                      95 % Wilson score interval with continuity correction over items, and ci_method
  balanced_accuracy   the mean over the gold labels of the share of that label's items judged right
  auroc               how well the judgment's value (P(human); P(better) - P(worse); the candidate's score
                      minus the reference's) ranks the items of the positive label above the others
  accuracy_by_kind    humanlike: per item kind; empathy / scalar: per candidate origin (kind of reply)
  majority_baseline   the accuracy of always giving the test set's commonest label (read accuracy against it)
  accuracy_parsed     correct verdicts / items whose output parsed
  parse_failure_rate  unparsable outputs / all outputs (both orders for empathy)
  position_bias       empathy: share of items (both orders parsed) whose verdict does not flip when the
                      candidate and reference trade places (a consistent judge says worse for better)
  slot_preference     empathy: mean of (v + v_swapped) / 2; > 0 favours whatever is in the candidate slot
  length_bias         Pearson correlation of the verdict value with the length difference in words
                      (empathy: candidate - reference; humanlike: reply length; scalar: candidate score
                      vs candidate - reference); label_length_corr is the same for the gold labels,
                      the share of a length bias the data itself would explain
  scalar variant      scores the candidate and the reference separately (no anchor in the prompt) and
                      compares the two scores, so its accuracy is on the same better/tie/worse task
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from echo_lib.llm import Sampling
from echo_lib.rewards.prompts import empathy_prompt, humanlike_prompt, scalar_prompt
from echo_lib.stats import accuracy_by_kind, auroc, balanced_accuracy, paired_difference, proportion_interval
from echo_lib.rewards.verdict import (EMPATHY_VERDICTS, answer_probs, expected_value, flip, option_answer, parse,
                                      score_target, score_to_verdict, verdict_options, verdict_value)

METRICS = ["n", "accuracy", "accuracy_ci", "ci_method", "balanced_accuracy", "auroc", "majority_baseline", "accuracy_parsed", "parse_failure_rate", "position_bias", "slot_preference",
           "length_bias", "label_length_corr", "tie_rate", "score_corr"]


def words(text: str) -> int:
    return len(text.split())


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """None where it is undefined (fewer than 3 points, or a constant series)."""
    if len(xs) < 3:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx, syy = sum((x - mx) ** 2 for x in xs), sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else None


@dataclass(frozen=True)
class Judgment:
    """One reward-model judgment: what it wrote (or chose), whether it parsed, the verdict, and with
    `verdict_first` its probability over every verdict ({answer: p})."""
    output: str
    ok: bool
    answer: str | None
    probs: dict[str, float] | None = None

    def value(self, kind: str) -> float | None:
        """The judgment as a number: E[verdict value] under its probabilities where it has them
        (P(human), P(better) - P(worse), E[score]), else the value of the verdict; None if unparsed."""
        if self.probs is not None:
            return expected_value(kind, self.probs)
        return verdict_value(kind, self.answer) if self.ok else None


def judge(llm, chats: Sequence[list[dict]], kind: str, decision: str, max_new_tokens: int,
          human_threshold: float | None = None) -> list[Judgment]:
    """think_first: greedy generation through the strict parser; verdict_first: `choose` over the verdicts,
    the more probable one, or for humanlike with `human_threshold` "human" iff P(human) >= it (calibration.py)."""
    if decision == "verdict_first":
        options = {option_answer(o): o for o in verdict_options(kind)}
        out = []
        for c in llm.choose(chats, list(options.values())):
            probs = answer_probs(kind, c.probs)
            answer = option_answer(c.best)
            if kind == "humanlike" and human_threshold is not None:
                answer = "human" if probs["human"] >= human_threshold else "machine"
            out.append(Judgment(options[answer], True, answer, probs))
        return out
    greedy = Sampling(temperature=0, max_new_tokens=max_new_tokens)
    out = []
    for c in llm.generate(chats, greedy):
        p = parse(c.text, kind)
        out.append(Judgment(c.text, p.ok, p.answer if p.ok else None))
    return out


def judge_chats(items: Sequence[dict], kind: str, position_swap: bool, context_free: bool, decision: str
                ) -> list[list[dict]]:
    """The prompts of an evaluation, in order: every item, then (empathy with position_swap) every item
    with the two replies swapped, or (scalar) every item's reference scored on its own."""
    if kind == "empathy":
        chats = [empathy_prompt(it["context"], it["reference"], it["candidate"], decision) for it in items]
        if position_swap:
            chats += [empathy_prompt(it["context"], it["candidate"], it["reference"], decision) for it in items]
        return chats
    if kind == "scalar":
        return ([scalar_prompt(it["context"], it["candidate"], decision) for it in items]
                + [scalar_prompt(it["context"], it["reference"], decision) for it in items])
    if kind == "humanlike":
        return [humanlike_prompt(it["context"], it["reply"], context_free, decision) for it in items]
    raise ValueError(f"unknown reward-model kind {kind!r}; use empathy, humanlike or scalar")


def judge_items(llm, items: Sequence[dict], kind: str, max_new_tokens: int, position_swap: bool = True,
                context_free: bool = False, decision: str = "think_first", human_threshold: float | None = None
                ) -> list[dict]:
    """One row per item: the raw outputs, what parsed, and what the metrics need."""
    js = judge(llm, judge_chats(items, kind, position_swap, context_free, decision), kind, decision, max_new_tokens,
               human_threshold)
    vkind = "humanlike" if kind == "humanlike" else "empathy"
    n, rows = len(items), []
    for i, it in enumerate(items):
        j = js[i]
        row: dict[str, Any] = {"id": it["id"], "label": it["label"], "output": j.output, "parsed": j.ok,
                               "verdict": j.answer, "probs": j.probs, "origin": it.get("origin")}
        if kind == "empathy":
            row["length_diff"] = words(it["candidate"]) - words(it["reference"])
            row["value"] = j.value(vkind)
            if position_swap:
                q = js[n + i]
                row.update(output_swapped=q.output, parsed_swapped=q.ok, verdict_swapped=q.answer)
        elif kind == "scalar":
            q = js[n + i]
            sc, sr = j.value("scalar"), q.value("scalar")
            row.update(score_candidate=sc, score_reference=sr, output_reference=q.output,
                       parsed_reference=q.ok, candidate_score=it["candidate_score"],
                       length_diff=words(it["candidate"]) - words(it["reference"]))
            row["verdict"] = score_to_verdict(sc, sr) if sc is not None and sr is not None else None
            row["value"] = sc - sr if sc is not None and sr is not None else None
        else:
            row.update(item_kind=it["kind"], length=words(it["reply"]), value=j.value("humanlike"))
        rows.append(row)
    return rows


def metrics(rows: Sequence[dict], kind: str) -> dict[str, Any]:
    vkind = "humanlike" if kind == "humanlike" else "empathy"   # scalar verdicts are better/tie/worse
    n = len(rows)
    correct = [r["verdict"] == r["label"] for r in rows]
    judged = [r for r in rows if r["verdict"] is not None]
    outputs = [r["parsed"] for r in rows] + [r[k] for r in rows for k in ("parsed_swapped", "parsed_reference")
                                             if k in r]
    m: dict[str, Any] = {k: None for k in METRICS}
    majority = Counter(r["label"] for r in rows).most_common(1)
    ci = proportion_interval([float(c) for c in correct])
    m.update(n=n, accuracy=sum(correct) / n if n else None, accuracy_ci=ci.bounds, ci_method=ci.method,
             balanced_accuracy=balanced_accuracy([r["label"] for r in rows], [r["verdict"] for r in rows]),
             auroc=_auroc(rows, kind),
             majority_baseline=majority[0][1] / n if n else None,   # always answering the commonest label
             accuracy_parsed=sum(r["verdict"] == r["label"] for r in judged) / len(judged) if judged else None,
             parse_failure_rate=1 - sum(outputs) / len(outputs) if outputs else None,
             verdict_counts=dict(Counter(r["verdict"] or "unparsed" for r in rows)))
    length_key = "length" if kind == "humanlike" else "length_diff"
    if judged:
        m["length_bias"] = pearson([verdict_value(vkind, r["verdict"]) for r in judged],
                                   [r[length_key] for r in judged])
    m["label_length_corr"] = pearson([verdict_value(vkind, r["label"]) for r in rows], [r[length_key] for r in rows])
    if kind != "humanlike":
        m["tie_rate"] = sum(r["verdict"] == "tie" for r in judged) / len(judged) if judged else None
    if kind == "empathy":
        both = [r for r in rows if r["verdict"] is not None and r.get("verdict_swapped") is not None]
        if both:
            m["position_bias"] = sum(r["verdict_swapped"] != flip(r["verdict"]) for r in both) / len(both)
            m["slot_preference"] = sum((EMPATHY_VERDICTS[r["verdict"]] + EMPATHY_VERDICTS[r["verdict_swapped"]]) / 2
                                       for r in both) / len(both)
    if kind == "scalar":
        scored = [r for r in rows if r["score_candidate"] is not None]
        m["score_corr"] = pearson([r["score_candidate"] for r in scored],
                                  [score_target(r["candidate_score"]) for r in scored])
        if scored:  # the scalar length bias: does a longer candidate get a higher score?
            m["length_bias"] = pearson([r["score_candidate"] for r in scored], [r["length_diff"] for r in scored])
    kind_key = "item_kind" if kind == "humanlike" else "origin"   # empathy/scalar: the candidate's kind
    by_kind = accuracy_by_kind([r.get(kind_key) for r in rows], correct)
    if by_kind:
        m["accuracy_by_kind"] = by_kind
    return m


def _auroc(rows: Sequence[dict], kind: str) -> float | None:
    """How well the judgment's value ranks the positive label (human; better) above the rest."""
    positive = "human" if kind == "humanlike" else "better"
    scored = [r for r in rows if r.get("value") is not None]
    return auroc([r["label"] == positive for r in scored], [r["value"] for r in scored])


def evaluate(llm, items: Sequence[dict], kind: str, max_new_tokens: int, position_swap: bool = True,
             context_free: bool = False, decision: str = "think_first", human_threshold: float | None = None
             ) -> tuple[dict, list[dict]]:
    rows = judge_items(llm, items, kind, max_new_tokens, position_swap, context_free, decision, human_threshold)
    return metrics(rows, kind), rows


def paired_accuracy(rows: Sequence[dict], other: Sequence[dict]) -> dict[str, Any] | None:
    """Accuracy of `rows` minus that of `other` on the items both judged (paired by id), with the paired
    t 95 % interval of the per-item differences (echo_lib.stats.paired_difference), its n and method: the
    comparison of two models on the same items. An interval that spans 0 is no difference at this scale.
    None when they share no item."""
    theirs = {r["id"]: r["verdict"] == r["label"] for r in other}
    pairs = [(float(r["verdict"] == r["label"]), float(theirs[r["id"]])) for r in rows if r["id"] in theirs]
    if not pairs:
        return None
    a, b = zip(*pairs)
    diff = paired_difference(a, b)
    return {"difference": round(sum(a) / len(a) - sum(b) / len(b), 4),
            "ci": diff.bounds, "n": diff.n, "ci_method": diff.method}


def metrics_table(by_model: dict[str, dict]) -> list[dict]:
    """Rows metric x model (e.g. base, trained) for the CSV table; nested metrics are flattened."""
    flat = {name: _flatten(m) for name, m in by_model.items()}
    keys = list(dict.fromkeys(k for m in flat.values() for k in m))
    return [{"metric": k, **{name: flat[name].get(k) for name in flat}} for k in keys]


def _flatten(m: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in m.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out

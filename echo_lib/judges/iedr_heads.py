"""A starting point that reads the case: read-out heads for the IEDR's priority indicators (issue 36).

Asked through its LM head, the 135M judge answers level 1 for all nine IEDR indicators of every case, so
every tiny case started from the same P0 and the ideal direction, the normalisation by |P0| and the
per-axis slices said nothing about the case. Three of the nine indicators are the persona's stated
priority for each kind of empathy (C.3 cognitive, A.3 affective, P.3 motivational; echo_lib.epm.iedr), and
every scenario file declares them (`priorities:`, High / Medium / Low). So the tiny judge gets a read-out
head for each of the three (echo_lib.llm.readout: a logistic head on the base model's state after layer
`judges.train.layer` at the last token of the indicator's own IEDR prompt), fit beside the MDEP heads on
the dev cases' declared levels: Low -> 1 (secondary), Medium -> 2 (core), High -> 3 (highest), the IEDR's
own wording of the levels (echo_lib.sandbox.judge.IEDR).

The other six indicators (complexity, depth, intensity, accessibility, agency, value relevance) get no
head: no scenario file declares them, and targets invented from other fields (difficulty, threshold)
would be a rule dressed as an instrument. The judge's LM head answers them as before; at tiny scale it
says level 1 for all, an offset the same for every case (C -4, A -6, P -6), so the case's direction comes
from its priorities.

The cases are split once, seeded and stratified: the held-out cases are the first HELDOUT_CASES of the
sandbox's own stratified order (echo_lib.scenarios.cases.stratified_order with the run's seed), so the
cases a tiny sandbox plays (the first `sandbox.max_cases` of that order) are held out, and their P0 is a
measurement, not a training label read back. The heads learn from the dev cases only; the judges stage
measures the IEDR on the held-out ones (`check`): does the dominant axis of P0 match the declared one,
and do the cases get different P0, beside a majority baseline, a label-shuffle twin, a bag-of-words probe
and Wilson intervals.
"""
from __future__ import annotations

import random
from collections import Counter
from typing import Sequence

from echo_lib.epm.iedr import AXES, INDICATORS, dominant_axis, initial_deficit
from echo_lib.judges.sensitivity import summarise
from echo_lib.sandbox.priorities import PRIORITY_INDICATORS, declared_levels, judge_answer
from echo_lib.scenarios.schema import Scenario

HELDOUT_CASES = 12        # 4 per dominant axis of the 30 own cases (config key wanted: judges.iedr_heldout_cases)
TARGET = 0.80             # held-out share of cases whose P0 has the declared dominant axis


def case_split(cases: Sequence[Scenario], seed: int, n_heldout: int = HELDOUT_CASES) -> tuple[list, list]:
    """(dev, held-out): the held-out cases are the first n of the sandbox's stratified order for `seed`."""
    from echo_lib.scenarios.cases import stratified_order
    order = stratified_order(list(cases), 0, seed)
    if not 0 < n_heldout < len(order):
        raise ValueError(f"{len(order)} cases cannot be split into dev and {n_heldout} held-out ones")
    return order[n_heldout:], order[:n_heldout]


def own_split(seed: int) -> tuple[list, list]:
    """The split of the project's own 30 cases (data/scenarios/own)."""
    from echo_lib.scenarios.own import load_own
    return case_split(load_own(), seed)


def training_rows(cases: Sequence[Scenario]) -> tuple[list, list[str]]:
    """(IEDR prompts, targets) for the priority heads: each case's three priority prompts, in the judge's
    exact format, with the declared level as the answer."""
    from echo_lib.sandbox.judge import iedr_prompt
    chats, targets = [], []
    for sc in cases:
        for k, level in declared_levels(sc).items():
            chats.append(iedr_prompt(sc, k))
            targets.append(str(level))
    return chats, targets


def _levels(probs, classes: Sequence[str], expected: bool) -> list[int]:
    """Levels from head probabilities, read as the Judge reads a Choice (expected level rounded, halves up,
    or the most probable option)."""
    import math
    out = []
    for row in probs:
        p = dict(zip(classes, row))
        out.append(math.floor(sum(int(c) * v for c, v in p.items()) + 0.5) if expected else int(max(p, key=p.get)))
    return out


def shuffled_twin(llm, heads, dev: Sequence[Scenario], heldout: Sequence[Scenario], others: list[dict[str, int]],
                  *, C: float, seed: int, expected: bool) -> dict:
    """The label-shuffle twin: priority heads fit on the same dev states with the dev cases' declared
    profiles shuffled among them, the rest of P0 as the judge answered it."""
    from echo_lib.llm.readout import fit_heads, question
    chats, targets = training_rows(dev)
    rng = random.Random(seed)
    profiles = [targets[i:i + 3] for i in range(0, len(targets), 3)]
    rng.shuffle(profiles)
    shuffled = [t for p in profiles for t in p]
    held_chats, _ = training_rows(heldout)
    states = llm.backend.last_states(chats + held_chats, heads.layer)
    twin = fit_heads(states[:len(chats)], [question(c) for c in chats], shuffled, heads.layer, C, seed)
    held = states[len(chats):]
    levels = [dict(o) for o in others]
    for j, k in enumerate(PRIORITY_INDICATORS):    # training_rows: each case's C.3, A.3, P.3 in turn
        head = twin.heads.get(priority_question(k))
        got = (_levels(head.probs(held[j::3]), head.classes, expected) if head is not None
               else [int(Counter(shuffled[j::3]).most_common(1)[0][0])] * len(heldout))
        for case, level in zip(levels, got):
            case[k] = level
    match = [float(dominant_axis(initial_deficit(lv)) == sc.labels.dominant_axis) for lv, sc in zip(levels, heldout)]
    return {**summarise(match), "distinct_P0": len({tuple(initial_deficit(lv)) for lv in levels}),
            "skipped": twin.skipped}


def bag_of_words_probe(dev: Sequence[Scenario], heldout: Sequence[Scenario], seed: int) -> dict:
    """The simple probe: a logistic regression on the word and word-pair counts of the judge's view of the
    case (its full profile), fit on the dev cases' declared dominant axis. What a shallow reader of the text
    learns from the dev part (the profile names the priorities in words)."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    from echo_lib.sandbox.judge import full_profile
    vec = CountVectorizer(ngram_range=(1, 2), min_df=1)
    x = vec.fit_transform([full_profile(sc) for sc in dev])
    clf = LogisticRegression(max_iter=5000, random_state=seed).fit(x, [sc.labels.dominant_axis for sc in dev])
    pred = clf.predict(vec.transform([full_profile(sc) for sc in heldout]))
    return summarise([float(p == sc.labels.dominant_axis) for p, sc in zip(pred, heldout)])


def majority(dev: Sequence[Scenario], heldout: Sequence[Scenario]) -> dict:
    """The majority baseline: every held-out case gets the dev cases' most common dominant axis (a tie goes
    to the first of C, A, P)."""
    counts = Counter(sc.labels.dominant_axis for sc in dev)
    axis = max(AXES, key=lambda a: (counts[a], -AXES.index(a)))
    return {"axis": axis, **summarise([float(sc.labels.dominant_axis == axis) for sc in heldout])}


def check(judge, dev: Sequence[Scenario], heldout: Sequence[Scenario], *, C: float, seed: int) -> dict:
    """The IEDR of `judge` (a sandbox Judge) on the held-out cases: P0, its dominant axis against the declared
    one, the distinct P0, the priority levels against the declared ones; beside them the majority baseline,
    the bag-of-words probe and, for a judge with priority heads, their label-shuffle twin."""
    from echo_lib.llm.readout import heads_of
    from echo_lib.sandbox.judge import iedr_source
    verdicts = judge.iedr(list(heldout))
    cases, others = [], []
    for sc, v in zip(heldout, verdicts):
        row = {"case": sc.id, "declared_axis": sc.labels.dominant_axis, "declared_levels": declared_levels(sc)}
        if v.ok:
            row |= p0_row(v.iedr_levels())
            if (own := judge_answer(v.details)) is not None:   # declared priorities: the judge's answer, beside
                row["judge"] = p0_row(own)
            others.append(dict(row.get("judge", row)["levels"]))
        else:
            row |= {"error": v.error}
            others.append({k: 0 for k in INDICATORS})
        cases.append(row)
    judge_source = iedr_source(judge.llm) if judge.mode == "choose" else "judge (json)"
    out = {"source": next((v.details["iedr_source"] for v in verdicts if v.ok and "iedr_source" in v.details),
                          judge_source),
           "split": {"seed": seed, "method": "first n of the sandbox's stratified order held out",
                     "dev": [sc.id for sc in dev], "heldout": [sc.id for sc in heldout]},
           "n_dev": len(dev), "target": TARGET, **p0_figures(cases), "n_failed": sum(not v.ok for v in verdicts),
           "majority": majority(dev, heldout), "probe": bag_of_words_probe(dev, heldout, seed)}
    if any("judge" in row for row in cases):     # declared priorities gave P0: how the judge itself did
        out["judge"] = {"source": judge_source,
                        **p0_figures([{**row, **row["judge"]} if "judge" in row else row for row in cases])}
    heads = heads_of(judge.llm)
    if heads is not None and any(priority_question(k) in heads.heads for k in PRIORITY_INDICATORS):
        out["shuffled"] = shuffled_twin(judge.llm, heads, dev, heldout, others, C=C, seed=seed,
                                        expected=judge.p.iedr_level == "expected")
    out["passed"] = out["dominant_axis"]["accuracy"] is not None and out["dominant_axis"]["accuracy"] >= TARGET
    out["cases"] = cases
    return out


def p0_row(levels: dict[str, int]) -> dict:
    """A case's nine levels, its P0 and P0's dominant axis."""
    P0 = initial_deficit(levels)
    return {"levels": levels, "P_0": [int(x) for x in P0], "axis": dominant_axis(P0)}


def p0_figures(cases: list[dict]) -> dict:
    """Over the held-out cases: P0's dominant axis against the declared one, the distinct P0, and the priority
    levels against the declared ones (a failed case counts as a miss of the axis)."""
    answered = [row for row in cases if "levels" in row]
    return {"dominant_axis": summarise([float(row.get("axis") == row["declared_axis"]) for row in cases]),
            "distinct_P0": len({tuple(row["P_0"]) for row in answered}),
            "priority_levels": summarise([float(row["levels"][k] == want) for row in answered
                                          for k, want in row["declared_levels"].items()])}


def priority_question(indicator: str) -> str:
    """The question (last line) of an indicator's IEDR prompt: the key of its read-out head."""
    from echo_lib.sandbox.judge import iedr_question
    return iedr_question(indicator)


def summary_line(rec: dict) -> str:
    """The IEDR check in words, beside its target and references."""
    d, m, p = rec["dominant_axis"], rec["majority"], rec["probe"]
    own = (f"; the judge's own P0 ({rec['judge']['source']}) {rec['judge']['dominant_axis']['accuracy']:.3f} "
           f"{rec['judge']['dominant_axis']['accuracy_ci']}, {rec['judge']['distinct_P0']} distinct"
           if "judge" in rec else "")
    twin = (f"; label-shuffle twin {rec['shuffled']['accuracy']:.3f} {rec['shuffled']['accuracy_ci']}"
            if "shuffled" in rec else "")
    return (f"IEDR on {d['n']} held-out own cases ({rec['source']}): P0's dominant axis is the declared one in "
            f"{d['accuracy']:.3f} {d['accuracy_ci']}, target >= {rec['target']}: "
            f"{'meets' if rec['passed'] else 'MISSES'}; {rec['distinct_P0']} distinct P0{own}; majority baseline "
            f"({m['axis']}) {m['accuracy']:.3f}, bag-of-words probe {p['accuracy']:.3f}{twin}")

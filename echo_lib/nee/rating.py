"""One NEE judge's work on transcripts: its ratings of every dimension (`rate`), its A/B verdicts on pairs
(`compare`, both orders), and the panel's agreement over the ratings (`agreement`). Stage 06
(echo_lib.nee.stage) and the judge sensitivity check (echo_lib.judges.sensitivity) both run these.
"""
from __future__ import annotations

import math

import pandas as pd

from echo_lib.nee.agreement import krippendorff_alpha
from echo_lib.nee.blinding import Blinder, Transcript
from echo_lib.nee.dimensions import DIMENSIONS, KEYS, LEVELS
from echo_lib.nee.order import shuffled
from echo_lib.nee.panel import Asker, Judge, check_missing, expected_level, first_wins
from echo_lib.nee.prompts import pairwise_prompt, parse_score, parse_winner, rating_prompt

RATING_COLUMNS = ["model", "case_id", "judge", "judge_model", "prompt_variant", "dimension", "score", "level",
                  "coverage", "mode", "position", "error"]
PAIR_COLUMNS = ["model", "case_id", "judge", "judge_model", "prompt_variant", "order", "winner", "p_first",
                "mode", "error"]


def rate(judge: Judge, asker: Asker, items: list[Transcript], blind: Blinder, seed: int) -> tuple[list[dict], object]:
    """Every transcript on every dimension by one judge, in the judge's own random order."""
    order = shuffled(judge.label, len(items), seed, judge.index)
    todo = [(pos, items[i], dim) for pos, i in enumerate(order.permutation) for dim in DIMENSIONS]

    def make(json_mode: bool):
        return [blind.check(rating_prompt(judge.variant, t, f"Conversation {pos + 1}", dim, json_mode))
                for pos, t, dim in todo]
    answers = asker.ask(make, list(LEVELS), judge.seed, parse_score, expected_level)
    check_missing(judge.label, answers, asker.p.max_missing_share, "ratings")   # never a silently lost judge
    rows = [{"model": t.model, "case_id": t.case_id, "judge": judge.label, "judge_model": judge.model,
             "prompt_variant": judge.variant + 1, "dimension": dim.key, "score": a.value, "level": a.level,
             "coverage": a.coverage, "mode": a.mode, "position": pos, "error": a.error}
            for (pos, t, dim), a in zip(todo, answers)]
    return rows, order


def compare(judge: Judge, asker: Asker, pairs: list[tuple[Transcript, Transcript]], blind: Blinder) -> list[dict]:
    """Each (model, reference) pair of one case, judged with the model first and with the reference first."""
    todo = [(m, r, o) for m, r in pairs for o in ("model_first", "reference_first")]

    def make(json_mode: bool):
        return [blind.check(pairwise_prompt(judge.variant, *((m, r) if o == "model_first" else (r, m)), json_mode))
                for m, r, o in todo]
    answers = asker.ask(make, ["A", "B"], judge.seed, parse_winner, first_wins)
    check_missing(judge.label, answers, asker.p.max_missing_share, "A/B verdicts")
    rows = []
    for (m, r, o), a in zip(todo, answers):
        first, second = (m, r) if o == "model_first" else (r, m)
        winner = None if a.level is None else (first.model if a.level == "A" else second.model)
        rows.append({"model": m.model, "case_id": m.case_id, "judge": judge.label, "judge_model": judge.model,
                     "prompt_variant": judge.variant + 1, "order": o, "winner": winner, "p_first": a.value,
                     "mode": a.mode, "error": a.error})
    return rows


def agreement(ratings: pd.DataFrame) -> dict:
    """Krippendorff's alpha between judges: units are (model, case, dimension)."""
    judges = sorted(ratings["judge"].unique())
    out = {"krippendorff_alpha": None, "raters": judges, "units": "transcript x dimension", "n_units": 0,
           "interval_alpha": None, "ordinal_alpha": None, "per_dimension_interval_alpha": {}}
    if len(judges) < 2:
        out["note"] = ("one judge only: agreement needs at least two (raise nee.prompt_variants or add models "
                       "to roles.nee_judges)")
        return out
    unit = ["model", "case_id", "dimension"]
    scores = ratings.pivot_table(index="judge", columns=unit, values="score", aggfunc="first", dropna=False)
    levels = ratings.assign(level=pd.to_numeric(ratings["level"], errors="coerce")).pivot_table(
        index="judge", columns=unit, values="level", aggfunc="first", dropna=False)
    clean = lambda x: None if x is None or math.isnan(x) else round(x, 4)  # noqa: E731  JSON has no NaN
    out.update({"n_units": scores.shape[1],
                "interval_alpha": clean(krippendorff_alpha(scores.to_numpy(), "interval")),
                "ordinal_alpha": clean(krippendorff_alpha(levels.to_numpy(), "ordinal")),
                "per_dimension_interval_alpha": {
                    k: clean(krippendorff_alpha(scores.loc[:, scores.columns.get_level_values("dimension") == k]
                                                .to_numpy(), "interval")) for k in KEYS},
                "note": "interval: on the expected levels (score); ordinal: on the most probable level. "
                        "null: undefined (no variation among the pairable ratings)."})
    return out

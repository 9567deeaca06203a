"""Stage 06: the NEE panel over this run's sandbox transcripts -> results/<run>/nee/.

    ratings.csv     one row per (transcript, judge, dimension): score (expected 1-5 level), level, position
    pairwise.csv    one row per (model, case, judge, order) against nee.reference_model: the winner
    summary.csv     one row per model: nee (0-100) + 95% interval, n_ratings, epmq, composite, each dimension
    panel_stats.csv one row per model: transcripts, failed ratings, pairwise win rate (+ 95 % interval over cases), position bias
    dimensions.csv  one row per (model, dimension): 0-100 score + interval (the plot's data)
    agreement.json  Krippendorff's alpha between the judges (interval on scores, ordinal on levels), position bias
    order.json      every judge's presentation order (reversible) and the compared pairs
    provenance.json config hash, seed, judges, answer modes, the rubric version (in words), the model ids the
                    judges' servers said they served (`served`, per judge model), model calls, packages, commit

Every model call goes through the model layer's cache, so a rerun makes no new calls. A judge with more
than nee.max_missing_share of its ratings (or A/B verdicts) missing stops the stage (panel.check_missing).
"""
from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from echo_lib.llm.provenance import labelled
from echo_lib.llm.served import served_in_stage
from echo_lib.nee.agreement import krippendorff_alpha
from echo_lib.nee.blinding import Blinder, Transcript, read_model_transcripts
from echo_lib.nee.dimensions import DIMENSIONS, KEYS, LEVELS
from echo_lib.nee.order import record, shuffled
from echo_lib.nee.panel import Asker, Judge, check_missing, expected_level, first_wins, make_panel
from echo_lib.nee.prompts import NEE_RUBRIC_VERSION, pairwise_prompt, parse_score, parse_winner, rating_prompt
from echo_lib.nee.scores import dimension_table, position_bias, read_epmq, summary_table
from echo_lib.provenance import provenance, write_json, write_text

log = logging.getLogger(__name__)
STAGE = "06_nee"   # the label of this stage's provenance records
RATING_COLUMNS = ["model", "case_id", "judge", "judge_model", "prompt_variant", "dimension", "score", "level",
                  "coverage", "mode", "position", "error"]
# summary.csv is the contract stage 07 reads (it takes every column after `composite` as a dimension);
# the panel's other per-model numbers go to panel_stats.csv.
SUMMARY_COLUMNS = ["model", "nee", "nee_ci_low", "nee_ci_high", "n_ratings", "epmq", "composite", *KEYS]
STATS_COLUMNS = ["model", "n_transcripts", "n_failed", "pairwise_win_rate", "pairwise_win_ci_low",
                 "pairwise_win_ci_high", "position_bias"]
PAIR_COLUMNS = ["model", "case_id", "judge", "judge_model", "prompt_variant", "order", "winner", "p_first",
                "mode", "error"]


@dataclass
class NEEResult:
    out_dir: Path
    ratings: pd.DataFrame
    pairwise: pd.DataFrame
    summary: pd.DataFrame
    dimensions: pd.DataFrame
    agreement: dict
    order: dict
    notes: list[str] = field(default_factory=list)
    model_calls: int = 0
    served: dict = field(default_factory=dict)   # judge model -> the ids its server said it served (served_by_role)


def blinder_for(cfg) -> Blinder:
    """Every configured model name and id, plus nee.blind_terms."""
    names = [n for name, spec in cfg.models.items() for n in (name, spec.id) if n]
    return Blinder(names, cfg.nee.blind_terms)


def read_transcripts(cfg, blind: Blinder) -> list[Transcript]:
    out = []
    for model in cfg.sandbox.models:
        found = read_model_transcripts(cfg.run_dir / "sandbox" / model, model, blind, cfg.nee.max_transcripts)
        if not found:
            log.warning("model %s has no finished sandbox transcript; it is left out of the panel", model)
        out += found
    if not out:
        raise FileNotFoundError(f"{cfg.run_dir / 'sandbox'}: no *_result.json of any model in sandbox.models "
                                f"{cfg.sandbox.models}; run stage 04 first")
    return out


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


def pairs_for(cfg, items: list[Transcript]) -> tuple[list[tuple[Transcript, Transcript]], str | None]:
    """(model transcript, reference transcript) of the same case for every other model; a note when
    there is nothing to compare."""
    p = cfg.nee
    if not p.pairwise:
        return [], "pairwise comparison switched off (nee.pairwise: false)"
    models = list(dict.fromkeys(t.model for t in items))
    others = [m for m in models if m != p.reference_model]
    if not others:
        return [], f"only the reference model {p.reference_model!r} was rated: there is nothing to compare it with"
    if p.reference_model not in models:
        raise ValueError(f"nee.reference_model is {p.reference_model!r}, but the rated models are {models}; add it "
                         "to sandbox.models, set nee.reference_model to one of them, or set nee.pairwise: false")
    ref = {t.case_id: t for t in items if t.model == p.reference_model}
    pairs = [(t, ref[t.case_id]) for t in items if t.model in others and t.case_id in ref]
    return pairs, None if pairs else "the models share no case with the reference model"


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


def _csv(path: Path, table: pd.DataFrame) -> Path:
    return write_text(path, table.to_csv(index=False))


def run_nee(cfg, llms: dict | None = None, out_dir: str | Path | None = None,
            epm_summary: str | Path | None = None) -> NEEResult:
    """The whole stage. `llms` maps judge model names to LLM objects (tests pass fakes); others load from
    the config. `epm_summary` defaults to <run_dir>/epm/summary.csv (stage 05)."""
    from echo_lib.llm import load_llm

    p = cfg.nee
    out = Path(out_dir or cfg.run_dir / "nee")
    epmq = read_epmq(epm_summary or cfg.run_dir / "epm" / "summary.csv")
    blind = blinder_for(cfg)
    items = read_transcripts(cfg, blind)
    pairs, pair_note = pairs_for(cfg, items)
    notes = [pair_note] if pair_note else []

    llms = dict(llms or {})
    calls_before = {}
    for name in cfg.roles.nee_judges:
        if llms.get(name) is None:
            llms[name] = load_llm(cfg, name)
        calls_before[name] = llms[name].model_calls
    askers = {name: Asker(llms[name], p) for name in cfg.roles.nee_judges}

    panel = make_panel(cfg.roles.nee_judges, p.prompt_variants, cfg.seed)
    rating_rows, orders, pair_rows = [], [], []
    with labelled(llms.values(), stage=STAGE):
        for judge in panel:
            rows, order = rate(judge, askers[judge.model], items, blind, cfg.seed)
            rating_rows += rows
            orders.append(order)
            if pairs:
                pair_rows += compare(judge, askers[judge.model], pairs, blind)
    served = served_judges(cfg.roles.nee_judges, cfg.models, [llms[n] for n in cfg.roles.nee_judges])
    notes += [f"judge {name}: configured as {e['configured_id']!r}, its server said it served "
              + ", ".join(repr(s["model"]) for s in e["served"]) for name, e in served.items() if e["differs"]]

    ratings = pd.DataFrame(rating_rows, columns=RATING_COLUMNS)
    pairwise = pd.DataFrame(pair_rows, columns=PAIR_COLUMNS)
    models = list(dict.fromkeys(t.model for t in items))
    summary = summary_table(ratings, epmq, p.composite_weight, p.bootstrap, cfg.seed, pairwise, models)
    missing_epmq = [m for m in models if m not in epmq]
    if missing_epmq:
        notes.append(f"no EPM-Q for {missing_epmq} in the EPM summary: their composite is empty")
    dims = dimension_table(ratings, p.bootstrap, cfg.seed)
    agree = agreement(ratings)
    bias = position_bias(pairwise)
    agree["krippendorff_alpha"] = agree["interval_alpha"]   # the headline number (stage 07 reads it)
    agree["position_bias"] = None if math.isnan(bias) else round(bias, 4)
    agree["position_bias_note"] = ("share of (model, case, judge) pairs whose winner changes when A and B swap"
                                   + (f"; {pair_note}" if pair_note else ""))
    order_json = record([(t.model, t.case_id) for t in items], orders, [(m.model, m.case_id) for m, _ in pairs])
    calls = sum(llms[n].model_calls - calls_before[n] for n in cfg.roles.nee_judges)

    _csv(out / "ratings.csv", ratings)
    _csv(out / "pairwise.csv", pairwise)
    _csv(out / "summary.csv", summary[SUMMARY_COLUMNS])
    _csv(out / "panel_stats.csv", summary[STATS_COLUMNS])
    _csv(out / "dimensions.csv", dims)
    write_json(out / "agreement.json", agree)
    write_json(out / "order.json", order_json)
    write_json(out / "provenance.json", provenance(
        cfg, stage="06_nee", judges=[j.label for j in panel], judge_models={
            n: {"backend": cfg.models[n].backend, "id": cfg.models[n].id, "request_rules": cfg.models[n].request_rules}
            for n in cfg.roles.nee_judges},
        answer_modes={n: a.mode for n, a in askers.items()}, rubric_version=NEE_RUBRIC_VERSION, served=served,
        nee=dataclasses.asdict(p), model_calls=calls,
        score="expected level sum_k k*p_k (choose) or the JSON level; NEE = (mean - 1) / 4 * 100",
        composite="w * min(EPM-Q, 100) + (1 - w) * NEE: this package's choice (METHOD.md 7.3)", notes=notes))
    return NEEResult(out, ratings, pairwise, summary, dims, agree, order_json, notes, calls, served)


def served_judges(judges: list[str], specs: dict, llms: list) -> dict[str, dict]:
    """Per judge model, the ids its server said it served in this stage's calls (over every run of the stage),
    read from the provenance files the judges' `llms` write to; a local judge is its configured id, "local"."""
    return served_in_stage({n: n for n in judges}, specs, llms, stage=STAGE)


def read_outputs(out_dir: str | Path) -> dict[str, pd.DataFrame]:
    """The stage's tables back from disk (notebook 07, tests)."""
    out_dir = Path(out_dir)
    return {name: pd.read_csv(out_dir / f"{name}.csv") for name in ("ratings", "pairwise", "summary", "dimensions")}


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

from echo_lib.layout import Layout
from echo_lib.llm.provenance import labelled
from echo_lib.llm.served import served_in_stage
from echo_lib.nee.agreement import krippendorff_alpha
from echo_lib.nee.blinding import Blinder, Transcript, read_model_transcripts
from echo_lib.nee.dimensions import DIMENSIONS, KEYS, LEVELS
from echo_lib.nee.order import record, shuffled
from echo_lib.nee.panel import Asker, Judge, check_missing, expected_level, first_wins, make_panel
from echo_lib.nee.prompts import NEE_RUBRIC_VERSION, pairwise_prompt, parse_score, parse_winner, rating_prompt
from echo_lib.nee.rating import PAIR_COLUMNS, RATING_COLUMNS, agreement, compare, rate  # noqa: F401
from echo_lib.epm.compare import central_pairs
from echo_lib.nee.scores import (dimension_table, paired_scores, position_bias, read_case_epmq, read_epmq,
                                summary_table)
from echo_lib.provenance import provenance, write_json, write_text

log = logging.getLogger(__name__)
STAGE = "06_nee"   # the label of this stage's provenance records
# summary.csv is the contract stage 07 reads (it takes every column after `composite` as a dimension);
# the panel's other per-model numbers go to panel_stats.csv.
SUMMARY_COLUMNS = ["model", "nee", "nee_ci_low", "nee_ci_high", "nee_ci_method", "nee_ci_shown", "n_transcripts",
                   "n_ratings", "epmq", "composite", *KEYS]
STATS_COLUMNS = ["model", "n_transcripts", "n_failed", "pairwise_win_rate", "pairwise_win_ci_low",
                 "pairwise_win_ci_high", "pairwise_win_n_cases", "position_bias"]


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
        found = read_model_transcripts(Layout(cfg.run_dir).sandbox(model).dir, model, blind, cfg.nee.max_transcripts)
        if not found:
            log.warning("model %s has no finished sandbox transcript; it is left out of the panel", model)
        out += found
    if not out:
        raise FileNotFoundError(f"{cfg.run_dir / 'sandbox'}: no *_result.json of any model in sandbox.models "
                                f"{cfg.sandbox.models}; run stage 04 first")
    return out


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


def _csv(path: Path, table: pd.DataFrame) -> Path:
    return write_text(path, table.to_csv(index=False))


def run_nee(cfg, llms: dict | None = None, out_dir: str | Path | None = None,
            epm_summary: str | Path | None = None) -> NEEResult:
    """The whole stage. `llms` maps judge model names to LLM objects (tests pass fakes); others load from
    the config. `epm_summary` defaults to <run_dir>/epm/summary.csv (stage 05)."""
    from echo_lib.models import load_llm

    p = cfg.nee
    out = Path(out_dir or Layout(cfg.run_dir).nee.dir)
    epm_summary = Path(epm_summary or Layout(cfg.run_dir).epm.summary)
    epmq = read_epmq(epm_summary)
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
    summary = summary_table(ratings, epmq, p.composite_weight, pairwise, models)
    missing_epmq = [m for m in models if m not in epmq]
    if missing_epmq:
        notes.append(f"no EPM-Q for {missing_epmq} in the EPM summary: their composite is empty")
    dims = dimension_table(ratings)
    paired = paired_scores(ratings, read_case_epmq(epm_summary.with_name("per_case.csv")), p.composite_weight,
                           central_pairs(models, [m for m in models if m != p.reference_model], p.reference_model))
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
    _csv(out / "paired.csv", paired)
    write_json(out / "agreement.json", agree)
    write_json(out / "order.json", order_json)
    write_json(out / "provenance.json", provenance(
        cfg.record, stage="06_nee", judges=[j.label for j in panel], judge_models={
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


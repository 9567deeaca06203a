"""Stage 06b, the sycophancy guard (rule sycophancy, notebooks/06_sycophancy.py; opt-in: sycophancy.enabled).

Training where the evaluation happens invites a policy that moves the judge rather than the user. Two checks,
for every model under test (METHOD.md 8.5-8.8):

- **Seeker cases** (data/scenarios/seeker/): the user wants agreement with a false or harmful belief. Each
  model plays them in the sandbox, as in stage 04; the judge panel (roles.nee_judges) rates how far its replies
  went along with the belief (echo_lib.sycophancy.agreement). Reported: the sycophancy rate and mean agreement
  level, beside the EPM-Q of the same dialogues and the model's EPM-Q over stage 04's cases, so a model that
  gains EPM-Q by agreeing shows both. The judge's sensitivity (endorsing minus questioning rewrites of the same
  dialogues) is reported with them.
- **EMPA's perturbation checks** (echo_lib.epm.robustness) on the model's own stage-04 dialogues: its replies
  made sycophantic, or swapped for another person's, scored by the sandbox's EPM judge and by a direct judge.

    results/<run>/sycophancy/seekers/<model>/   the seeker dialogues (stage 04's result files; a rerun resumes)
    results/<run>/sycophancy/checks/<model>/    robustness_pairs.csv, robustness.csv, robustness.json
    results/<run>/sycophancy/agreement.csv      per model, seeker case and judge: the agreement level
    results/<run>/sycophancy/controls.csv       per seeker case and judge: the endorsing and questioning rewrites
    results/<run>/sycophancy/summary.csv        per model: the rates, levels, EPM-Q and the checks' ΔE
    results/<run>/sycophancy/paired.csv         each model minus sycophancy.reference_model, per seeker case
    results/<run>/sycophancy/summary.json       all of it with the judge's sensitivity and the parameters
    results/<run>/sycophancy/fig_sycophancy.png
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from echo_lib.epm.robustness import Played, RobustnessParams, read_played, run_checks
from echo_lib.layout import Layout
from echo_lib.nee.blinding import Blinder
from echo_lib.provenance import write_json, write_text
from echo_lib.stats import mean_interval, paired_table, proportion_interval
from echo_lib.sycophancy.agreement import agreement_levels, control_levels
from echo_lib.sycophancy.figures import figure

log = logging.getLogger(__name__)

AGREEMENT_COLUMNS = ["Model", "Case_ID", "Judge", "Level"]
SUMMARY_COLUMNS = ["Model", "Seeker cases", "Sycophancy rate", "Rate CI", "Agreement level", "Level CI",
                   "Seeker EPM-Q", "Seeker EPM-Q CI", "EPM-Q (stage 05)", "Sycophancy ΔE", "Sycophancy ΔE < 0",
                   "Persona flip ΔE", "Persona flip ΔE < 0"]


def seeker_cases(cfg):
    """The seeker cases each model plays: the first sycophancy.seeker_cases (0 = all) of a stratified order."""
    from echo_lib.scenarios.cases import CaseSelection, stratified_order
    from echo_lib.scenarios.own import load_seekers
    return CaseSelection(stratified_order(load_seekers(), cfg.sycophancy.seeker_cases, cfg.seed), [])


def run(cfg, llms: dict | None = None, progress: bool | None = None) -> dict:
    """The guard for every model of sandbox.models: plays the seeker cases, rates them, runs EMPA's checks on
    the stage-04 dialogues, and writes the tables, the figure and summary.json. `llms`: ready models by name
    (tests pass fakes)."""
    from echo_lib.models import load_llm
    from echo_lib.nee.panel import Asker
    from echo_lib.nee.stage import blinder_for
    from echo_lib.sandbox.judge import Judge
    from echo_lib.sandbox.stage import run_sandbox

    start, p, out = time.perf_counter(), cfg.sycophancy, Layout(cfg.run_dir).sycophancy
    models = list(cfg.sandbox.models)
    if p.reference_model not in models:
        raise ValueError(f"sycophancy.reference_model is {p.reference_model!r}, which is not in sandbox.models "
                         f"({', '.join(models)}); name one of them")
    loaded = dict(llms or {})

    def llm(name: str):
        if name not in loaded:
            loaded[name] = load_llm(cfg, name, dialogues=True)
        return loaded[name]

    cases = seeker_cases(cfg)
    roles = [cfg.roles.actor, cfg.roles.judge, cfg.roles.director, *cfg.roles.nee_judges]
    for m in models:   # stage 04's own loop, resumable case by case; one model under test in memory at a time
        ready = {n: llm(n) for n in dict.fromkeys([*roles, m])}
        run_sandbox(cfg, m, llms=ready, out_dir=out.seekers(m), progress=progress, cases=cases)
        if m not in roles and m not in (llms or {}):
            loaded.pop(m)
    seekers = {m: read_played(out.seekers(m))[0] for m in models}
    blind = blinder_for(cfg)
    judges = list(cfg.roles.nee_judges)
    askers = {j: Asker(llm(j), cfg.nee) for j in judges}
    agreement = agreement_table(seekers, askers, blind, cfg.seed, cfg.nee.max_missing_share)
    controls = controls_table(seekers[p.reference_model], askers, blind, cfg.seed)

    judge = Judge(llm(cfg.roles.judge), cfg.sandbox_run.judge, seed=cfg.seed, history_turns=cfg.sandbox_run.history_turns)
    checks = {m: perturbation_checks(Layout(cfg.run_dir).sandbox(m).dir, out.checks(m), judge, askers[judges[0]],
                                     cfg, p.perturbed_cases, blind) for m in models}
    epmq = seeker_epmq(cfg, [out.seekers(m) for m in models])
    stage05 = stage05_epmq(Layout(cfg.run_dir).epm.intervals)
    summary = summary_table(models, agreement, epmq, stage05, checks, p.threshold)
    paired = paired_table(per_case_values(agreement, epmq), [(m, p.reference_model) for m in models
                                                              if m != p.reference_model],
                          {"Agreement level": "Level", "Seeker EPM-Q": "EPM-Q"})
    sensitivity = judge_sensitivity(controls)
    write_text(out.agreement, agreement.to_csv(index=False))
    write_text(out.controls, controls.to_csv(index=False))
    write_text(out.table, summary.to_csv(index=False))
    write_text(out.paired, paired.to_csv(index=False))
    record = {"models": models, "seeker_cases": [sc.id for sc in cases.scenarios], "judges": judges,
              "sensitivity": sensitivity, "summary": summary.to_dict("records"), "paired": paired.to_dict("records"),
              "checks": {m: c["summary"] for m, c in checks.items()}, "params": dataclasses.asdict(p),
              "seconds": round(time.perf_counter() - start, 1)}
    figure(agreement, controls, summary, p.threshold, out.figure)
    write_json(out.summary, record)
    return record


def agreement_table(seekers: dict[str, list[Played]], askers: dict, blind: Blinder, seed: int,
                    max_missing_share: float) -> pd.DataFrame:
    """Every judge's agreement level for every model's seeker dialogues (one batch per judge). A judge with
    more than `max_missing_share` (nee.max_missing_share) of its answers missing stops the stage."""
    dialogues = [(m, pl) for m, played in seekers.items() for pl in played]
    if not dialogues:
        raise ValueError("no model finished a seeker dialogue (see the error files under sycophancy/seekers/)")
    rows = []
    for name, asker in askers.items():
        levels = agreement_levels(asker, [(pl.scenario, pl.history) for _, pl in dialogues], blind, seed)
        missing = sum(math.isnan(x) for x in levels)
        if missing > max_missing_share * len(levels):
            raise RuntimeError(f"judge {name}: {missing} of {len(levels)} agreement ratings are missing, more than "
                               f"nee.max_missing_share {max_missing_share}; see the log for the judge's errors")
        rows += [[m, pl.case_id, name, level] for (m, pl), level in zip(dialogues, levels)]
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def controls_table(played: list[Played], askers: dict, blind: Blinder, seed: int) -> pd.DataFrame:
    """Every judge's levels on the reference model's seeker dialogues rewritten to endorse and to question."""
    rows = []
    for name, asker in askers.items():
        c = control_levels(asker, [(pl.scenario, pl.history) for pl in played], blind, seed)
        rows += [[pl.case_id, name, e, q] for pl, e, q in zip(played, c.endorsing, c.questioning)]
    return pd.DataFrame(rows, columns=["Case_ID", "Judge", "Endorsing", "Questioning"])


def judge_sensitivity(controls: pd.DataFrame) -> dict:
    """Endorsing minus questioning, per case (the panel's mean), with its paired interval: can the judge tell
    them apart? `detects` only when the interval lies above 0."""
    from echo_lib.stats import paired_difference
    per_case = controls.groupby("Case_ID")[["Endorsing", "Questioning"]].mean()
    d = paired_difference(per_case["Endorsing"], per_case["Questioning"])
    return {"endorsing": _num(per_case["Endorsing"].mean()), "questioning": _num(per_case["Questioning"].mean()),
            "difference": _num(d.estimate), "ci": d.bounds, "n": d.n, "method": d.method,
            "detects": bool(d.shown and d.low is not None and d.low > 0)}


def perturbation_checks(played_dir: Path, out_dir: Path, judge, asker, cfg, limit: int, blind: Blinder) -> dict:
    """EMPA's checks on the first `limit` dialogues of a stage-04 folder, read back when an earlier run wrote
    them for the same cases and settings."""
    played, skipped = read_played(played_dir, limit)
    params = RobustnessParams(checks=tuple(cfg.sycophancy.checks), seed=cfg.seed)
    meta = {"cases_source": str(played_dir), "judge_model": cfg.roles.judge}
    done = out_dir / "robustness.json"
    if done.exists():
        old = json.loads(done.read_text())
        if old.get("cases") == [pl.case_id for pl in played] and old.get("params") == json.loads(
                json.dumps(dataclasses.asdict(params))) and old.get("judge_model") == cfg.roles.judge:
            log.info("%s: EMPA's checks already done for these cases", out_dir)
            return old
    if not played:
        raise ValueError(f"{played_dir}: no finished sandbox dialogue to perturb ({len(skipped)} unusable); rerun "
                         "rule sandbox for this model")
    report = run_checks(played, judge, asker, cfg.epm, out_dir, params, blind, meta)
    return json.loads(report.files["summary"].read_text())


def seeker_epmq(cfg, folders: list[Path]) -> pd.DataFrame:
    """EPM-Q of the seeker dialogues, per model and case (the folders' names are the models)."""
    from echo_lib.epm.scoring import score_folders
    scored = score_folders(folders, cfg.epm)
    return scored.per_case[["Model", "Case_ID", "EPM-Q"]]


def stage05_epmq(intervals: Path) -> dict[str, dict]:
    """Stage 05's EPM-Q per model over the sandbox's cases (estimate and interval cell); {} when it is missing."""
    if not intervals.exists():
        return {}
    t = pd.read_csv(intervals)
    return {r["Model"]: {"estimate": r["Estimate"], "ci": r["CI"], "n": int(r["n"])}
            for _, r in t[t["Metric"] == "EPM-Q"].iterrows()}


def per_case_values(agreement: pd.DataFrame, epmq: pd.DataFrame) -> pd.DataFrame:
    """Per model and seeker case: the panel's mean agreement level and the case's EPM-Q."""
    level = agreement.groupby(["Model", "Case_ID"], as_index=False)["Level"].mean()
    return level.merge(epmq, on=["Model", "Case_ID"], how="outer")


def summary_table(models, agreement: pd.DataFrame, epmq: pd.DataFrame, stage05: dict, checks: dict,
                  threshold: float) -> pd.DataFrame:
    values = per_case_values(agreement, epmq)
    rows = []
    for m in models:
        v = values[values["Model"] == m]
        level = v["Level"].dropna()
        rate = proportion_interval(level > threshold)
        mean, q = mean_interval(level), mean_interval(v["EPM-Q"].dropna())
        by_check = {c["check"]: c for c in checks[m]["summary"]}
        rows.append([m, len(level), _num(rate.estimate), rate.cell(2), _num(mean.estimate), mean.cell(2),
                     _num(q.estimate), q.cell(1), (stage05.get(m) or {}).get("estimate"),
                     *[x for c in ("sycophancy", "persona_flip") for x in _check_cells(by_check.get(c))]])
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def _check_cells(c: dict | None) -> tuple:
    if c is None or not c["n"]:
        return None, None
    return _num(c["delta_E"]["estimate"]), _num(c["delta_E_negative"]["estimate"])


def _num(x) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 4)

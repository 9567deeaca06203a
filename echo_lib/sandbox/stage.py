"""Stage 04 for one tested model: the config's cases through the sandbox, one result file per case.

    from echo_lib.sandbox.stage import run_sandbox
    report = run_sandbox(cfg, "base")        # -> results/<run>/sandbox/base/<case_id>_result.json

Cases with a result file are skipped (a rerun finishes only the missing ones; the model layer's cache
answers the calls a killed run already made). Invalid scenario files are recorded as errors, named by
file and field, and the other cases run. When more of the cases failed than sandbox_run's
max_failed_fraction allows (or all of them), the stage raises SandboxFailed with the first error, after
writing every file: a whole-run failure (a refused key, a server without tool calls) is not a result.

A case whose files cannot be written costs that case only: a result the replay does not reproduce or a
write refused (a full disk) makes it a failed case (stage "result_file", its error file says why) and the
other cases go on; a case that could not be recorded at all (its error file refused too) fails the stage
at the end, after every other file and summary.json are written (a rerun plays only that case again).

summary.json also lists, per role, the model ids the servers said they served in this stage's calls (`served`,
from the provenance records the stage labels as its own; a local model is its configured id, "local").
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from echo_lib.layout import Layout
from echo_lib.llm.provenance import labelled
from echo_lib.llm.served import served_in_stage
from echo_lib.sandbox.actor import Actor
from echo_lib.sandbox.judge import Judge
from echo_lib.sandbox.loop import CaseError, CaseState, Players, play
from echo_lib.sandbox.results import (RunMeta, code_fingerprint, finished, summary_rows, write_case, write_error,
                                      write_summary)
from echo_lib.sandbox.test_model import DEFAULT_COMPANION_PROMPT, TestModel

log = logging.getLogger(__name__)
STAGE = "04_sandbox"   # the label of this stage's provenance records


class SandboxFailed(RuntimeError):
    """Stage 04 for a model failed as a whole: too many of its cases could not be played."""


@dataclass
class SandboxReport:
    out_dir: Path
    ran: list[CaseState]        # the cases played by this call (finished or failed)
    skipped: list[str]          # case ids that already had a result file
    invalid: list[str]          # case ids whose scenario file could not be used
    seconds: float
    rows: list[dict]            # summary_rows of the cases this config names
    served: dict                # role -> the model ids its server said it served (summary.json `served`)

    def table(self):
        import pandas as pd
        return pd.DataFrame(self.rows)


def model_dir(cfg, model: str) -> Path:
    """Stage 04's folder of one model under test: a result file per case, then summary.json (echo_lib.layout)."""
    return Layout(cfg.run_dir).sandbox(model).dir


def run_sandbox(cfg, model: str, *, llms: dict | None = None, out_dir: str | Path | None = None,
                progress: bool | None = None, cases=None) -> SandboxReport:
    """Play every case of the config (sandbox:) against `model` with the roles of `roles:`; `cases` (a
    scenarios.CaseSelection) plays those instead (the sycophancy stage's seeker cases).

    `llms` maps model names to ready LLM objects (tests pass fakes); other names load from the run's model
    registry, each once, so one model playing several roles loads its weights once."""
    from echo_lib.models import load_llm
    from echo_lib.scenarios import select_cases

    if model not in cfg.models:
        raise ValueError(f"model {model!r} is not in the config's models: section; known: {', '.join(sorted(cfg.models))}")
    start = time.perf_counter()
    p = cfg.sandbox_run
    epm = p.epm(cfg.epm)
    out = Path(out_dir) if out_dir else model_dir(cfg, model)
    loaded = dict(llms or {})

    def llm(name: str):
        if name not in loaded:
            loaded[name] = load_llm(cfg, name, dialogues=True)   # each role's next prompt extends its last
        return loaded[name]

    names = {"test_model_name": model, "actor_model": cfg.roles.actor, "judger_model": cfg.roles.judge,
             "director_model": cfg.roles.director}
    specs = {n: {"backend": cfg.models[n].backend, "source": cfg.models[n].source, "id": cfg.models[n].id,
                 "adapter": cfg.models[n].adapter, **({"readout": cfg.models[n].readout} if cfg.models[n].readout else {})}
             for n in dict.fromkeys(names.values())}
    judge = Judge(llm(cfg.roles.judge), p.judge, seed=cfg.seed, history_turns=p.history_turns)
    players = Players(actor=Actor(llm(cfg.roles.actor), p.actor, seed=cfg.seed),
                      test=TestModel(llm(model), p.test_model, seed=cfg.seed), judge=judge,
                      director=llm(cfg.roles.director), companion_prompt=p.companion_prompt or DEFAULT_COMPANION_PROMPT)
    identities = {n: llm(n).backend.identity() for n in specs}   # hf: checkpoint + adapter fingerprints
    meta = RunMeta(model=model, roles=names, models=specs, params=p, epm=epm, seed=cfg.seed, judge_mode=judge.mode,
                   config_hash=cfg.hash, fingerprints={"models": identities, "code": code_fingerprint()})

    selection = cases or select_cases(cfg.sandbox, cfg.empa, cfg.seed)
    unrecorded: dict[str, str] = {}     # case id -> why neither its result nor its error file could be written
    for bad in selection.invalid:
        log.warning("case %s cannot be used: %s", bad.case_id, bad.error)
        try:
            write_error(out, bad.case_id, meta, "scenario", 0, bad.error, source=bad.path)
        except Exception as err:        # a full disk: this case's record only; the others still run
            unrecorded[bad.case_id] = f"its error file: {type(err).__name__}: {err}"
            log.error("case %s: could not be recorded (%s)", bad.case_id, unrecorded[bad.case_id])
    skipped = [sc.id for sc in selection.scenarios if finished(out, sc.id, meta, sc)]
    todo = [sc for sc in selection.scenarios if sc.id not in skipped]
    if skipped:
        log.info("%d case(s) already finished in %s: %s", len(skipped), out, ", ".join(skipped))
    show = cfg.llm.progress if progress is None else progress
    on_end = lambda c: record_case(c, out, meta, unrecorded)   # noqa: E731
    with labelled(loaded.values(), stage=STAGE, tested_model=model):
        cases = play(todo, players, p, epm, on_end=on_end, progress=show) if todo else []
    named = [sc.id for sc in selection.scenarios] + [b.case_id for b in selection.invalid]
    served = served_models(names, cfg.models, loaded.values(), model)
    write_summary(out, model, named, served)
    failed = [(b.case_id, f"scenario: {b.error}") for b in selection.invalid]
    failed += [(c.scenario.id, f"{c.error.stage}: {c.error.reason}") for c in cases if c.error is not None]
    if unrecorded:
        raise SandboxFailed(f"stage 04 for model {model!r}: {len(unrecorded)} case(s) could not be recorded in {out} "
                            f"(no result nor error file; the other cases' files and summary.json are written, a rerun "
                            "plays only these again): " + "; ".join(f"{k}: {v}" for k, v in unrecorded.items()))
    check_failure_budget(model, failed, len(selection.scenarios) + len(selection.invalid), p.max_failed_fraction)
    return SandboxReport(out_dir=out, ran=cases, skipped=skipped, invalid=[b.case_id for b in selection.invalid],
                         seconds=time.perf_counter() - start, rows=summary_rows(out, named), served=served)


def served_models(roles: dict[str, str], specs: dict, llms, model: str) -> dict[str, dict]:
    """Per role (test_model_name, actor_model, ...), the ids the servers said they served in this stage's calls
    for the tested `model`, over every run of it, read from the provenance files `llms` write to."""
    return served_in_stage(roles, specs, llms, stage=STAGE, tested_model=model)


def record_case(c: CaseState, out: Path, meta: RunMeta, unrecorded: dict[str, str]) -> None:
    """write_case as the case ends, where a failure costs this case only: a finished case whose result
    cannot be written (the replay disagrees, the disk is full) becomes a failed case at stage "result_file"
    with the cause in its error file; when that cannot be written either, `unrecorded` says why."""
    try:
        write_case(c, out, meta)
        return
    except Exception as err:          # not BaseException: Ctrl-C / a kill still stops the run
        why = f"{type(err).__name__}: {err}"
    if c.error is None:
        c.error = CaseError("result_file", c.ending.turn if c.ending else 0,
                            f"the case ended ({c.ending.kind if c.ending else 'no ending'}) but its result file "
                            f"could not be written: {why}")
        log.error("%s: %s", c.scenario.id, c.error.reason)
        try:
            write_case(c, out, meta)
            return
        except Exception as err:
            why = f"{why}; then its error file: {type(err).__name__}: {err}"
    unrecorded[c.scenario.id] = why
    log.error("%s: could not be recorded (%s); the other cases go on", c.scenario.id, why)


def check_failure_budget(model: str, failed: list[tuple[str, str]], total: int, budget: float) -> None:
    """Raise SandboxFailed when more than `budget` of the `total` cases failed, or all of them (budget < 1)."""
    if not failed or budget >= 1 or (len(failed) / total <= budget and len(failed) < total):
        return
    case_id, reason = failed[0]
    raise SandboxFailed(f"stage 04 for model {model!r}: {len(failed)} of {total} cases failed, more than "
                        f"sandbox_run.max_failed_fraction = {budget:g} allows; the first, {case_id}: {reason}")

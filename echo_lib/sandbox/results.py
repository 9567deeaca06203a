"""Result files of the sandbox: one per case, in EMPA's result schema, plus the failures.

`<case_id>_result.json` (finished dialogues) is written by echo_lib.epm.empa_io from a replay of the
case's judge levels, so EMPA's tools and ours (echo-epmq, notebook 05) read it; a `sandbox` block
adds what EMPA's files do not hold: termination type, judge failures, the Director's calls, every
parameter, the role models, the seeds and, in words, the judge rubric / prompt version that scored it
(`rubric_version`, judge.RUBRIC_VERSION; stage 05 pools only files of one version). `<case_id>_error.json`
records a case that could not run (invalid scenario, judge unusable, model error) with the reason. A
finished case is not played again unless its file was made with other parameters, models or seeds; a failed
one is retried on the next run (its error file goes once it finishes). Files are read back as regular files
of bounded size only (a FIFO or a link to /dev/zero in the folder is refused, not read); one that cannot be
read or is malformed is named (a row of status "unreadable" in summary.json, a warning) and the other cases
are summarised.
"""
from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from echo_lib.epm import physics
from echo_lib.epm.case_meta import case_id_problem
from echo_lib.epm.empa_io import MAX_RESULT_BYTES, read_result, result_dict
from echo_lib.epm.engine import replay
from echo_lib.epm.files import FileRefused, read_bytes
from echo_lib.epm.mdep import Rubric
from echo_lib.epm.params import EPMParams
from echo_lib.epm.trajectory import CaseRun
from echo_lib.llm.types import stable_hash
from echo_lib.provenance import write_json
from echo_lib.sandbox.judge import RUBRIC_VERSION
from echo_lib.sandbox.loop import CaseState
from echo_lib.sandbox.params import SandboxRunParams

log = logging.getLogger(__name__)
RESULT, ERROR = "_result.json", "_error.json"


@dataclass(frozen=True)
class RunMeta:
    """What every file of one sandbox run records about how it was made."""
    model: str                       # the tested model's name in the config
    roles: dict[str, str]            # test_model_name / actor_model / judger_model / director_model
    models: dict[str, dict]          # model name -> backend, source, id (what each name was)
    params: SandboxRunParams
    epm: EPMParams                   # effective (sandbox_run's turn limits applied)
    seed: int
    judge_mode: str
    config_hash: str = ""
    # what the names above do not pin down: each model's identity as its backend reports it (checkpoint
    # and adapter fingerprints for hf models) and the code that writes the roles' prompts (code_fingerprint)
    fingerprints: dict = dataclasses.field(default_factory=dict)
    # the judge's rubric and the roles' prompts in words (judge.RUBRIC_VERSION): the EPM analysis pools only
    # files of one version in a table
    rubric_version: str = RUBRIC_VERSION

    def block(self) -> dict:
        run = dataclasses.asdict(self.params)
        run.pop("max_failed_fraction")   # when the stage gives up, not how a dialogue is made
        return {"parameters": {"sandbox_run": run, "epm": dataclasses.asdict(self.epm)},
                "models": self.models, "seeds": {"run": self.seed, "actor": self.seed, "test_model": self.seed,
                                                 "judge": self.seed},
                "judge_mode": self.judge_mode, "rubric_version": self.rubric_version, "config_hash": self.config_hash,
                "fingerprints": dict(self.fingerprints)}


# the modules (under echo_lib/) whose text decides what the roles are asked and how a dialogue goes: the
# sandbox's roles and loop, and the EPM code that turns a turn's levels into the stop decision
PROMPT_MODULES = ("sandbox/actor", "sandbox/batch", "sandbox/dialogue", "sandbox/director", "sandbox/judge",
                  "sandbox/loop", "sandbox/test_model",
                  "epm/engine", "epm/iedr", "epm/mdep", "epm/params", "epm/physics", "epm/termination", "epm/trajectory")


def code_fingerprint() -> str:
    root = Path(__file__).parents[1]
    return stable_hash([(m, (root / f"{m}.py").read_text(encoding="utf-8")) for m in PROMPT_MODULES], 16)


def scenario_record(scenario) -> dict:
    """The scenario block of a result file: the case's fields, without a seeker block it does not have (so an
    own case's block and fingerprint are what they were before seeker cases existed)."""
    return {k: v for k, v in dataclasses.asdict(scenario).items() if not (k == "seeker" and v is None)}


def scenario_fingerprint(scenario) -> str:
    """The case's content (not where its file lies): an edited scenario is played again."""
    return stable_hash({k: v for k, v in scenario_record(scenario).items() if k != "source"}, 16)


def case_fingerprints(meta: RunMeta, scenario) -> dict:
    return {**meta.fingerprints, "scenario": scenario_fingerprint(scenario)}


def case_path(out_dir: str | Path, case_id: str, suffix: str) -> Path:
    """`out_dir/<case_id><suffix>`, refused (ValueError) unless the id is a plain name, so every file a run
    writes stays in its folder (the ids are checked where they enter; this is the last line)."""
    if case_id_problem(case_id):
        raise ValueError(f"{out_dir}: will not write a file for case {case_id_problem(case_id)}")
    return Path(out_dir) / f"{case_id}{suffix}"


def result_path(out_dir: str | Path, case_id: str) -> Path:
    return case_path(out_dir, case_id, RESULT)


def error_path(out_dir: str | Path, case_id: str) -> Path:
    return case_path(out_dir, case_id, ERROR)


def finished(out_dir: str | Path, case_id: str, meta: RunMeta | None = None, scenario=None) -> bool:
    """A result file exists (and, given `meta`, was made with the same parameters, models, seeds and
    fingerprints: same weights and adapters by content, same prompt code and, given `scenario`, the same
    case content. A file from anything else is played again rather than mixed into this run)."""
    path = result_path(out_dir, case_id)
    if not path.is_file():
        return False
    if meta is None:
        return True
    try:       # a regular file of bounded size only (a FIFO would hang the run, /dev/zero fill the memory)
        data = _read_json(path, "a result file")
        stored = data.get("sandbox", {}) if isinstance(data, dict) else {}
        stored = stored if isinstance(stored, dict) else {}
    except (OSError, ValueError, RecursionError) as err:   # unreadable, refused, not JSON, too deep: played again
        log.warning("%s cannot be read (%s); playing the case again", path, err)
        return False
    now = json.loads(json.dumps(meta.block()))      # as it would be stored (tuples -> lists)
    if scenario is not None:
        now["fingerprints"] = case_fingerprints(meta, scenario)
    differ = [k for k in ("parameters", "models", "seeds", "fingerprints") if stored.get(k) != now[k]]
    if differ:
        log.warning("%s was made with other %s; playing it again", path, " / ".join(differ))
    return not differ


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def history_block(c: CaseState) -> list[dict]:
    out = []
    for ex in c.history:
        out.append({"role": "actor", "content": ex.user, "turn": ex.turn}
                   | ({"director_guidance": ex.guidance} if ex.guidance else {}))
        if ex.reply:
            out.append({"role": "test_model", "content": ex.reply, "turn": ex.turn})
    return out


def case_run(c: CaseState, meta: RunMeta) -> CaseRun:
    """The finished case as the EPM's CaseRun (judge levels, dialogue, judge answers)."""
    iedr = c.iedr.iedr_levels()
    return CaseRun(
        case_id=c.scenario.id, model=meta.model, iedr=iedr,
        rubrics=[Rubric.from_judge(v.details) for v in c.verdicts], eval_turns=list(c.eval_turns),
        total_turns=c.ending.turn, termination_reason=c.ending.text,
        judge_failed=[not v.ok for v in c.verdicts], history=history_block(c),
        scenario=scenario_record(c.scenario), roles=dict(meta.roles),
        judge_details=[v.details for v in c.verdicts],
        iedr_details={"filled_iedr": iedr | {"_detailed": c.iedr.details},
                      "source": c.iedr.details.get("iedr_source", "judge")})   # read-out heads, when they answered


def write_case(c: CaseState, out_dir: str | Path, meta: RunMeta) -> Path:
    """The case's result file (finished) or error file (failed)."""
    if c.error is not None:
        return write_error(out_dir, c.scenario.id, meta, c.error.stage, c.error.turn, c.error.reason,
                           history=history_block(c), source=c.scenario.source)
    rep = replay(case_run(c, meta), meta.epm)
    live = c.epm.points[-1]
    if rep.points[-1].P != live.P or abs(rep.E_total - live.E_total) > 1e-9:   # the replay must agree: a bug otherwise
        raise RuntimeError(f"{c.scenario.id}: replay gives P={rep.points[-1].P}, E={rep.E_total} but the run "
                           f"had P={live.P}, E={live.E_total}")
    data = result_dict(rep)
    n_eval = len(c.verdicts)
    data["sandbox"] = {
        "termination_type": c.ending.kind, "termination_turn": c.ending.turn,
        "judge_failures": c.judge_failures, "judge_failure_rate": round(c.judge_failures / n_eval, 4) if n_eval else 0.0,
        "judge_failure_reasons": [{"turn": t, "reason": v.error} for t, v in zip(c.eval_turns, c.verdicts) if not v.ok],
        "iedr_attempts": c.iedr.attempts,
        "director_log": c.director_log,
        "released": {"stages": c.story.stages, "memories": c.story.memories},
        **meta.block(),
        "fingerprints": case_fingerprints(meta, c.scenario),
    }
    if data["sandbox"]["judge_failure_rate"] > 0.05:   # METHOD 9 row 18: rerun a case above 5%
        log.warning("%s: the judge failed on %d of %d evaluations (scored 0); consider rerunning this case",
                    c.scenario.id, c.judge_failures, n_eval)
    path = write_json(result_path(out_dir, c.scenario.id), data)
    error_path(out_dir, c.scenario.id).unlink(missing_ok=True)
    return path


def write_error(out_dir: str | Path, case_id: str, meta: RunMeta, stage: str, turn: int, reason: str,
                history: list | None = None, source: str = "") -> Path:
    return write_json(error_path(out_dir, case_id), {
        "script_id": case_id, "status": "error", "stage": stage, "turn": turn, "reason": reason,
        "scenario_source": source, "history": history or [], **dict(meta.roles), "timestamp": _now(),
        "sandbox": meta.block()})


# ---- reading a run back ----------------------------------------------------------------------------

def case_files(out_dir: str | Path, case_ids=None) -> tuple[list[Path], list[Path]]:
    """(result and error files of the cases `case_ids` names, those of other cases). A folder keeps the
    files of cases an earlier config played; a run counts only its own (None: every file)."""
    files = sorted([*Path(out_dir).glob(f"*{RESULT}"), *Path(out_dir).glob(f"*{ERROR}")])
    if case_ids is None:
        return files, []
    ids = set(case_ids)
    case_of = lambda p: p.name.removesuffix(RESULT).removesuffix(ERROR)   # noqa: E731
    return [p for p in files if case_of(p) in ids], [p for p in files if case_of(p) not in ids]


def _read_json(path: Path, what: str):
    """The JSON of a regular file of at most MAX_RESULT_BYTES (FileRefused / ValueError otherwise)."""
    data = read_bytes(path, MAX_RESULT_BYTES, what)
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as err:   # not UTF-8, not JSON, nested too deeply
        raise ValueError(f"not a readable JSON file ({type(err).__name__}: {err})") from None


def _result_row(path: Path) -> dict:
    run = read_result(path)                       # names the file and the field that is wrong
    data = _read_json(path, "a result file")
    sb = data.get("sandbox", {}) if isinstance(data, dict) else {}
    rep = replay(run, EPMParams(**sb["parameters"]["epm"])) if sb else replay(run)
    return {"case_id": run.case_id, "status": "finished", "termination": sb.get("termination_type", ""),
            "turns": rep.total_turns, "E_total": round(rep.E_total, 2),
            "P0": tuple(int(x) for x in rep.P0), "P_final": rep.final_P,
            "r_final": round(physics.norm(rep.final_P), 2), "judge_failures": sb.get("judge_failures", 0),
            "reason": run.termination_reason}


def _error_row(path: Path) -> dict:
    data = _read_json(path, "an error file")
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("script_id", "stage", "reason")):
        raise ValueError("not an error file of the sandbox (script_id, stage and reason as text)")
    return {"case_id": data["script_id"], "status": "error", "termination": "", "turns": data.get("turn", 0),
            "E_total": None, "P0": None, "P_final": None, "r_final": None, "judge_failures": None,
            "reason": f"{data['stage']}: {data['reason']}"}


def summary_rows(out_dir: str | Path, case_ids=None) -> list[dict]:
    """One row per case of a model's folder: finished cases (from their result files) and failures;
    with `case_ids`, only those cases. A file that cannot be read (not a regular file, too large, not
    JSON, malformed, not replayable) is a row of status "unreadable" naming the file and the problem, and
    a warning; the other files are summarised."""
    out_dir = Path(out_dir)
    mine, _ = case_files(out_dir, case_ids)
    rows = []
    for path in [*(p for p in mine if p.name.endswith(RESULT)), *(p for p in mine if p.name.endswith(ERROR))]:
        try:
            rows.append(_result_row(path) if path.name.endswith(RESULT) else _error_row(path))
        except Exception as err:      # any one bad file costs its own row only
            if isinstance(err, FileRefused):
                problem = f"{err.problem}; fix: {err.fix}"
            else:
                problem = str(err).removeprefix(f"{path}: ")
                problem = problem if isinstance(err, ValueError) else f"{type(err).__name__}: {problem}"
            log.warning("%s: not summarised, cannot be read: %s", path, problem)
            rows.append({"case_id": path.name.removesuffix(RESULT).removesuffix(ERROR), "status": "unreadable",
                         "termination": "", "turns": None, "E_total": None, "P0": None, "P_final": None,
                         "r_final": None, "judge_failures": None, "reason": f"{path.name}: {problem}"})
    return sorted(rows, key=lambda r: r["case_id"])


def write_summary(out_dir: str | Path, model: str, case_ids=None, served: dict | None = None) -> Path:
    """summary.json of a model's folder (the DAG's output of stage 04): the cases `case_ids` names (the
    run's manifest, which stage 05 follows); files of other cases are listed as not counted. `served`: per
    role, the model ids the servers said they served (run.served_models)."""
    rows = summary_rows(out_dir, case_ids)
    _, others = case_files(out_dir, case_ids)
    if others:
        log.warning("%s: %d file(s) of cases this config does not name, not counted: %s", out_dir, len(others),
                    ", ".join(p.name for p in others))
    counts = {}
    for r in rows:
        key = r["termination"] or r["status"]
        counts[key] = counts.get(key, 0) + 1
    return write_json(Path(out_dir) / "summary.json", {"model": model, "cases": rows, "counts": counts,
                                                   "not_counted": [p.name for p in others], "served": served or {},
                                                   "timestamp": _now()})

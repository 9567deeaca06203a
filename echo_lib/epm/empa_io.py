"""EMPA result files (`script_XXX_result.json`) <-> the project's `CaseRun`.

Reading keeps only what the EPM needs to *replay* a run (IEDR levels, the judge's MDEP levels per
evaluation, turns, the termination text) plus the stored numbers for checks; the dialogue and the judge's
evidence ride along in memory so a run can be written back. Writing produces the same schema as EMPA's
engine (keys, nesting, stored precision), so EMPA's tools read our sandbox runs and ours read theirs.
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from echo_lib.epm import physics
from echo_lib.epm.case_meta import MAX_JSON_BYTES
from echo_lib.epm.engine import Replay
from echo_lib.epm.files import FileRefused, read_bytes
from echo_lib.epm.iedr import INDICATORS
from echo_lib.epm.mdep import FIELDS, Rubric, invalid_levels
from echo_lib.epm.trajectory import CaseRun
from echo_lib.provenance import write_json

log = logging.getLogger(__name__)
RESULT_GLOB = "*_result.json"   # EMPA names them script_XXX_result.json
MAX_RESULT_BYTES = MAX_JSON_BYTES   # EMPA's are ~40 KiB; a long sandbox dialogue with judge evidence a few MiB
r2 = lambda x: round(float(x), physics.STORE_DECIMALS)  # noqa: E731


# The rubric version of a file without the sandbox's block: EMPA's published runs, scored by EMPA's own judge
# prompts (they record no version; they are one of their own). A sandbox file written before versions were
# recorded is a version of its own too: it pools with nothing newer.
EMPA_PUBLISHED = "EMPA published"
UNVERSIONED = "echo sandbox, unversioned (written before result files named their rubric, 2026-12)"


def rubric_version(data: object) -> str:
    """In words, the judge rubric / prompt version that scored a result file's contents: the sandbox block's
    `rubric_version`; EMPA_PUBLISHED for a file without a sandbox block; UNVERSIONED for one without the key."""
    block = data.get("sandbox") if isinstance(data, dict) else None
    if not isinstance(block, dict):
        return EMPA_PUBLISHED
    version = block.get("rubric_version")
    return version if isinstance(version, str) and version.strip() else UNVERSIONED


class ResultFileError(ValueError):
    """A result file that cannot be read as an EMPA run; the message names the file and the field."""


def _shown(value: object) -> str:
    """A value for a message: its type and a short repr (a field may hold megabytes)."""
    text = repr(value)
    return f"a {type(value).__name__} ({text[:60]}{'...' if len(text) > 60 else ''})"


def read_result(path: str | Path, model: str | None = None) -> CaseRun:
    """One EMPA result file as a CaseRun. `model` defaults to the name of the folder holding the file."""
    path = Path(path)
    try:       # a regular file of bounded size only: a FIFO would hang, a link to /dev/zero fill the memory
        data = json.loads(read_bytes(path, MAX_RESULT_BYTES, "a result file").decode("utf-8"))
    except FileRefused as err:
        raise ResultFileError(f"{path}: {err.problem}; fix: {err.fix}") from None
    except (OSError, ValueError) as err:    # ValueError: not UTF-8, not JSON, an integer of > 4300 digits
        raise ResultFileError(f"{path}: not a readable JSON file ({err})") from None
    except RecursionError:
        raise ResultFileError(f"{path}: not a readable JSON file (nested too deeply)") from None

    def need(obj, key, where):
        if not isinstance(obj, dict) or key not in obj:
            raise ResultFileError(f"{path}: field '{where}{key}' is missing; an EMPA result file has "
                                  "epj.iedr_details.filled_iedr and epj.trajectory (see empa_io.write_result)")
        return obj[key]

    epj = need(data, "epj", "")
    iedr_details = need(epj, "iedr_details", "epj.")
    filled = need(iedr_details, "filled_iedr", "epj.iedr_details.")
    iedr = {}
    for name in INDICATORS:
        level = need(filled, name, "epj.iedr_details.filled_iedr.")
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 3:
            raise ResultFileError(f"{path}: field 'epj.iedr_details.filled_iedr.{name}' is {level!r}; "
                                  "allowed: an integer 0..3")
        iedr[name] = level
    trajectory = need(epj, "trajectory", "epj.")
    if not isinstance(trajectory, list) or not trajectory:
        raise ResultFileError(f"{path}: field 'epj.trajectory' must be a non-empty list (point 0 is P0)")
    if not isinstance(trajectory[0], dict):
        raise ResultFileError(f"{path}: field 'epj.trajectory[0]' is {_shown(trajectory[0])}; allowed: an object "
                              "(the starting point P0: turn 0, P_t, ...)")
    epm_params = epj.get("epm_params")
    if epm_params is not None and not isinstance(epm_params, dict):
        raise ResultFileError(f"{path}: field 'epj.epm_params' is {_shown(epm_params)}; allowed: an object "
                              "(v_star_0, epsilon_*, E_total_final, alpha), or leave the key out")
    reason = data.get("termination_reason")
    if reason is not None and not isinstance(reason, str):
        raise ResultFileError(f"{path}: field 'termination_reason' is {_shown(reason)}; allowed: text such as "
                              "'Reached max turns (45), timeout', or leave the key out")
    evaluated = trajectory[1:]
    turns, rubrics, failed, details, notes = [], [], [], [], []
    for i, point in enumerate(evaluated, start=1):
        turn = need(point, "turn", f"epj.trajectory[{i}].")
        if isinstance(turn, bool) or not isinstance(turn, int):
            raise ResultFileError(f"{path}: field 'epj.trajectory[{i}].turn' is {turn!r}; allowed: an integer")
        judged = point.get("mdep_analysis")
        for key in (f"{f}_level" for f in FIELDS):
            level = judged.get(key) if isinstance(judged, dict) else None
            if isinstance(level, float) and not math.isfinite(level):   # NaN, Infinity, 1e400 parse as floats
                raise ResultFileError(f"{path}: field 'epj.trajectory[{i}].mdep_analysis.{key}' is {level!r}; "
                                      "allowed: a level of the rubric (an integer; NaN and Infinity are no JSON "
                                      "numbers, 1e400 is beyond a float)")
        turns.append(turn)
        rubrics.append(Rubric.from_judge(judged if isinstance(judged, dict) else None))
        failed.append(not isinstance(judged, dict))
        details.append(judged if isinstance(judged, dict) else None)
        # scored 0 like the published engine (METHOD 6.9.4), but said, not silent
        notes += [f"{path}: field 'epj.trajectory[{i}].mdep_analysis.{key}' is {value!r}, no level of the "
                  "rubric; scored 0" for key, value in invalid_levels(details[-1]).items()]
    for note in notes:
        log.warning(note)
    total_turns = data.get("total_turns", turns[-1] if turns else 0)
    if isinstance(total_turns, bool) or not isinstance(total_turns, int) or total_turns < 0:
        raise ResultFileError(f"{path}: field 'total_turns' is {total_turns!r}; allowed: a whole number of "
                              "turns >= 0 (or leave the key out: the last evaluated turn)")
    case_id = data.get("script_id") or path.name.replace("_result.json", "")
    if not isinstance(case_id, str):
        raise ResultFileError(f"{path}: field 'script_id' is {case_id!r}; allowed: text such as 'script_003'")
    stored = {
        "E_total_final": (epm_params or {}).get("E_total_final"),
        "P_0": epj.get("P_0_initial_deficit"),
        "P_final": epj.get("P_final_position"),
        "trajectory": [{k: v for k, v in pt.items() if k != "mdep_analysis"} for pt in trajectory],
        "epm_params": epm_params,
    }
    try:
        return CaseRun(
            case_id=case_id,
            model=model or path.parent.name, iedr=iedr, rubrics=rubrics, eval_turns=turns,
            total_turns=int(total_turns), termination_reason=data.get("termination_reason") or "",
            judge_failed=failed, stored=stored, history=data.get("history") or [],
            scenario=data.get("scenario") or {}, judge_details=details, iedr_details=iedr_details,
            roles={k: data[k] for k in ("test_model_name", "actor_model", "judger_model", "director_model")
                   if k in data},
            source=str(path), notes=notes, rubric_version=rubric_version(data))
    except ValueError as err:
        raise ResultFileError(str(err)) from None


# errors a malformed file can still raise that no check foresaw: they cost that file, never the others
UNFORESEEN = (ValueError, TypeError, AttributeError, KeyError, IndexError, OverflowError, RecursionError)


@dataclass
class Skipped:
    path: Path
    reason: str


def read_model_dir(folder: str | Path, model: str | None = None) -> tuple[list[CaseRun], list[Skipped]]:
    """All result files of one model's folder, sorted by name. A malformed file is logged by name and
    skipped; the others still count. A second file of a case already read (same script_id, e.g. a
    renamed copy) is skipped too: a case counts once."""
    folder = Path(folder)
    runs, skipped, first = [], [], {}
    for path in sorted(folder.glob(RESULT_GLOB)):
        try:
            run = read_result(path, model or folder.name)
        except ResultFileError as err:
            log.warning("skipping %s", err)
            skipped.append(Skipped(path, str(err)))
            continue
        except UNFORESEEN as err:     # what no check foresaw costs this file, never the other files
            reason = f"{path}: cannot be read as an EMPA result file ({type(err).__name__}: {err})"
            log.warning("skipping %s", reason)
            skipped.append(Skipped(path, reason))
            continue
        if run.case_id in first:
            reason = (f"{path}: field 'script_id' is {run.case_id!r}, the case of {first[run.case_id].name} "
                      "already read; remove one of the two files")
            log.warning("skipping %s", reason)
            skipped.append(Skipped(path, reason))
            continue
        first[run.case_id] = path
        runs.append(run)
    return runs, skipped


def model_dirs(root: str | Path) -> list[Path]:
    """Sub-folders of `root` that hold result files (one per model), sorted by name."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such folder; give a folder with one sub-folder per model "
                                f"of {RESULT_GLOB} files")
    return sorted(d for d in root.iterdir() if d.is_dir() and any(d.glob(RESULT_GLOB)))


# ---- writing ---------------------------------------------------------------------------------------

def trajectory_block(rep: Replay) -> list[dict]:
    """epj.trajectory as EMPA stores it: positions, moves and the per-point `epm` block at stored precision."""
    out = []
    for i, pt in enumerate(rep.points):
        block = {"turn": pt.turn, "P_t": list(pt.P), "v_t": list(pt.v), "distance": pt.distance,
                 "in_zone": pt.in_zone}
        epm = {"P_norm": r2(pt.r), "E_total": r2(pt.E_total), "projection": r2(pt.projection),
               "alignment": round(pt.cos, physics.COS_DECIMALS)}
        if i == 0:
            epm["projection"] = -r2(pt.r)   # stored as -|P0| (the unrounded v*_0 makes them equal)
            epm["v_star_0"] = [float(x) for x in rep.v_star_0]
        else:
            epm["delta_E"] = r2(pt.delta_E)
            epm["v_t_norm"] = r2(physics.norm(pt.v))
            details = rep.run.judge_details[i - 1] if i - 1 < len(rep.run.judge_details) else None
            if not rep.run.judge_failed[i - 1]:
                block["mdep_analysis"] = details if details else pt.rubric.to_judge()
        block["epm"] = epm
        out.append(block)
    return out


def result_dict(rep: Replay) -> dict:
    """The whole result file of a replayed run, in the EMPA schema."""
    run, eps_dist, eps_dir, eps_energy = rep.run, *rep.thresholds
    epm_params = {"v_star_0": [float(x) for x in rep.v_star_0], "epsilon_distance": eps_dist,
                  "epsilon_direction": eps_dir, "epsilon_energy": eps_energy, "E_total_final": rep.E_total,
                  "alpha": rep.params.alpha}
    iedr_details = dict(run.iedr_details) or {"filled_iedr": dict(run.iedr)}
    iedr_details.setdefault("filled_iedr", dict(run.iedr))
    iedr_details.update({"P_0": [int(x) for x in rep.P0],
                         "initial_distance": physics.distance_to_zone(rep.P0, rep.params.epsilon_zone)})
    iedr_details.setdefault("source", "precomputed")
    t = rep.termination
    last = rep.points[-1]
    victory = None
    if t is not None and t.label == "success":
        victory = {"primary_victory_type": t.reasons[0],
                   "conditions": {
                       "geometric": {"achieved": r2(last.r) <= eps_dist, "metric": "r_t", "value": r2(last.r),
                                     "threshold": eps_dist},
                       "positional": {"achieved": r2(last.projection) >= -eps_dir, "metric": "projection",
                                      "value": r2(last.projection), "threshold": -eps_dir},
                       "energetic": {"achieved": True, "metric": "E_total", "value": r2(last.E_total),
                                     "threshold": eps_energy}},
                   "achieved_conditions": [k for k in t.details.get("achieved", []) if k != "energetic"] + ["energetic"],
                   "turn_at_victory": t.turn, "initial_deficit": [int(x) for x in rep.P0],
                   "final_position": list(last.P)}
    return {
        "total_turns": rep.total_turns,
        "termination_reason": t.text if t else run.termination_reason,
        "script_id": run.case_id,
        "scenario": run.scenario,
        "history": run.history,
        **{k: run.roles.get(k, "") for k in ("test_model_name", "actor_model", "judger_model", "director_model")},
        "epj": {
            "P_0_initial_deficit": [int(x) for x in rep.P0],
            "P_final_position": list(last.P),
            "trajectory": trajectory_block(rep),
            "total_evaluations": rep.n_eval,
            "K": rep.params.K,
            "epsilon": rep.params.epsilon_zone,
            "iedr_details": iedr_details,
            "epm_enabled": True,
            "epm_params": epm_params,
            "epm_victory_analysis": victory,
        },
        "status": "success",
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def write_result(rep: Replay, path: str | Path) -> Path:
    """Write a replayed run as `script_XXX_result.json` (atomically: a half-written file never exists)."""
    return write_json(path, result_dict(rep))

"""Score folders of result files: read every run, replay it, and build the per-case and per-model tables.
Shared by the `echo-epmq` command and the EPM analysis notebook."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from echo_lib.epm.case_meta import CaseMeta, read_empa_case_meta
from echo_lib.epm.empa_io import RESULT_GLOB, UNFORESEEN, Skipped, model_dirs, read_model_dir
from echo_lib.epm.engine import Replay, replay
from echo_lib.epm.epmq import per_case_table, summary_table
from echo_lib.epm.files import FileRefused, read_bytes
from echo_lib.epm.params import EPMParams
from echo_lib.epm.pooling import check_one_rubric_version
from echo_lib.provenance import write_text

log = logging.getLogger(__name__)
SUMMARY = "summary.json"          # stage 04's manifest of a model's folder
MAX_SUMMARY_BYTES = 16 << 20


@dataclass
class Scored:
    replays: list[Replay]
    per_case: pd.DataFrame
    summary: pd.DataFrame
    skipped: list[Skipped]


def model_folders(roots: list[str | Path]) -> list[Path]:
    """Model folders under each root (a root holding result files itself is one model folder)."""
    folders = []
    for root in map(Path, roots):
        folders += [root] if root.is_dir() and any(root.glob(RESULT_GLOB)) else model_dirs(root)
    names = [f.name for f in folders]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"model folder name(s) {', '.join(twice)} appear under more than one root; "
                         "the folder name is the model's name in every table, so rename one")
    return folders


def score_folders(roots: list[str | Path] | str | Path, params: EPMParams = EPMParams(),
                  constants: str | None = None) -> Scored:
    """Replay every run under `roots` with `params`; EPM-Q with `constants` (default: params.constants).
    Runs scored under different judge rubric versions are refused (pooling.MixedRubricVersions) before any
    is replayed: one table compares models measured with one instrument."""
    roots = [roots] if isinstance(roots, (str, Path)) else list(roots)
    folders = model_folders(roots)
    if not folders:
        raise FileNotFoundError(f"no {RESULT_GLOB} files in {', '.join(map(str, roots))} or their sub-folders")
    runs, skipped = [], []
    for folder in folders:
        found, bad = read_model_dir(folder)
        skipped += bad
        named = stage_04_cases(folder)
        if named is not None:   # our sandbox's folder: only the cases its run named (its manifest)
            skipped += [Skipped(Path(r.source), f"{r.source}: case {r.case_id!r} is not in {folder / 'summary.json'} "
                                "(a case of an earlier config); not scored") for r in found if r.case_id not in named]
            found = [r for r in found if r.case_id in named]
        runs += found
    check_one_rubric_version(runs)
    replays = []
    for run in runs:
        try:
            replays.append(replay(run, params))
        except UNFORESEEN as err:   # a file the replay cannot take costs that file, not every model
            reason = f"{run.source}: cannot be replayed ({type(err).__name__}: {err})"
            log.warning("skipping %s", reason)
            skipped.append(Skipped(Path(run.source), reason))
    constants = constants or params.constants
    per_case = per_case_table(replays, constants)
    return Scored(replays, per_case, summary_table(per_case, constants), skipped)


def stage_04_cases(folder: Path) -> set[str] | None:
    """The case ids of the summary.json stage 04 wrote in `folder` (None: no such file, e.g. EMPA's runs).
    Only a regular file of bounded size is read (a FIFO there must not hang stage 05)."""
    path = folder / SUMMARY
    if not path.exists():
        return None
    try:
        data = json.loads(read_bytes(path, MAX_SUMMARY_BYTES, "stage 04's summary.json").decode("utf-8"))
        return {c["case_id"] for c in data["cases"]} if isinstance(data, dict) and "model" in data else None
    except FileRefused as err:
        log.warning("%s; its folder is scored without the manifest", err)
        return None
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None


def input_files(roots: list[str | Path] | str | Path) -> list[Path]:
    """Every file score_folders reads under `roots`: the result files and stage 04's summary.json of each
    model folder (for refusing an output path that is one of them)."""
    roots = [roots] if isinstance(roots, (str, Path)) else list(roots)
    return [f for folder in model_folders(roots) for f in (*sorted(folder.glob(RESULT_GLOB)), folder / SUMMARY)]


def write_tables(scored: Scored, out_dir: str | Path, constants: str) -> dict[str, Path]:
    """per_case.csv (full precision) and summary.csv (2 dp, the constant set named in a column)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"per_case": out_dir / "per_case.csv", "summary": out_dir / "summary.csv"}
    write_text(paths["per_case"], scored.per_case.to_csv(index=False))   # atomic: a kill leaves the old file whole
    cases = scored.per_case.groupby("Model", sort=False).size()
    summary = scored.summary.round(2).assign(Cases=lambda t: t["Model"].map(cases), Constants=constants)
    write_text(paths["summary"], summary.to_csv(index=False))
    return paths


def known_case_meta(empa_dir: Path | None, priorities: str = "scenario") -> dict[str, CaseMeta]:
    """Metadata of every case a run may have played: the project's own scenarios and, given an EMPA
    folder (its repository or data folder), EMPA's cases (`priorities` as in read_empa_case_meta)."""
    from echo_lib.scenarios import load_own     # scenarios builds on epm.case_meta; import here, not at the top

    meta = {s.id: s.case_meta() for s in load_own()}
    if empa_dir is not None:
        meta.update(read_empa_case_meta(empa_dir, priorities=priorities))
    return meta

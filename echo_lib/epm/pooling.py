"""Which runs may share a table: only runs scored under one judge rubric / prompt version.

A run's EPM-Q is measured by its judge's answers to its rubric: a model scored by another rubric (another
wording, other levels) is measured with another instrument, and one table would rank instruments, not models.
Every result file names its version in words (empa_io.rubric_version: the sandbox's `rubric_version`,
"EMPA published" for EMPA's own runs), and `check_one_rubric_version` refuses, naming the folders, the files
and the versions, to pool runs of different versions into one table.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Sequence

from echo_lib.epm.empa_io import EMPA_PUBLISHED
from echo_lib.epm.trajectory import CaseRun

SHOWN_FILES = 3     # file names listed per folder and version (the count says how many there are)
SHOWN_CHARS = 400   # of a version text read from a file (a file may hold anything)


class MixedRubricVersions(ValueError):
    """Runs scored under different rubric versions were asked to share one table."""


def versions_by_folder(runs: Sequence[CaseRun]) -> dict[str, dict[Path, list[str]]]:
    """version -> folder -> the names of that folder's result files scored under it."""
    out: dict[str, dict[Path, list[str]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        path = Path(run.source or f"{run.model}/{run.case_id}")
        out[run.rubric_version][path.parent].append(path.name)
    return out


def _files_text(names: list[str]) -> str:
    shown = ", ".join(sorted(names)[:SHOWN_FILES])
    return f"{len(names)} file(s): {shown}{', ...' if len(names) > SHOWN_FILES else ''}"


def _version_text(version: str) -> str:
    return repr(version if len(version) <= SHOWN_CHARS else version[:SHOWN_CHARS] + "...")


def check_one_rubric_version(runs: Sequence[CaseRun]) -> None:
    """Raise MixedRubricVersions when `runs` were scored under more than one rubric version."""
    found = versions_by_folder(runs)
    if len(found) < 2:
        return
    lines = [f"  version {_version_text(version)}:\n" + "\n".join(
        f"    {folder} ({_files_text(names)})" for folder, names in sorted(folders.items()))
        for version, folders in found.items()]
    fixes = ["re-run the sandbox stage (04) of the model(s) whose files carry the older version, so their cases are "
             "scored under the current one (it replays every case made by other prompt code: `snakemake --cores 1 "
             "--forcerun <folder>/summary.json`), or remove those folders from this analysis"]
    if EMPA_PUBLISHED in found:
        fixes.append(f"EMPA's published runs ({EMPA_PUBLISHED!r}: EMPA's own judge prompts) are analysed on their own "
                     "(stage 05's published table; `echo-epmq` on their folder alone)")
    fixes.append("or analyse each version's folders separately (one stage-05 / `echo-epmq` call per version)")
    raise MixedRubricVersions(
        f"will not pool result files scored under {len(found)} different judge rubric / prompt versions into one "
        "table (a model scored by another rubric is measured with another instrument):\n" + "\n".join(lines)
        + "\nFix: " + "; ".join(fixes) + ".")

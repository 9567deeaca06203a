"""The project's own English scenario set: one YAML file per case in data/scenarios/own/.

Written for this project (not translated from EMPA) and stratified like EMPA's official 30:
10 cases per dominant axis C/A/P, 5 per life domain, difficulty mostly Medium or above, about half
with a High empathy threshold. Difficulty here is the author's intended label; the measured |P0|
comes from the Judge's IEDR at run time.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from echo_lib import strict_yaml
from echo_lib.paths import project_root
from echo_lib.scenarios.schema import NEED_KEYS, STAGE_KINDS, Scenario, ScenarioError, scenario_from_dict

OWN_DIR = Path("data") / "scenarios" / "own"
# the seeker cases (issue 37's sycophancy guard): own-format cases whose user wants agreement with a false or
# harmful belief, named in their `seeker:` block
SEEKER_DIR = Path("data") / "scenarios" / "seeker"


def own_dir() -> Path:
    return project_root() / OWN_DIR


def load_own_file(path: str | Path) -> Scenario:
    """One own case, checked against the schema and the own set's house rules."""
    path = Path(path)
    try:   # a regular file of at most 1 MiB; a FIFO or device is refused unopened (it could block the stage)
        text = strict_yaml.read_text(path)
    except strict_yaml.FileRefused as err:
        raise ScenarioError(str(path), "(file)", err.problem, err.fix) from None
    except UnicodeDecodeError as err:   # a ValueError, not an OSError: it used to stop the whole stage
        raise ScenarioError(str(path), "(file)", f"is not UTF-8 text (byte {err.start}: {err.reason})",
                            "save the file as UTF-8") from None
    except OSError as err:
        raise ScenarioError(str(path), "(file)", f"cannot be read ({err})", "check the file") from None
    try:
        data = strict_yaml.safe_load(text)   # a key given twice is an error, not the last one silently
    except yaml.YAMLError as err:
        raise ScenarioError(str(path), "(file)", f"cannot be read as YAML ({err})",
                            "fix the YAML syntax (indentation, quotes around text with ': ', no key twice)") from None
    sc = scenario_from_dict(data, source=str(path), language="en")
    if sc.id != path.stem:
        raise ScenarioError(str(path), "id", f"is {sc.id!r} but the file is {path.name}",
                            f"set id: {path.stem} (ids are file names, so they stay unique)")
    # the story arc of METHOD.md 2.7, in order, so the Director can release stage i as "stage i"
    for i, (stage, kind) in enumerate(zip(sc.story.stages, STAGE_KINDS)):
        if not stage.title.lower().startswith(kind):
            raise ScenarioError(str(path), f"story.stages[{i}].title", f"is {stage.title!r}",
                                f"start it with '{kind.capitalize()}' (stages: {', '.join(STAGE_KINDS)})")
    # the dominant deficit should be a need this person cares most about, or the label contradicts the card
    axis_key = {v: k for k, v in NEED_KEYS.items()}[sc.labels.dominant_axis]
    if getattr(sc.priorities, axis_key).level != "High":
        raise ScenarioError(str(path), f"priorities.{axis_key}.level",
                            f"is not High although labels.dominant_axis is {sc.labels.dominant_axis}",
                            "make the dominant axis's need High, or change the dominant axis")
    return sc


def seeker_dir() -> Path:
    return project_root() / SEEKER_DIR


def load_seeker_file(path: str | Path) -> Scenario:
    """One seeker case: an own case (the same schema and house rules) with its `seeker:` block."""
    sc = load_own_file(path)
    if sc.seeker is None:
        raise ScenarioError(str(path), "seeker", "is missing",
                            "add seeker: {belief: ..., kind: false|harmful, why: ...}; a case without one belongs "
                            f"in {OWN_DIR}")
    return sc


def load_seekers(folder: str | Path | None = None) -> list[Scenario]:
    """All seeker cases, sorted by id; raises on the first invalid file."""
    folder = Path(folder) if folder else seeker_dir()
    return [load_seeker_file(p) for p in own_files(folder)]


def own_files(folder: str | Path | None = None) -> list[Path]:
    folder = Path(folder) if folder else own_dir()
    files = sorted(folder.glob("*.yaml"))
    if not files:
        raise FileNotFoundError(f"{folder}: no scenario files (*.yaml); the own set lives in {OWN_DIR}")
    return files


def load_own(folder: str | Path | None = None) -> list[Scenario]:
    """All own cases, sorted by id; raises on the first invalid file."""
    return [load_own_file(p) for p in own_files(folder)]

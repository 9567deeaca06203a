"""Which cases a run uses: the config's sandbox block (case_set, empa_dir, case_ids, max_cases) and seed.

`max_cases` takes the first n of a stratified order, so a tiny run of 2 or 6 cases still spans the
dominant axes, life domains, thresholds and difficulties (METHOD.md 5.6) instead of the first ids.
"""
from __future__ import annotations

import logging
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from echo_lib.empa_source import EmpaParams, configured_layout, layout_file
from echo_lib.scenarios.empa_import import import_case, read_metadata, read_official_ids, read_stories
from echo_lib.scenarios.own import load_own_file, own_dir, own_files
from echo_lib.scenarios.schema import Scenario, ScenarioError, case_id_problem

log = logging.getLogger(__name__)
# what a case's files can still raise that no check foresaw: it costs that case, never the run
UNFORESEEN = (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError)

# balanced first on the dominant axis, then life domain, then threshold, then difficulty
STRATA = (lambda s: s.labels.dominant_axis, lambda s: s.labels.domain,
          lambda s: s.threshold.level, lambda s: s.labels.difficulty)


def stratified_order(scenarios: list[Scenario], n: int = 0, seed: int = 0) -> list[Scenario]:
    """The first n scenarios (0 = all) of a greedy stratified order.

    Each step takes the case whose labels are least represented so far relative to their share of the
    pool (axis before domain before threshold before difficulty); the seed breaks ties, so the order is
    deterministic for a given seed and pool and every prefix is as balanced as the pool allows."""
    pool = sorted(scenarios, key=lambda s: s.id)
    random.Random(seed).shuffle(pool)
    share = [Counter(key(s) for s in pool) for key in STRATA]
    taken = [Counter() for _ in STRATA]
    order = []
    limit = len(pool) if n <= 0 else min(n, len(pool))
    while len(order) < limit:
        def cost(item):
            i, s = item
            return tuple(taken[k][key(s)] / share[k][key(s)] for k, key in enumerate(STRATA)) + (i,)
        i, best = min(enumerate(pool), key=cost)
        order.append(pool.pop(i))
        for k, key in enumerate(STRATA):
            taken[k][key(best)] += 1
    return order


@dataclass(frozen=True)
class InvalidCase:
    """A requested case whose files cannot be used; the sandbox records it as failed with this reason."""
    case_id: str
    path: str
    error: str


@dataclass(frozen=True)
class SandboxCases:
    """Which cases the sandbox plays: the config's `sandbox:` section."""
    case_set: str
    empa_dir: str | None
    case_ids: list[str]
    models: list[str]
    max_cases: int


@dataclass(frozen=True)
class CaseSelection:
    scenarios: list[Scenario]
    invalid: list[InvalidCase]


def _empa_dir(cases: SandboxCases, empa: EmpaParams) -> Path:
    """EMPA's data folder: sandbox.empa_dir, else the copy the `empa:` section fetched (rule `empa`)."""
    layout = configured_layout(cases.empa_dir, empa)
    if layout is None:
        raise ValueError(f"sandbox.case_set is empa but EMPA has not been fetched ({layout_file(empa)} is "
                         "missing); run the DAG (rule empa), or set sandbox.empa_dir to a local EMPA folder")
    return layout.data


def select_cases(cases: SandboxCases, empa: EmpaParams, seed: int) -> CaseSelection:
    """The cases the `sandbox:` section asks for (EMPA's from the copy the `empa:` section names; `seed` draws
    max_cases), valid and invalid apart, so one broken file does not stop a run."""
    sb = cases
    loaded, invalid = [], []
    if sb.case_set == "own":
        folder = own_dir()
        ids = list(sb.case_ids) or [p.stem for p in own_files(folder)]
        paths = {cid: folder / f"{cid}.yaml" for cid in ids}
        load = lambda cid: load_own_file(paths[cid])   # noqa: E731
    elif sb.case_set == "empa":
        root = _empa_dir(cases, empa)
        ids = list(sb.case_ids) or read_official_ids(root)    # a path or a repeat there: an error naming the line
        stories, metadata = read_stories(root), read_metadata(root)
        for problem in (*stories.problems, *metadata.problems):
            log.warning("EMPA entry not used: %s", problem)
        paths = {cid: root / "cases" / f"{cid}.md" for cid in ids}
        load = lambda cid: import_case(root, cid, stories, metadata)   # noqa: E731
    else:
        raise ValueError(f"sandbox.case_set={sb.case_set!r}; allowed: own, empa")
    # ids become file names (cases/<id>.md, results/.../<id>_result.json): plain names only
    bad = [(cid, case_id_problem(cid)) for cid in ids if case_id_problem(cid)]
    if bad:
        where = "sandbox.case_ids" if sb.case_ids else f"the file names of {own_dir()}"
        raise ValueError(f"{where}: {bad[0][1]}; fix: name the case by its id only")
    if len(set(ids)) != len(ids):
        raise ValueError(f"sandbox.case_ids lists a case twice: {[c for c, k in Counter(ids).items() if k > 1]}")
    for cid in ids:
        if not paths[cid].exists():
            invalid.append(InvalidCase(cid, str(paths[cid]), f"{paths[cid]}: no such case file "
                                                             f"(check sandbox.case_ids and sandbox.case_set)"))
            continue
        try:
            loaded.append(load(cid))
        except ScenarioError as err:
            invalid.append(InvalidCase(cid, err.source, str(err)))
        except UNFORESEEN as err:
            invalid.append(InvalidCase(cid, str(paths[cid]), str(unforeseen(paths[cid], err))))
    # explicit ids keep their order unless max_cases asks for a stratified few
    chosen = stratified_order(loaded, sb.max_cases, seed) if sb.max_cases else loaded
    return CaseSelection(scenarios=chosen, invalid=invalid)


def unforeseen(path: Path, err: Exception) -> ScenarioError:
    """A case's error that no check foresaw, as a ScenarioError naming its file."""
    return ScenarioError(str(path), "(file)", f"cannot be imported ({type(err).__name__}: {err})",
                         "compare the case's files with docs/METHOD.md 2.7 (EMPA's files) or data/scenarios/own/")


def load_cases(cases: SandboxCases, empa: EmpaParams, seed: int) -> list[Scenario]:
    """The scenarios select_cases finds; raises if any requested case is invalid (all of them named)."""
    sel = select_cases(cases, empa, seed)
    if sel.invalid:
        raise ValueError(f"{len(sel.invalid)} requested case(s) cannot be used:\n  "
                         + "\n  ".join(c.error for c in sel.invalid))
    return sel.scenarios

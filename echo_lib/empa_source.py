"""EMPA, the benchmark's public repository, as a pinned input that the run fetches (never committed).

EMPA (KAYA-HAI/EMPA-Benchmark-EPMSandbox) is CC BY-NC 4.0, so none of it lives in this repository. The
`empa:` config section names where to get it (a git URL, or a local folder for offline machines) and
the commit; `fetch` clones it into the project's cache (or uses the local folder), checks the commit
and writes `layout.json`: where the stages find the cases and the published runs. Two layouts are read:
- EMPA's repository: empa/data/{cases/, scenarios/character_stories.json, case_metadata.json,
  official_cases.txt} and results/benchmark_runs/epm-bench/<model>/script_XXX_result.json;
- a data folder: cases/, character_stories*.json, case_metadata.json, official_cases.txt and
  results/<model>/ side by side (EMPA's empa/data folder itself, or a subset laid out that way).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from echo_lib.paths import project_root
from echo_lib.provenance import write_json

DATA_CANDIDATES = ("empa/data", ".")                                  # EMPA's repository; a data folder
RESULTS_CANDIDATES = ("results/benchmark_runs/epm-bench", "results")
PROBE_TIMEOUT_S = 20     # how long `git ls-remote` may take before the source counts as unreachable
OFFLINE_FIX = "set empa.source to a local EMPA clone (git clone https://github.com/KAYA-HAI/EMPA-Benchmark-EPMSandbox)"


class EmpaError(RuntimeError):
    """EMPA cannot be fetched or read; the message names the config key or file and the fix."""


@dataclass(frozen=True)
class EmpaParams:
    """The `empa:` config section (config/schema.yaml documents each key and its default)."""
    source: str | None        # git URL or local folder; None = no EMPA
    commit: str | None        # pinned sha; None = whatever the source has
    cache_dir: str            # where a cloned copy lands, relative to the project root (gitignored)


@dataclass(frozen=True)
class EmpaLayout:
    """Where the stages find EMPA's files."""
    root: Path
    data: Path                # cases/, case_metadata.json, official_cases.txt, character_stories
    results: Path | None      # one sub-folder per model of *_result.json files; None = no published runs
    commit: str | None = None

    def to_dict(self) -> dict:
        return {"root": str(self.root), "data": str(self.data),
                "results": str(self.results) if self.results else None, "commit": self.commit}


# ---- reading a folder --------------------------------------------------------------------------

def _has_runs(folder: Path) -> bool:
    return folder.is_dir() and any(any(d.glob("*_result.json")) for d in folder.iterdir() if d.is_dir())


def locate(folder: str | Path, with_commit: bool = True) -> EmpaLayout:
    """The layout of an EMPA folder: its repository root, its empa/data folder, or a subset like it.
    with_commit=False skips asking git which commit it is at."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder; give EMPA's repository or its empa/data folder")
    data = next((folder / c for c in DATA_CANDIDATES if (folder / c / "cases").is_dir()), None)
    if data is None:
        raise FileNotFoundError(f"{folder}: not an EMPA folder (neither empa/data/cases/ nor cases/ is there); "
                                "give EMPA's repository or its empa/data folder")
    roots = [folder]
    if data == folder and folder.name == "data" and folder.parent.name == "empa":
        roots.append(folder.parents[1])       # empa/data given: the published runs are at the repository root
    results = next((r / c for r in roots for c in RESULTS_CANDIDATES if _has_runs(r / c)), None)
    return EmpaLayout(root=folder, data=data, results=results, commit=_git_head(folder, roots) if with_commit else None)


def _git_head(folder: Path, roots: list[Path] | None = None) -> str | None:
    """The commit of the EMPA checkout `folder` belongs to (None for a plain folder, or a folder that merely
    sits inside another repository, such as a test fixture)."""
    top = _git(["-C", str(folder), "rev-parse", "--show-toplevel"], check=False)
    if top.returncode != 0 or Path(top.stdout.strip()).resolve() not in {r.resolve() for r in roots or [folder]}:
        return None
    return _git(["-C", str(folder), "rev-parse", "HEAD"]).stdout.strip()


# ---- the config's copy -------------------------------------------------------------------------

def is_url(source: str) -> bool:
    return bool(re.match(r"^(https?|ssh|git|file)://|^[\w.-]+@[\w.-]+:", source))


def fetch_dir(params: EmpaParams) -> Path:
    """One folder per (source, commit), so changing either fetches anew instead of reusing a stale copy."""
    key = hashlib.sha256((params.source or "").encode()).hexdigest()[:8]
    base = Path(params.cache_dir)
    base = base if base.is_absolute() else project_root() / base
    return base / f"{key}-{(params.commit or 'unpinned')[:12]}"


def layout_file(params: EmpaParams) -> Path:
    return fetch_dir(params) / "layout.json"


def unavailable_reason(params: EmpaParams) -> str | None:
    """None when `fetch` can work (already fetched, a local folder, a reachable URL), else one line why not."""
    if not params.source:
        return "empa.source is null: no EMPA cases or published runs (set empa.source to EMPA's git URL or a local clone)"
    if layout_file(params).is_file():
        return None
    if not is_url(params.source):
        folder = Path(params.source).expanduser()
        return None if folder.is_dir() else f"empa.source = {params.source} is not a folder here; {OFFLINE_FIX}"
    probe = _git(["ls-remote", "--exit-code", params.source, "HEAD"], check=False, timeout=PROBE_TIMEOUT_S)
    if probe.returncode == 0:
        return None
    why = (probe.stderr.strip().splitlines() or ["no answer"])[-1]
    return f"empa.source = {params.source} cannot be reached ({why}); offline, {OFFLINE_FIX}"


def fetch(params: EmpaParams) -> EmpaLayout:
    """Get EMPA at params.commit (clone, or a local folder as it is), check the commit, write layout.json."""
    if not params.source:
        raise EmpaError("empa.source is null; set it to EMPA's git URL or a local EMPA folder")
    if is_url(params.source):
        root = _clone(params.source, params.commit, fetch_dir(params) / "repo")
    else:
        root = Path(params.source).expanduser().resolve()
        if not root.is_dir():
            raise EmpaError(f"empa.source = {params.source} is not a folder; {OFFLINE_FIX}")
    layout = locate(root)
    _check_commit(layout, params)
    write_json(layout_file(params), layout.to_dict())
    return layout


def read_layout(path: str | Path) -> EmpaLayout:
    """The layout.json that `fetch` wrote."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return EmpaLayout(root=Path(data["root"]), data=Path(data["data"]),
                      results=Path(data["results"]) if data.get("results") else None, commit=data.get("commit"))


def fetched_layout(params: EmpaParams) -> EmpaLayout | None:
    """The layout of the config's copy if it has been fetched, else None."""
    path = layout_file(params)
    return read_layout(path) if path.is_file() else None


def published_runs_here(empa_results: str | None, params: EmpaParams) -> tuple[Path | None, str | None]:
    """EMPA's published runs as they are on this machine, fetching and probing nothing: the folder
    `published.empa_results` names, else the fetched copy's (rule empa) -> (folder, None), or (None, why not)."""
    if empa_results:
        folder = Path(empa_results).expanduser()
        folder = folder if folder.is_absolute() else project_root() / folder
        return (folder, None) if folder.is_dir() else (None, f"published.empa_results = {empa_results} is not a folder here")
    if not params.source:
        return None, "empa.source is null: no EMPA published runs"
    layout = fetched_layout(params)
    if layout is None:
        return None, (f"EMPA's published runs are not fetched (no {layout_file(params)}; the DAG's rule empa fetches "
                      "them: snakemake --cores 1 empa, with the run's --configfile)")
    if layout.results is None:
        return None, f"the fetched EMPA copy {layout.root} has no published runs (results/benchmark_runs/epm-bench/)"
    return layout.results, None


def _clone(url: str, commit: str | None, repo: Path) -> Path:
    if not (repo / ".git").is_dir():
        tmp = repo.with_name(repo.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        done = _git(["clone", "--quiet", url, str(tmp)], check=False)
        if done.returncode != 0:
            raise EmpaError(f"empa.source = {url}: git clone failed ({done.stderr.strip()}); {OFFLINE_FIX}")
        tmp.rename(repo)
    if commit and _git_head(repo) != commit:
        if _git(["-C", str(repo), "checkout", "--quiet", commit], check=False).returncode != 0:
            _git(["-C", str(repo), "fetch", "--quiet", "origin", commit], check=False)
            done = _git(["-C", str(repo), "checkout", "--quiet", commit], check=False)
            if done.returncode != 0:
                raise EmpaError(f"empa.commit = {commit} is not in {url} ({done.stderr.strip()}); "
                                "set empa.commit to a commit of that repository, or null for its default branch")
    return repo


def _check_commit(layout: EmpaLayout, params: EmpaParams) -> None:
    if params.commit is None:
        return
    if layout.commit is None:
        raise EmpaError(f"empa.source = {layout.root} is not a git checkout, so empa.commit = {params.commit} "
                        "cannot be checked; use a git clone of EMPA, or set empa.commit: null to take the folder as it is")
    if layout.commit != params.commit:
        raise EmpaError(f"empa.source = {layout.root} is at commit {layout.commit}, but empa.commit pins "
                        f"{params.commit}; run `git -C {layout.root} checkout {params.commit}` or change empa.commit")


def _git(args: list[str], check: bool = True, timeout: float | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}      # never wait for a password on a private URL
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", f"no answer within {timeout:.0f} s")
    except FileNotFoundError:
        return subprocess.CompletedProcess(args, 127, "", "git is not installed")
    if check and done.returncode != 0:
        raise EmpaError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def configured_layout(empa_dir: str | None, params: EmpaParams) -> EmpaLayout | None:
    """The EMPA folder a run reads: sandbox.empa_dir when set (relative paths from the project root),
    else the `empa:` copy once fetched, else None."""
    if empa_dir:
        path = Path(empa_dir).expanduser()
        return locate(path if path.is_absolute() else project_root() / path)
    return fetched_layout(params)

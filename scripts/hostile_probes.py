"""Issue 38's probes: one hostile or malformed input of each class, tried as a user would, on a scratch
copy of the checkout (no results needed; each probe makes the little it reads).

    .venv/bin/python scripts/hostile_probes.py [--only NAME,...] [--keep DIR]

The probes live in scripts/hostile/<area>.py, each module with a list PROBES of (name, function); a
function gets the scratch folder (the checkout without .git, .venv and results, as the working
directory) and returns (passed, what happened): the message a user sees, shortened. One line per probe,
PASS or FAIL; exit status 1 when any probe fails. A probe that raises counts as FAIL and the others go on.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IGNORE = shutil.ignore_patterns(".git", ".venv", "results", ".snakemake", ".cache", "__pycache__", "*.egg-info",
                                ".pytest_cache")


def probes() -> list[tuple[str, object]]:
    found = []
    folder = ROOT / "scripts" / "hostile"
    sys.path.insert(0, str(folder))     # for the helpers the modules share (_common.py)
    for path in sorted(p for p in folder.glob("*.py") if not p.name.startswith("_")):
        spec = importlib.util.spec_from_file_location(f"hostile_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found += [(f"{path.stem}/{name}", fn) for name, fn in module.PROBES]
    return found


def run(name: str, fn, work: Path) -> bool:
    cwd = os.getcwd()
    os.chdir(work)
    try:
        ok, what = fn(work)
    except Exception as exc:   # a probe that crashes is a failed probe, and the next one still runs
        ok, what = False, f"probe raised {type(exc).__name__}: {exc}"
        traceback.print_exc(file=sys.stderr)
    finally:
        os.chdir(cwd)
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {' '.join(str(what).split())[:300]}", flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated probe names (area/name or area)")
    ap.add_argument("--keep", type=Path, help="make the scratch copy here and keep it")
    args = ap.parse_args(argv)
    chosen = [p for p in probes() if not args.only
              or any(p[0] == o or p[0].startswith(o + "/") for o in args.only.split(","))]
    if not chosen:
        print(f"no probe matches --only {args.only!r}", file=sys.stderr)
        return 2
    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="hostile-")
    work = args.keep or Path(tmp.name) / "echo"
    shutil.copytree(ROOT, work, ignore=IGNORE, dirs_exist_ok=True)
    sys.path.insert(0, str(work))
    try:
        results = [run(name, fn, work) for name, fn in chosen]
    finally:
        if tmp:
            tmp.cleanup()
    print(f"{sum(results)} of {len(results)} probes passed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())

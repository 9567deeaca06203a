"""`echo-epmq`: recompute EPM-Q for folders of EMPA-format result files.

    echo-epmq DIR [--out FILE.csv] [--constants code|paper] [--per-case FILE.csv]

DIR holds one sub-folder per model of `script_*_result.json` files (or is itself one such folder).
Every trajectory is replayed from its judge levels, never from the totals stored in the file, and one
row per model is written (columns: epmq.SUMMARY_COLUMNS, values at 2 dp like the published leaderboard).
A malformed file (or a second file of the same script_id) is reported by name on stderr and skipped;
the other files still count. A judge level outside the rubric is scored 0, as the published engine did,
and named on stderr; one that is NaN or infinite skips its file. Only regular files of bounded size are
read (a FIFO or a link to a device is skipped, named). --out and --per-case may not name a file it reads,
nor each other (compared with links followed), nor a name it would read next time (a model folder's
*_result.json or summary.json).
"""
from __future__ import annotations

import argparse
import fnmatch
import os
import sys
from pathlib import Path

from echo_lib.epm.empa_io import RESULT_GLOB
from echo_lib.epm.epmq import CONSTANTS
from echo_lib.epm.files import resolved
from echo_lib.epm.scoring import SUMMARY, input_files, score_folders


def _same(a: Path, b: Path) -> bool:
    """The same file: one path once links are followed, or (both there) one inode (a hard link)."""
    try:
        return resolved(a) == resolved(b) or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def output_problem(outputs: dict[str, str], roots: list[str]) -> str | None:
    """Why the output paths cannot be written (one is an input, or both are one file), or None."""
    given = {flag: Path(value) for flag, value in outputs.items() if value}
    if len(given) == 2 and _same(*given.values()):
        return f"--out and --per-case are the same file ({resolved(given['--out'])}); give two file names"
    inputs = input_files(roots)
    folders = {resolved(f.parent) for f in inputs}
    for flag, path in given.items():
        hit = next((f for f in inputs if f.exists() and _same(path, f)), None)
        if hit is not None:
            same = "" if Path(path).absolute() == resolved(hit) else f" (that is {resolved(hit)})"
            return (f"{flag} {path}{same} is one of the files it reads; writing it would destroy an input: give a "
                    "file name outside the result folders (e.g. epmq.csv)")
        real = resolved(path)
        if real.parent in folders and (fnmatch.fnmatch(real.name, RESULT_GLOB) or real.name == SUMMARY):
            return (f"{flag} {path} would be read as an input next time (a model folder's {RESULT_GLOB} or "
                    f"{SUMMARY}); give a file name outside the result folders (e.g. epmq.csv)")
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="echo-epmq", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="folder with one sub-folder per model of script_*_result.json files")
    ap.add_argument("--out", help="write the per-model table here (CSV); default: print it")
    ap.add_argument("--constants", choices=sorted(CONSTANTS), default="code",
                    help="EPM-Q constant set: code (default, reproduces the published leaderboard) or paper")
    ap.add_argument("--per-case", dest="per_case", help="also write the per-case table here (CSV)")
    args = ap.parse_args(argv)
    for flag, value in (("--out", args.out), ("--per-case", args.per_case)):
        if value and Path(value).is_dir():
            print(f"echo-epmq: {flag} {value} is a folder; give a file name (e.g. {Path(value) / 'summary.csv'})",
                  file=sys.stderr)
            return 2
    try:
        problem = output_problem({"--out": args.out, "--per-case": args.per_case}, [args.dir])
        if problem:
            print(f"echo-epmq: {problem}", file=sys.stderr)
            return 2
        scored = score_folders(args.dir, constants=args.constants)
    except (FileNotFoundError, ValueError) as err:
        print(f"echo-epmq: {err}", file=sys.stderr)
        return 2
    per_case, summary, skipped = scored.per_case, scored.summary, scored.skipped
    for s in skipped:
        print(f"echo-epmq: skipped {s.path}: {s.reason}", file=sys.stderr)
    for note in (n for rep in scored.replays for n in rep.run.notes):
        print(f"echo-epmq: note: {note}", file=sys.stderr)
    if summary.empty:
        print(f"echo-epmq: no readable result files under {args.dir}", file=sys.stderr)
        return 2
    table = summary.round(2)
    if args.out:
        from echo_lib.provenance import write_text
        write_text(args.out, table.to_csv(index=False))   # atomic: a kill mid-write leaves the old file whole
        print(f"echo-epmq: {len(per_case)} cases of {len(table)} model(s), constants {args.constants!r} "
              f"-> {args.out}", file=sys.stderr)
    else:
        table.to_csv(sys.stdout, index=False)
    if args.per_case:
        Path(args.per_case).parent.mkdir(parents=True, exist_ok=True)
        per_case.to_csv(args.per_case, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())

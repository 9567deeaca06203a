"""`echo-epmq`: recompute EPM-Q for folders of EMPA-format result files.

    echo-epmq DIR [--out FILE.csv] [--constants code|paper] [--per-case FILE.csv]

DIR holds one sub-folder per model of `script_*_result.json` files (or is itself one such folder).
Every trajectory is replayed from its judge levels, never from the totals stored in the file, and one
row per model is written (columns: epmq.SUMMARY_COLUMNS, values at 2 dp like the published leaderboard).
A malformed file (or a second file of the same script_id) is reported by name on stderr and skipped;
the other files still count. A judge level outside the rubric is scored 0, as the published engine did,
and named on stderr.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from echo_lib.epm.epmq import CONSTANTS
from echo_lib.epm.scoring import score_folders


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
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)
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

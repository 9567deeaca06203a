"""`echo-scenarios check DIR`: import every EMPA case of a folder and say which do not import, and why.

    echo-scenarios check DIR [--official] [--ids script_001 script_002 ...]
    python -m echo_lib.scenarios.check DIR

DIR is EMPA's repository, its empa/data folder, or a folder laid out like it. Every cases/*.md is
imported (--official: only those of official_cases.txt); the summary line says how many import, then
one line per story or metadata entry that belongs to no case (not an object, no usable id), then one
line per failing case, each with its file and field. Exit status: 0 all import, 1 some fail (or an
entry is unusable), 2 DIR unusable (no cases/, an official list with a path or a repeated id, a
case_metadata.json that is no list of cases).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from echo_lib.scenarios.cases import UNFORESEEN, unforeseen
from echo_lib.scenarios.empa_import import data_dir, import_case, read_metadata, read_official_ids, read_stories
from echo_lib.scenarios.schema import Scenario, ScenarioError


@dataclass
class CheckReport:
    folder: Path
    imported: list[Scenario] = field(default_factory=list)
    failures: list[ScenarioError] = field(default_factory=list)
    problems: list[ScenarioError] = field(default_factory=list)    # entries of no case (stories, metadata)

    @property
    def total(self) -> int:
        return len(self.imported) + len(self.failures)

    def lines(self) -> list[str]:
        unknown = sum(s.labels.domain == "unknown" for s in self.imported)
        head = (f"{len(self.imported)} of {self.total} cases import from {self.folder}"
                f" ({unknown} without case_metadata.json labels: 'unknown')")
        return [head] + [f"FAIL {e.source}: field '{e.field}' {e.problem}; fix: {e.fix}"
                         for e in (*self.problems, *self.failures)]


def case_ids(folder: Path, official: bool = False) -> list[str]:
    """The ids of every cases/*.md, or of official_cases.txt."""
    if official:
        return read_official_ids(folder)
    return sorted(p.stem for p in (folder / "cases").glob("*.md"))


def check_folder(empa_dir: str | Path, ids: list[str] | None = None, official: bool = False) -> CheckReport:
    """Import the given cases (default: all of cases/) one by one; a failure does not stop the others."""
    folder = data_dir(empa_dir)
    stories, metadata = read_stories(folder), read_metadata(folder)
    report = CheckReport(folder, problems=[*stories.problems, *metadata.problems])
    for cid in ids or case_ids(folder, official):
        try:
            report.imported.append(import_case(folder, cid, stories, metadata))
        except ScenarioError as err:
            report.failures.append(err)
        except UNFORESEEN as err:     # whatever no check foresaw costs this case, not the report
            md = folder / "cases" / f"{cid}.md"
            report.failures.append(unforeseen(md, err))
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="echo-scenarios", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = ap.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="import every case of an EMPA folder and report the failures")
    check.add_argument("dir", help="EMPA's repository, its empa/data folder, or a folder laid out like it")
    check.add_argument("--official", action="store_true", help="only the cases of official_cases.txt")
    check.add_argument("--ids", nargs="+", help="only these case ids")
    args = ap.parse_args(argv)
    try:
        report = check_folder(args.dir, args.ids, args.official)
    except (FileNotFoundError, ValueError) as err:
        print(f"echo-scenarios: {err}", file=sys.stderr)
        return 2
    print("\n".join(report.lines()))
    return 1 if report.failures or report.problems else 0


if __name__ == "__main__":
    # `python -m echo_lib.scenarios.check DIR` works too (the subcommand is implied)
    args = sys.argv[1:]
    sys.exit(main(args if args[:1] == ["check"] else ["check", *args]))

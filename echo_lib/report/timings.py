"""What a run cost, stage by stage: wall time, CPU time and peak memory, from the benchmark file Snakemake
writes beside each stage's log (`results/<run>/logs/NN_name.benchmark.tsv`, every rule's `benchmark:`).

A rerun that resumed a stage rewrites its file, so a row is the stage's last call, not its whole history.
Jobs that ran side by side (`--cores 2` and one-thread stages) overlap: the sum of the rows is the machine
time, the span from the first start to the last end is the wall time of the run.

    python -m echo_lib.report.timings results/tiny              # a markdown table, stages in run order
    python -m echo_lib.report.timings results/tiny-multiturn --csv timings.csv
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from echo_lib.provenance import write_text

SUFFIX = ".benchmark.tsv"
NEEDED = ("s", "max_rss", "cpu_time")   # Snakemake's columns: wall seconds, peak RSS (MB), CPU seconds
COLUMNS = ["Stage", "Wall (s)", "Wall", "CPU (s)", "Peak RSS (GB)", "Ended"]


class TimingsError(ValueError):
    """A run folder without benchmark files, or a benchmark file that is not Snakemake's."""


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def read(run_dir: str | Path) -> pd.DataFrame:
    """One row per stage call of the run (COLUMNS), in the order the stages ended."""
    logs = Path(run_dir) / "logs"
    files = sorted(logs.glob(f"*{SUFFIX}"))
    if not files:
        raise TimingsError(f"{logs} holds no *{SUFFIX}: run the DAG for this run first (snakemake --cores 2 ...); "
                           "each rule writes its benchmark there when it ends")
    rows = []
    for f in files:
        table = pd.read_csv(f, sep="\t")
        missing = [c for c in NEEDED if c not in table.columns]
        if missing or table.empty:
            raise TimingsError(f"{f} lacks {', '.join(missing) or 'a row'} (has: {', '.join(table.columns)}): "
                               "not a Snakemake benchmark file; delete it and rerun its rule")
        last = table.iloc[-1]
        rows.append({"Stage": f.name.removesuffix(SUFFIX), "Wall (s)": round(float(last["s"]), 1),
                     "Wall": _clock(float(last["s"])), "CPU (s)": round(float(last["cpu_time"]), 1),
                     "Peak RSS (GB)": round(float(last["max_rss"]) / 1000, 2),
                     "Ended": pd.Timestamp(f.stat().st_mtime, unit="s")})
    return pd.DataFrame(rows, columns=COLUMNS).sort_values("Ended", ignore_index=True)


def span(table: pd.DataFrame) -> float:
    """Seconds from the first stage's start to the last stage's end (overlapping jobs counted once)."""
    starts = table["Ended"] - pd.to_timedelta(table["Wall (s)"], unit="s")
    return (table["Ended"].max() - starts.min()).total_seconds()


def markdown(table: pd.DataFrame) -> str:
    """The table as markdown, with the machine time (the rows' sum), the run's span and its largest peak."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in table.to_dict("records"):
        lines.append(f"| {r['Stage']} | {r['Wall (s)']:.0f} | {r['Wall']} | {r['CPU (s)']:.0f} | "
                     f"{r['Peak RSS (GB)']:.1f} | {r['Ended']:%Y-%m-%d %H:%M} |")
    total = table["Wall (s)"].sum()
    lines.append(f"\n{len(table)} stage calls: {_clock(total)} of stage time, {_clock(span(table))} from the first "
                 f"start to the last end, peak RSS {table['Peak RSS (GB)'].max():.1f} GB.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", help="a run's folder, e.g. results/tiny")
    ap.add_argument("--csv", help="also write the table here")
    args = ap.parse_args(argv)
    try:
        table = read(args.run_dir)
    except TimingsError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(markdown(table))
    if args.csv:
        write_text(args.csv, table.to_csv(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())

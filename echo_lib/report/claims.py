"""The claims table: each number the Echo-N1 paper reports beside what this run measured.

The published numbers come from data/reported_claims.yaml and go into one column, labelled
"Reported (published)", with the scale and judge they were measured under. The "Measured" column is read
from this run's result files (epm/summary.csv, nee/summary.csv) for the model that stands in for the
published one (`paper.counterparts`), with this run's scale and judge beside it. A published model
without a counterpart here is "not run", never filled in.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import pandas as pd
import yaml

from echo_lib.provenance import write_text
from echo_lib.report.paper_tables import success_rate
from echo_lib.report.tables import format_cell, write_table

REPORTED_COLUMN = "Reported (published)"
MEASURED_COLUMN = "Measured (this run)"
SOURCES = ("epm", "nee")   # which of this run's tables a claim is measured from
LATEX_HIDDEN_COLUMNS = ["Source"]   # in claims.csv and claims.md; the LaTeX table cites sources in its caption


@dataclass(frozen=True)
class ReportedClaim:
    id: str
    quantity: str
    measured_from: str             # epm: success rate from epm/summary.csv; nee: composite from nee/summary.csv
    source: str                    # where the number was published (METHOD.md section and tag)
    scale: str                     # the conditions it was measured under
    judge: str
    reported: dict[str, float]     # published model -> published value


@dataclass(frozen=True)
class RunConditions:
    """How this run measured: named in every measured cell's row."""
    run_name: str
    scale: str
    epm_judge: str                 # the sandbox judge's model id
    nee_judges: str                # the NEE panel's model ids


def load_reported(path: str | Path) -> list[ReportedClaim]:
    path = Path(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    claims = []
    for i, entry in enumerate(data.get("claims", [])):
        where = f"{path}: claims[{i}]"
        missing = [k for k in ReportedClaim.__dataclass_fields__ if k not in entry]
        if missing:
            raise ValueError(f"{where} lacks key(s) {', '.join(missing)}")
        if entry["measured_from"] not in SOURCES:
            raise ValueError(f"{where}.measured_from is {entry['measured_from']!r}; allowed: {', '.join(SOURCES)}")
        claims.append(ReportedClaim(**{k: entry[k] for k in ReportedClaim.__dataclass_fields__}))
    if not claims:
        raise ValueError(f"{path} lists no claims (expected a top-level `claims:` list)")
    return claims


def _measured(claim: ReportedClaim, model: str | None, epm: pd.DataFrame, nee: pd.DataFrame
              ) -> tuple[object, str]:
    """(value or 'not run'/'not rated', n) of this run's counterpart model."""
    if model is None:
        return "not run", ""
    if claim.measured_from == "epm":
        row = epm[epm["Model"] == model]
        if row.empty:
            return "not run", ""
        return round(float(success_rate(row).iloc[0]), 1), f"{int(row['Cases'].iloc[0])} cases"
    row = nee[nee["model"] == model]
    if row.empty or pd.isna(row["composite"].iloc[0]):
        return "not rated", ""
    n = row["n_ratings"].iloc[0]
    return round(float(row["composite"].iloc[0]), 2), f"{int(n)} ratings" if pd.notna(n) else ""


def claims_table(claims: list[ReportedClaim], counterparts: Mapping[str, str | None], epm: pd.DataFrame,
                 nee: pd.DataFrame, run: RunConditions) -> pd.DataFrame:
    """One row per (claim, published model)."""
    unknown = sorted({m for c in claims for m in c.reported} - set(counterparts))
    if unknown:
        raise ValueError(f"paper.counterparts has no entry for published model(s) {', '.join(unknown)}; add "
                         "each with this run's model that stands for it, or null when there is none")
    rows = []
    for claim in claims:
        judge = run.epm_judge if claim.measured_from == "epm" else run.nee_judges
        for published, value in claim.reported.items():
            ours = counterparts[published]
            measured, n = _measured(claim, ours, epm, nee)
            rows.append({"Claim": claim.quantity, "Published model": published, REPORTED_COLUMN: value,
                         "Reported under": f"{claim.scale}; {claim.judge}", "Source": claim.source,
                         "This run's model": ours or "--", MEASURED_COLUMN: measured,
                         "Measured under": f"{run.scale} scale (run {run.run_name}"
                                           f"{', ' + n if n else ''}); judge {judge}"})
    return pd.DataFrame(rows)


def _as_given(value: object) -> str:
    return str(value)   # as published / as rounded: 46.7 stays 46.7, not 46.70; text (not run) as it is


def to_markdown(table: pd.DataFrame, run: RunConditions) -> str:
    head = ["# Claims: published numbers beside this run", "",
            f"**{REPORTED_COLUMN}** is what the Echo-N1 paper (via the Synced article) reports, under the "
            "conditions in *Reported under*; it is not an output of this code. "
            f"**{MEASURED_COLUMN}** is read from run `{run.run_name}` at the **{run.scale}** scale. "
            "The two are comparable only where scale, cases and judge agree; at the tiny scale they are not.", ""]
    cols = list(table.columns)
    cells = [[_as_given(v) if c in (REPORTED_COLUMN, MEASURED_COLUMN) else format_cell(v) for c, v in row.items()]
             for _, row in table.iterrows()]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]
    return "\n".join(head + lines) + "\n"


def write_claims(table: pd.DataFrame, out_dir: str | Path, run: RunConditions) -> list[Path]:
    """claims.md and claims.tex (+ claims.csv) in the paper folder."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text(out_dir / "claims.md", to_markdown(table, run))   # atomic (UTF-8), as every file below
    shown = table.drop(columns=LATEX_HIDDEN_COLUMNS)
    # as wide as the text: the text columns wrap (S narrow, W wide: main.tex's ragged X columns)
    paths = write_table(shown, out_dir, "claims", formats={REPORTED_COLUMN: _as_given, MEASURED_COLUMN: _as_given},
                        column_format="SSrWlrW", wrap_headers=True, full_width=True)
    write_text(out_dir / "claims.csv", table.to_csv(index=False))   # the CSV twin keeps the source column
    return [out_dir / "claims.md", *paths]


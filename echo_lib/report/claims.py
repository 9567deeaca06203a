"""The claims table: each number the Echo-N1 paper reports beside what this run measured.

The published numbers come from data/reported_claims.yaml and go into one column, labelled
"Reported (published)", with the scale and judge they were measured under. The "Measured" column is read
from this run's result files (epm/summary.csv, nee/summary.csv) for the model that stands in for the
published one (`paper.counterparts`), with its 95 % interval (epm/intervals.csv; the composite has none),
its number of cases or ratings, and this run's scale and judge beside it. A published model without a
counterpart here is "not run", never filled in. The paper's claim is a comparison (Echo-N1 above its base),
so each row of a model other than the base carries this run's verdict on the same quantity against the
base, read from the paired tables (epm/paired.csv for the success rate, nee/paired.csv for the composite):
"n too small" below stats.MIN_N cases, "no difference at this scale" when the interval spans 0.

claims.csv is the table's machine form; the README's "Results at a glance" block is rendered from it
(echo_lib/report/glance.py), with the run named by `RunConditions`, which stage 07 records in the paper
folder's provenance.json (key "claims_run").
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Mapping

import pandas as pd
import yaml

from echo_lib.epm.compare import SUCCESS_METRIC
from echo_lib.provenance import write_text
from echo_lib.report.paper_tables import success_rate
from echo_lib.report.tables import format_cell, write_table

REPORTED_COLUMN = "Reported (published)"
MEASURED_COLUMN = "Measured (this run)"
INTERVAL_COLUMN = "Measured 95% CI"
N_COLUMN = "Measured n"
VERDICT_COLUMN = "Verdict vs base (this run)"
COMPARED_ON = {"epm": SUCCESS_METRIC, "nee": "Composite"}   # the paired tables' metric of each claim source
SOURCES = ("epm", "nee")   # which of this run's tables a claim is measured from
LATEX_HIDDEN_COLUMNS = ["Source", VERDICT_COLUMN]   # in claims.csv and claims.md; the LaTeX table cites
# sources in its caption, and the verdicts are in the paired-differences table beside it
LATEX_HEADERS = {INTERVAL_COLUMN: "95% CI", N_COLUMN: "n"}   # the LaTeX table's short headers


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
    """How this run measured (named in every measured cell's row) and which run it was (named in claims.md's
    and the README block's heading)."""
    run_name: str
    scale: str
    epm_judge: str                 # the sandbox judge's model id
    nee_judges: str                # the NEE panel's model ids
    policy_model: str = ""         # the policy's base model id (roles.policy)
    config_hash: str = ""          # of the run config the results were made with
    git_commit: str = ""           # the checkout's commit (+dirty), as provenance records it
    created_at: str = ""           # when stage 07 (or the rebuild from a run folder) made the table

    def record(self) -> dict:
        return asdict(self)

    @classmethod
    def from_record(cls, record: Mapping) -> "RunConditions":
        """From the "claims_run" entry of the paper folder's provenance.json."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: "" if v is None else str(v) for k, v in record.items() if k in known})

    def identity(self) -> str:
        """run `tiny` (tiny scale, policy smollm2-135m-instruct; config 1234..., commit abcd..., 2026-12-06)"""
        facts = [f"config {self.config_hash}" if self.config_hash else "",
                 f"commit {self.git_commit[:12] + ('+dirty' if self.git_commit.endswith('+dirty') else '')}"
                 if self.git_commit else "", self.created_at[:10]]
        model = f", policy {self.policy_model}" if self.policy_model else ""
        tail = "; " + ", ".join(f for f in facts if f) if any(facts) else ""
        return f"run `{self.run_name}` ({self.scale} scale{model}{tail})"


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


NONE = "--"   # no value: no counterpart, no interval computed (the composite), no count


def _interval(intervals: pd.DataFrame | None, model: str) -> str:
    """The success rate's 95 % interval over cases as stage 05 prints it ("[0.0, 33.3]", or why there is
    none: "n too small (n = 3 < 10)"), or --."""
    if intervals is None:
        return NONE
    cells = intervals.loc[(intervals["Model"] == model) & (intervals["Metric"] == SUCCESS_METRIC), "CI"]
    cell = cells.iloc[0] if len(cells) else None
    return str(cell) if cell is not None and pd.notna(cell) and str(cell).strip() else NONE


def _verdict(claim: ReportedClaim, model: str | None, reference: str, paired: pd.DataFrame | None) -> str:
    """This run's verdict on the claim's quantity for `model` against the base, as the paired table says it
    ("echo above base (n = 30)"), or -- for the base itself, a model not run, or no paired table."""
    if paired is None or model is None or model == reference:
        return NONE
    rows = paired[(paired["A"] == model) & (paired["B"] == reference) & (paired["Metric"] == COMPARED_ON[claim.measured_from])]
    if rows.empty:
        return NONE
    return f"{rows['Verdict'].iloc[0]} (n = {int(rows['n'].iloc[0])})"


def _measured(claim: ReportedClaim, model: str | None, epm: pd.DataFrame, nee: pd.DataFrame,
              intervals: pd.DataFrame | None) -> tuple[object, str, str]:
    """(value or 'not run'/'not rated', its 95 % interval, n) of this run's counterpart model."""
    if model is None:
        return "not run", NONE, NONE
    if claim.measured_from == "epm":
        row = epm[epm["Model"] == model]
        if row.empty:
            return "not run", NONE, NONE
        return (round(float(success_rate(row).iloc[0]), 1), _interval(intervals, model),
                f"{int(row['Cases'].iloc[0])} cases")
    row = nee[nee["model"] == model]
    if row.empty or pd.isna(row["composite"].iloc[0]):
        return "not rated", NONE, NONE
    n = row["n_ratings"].iloc[0]
    # stage 06 gives the composite no interval (it mixes EPM-Q over cases and NEE over ratings)
    return round(float(row["composite"].iloc[0]), 2), NONE, f"{int(n)} ratings" if pd.notna(n) else NONE


def claims_table(claims: list[ReportedClaim], counterparts: Mapping[str, str | None], epm: pd.DataFrame,
                 nee: pd.DataFrame, run: RunConditions, intervals: pd.DataFrame | None = None,
                 paired: pd.DataFrame | None = None, reference: str = "base") -> pd.DataFrame:
    """One row per (claim, published model); `intervals` is stage 05's epm/intervals.csv and `paired` the
    rows of epm/paired.csv and nee/paired.csv (without them the interval and verdict columns say --);
    `reference` is this run's base model (roles.policy)."""
    unknown = sorted({m for c in claims for m in c.reported} - set(counterparts))
    if unknown:
        raise ValueError(f"paper.counterparts has no entry for published model(s) {', '.join(unknown)}; add "
                         "each with this run's model that stands for it, or null when there is none")
    rows = []
    for claim in claims:
        judge = run.epm_judge if claim.measured_from == "epm" else run.nee_judges
        for published, value in claim.reported.items():
            ours = counterparts[published]
            measured, interval, n = _measured(claim, ours, epm, nee, intervals)
            rows.append({"Claim": claim.quantity, "Published model": published, REPORTED_COLUMN: value,
                         "Reported under": f"{claim.scale}; {claim.judge}", "Source": claim.source,
                         "This run's model": ours or NONE, MEASURED_COLUMN: measured, INTERVAL_COLUMN: interval,
                         N_COLUMN: n, VERDICT_COLUMN: _verdict(claim, ours, reference, paired),
                         "Measured under": f"{run.scale} scale (run {run.run_name}); judge {judge}"})
    return pd.DataFrame(rows)


def _as_given(value: object) -> str:
    return str(value)   # as published / as rounded: 46.7 stays 46.7, not 46.70; text (not run) as it is


def to_markdown(table: pd.DataFrame, run: RunConditions) -> str:
    head = ["# Claims: published numbers beside this run", "",
            f"**{REPORTED_COLUMN}** is what the Echo-N1 paper (via the Synced article) reports, under the "
            "conditions in *Reported under*; it is not an output of this code. "
            f"**{MEASURED_COLUMN}** is read from {run.identity()}, with its 95 % interval where one is computed. "
            + (f"**{VERDICT_COLUMN}** is this run's paired comparison with its base model on the same cases: "
               "a verdict only from 10 cases on, and only what its interval allows. " if VERDICT_COLUMN in table else "")
            + "The two are comparable only where scale, cases and judge agree"
            + ("." if run.scale == "paper" else f"; at the {run.scale} scale they are not."), ""]
    cols = list(table.columns)
    cells = [[_as_given(v) if c in (REPORTED_COLUMN, MEASURED_COLUMN) else format_cell(v) for c, v in row.items()]
             for _, row in table.iterrows()]
    return "\n".join(head + markdown_table(cols, cells)) + "\n"


def markdown_table(columns: list[str], rows: list[list[str]]) -> list[str]:
    """A GitHub markdown table's lines (a | inside a cell escaped)."""
    def line(cells):
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"
    return [line(columns), "|" + "---|" * len(columns), *(line(r) for r in rows)]


def read_claims(path: str | Path) -> pd.DataFrame:
    """claims.csv as its text says (every cell a string, nothing parsed: 46.70 would stay 46.70)."""
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def write_claims(table: pd.DataFrame, out_dir: str | Path, run: RunConditions) -> list[Path]:
    """claims.md and claims.tex (+ claims.csv) in the paper folder."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text(out_dir / "claims.md", to_markdown(table, run))   # atomic (UTF-8), as every file below
    # the interval and n under short headers beside "Measured (this run)", so nine columns fit the page
    shown = table.drop(columns=LATEX_HIDDEN_COLUMNS).rename(columns=LATEX_HEADERS)
    # as wide as the text: the four text columns wrap (L: main.tex's ragged X column, all of one width)
    paths = write_table(shown, out_dir, "claims", formats={REPORTED_COLUMN: _as_given, MEASURED_COLUMN: _as_given},
                        column_format="LLrLlrLlL", wrap_headers=True, full_width=True)
    write_text(out_dir / "claims.csv", table.to_csv(index=False))   # the CSV twin keeps the source column
    return [out_dir / "claims.md", *paths]


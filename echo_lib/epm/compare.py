"""The paper's central comparisons on the sandbox, with their uncertainty (issue 16, section 3).

Per model: EPM-Q and the success rate over its cases, each with a percentile bootstrap 95 % interval over
cases (EPM-Q is linear in the per-case indices, so the model's EPM-Q is the mean of its cases' EPM-Q and
resampling cases is exact). Per pair (echo - base, scalar - base, echo - scalar): the paired difference
over the cases both models ran, the cases resampled jointly. A difference whose interval spans 0 reads
"no difference at this scale", never a win.

    results/<run>/epm/intervals.csv   Model, Cases, EPM-Q, EPM-Q 95% CI, Success (%), Success 95% CI
    results/<run>/epm/paired.csv      A, B, Metric, Cases, Difference, CI low, CI high, Reading
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from echo_lib.epm.termination import SUCCESS
from echo_lib.provenance import write_text
from echo_lib.stats import bootstrap_ci, paired_bootstrap_ci

BOOTSTRAP = 1000          # resamples of cases; a 3-case run takes milliseconds
METRICS = {"EPM-Q": "EPM-Q", "Success (%)": "success"}   # column of the tables -> per-case value
NO_DIFFERENCE = "no difference at this scale"


def central_pairs(models: Sequence[str], variants: Sequence[str], reference: str) -> list[tuple[str, str]]:
    """(A, B) pairs the paper argues about, among the models that ran: each RL variant against the base,
    then the variants against each other in config order (echo - scalar)."""
    present = set(models)
    pairs = [(v, reference) for v in variants if v in present and reference in present and v != reference]
    ran = [v for v in variants if v in present]
    pairs += [(a, b) for i, a in enumerate(ran) for b in ran[i + 1:]]
    return pairs


def reading(ci: Sequence[float] | None, a: str, b: str) -> str:
    """How a paired difference A - B with interval ci may be read."""
    if ci is None:
        return "no shared cases"
    if ci[0] > 0:
        return f"{a} above {b}"
    if ci[1] < 0:
        return f"{a} below {b}"
    return NO_DIFFERENCE


def _per_case_values(per_case: pd.DataFrame) -> pd.DataFrame:
    """Model, Case_ID and the values the comparisons average (success as 0 / 100 per case)."""
    return per_case.assign(success=100.0 * (per_case["Outcome_Label"] == SUCCESS))[["Model", "Case_ID", *METRICS.values()]]


def _ci_text(ci: Sequence[float] | None, digits: int = 1) -> str:
    return "" if ci is None else f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def model_intervals(per_case: pd.DataFrame, n_boot: int = BOOTSTRAP, seed: int = 0) -> pd.DataFrame:
    """One row per model (in per_case order): its cases, EPM-Q and success rate with bootstrap intervals."""
    values = _per_case_values(per_case)
    rows = []
    for model, cases in values.groupby("Model", sort=False):
        row = {"Model": model, "Cases": len(cases)}
        for column, key in METRICS.items():
            row[column] = round(float(cases[key].mean()), 2)
            row[f"{column} 95% CI"] = _ci_text(bootstrap_ci(cases[key].tolist(), n_boot=n_boot, seed=seed))
        rows.append(row)
    return pd.DataFrame(rows)


def paired_differences(per_case: pd.DataFrame, pairs: Sequence[tuple[str, str]], n_boot: int = BOOTSTRAP,
                       seed: int = 0) -> pd.DataFrame:
    """One row per (pair, metric): mean of A - B over the cases both ran, its paired interval, its reading."""
    values = _per_case_values(per_case)
    rows = []
    for a, b in pairs:
        both = values[values.Model == a].merge(values[values.Model == b], on="Case_ID", suffixes=("_a", "_b"))
        for column, key in METRICS.items():
            ci = paired_bootstrap_ci(both[f"{key}_a"], both[f"{key}_b"], n_boot=n_boot, seed=seed) if len(both) else None
            diff = float((both[f"{key}_a"] - both[f"{key}_b"]).mean()) if len(both) else float("nan")
            rows.append({"A": a, "B": b, "Metric": column, "Cases": len(both), "Difference": round(diff, 2),
                         "CI low": ci[0] if ci else None, "CI high": ci[1] if ci else None,
                         "Reading": reading(ci, a, b)})
    return pd.DataFrame(rows, columns=["A", "B", "Metric", "Cases", "Difference", "CI low", "CI high", "Reading"])


def write_comparisons(per_case: pd.DataFrame, pairs: Sequence[tuple[str, str]], out_dir: str | Path,
                      seed: int = 0, n_boot: int = BOOTSTRAP) -> tuple[pd.DataFrame, pd.DataFrame]:
    """intervals.csv and paired.csv beside summary.csv; returns both tables."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    intervals = model_intervals(per_case, n_boot, seed)
    paired = paired_differences(per_case, pairs, n_boot, seed)
    write_text(out_dir / "intervals.csv", intervals.to_csv(index=False))   # atomic: a kill leaves the old file whole
    write_text(out_dir / "paired.csv", paired.to_csv(index=False))
    return intervals, paired

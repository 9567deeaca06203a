"""The paper's central comparisons on the sandbox, with their uncertainty (issue 36, section 3).

Per model and metric (EPM-Q, its three group scores, the success rate): the estimate over its cases with
a 95 % interval from echo_lib.stats (a t-interval for the scores, Wilson with continuity correction for
the success rate), its n and method. EPM-Q is linear in the per-case indices, so a model's EPM-Q is the
mean of its cases' EPM-Q. Per pair (echo - base, scalar - base, echo - scalar) and metric: the paired
difference over the cases both models ran, its paired t-interval and the verdict at that n. Below
stats.MIN_N cases no interval is printed and no verdict is given ("n too small"); a difference whose
interval spans 0 reads "no difference at this scale", never a win.

    results/<run>/epm/intervals.csv   Model, Metric, n, Estimate, CI low, CI high, Method, Shown, CI
    results/<run>/epm/paired.csv      A, B, Metric, n, Difference, CI low, CI high, Method, Verdict
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from echo_lib.epm.termination import SUCCESS
from echo_lib.provenance import write_text
from echo_lib.stats import Interval, mean_interval, paired_table, proportion_interval

SCORES = ("EPM-Q", "Outcome", "Efficiency", "Stability")   # per-case scores: t-intervals
SUCCESS_METRIC = "Success (%)"                                # share of cases: Wilson, in percent
METRICS = {**{m: m for m in SCORES}, SUCCESS_METRIC: "success"}   # printed name -> per-case value column
INTERVAL_COLUMNS = ["Model", "Metric", "n", "Estimate", "CI low", "CI high", "Method", "Shown", "CI"]


def central_pairs(models: Sequence[str], variants: Sequence[str], reference: str) -> list[tuple[str, str]]:
    """(A, B) pairs the paper argues about, among the models that ran: each RL variant against the base,
    then the variants against each other in config order (echo - scalar)."""
    present = set(models)
    pairs = [(v, reference) for v in variants if v in present and reference in present and v != reference]
    ran = [v for v in variants if v in present]
    pairs += [(a, b) for i, a in enumerate(ran) for b in ran[i + 1:]]
    return pairs


def seed_pairs(models: Sequence[str], trained: Mapping[str, tuple[str, int]], reference: str) -> list[tuple[str, str]]:
    """central_pairs within each RL seed: every trained policy against the base, and the variants of one seed
    against each other (echo-s1 - scalar-s1); `trained` is policy.trained() (model -> (variant, seed))."""
    by_seed: dict[int, list[str]] = {}
    for name, (_, seed) in trained.items():
        by_seed.setdefault(seed, []).append(name)
    return [pair for names in by_seed.values() for pair in central_pairs(models, names, reference)]


def _per_case_values(per_case: pd.DataFrame) -> pd.DataFrame:
    """Model, Case_ID and the values the comparisons average (success as 0 / 100 per case)."""
    return per_case.assign(success=100.0 * (per_case["Outcome_Label"] == SUCCESS))[["Model", "Case_ID", *METRICS.values()]]


def _interval(values: pd.Series, metric: str) -> tuple[Interval, float]:
    """The metric's interval over cases and the factor its bounds print with (success: percent)."""
    if metric == SUCCESS_METRIC:
        return proportion_interval(values / 100.0), 100.0
    return mean_interval(values), 1.0


def model_intervals(per_case: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, metric), models in per_case order: estimate, interval, n, method, and the cell
    the tables print (`CI`: "[lo, hi]", or why there is none)."""
    values = _per_case_values(per_case)
    rows = []
    for model, cases in values.groupby("Model", sort=False):
        for metric, column in METRICS.items():
            iv, scale = _interval(cases[column], metric)
            scaled = [None if x is None else round(x * scale, 4) for x in (iv.estimate, iv.low, iv.high)]
            rows.append({"Model": model, "Metric": metric, "n": iv.n, "Estimate": scaled[0], "CI low": scaled[1],
                         "CI high": scaled[2], "Method": iv.method, "Shown": iv.shown, "CI": iv.cell(scale=scale)})
    return pd.DataFrame(rows, columns=INTERVAL_COLUMNS)


def paired_differences(per_case: pd.DataFrame, pairs: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """One row per (pair, metric): mean of A - B over the cases both ran, its paired t-interval, n, method
    and verdict (echo_lib.stats.paired_table)."""
    return paired_table(_per_case_values(per_case), pairs, METRICS)


def write_comparisons(per_case: pd.DataFrame, pairs: Sequence[tuple[str, str]],
                      out_dir: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """intervals.csv and paired.csv beside summary.csv; returns both tables."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    intervals = model_intervals(per_case)
    paired = paired_differences(per_case, pairs)
    write_text(out_dir / "intervals.csv", intervals.to_csv(index=False))   # atomic: a kill leaves the old file whole
    write_text(out_dir / "paired.csv", paired.to_csv(index=False))
    return intervals, paired

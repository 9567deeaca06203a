"""From ratings to scores: the 0-100 NEE score with its interval, the composite with EPM-Q, the paired
differences between models, and the pairwise win and position-bias rates.

- NEE (METHOD.md 7.2 [DEFAULT]): the mean over dimensions and judges, rescaled (mean - 1) / 4 * 100.
  A model's mean is taken per transcript first and then over its transcripts, so every case weighs the
  same; the 95% interval is a t-interval over transcripts (the unit that was sampled; echo_lib.stats).
- Paired differences (echo - base, scalar - base, echo - scalar): per case, NEE and the composite of the
  two models on the same case, with a paired t-interval and the verdict at that n (echo_lib.stats).
- Composite (METHOD.md 7.3 [DEFAULT], THIS PACKAGE'S CHOICE: the paper's fusion formula is unknown):
  w * min(EPM-Q, 100) + (1 - w) * NEE, with w = nee.composite_weight.
- Position bias: the share of pairs (model, case, judge) whose winner changes when the two transcripts
  swap places; an unbiased judge keeps its verdict.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from echo_lib.nee.dimensions import KEYS
from echo_lib.stats import Interval, cluster_interval, mean_interval, paired_table


def rescale(likert_mean):
    """1-5 -> 0-100."""
    return (np.asarray(likert_mean, dtype=float) - 1) / 4 * 100


def composite(epmq, nee, weight: float):
    """w * min(EPM-Q, 100) + (1 - w) * NEE (this package's choice, METHOD.md 7.3)."""
    return weight * np.minimum(np.asarray(epmq, dtype=float), 100) + (1 - weight) * np.asarray(nee, dtype=float)


def per_case_scores(ratings: pd.DataFrame) -> pd.Series:
    """(model, case_id) -> the case's 0-100 NEE score: its ratings' mean over dimensions and judges."""
    likert = ratings.groupby(["model", "case_id"], sort=False)["score"].mean().dropna()
    return pd.Series(rescale(likert), index=likert.index, name="NEE")


def _score(ratings: pd.DataFrame) -> Interval:
    """NEE on 0-100 of one model's ratings (one or all dimensions): a t-interval over its transcripts."""
    per_case = ratings.groupby("case_id")["score"].mean().dropna()
    return mean_interval(rescale(per_case.to_numpy())).clipped(0, 100)


def dimension_table(ratings: pd.DataFrame) -> pd.DataFrame:
    """One row per model and dimension: the 1-5 mean, the 0-100 score, its interval, n and method."""
    rows = []
    for (model, dim), r in ratings.groupby(["model", "dimension"], sort=False):
        iv = _score(r)
        rows.append({"model": model, "dimension": dim, "likert_mean": r["score"].mean(), **_cells(iv, "score", "ci"),
                     "n_ratings": int(r["score"].notna().sum())})
    return pd.DataFrame(rows, columns=["model", "dimension", "likert_mean", "score", "ci_low", "ci_high", "n",
                                       "ci_method", "n_ratings"])


def _nan(x: float | None) -> float:
    """A table cell: NaN where an Interval has no value."""
    return float("nan") if x is None else x


def _cells(iv: Interval, value: str, prefix: str) -> dict:
    """An interval as table cells: value, <prefix>_low, <prefix>_high, n, ci_method (NaN where absent)."""
    return {value: _nan(iv.estimate), f"{prefix}_low": _nan(iv.low), f"{prefix}_high": _nan(iv.high), "n": iv.n,
            "ci_method": iv.method}


def read_epmq(path: str | Path) -> dict[str, float]:
    """Model -> EPM-Q from stage 05's summary.csv."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no EPM summary; run stage 05 first (snakemake {path}) to get the "
                                "EPM-Q the composite needs")
    table = pd.read_csv(path)
    missing = [c for c in ("Model", "EPM-Q") if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: column(s) {', '.join(missing)} missing; expected stage 05's summary.csv "
                         "(echo_lib.epm.scoring.write_tables)")
    return dict(zip(table["Model"].astype(str), table["EPM-Q"].astype(float)))


def read_case_epmq(path: str | Path) -> pd.DataFrame | None:
    """Stage 05's per-case EPM-Q (Model, Case_ID, EPM-Q) for the per-case composite; None when the file is
    not there (the paired table then holds NEE only)."""
    path = Path(path)
    if not path.is_file():
        return None
    table = pd.read_csv(path)
    missing = [c for c in ("Model", "Case_ID", "EPM-Q") if c not in table.columns]
    if missing:
        raise ValueError(f"{path}: column(s) {', '.join(missing)} missing; expected stage 05's per_case.csv "
                         "(echo_lib.epm.scoring.write_tables)")
    table["Model"] = table["Model"].astype(str)
    return table


def pairwise_rates(pairwise: pd.DataFrame) -> pd.DataFrame:
    """Per model: the win rate against the reference (over both orders and every judge) with a 95 %
    interval over cases (cluster t: a case's verdicts are averaged first), and the position-bias rate."""
    cols = ["model", "win_rate", "win_ci_low", "win_ci_high", "win_n_cases", "win_ci_method", "position_bias", "n_pairs"]
    done = pairwise.dropna(subset=["winner"])
    if done.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for model, r in done.groupby("model", sort=False):
        both = r.groupby(["case_id", "judge"]).filter(lambda g: set(g["order"]) == {"model_first", "reference_first"})
        flips = both.groupby(["case_id", "judge"]).apply(
            lambda g: g["winner"].nunique() > 1, include_groups=False)
        iv = cluster_interval((r["winner"] == model).astype(float).tolist(), r["case_id"].tolist()).clipped(0, 1)
        rows.append({"model": model, "win_rate": float((r["winner"] == model).mean()),
                     "win_ci_low": _nan(iv.low), "win_ci_high": _nan(iv.high), "win_n_cases": iv.n,
                     "win_ci_method": iv.method,
                     "position_bias": float(flips.mean()) if len(flips) else float("nan"), "n_pairs": len(flips)})
    return pd.DataFrame(rows, columns=cols)


def position_bias(pairwise: pd.DataFrame) -> float:
    """Over all models: the share of complete pairs whose verdict flips with the order (NaN with none)."""
    rates = pairwise_rates(pairwise)
    if rates.empty or rates["n_pairs"].sum() == 0:
        return float("nan")
    return float((rates["position_bias"] * rates["n_pairs"]).sum() / rates["n_pairs"].sum())


def summary_table(ratings: pd.DataFrame, epmq: dict[str, float], weight: float,
                  pairwise: pd.DataFrame | None = None, models: list[str] | None = None) -> pd.DataFrame:
    """One row per model: nee (+ interval, n transcripts, method), n_ratings, epmq, composite, each
    dimension's 0-100 score, and the pairwise rates where there are pairs."""
    models = models or list(dict.fromkeys(ratings["model"]))
    dims = dimension_table(ratings)
    rates = pairwise_rates(pairwise) if pairwise is not None else pd.DataFrame(columns=["model"])
    rows = []
    for model in models:
        r = ratings[ratings["model"] == model]
        iv = _score(r)
        nee = _nan(iv.estimate)
        e = epmq.get(model, float("nan"))
        row = {"model": model, "nee": nee, "nee_ci_low": _nan(iv.low), "nee_ci_high": _nan(iv.high),
               "nee_ci_method": iv.method,
               "nee_ci_shown": iv.shown, "n_transcripts": r["case_id"].nunique(),
               "n_ratings": int(r["score"].notna().sum()),
               "n_failed": int(r["score"].isna().sum()), "epmq": e, "composite": float(composite(e, nee, weight))}
        d = dims[dims["model"] == model].set_index("dimension")["score"]
        row.update({k: float(d.get(k, float("nan"))) for k in KEYS})
        p = rates[rates["model"] == model]
        for key, col in (("pairwise_win_rate", "win_rate"), ("pairwise_win_ci_low", "win_ci_low"),
                         ("pairwise_win_ci_high", "win_ci_high")):
            row[key] = float(p[col].iloc[0]) if len(p) else float("nan")
        row["pairwise_win_n_cases"] = int(p["win_n_cases"].iloc[0]) if len(p) else 0
        row["position_bias"] = float(p["position_bias"].iloc[0]) if len(p) else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def paired_scores(ratings: pd.DataFrame, case_epmq: pd.DataFrame | None, weight: float,
                  pairs: list[tuple[str, str]]) -> pd.DataFrame:
    """One row per (pair, metric) for NEE and, where stage 05's per-case EPM-Q is there, the composite:
    A - B over the cases both models have, its paired t-interval, n, method and verdict. `case_epmq` has
    Model, Case_ID, EPM-Q (stage 05's per_case.csv)."""
    values = per_case_scores(ratings).reset_index().rename(columns={"model": "Model", "case_id": "Case_ID"})
    metrics = {"NEE": "NEE"}
    if case_epmq is not None and len(case_epmq):
        values = values.merge(case_epmq[["Model", "Case_ID", "EPM-Q"]], on=["Model", "Case_ID"], how="left")
        values["Composite"] = composite(values["EPM-Q"], values["NEE"], weight)
        metrics["Composite"] = "Composite"
    return paired_table(values, pairs, metrics)

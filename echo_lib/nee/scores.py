"""From ratings to scores: the 0-100 NEE score with bootstrap intervals, the composite with EPM-Q, and
the pairwise win and position-bias rates.

- NEE (METHOD.md 7.2 [DEFAULT]): the mean over dimensions and judges, rescaled (mean - 1) / 4 * 100.
  A model's mean is taken per transcript first and then over its transcripts, so every case weighs the
  same; the 95% interval resamples transcripts (the unit that was sampled), seeded from the run seed.
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


def rescale(likert_mean):
    """1-5 -> 0-100."""
    return (np.asarray(likert_mean, dtype=float) - 1) / 4 * 100


def bootstrap_ci(values, n_boot: int, seed: int, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval of the mean of `values` (NaN when n_boot is 0 or nothing is there)."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if n_boot <= 0 or len(values) == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(n_boot, len(values)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    return float(np.percentile(means, tail)), float(np.percentile(means, 100 - tail))


def composite(epmq, nee, weight: float):
    """w * min(EPM-Q, 100) + (1 - w) * NEE (this package's choice, METHOD.md 7.3)."""
    return weight * np.minimum(np.asarray(epmq, dtype=float), 100) + (1 - weight) * np.asarray(nee, dtype=float)


def _score(ratings: pd.DataFrame, n_boot: int, seed: int) -> tuple[float, float, float]:
    """(score, ci_low, ci_high) on 0-100 from ratings of one model (one or all dimensions)."""
    per_case = ratings.groupby("case_id")["score"].mean().dropna()
    if per_case.empty:
        return float("nan"), float("nan"), float("nan")
    low, high = bootstrap_ci(per_case.to_numpy(), n_boot, seed)
    return float(rescale(per_case.mean())), float(rescale(low)), float(rescale(high))


def dimension_table(ratings: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """One row per model and dimension: the 1-5 mean, the 0-100 score and its interval."""
    rows = []
    for (model, dim), r in ratings.groupby(["model", "dimension"], sort=False):
        score, low, high = _score(r, n_boot, seed)
        rows.append({"model": model, "dimension": dim, "likert_mean": r["score"].mean(), "score": score,
                     "ci_low": low, "ci_high": high, "n_ratings": int(r["score"].notna().sum())})
    return pd.DataFrame(rows, columns=["model", "dimension", "likert_mean", "score", "ci_low", "ci_high", "n_ratings"])


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


def pairwise_rates(pairwise: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Per model: the win rate against the reference (over both orders) with a bootstrap 95 % interval
    over cases (each case's share of wins resampled), and the position-bias rate."""
    cols = ["model", "win_rate", "win_ci_low", "win_ci_high", "position_bias", "n_pairs"]
    done = pairwise.dropna(subset=["winner"])
    if done.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for model, r in done.groupby("model", sort=False):
        both = r.groupby(["case_id", "judge"]).filter(lambda g: set(g["order"]) == {"model_first", "reference_first"})
        flips = both.groupby(["case_id", "judge"]).apply(
            lambda g: g["winner"].nunique() > 1, include_groups=False)
        per_case = (r["winner"] == model).groupby(r["case_id"]).mean()
        low, high = bootstrap_ci(per_case.to_numpy(), n_boot, seed)
        rows.append({"model": model, "win_rate": float((r["winner"] == model).mean()),
                     "win_ci_low": low, "win_ci_high": high, "position_bias": float(flips.mean()) if len(flips) else float("nan"), "n_pairs": len(flips)})
    return pd.DataFrame(rows, columns=cols)


def position_bias(pairwise: pd.DataFrame) -> float:
    """Over all models: the share of complete pairs whose verdict flips with the order (NaN with none)."""
    rates = pairwise_rates(pairwise)
    if rates.empty or rates["n_pairs"].sum() == 0:
        return float("nan")
    return float((rates["position_bias"] * rates["n_pairs"]).sum() / rates["n_pairs"].sum())


def summary_table(ratings: pd.DataFrame, epmq: dict[str, float], weight: float, n_boot: int, seed: int,
                  pairwise: pd.DataFrame | None = None, models: list[str] | None = None) -> pd.DataFrame:
    """One row per model: nee (+ interval), n_ratings, epmq, composite, each dimension's 0-100 score,
    and the pairwise rates where there are pairs."""
    models = models or list(dict.fromkeys(ratings["model"]))
    dims = dimension_table(ratings, n_boot, seed)
    rates = pairwise_rates(pairwise, n_boot, seed) if pairwise is not None else pd.DataFrame(columns=["model"])
    rows = []
    for model in models:
        r = ratings[ratings["model"] == model]
        nee, low, high = _score(r, n_boot, seed)
        e = epmq.get(model, float("nan"))
        row = {"model": model, "nee": nee, "nee_ci_low": low, "nee_ci_high": high,
               "n_transcripts": r["case_id"].nunique(), "n_ratings": int(r["score"].notna().sum()),
               "n_failed": int(r["score"].isna().sum()), "epmq": e, "composite": float(composite(e, nee, weight))}
        d = dims[dims["model"] == model].set_index("dimension")["score"]
        row.update({k: float(d.get(k, float("nan"))) for k in KEYS})
        p = rates[rates["model"] == model]
        for key, col in (("pairwise_win_rate", "win_rate"), ("pairwise_win_ci_low", "win_ci_low"),
                         ("pairwise_win_ci_high", "win_ci_high")):
            row[key] = float(p[col].iloc[0]) if len(p) else float("nan")
        row["position_bias"] = float(p["position_bias"].iloc[0]) if len(p) else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)

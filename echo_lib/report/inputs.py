"""The stage outputs the paper (stage 07) reads, each checked against its file contract (DESIGN.md).

A missing file or column stops stage 07 with a message naming the file, what is missing and which
stage writes it, rather than a table with a silent hole.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import pandas as pd

EPM_SUMMARY = ["Model", "EPM-Q", "Outcome", "Efficiency", "Stability", "Success", "Failure", "Timeout", "Cases"]
EPM_PER_CASE = ["Model", "Case_ID", "EPM-Q", "E_total", "P0_norm"]
EPM_INTERVALS = ["Model", "Metric", "n", "Estimate", "CI low", "CI high", "Method", "Shown", "CI"]
PAIRED = ["A", "B", "Metric", "n", "Difference", "CI low", "CI high", "Method", "Verdict"]   # epm/ and nee/paired.csv
NEE_SUMMARY = ["model", "nee", "nee_ci_low", "nee_ci_high", "nee_ci_method", "nee_ci_shown", "n_transcripts",
               "n_ratings", "epmq", "composite"]
TRAIN_LOG = ["step", "reward"]
WINRATE = ["variant", "judge", "judge_model", "n", "wins", "ties", "losses", "win_rate", "ci_low", "ci_high"]
RM_METRICS = ["accuracy", "majority_baseline", "parse_failure_rate"]
SYCOPHANCY_SUMMARY = ["Model", "Seeker cases", "Sycophancy rate", "Rate CI", "Agreement level", "Seeker EPM-Q",
                      "Seeker EPM-Q CI", "EPM-Q (stage 05)"]
SYCOPHANCY_RECORD = ["judges", "sensitivity", "checks", "params"]

WRITER = {"epm": "stage 05 (notebooks/05_epm_analysis.py)", "nee": "stage 06 (notebooks/06_nee_panel.py)",
          "policy": "stage 03 (notebooks/03_policy_rl.py)", "rm": "stage 02 (notebooks/02_reward_models.py)",
          "sycophancy": "stage 06b (notebooks/06_sycophancy.py)"}


class PaperInputError(ValueError):
    """A result file stage 07 needs is missing or does not hold what its contract promises."""


def _writer(path: Path) -> str:
    return next((w for part, w in WRITER.items() if part in path.parts), "an earlier stage")


def _exists(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise PaperInputError(f"{path} does not exist; it is written by {_writer(path)}: run the DAG "
                              f"(snakemake --cores N {path}) before stage 07")
    return path


def read_csv(path: str | Path, required: Iterable[str]) -> pd.DataFrame:
    """A CSV with the columns its contract requires (more are fine)."""
    path = _exists(path)
    table = pd.read_csv(path)
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise PaperInputError(f"{path} lacks column(s) {', '.join(missing)} (has: {', '.join(table.columns)}); "
                              f"rerun {_writer(path)} with this version of the code")
    return table


def read_json(path: str | Path) -> dict:
    path = _exists(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise PaperInputError(f"{path} is not valid JSON ({err}); rerun {_writer(path)}") from None


def read_sycophancy(path: str | Path) -> dict:
    """Stage 06b's summary.json: the judges, the panel's agreement check, EMPA's checks per model, the params."""
    record = read_json(path)
    missing = [k for k in SYCOPHANCY_RECORD if k not in record]
    if missing:
        raise PaperInputError(f"{path} lacks key(s) {', '.join(missing)}; rerun {_writer(Path(path))} with this "
                              "version of the code")
    return record


def read_rm_metrics(path: str | Path) -> dict:
    """metrics.json of one reward model: 'base' and 'trained', each with accuracy etc. (stage 02)."""
    record = read_json(path)
    for model in ("base", "trained"):
        got = record.get(model)
        if not isinstance(got, dict) or any(k not in got for k in RM_METRICS):
            raise PaperInputError(f"{path}: key '{model}' must hold {', '.join(RM_METRICS)}; "
                                  f"rerun {_writer(Path(path))}")
    return record


def agreement_alpha(path: str | Path) -> float | None:
    """Krippendorff's alpha from nee/agreement.json: the first numeric top-level key naming alpha."""
    record = read_json(path)
    for key in ("krippendorff_alpha", "alpha"):
        if isinstance(record.get(key), (int, float)) or record.get(key) is None and key in record:
            return record[key]
    for key, value in record.items():
        if "alpha" in key.lower() and (isinstance(value, (int, float)) or value is None):
            return value
    raise PaperInputError(f"{path} has no Krippendorff's alpha (keys: {', '.join(record)}); expected a key "
                          "'krippendorff_alpha' or 'alpha'")

"""Per-case EPM-Q slices for the radar and bar figures (METHOD.md 5.6, 6.8, 8.4).

A slice score is the mean per-case EPM-Q over the cases in the slice:
- mechanism: dominant axis (A, C, P) x Routine (Easy, Medium) / Hard (Hard, Very Hard);
- persona: need type x Receptive (threshold Low or Medium) / Defensive (High), where a case is an
  A-need case if its affective priority is High, C-need if cognitive is High, P-need if motivational is
  High or Medium (a case can have several need types);
- domain: the six life domains.
"""
from __future__ import annotations

from typing import Mapping

import pandas as pd

from echo_lib.epm.case_meta import DOMAINS, CaseMeta

MECHANISM = ("A-Rout", "A-Hard", "C-Rout", "C-Hard", "P-Rout", "P-Hard")
PERSONA = ("A-Rec", "A-Def", "C-Rec", "C-Def", "P-Rec", "P-Def")
SLICINGS = {"mechanism": MECHANISM, "persona": PERSONA, "domain": DOMAINS}
NEED_LEVELS = {"A": ("High",), "C": ("High",), "P": ("High", "Medium")}


def case_slices(meta: CaseMeta) -> dict[str, list[str]]:
    """The slices one case belongs to, per slicing."""
    hard = meta.difficulty in ("Hard", "Very Hard")
    stance = "Def" if meta.threshold == "High" else "Rec"
    needs = [axis for axis in ("A", "C", "P") if meta.priorities.get(axis) in NEED_LEVELS[axis]]
    return {"mechanism": [f"{meta.dominant_axis}-{'Hard' if hard else 'Rout'}"],
            "persona": [f"{axis}-{stance}" for axis in needs],
            "domain": [meta.domain]}


def slice_table(per_case: pd.DataFrame, meta: Mapping[str, CaseMeta], value: str = "EPM-Q") -> pd.DataFrame:
    """Long table: Model, Slicing, Slice, Score (mean of `value` over the slice's cases), Cases.
    Cases without metadata are left out of every slice (and named in the error if none has any)."""
    known = per_case[per_case["Case_ID"].isin(meta)]
    if known.empty and not per_case.empty:
        missing = sorted(set(per_case["Case_ID"]))[:5]
        raise ValueError(f"no case metadata for any case (e.g. {', '.join(missing)}); "
                         "pass the CaseMeta of the scenarios the runs used")
    rows = []
    for _, case in known.iterrows():
        for slicing, names in case_slices(meta[case["Case_ID"]]).items():
            for name in names:
                rows.append({"Model": case["Model"], "Slicing": slicing, "Slice": name, "value": case[value]})
    long = pd.DataFrame(rows, columns=["Model", "Slicing", "Slice", "value"])
    out = long.groupby(["Model", "Slicing", "Slice"], sort=False)["value"].agg(["mean", "size"]).reset_index()
    return out.rename(columns={"mean": "Score", "size": "Cases"})


def slice_wide(slices: pd.DataFrame, slicing: str) -> pd.DataFrame:
    """Models x slices of one slicing, columns in the paper's order (missing slices are NaN)."""
    part = slices[slices["Slicing"] == slicing]
    wide = part.pivot(index="Model", columns="Slice", values="Score")
    return wide.reindex(columns=list(SLICINGS[slicing]))

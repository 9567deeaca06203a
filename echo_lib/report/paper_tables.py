"""The paper's tables, each built from one stage's result files (checked by echo_lib.report.inputs).

Every function returns a DataFrame of what this run measured; nothing here knows a published number
(those live only in the claims table, echo_lib.report.claims).
"""
from __future__ import annotations

import numbers
from typing import Mapping

import pandas as pd

from echo_lib.report.tables import format_cell
from echo_lib.stats import MIN_N, Interval


def success_rate(summary: pd.DataFrame) -> pd.Series:
    """Successes / cases in percent (a timeout counts as not successful, as in EMPA)."""
    return 100.0 * summary["Success"] / summary["Cases"]


def _interval_cells(intervals: pd.DataFrame, metric: str) -> pd.Series:
    """Model -> the printed interval of one metric (stage 05's intervals.csv: "[lo, hi]" or why none)."""
    rows = intervals[intervals["Metric"] == metric]
    return pd.Series(rows["CI"].tolist(), index=rows["Model"].tolist(), dtype=object)


def nee_interval_cell(row: Mapping) -> str | None:
    """Stage 06's NEE interval as the tables print it: "[lo, hi]", or why there is none (stats.Interval)."""
    if pd.isna(row.get("nee")):
        return None
    low, high = (None if pd.isna(row[k]) else float(row[k]) for k in ("nee_ci_low", "nee_ci_high"))
    return Interval(float(row["nee"]), low, high, int(row["n_transcripts"]), str(row["nee_ci_method"])).cell()


def main_results(epm: pd.DataFrame, nee: pd.DataFrame, intervals: pd.DataFrame) -> pd.DataFrame:
    """One row per model under test: sandbox outcome and EPM-Q with their 95 % intervals over cases, the
    EPM-Q groups (stage 05), NEE and the composite (stage 06). Below stats.MIN_N cases an interval cell
    says "n too small" instead of bounds. A model the NEE panel did not rate keeps empty NEE cells."""
    nee = nee.rename(columns={"model": "Model"})
    merged = epm.merge(nee[["Model", "nee", "nee_ci_low", "nee_ci_high", "nee_ci_method", "n_transcripts", "composite"]],
                       on="Model", how="left")
    merged = merged.sort_values("EPM-Q", ascending=False)
    epmq_ci, success_ci = _interval_cells(intervals, "EPM-Q"), _interval_cells(intervals, "Success (%)")
    return pd.DataFrame({
        "Model": merged["Model"], "Cases": merged["Cases"].astype(int),
        "Success (%)": success_rate(merged).round(1), "Success 95% CI": merged["Model"].map(success_ci),
        "EPM-Q": merged["EPM-Q"], "EPM-Q 95% CI": merged["Model"].map(epmq_ci), "Outcome": merged["Outcome"],
        "Efficiency": merged["Efficiency"], "Stability": merged["Stability"], "NEE": merged["nee"],
        "NEE 95% CI": [nee_interval_cell(r) for r in merged.to_dict("records")],
        "Composite": merged["composite"]}).reset_index(drop=True)


def difference_cell(row: Mapping) -> str:
    """A paired difference's interval as printed: "[lo, hi]" from stats.MIN_N pairs on, else why not."""
    n, lo, hi = int(row["n"]), row["CI low"], row["CI high"]
    if n < MIN_N:
        return f"n too small (n = {n})" if n else "no shared cases"
    if pd.isna(lo) or pd.isna(hi) or not lo < hi:
        return "no spread: every case gave the same difference"
    return f"[{format_cell(lo, 1)}, {format_cell(hi, 1)}]"


def sandbox_differences(epm_paired: pd.DataFrame, nee_paired: pd.DataFrame | None = None) -> pd.DataFrame:
    """The paired differences (A - B over the cases both models ran) of stage 05 (EPM-Q, its groups, the
    success rate) and stage 06 (NEE, the composite), each with n, its interval, method and verdict as the
    stage wrote them: a verdict never says more than its interval."""
    present = [t for t in (epm_paired, nee_paired) if t is not None and len(t)]
    paired = pd.concat(present, ignore_index=True) if present else pd.DataFrame()
    if paired.empty:
        return pd.DataFrame(columns=["Comparison", "Metric", "n", "Difference", "95% CI", "Method", "Verdict"])
    return pd.DataFrame({"Comparison": paired["A"] + " - " + paired["B"], "Metric": paired["Metric"],
                         "n": paired["n"].astype(int), "Difference": paired["Difference"],
                         "95% CI": [difference_cell(r) for r in paired.to_dict("records")],
                         "Method": paired["Method"], "Verdict": paired["Verdict"]}).reset_index(drop=True)


SEED_METRICS = ("EPM-Q", "NEE", "Composite")   # the comparisons whose dependence on the RL seed the appendix shows
SEED_COLUMNS = ["Variant", "Metric", "RL seed", "n", "Difference", "95% CI", "Verdict", "Every seed"]


def seed_spread(paired: pd.DataFrame, trained: Mapping[str, tuple[str, int]], reference: str) -> pd.DataFrame:
    """How much a verdict depends on the RL seed: for each variant and SEED_METRICS metric, every seed's paired
    difference against `reference` (stages 05 / 06: n, interval, verdict), and whether all its seeds got the same
    verdict ("same verdict", "verdicts differ", or "one seed"). `trained` is policy.trained()."""
    rows = []
    by_pair = {(r["A"], r["B"], r["Metric"]): r for r in paired.to_dict("records")}
    for variant in dict.fromkeys(v for v, _ in trained.values()):
        seeds = [(name, seed) for name, (v, seed) in trained.items() if v == variant]
        for metric in SEED_METRICS:
            found = [(name, seed, by_pair[(name, reference, metric)]) for name, seed in seeds
                     if (name, reference, metric) in by_pair]
            verdicts = {r["Verdict"] for _, _, r in found}
            every = "one seed" if len(found) < 2 else ("same verdict" if len(verdicts) == 1 else "verdicts differ")
            rows += [{"Variant": f"{variant} - {reference}", "Metric": metric, "RL seed": seed, "n": int(r["n"]),
                      "Difference": r["Difference"], "95% CI": difference_cell(r), "Verdict": r["Verdict"],
                      "Every seed": every} for _, seed, r in found]
    return pd.DataFrame(rows, columns=SEED_COLUMNS)


def energy_reach(per_case: pd.DataFrame) -> dict[str, str]:
    """How close the dialogues came to success's energy condition (E_total >= |P_0|, METHOD.md 6.5): over
    every model's cases, the median and largest E_total / |P_0| and how many reached 1."""
    ratio = (per_case["E_total"] / per_case["P0_norm"]).dropna()
    if ratio.empty:
        return {"EnergyRatioMedian": NOT_AVAILABLE, "EnergyRatioMax": NOT_AVAILABLE, "EnergyReached": NOT_AVAILABLE}
    return {"EnergyRatioMedian": f"{ratio.median():.2f}", "EnergyRatioMax": f"{ratio.max():.2f}",
            "EnergyReached": f"{int((ratio >= 1).sum())} of {len(ratio)}"}


def judge_sensitivity(record: Mapping) -> pd.DataFrame:
    """The judges on the held-out sensitivity items (rule judges): preference accuracy with its interval
    beside chance, the length rule and the target; the NEE panel's alpha and position bias."""
    def ci(x):
        return "" if not x else f"[{x[0]:.2f}, {x[1]:.2f}]"
    t, rows = record["thresholds"], []
    rows.append({"Instrument": "length rule (probe)", "Accuracy": record["length_rule"]["accuracy"],
                 "95% CI": ci(record["length_rule"]["accuracy_ci"]), "Target": "", "Alpha": None, "Position bias": None})
    if "probe" in record:
        p = record["probe"]
        for name, r in (("embedding probe (fit on dev)", p), ("embedding probe, labels shuffled", p["shuffled"])):
            rows.append({"Instrument": name, "Accuracy": r["accuracy"], "95% CI": ci(r["accuracy_ci"]), "Target": "",
                         "Alpha": None, "Position bias": None})
    if "sandbox_judge" in record:
        s = record["sandbox_judge"]
        rows.append({"Instrument": f"sandbox judge ({s['model']})", "Accuracy": s["accuracy"], "95% CI": ci(s["accuracy_ci"]),
                     "Target": f">= {t['sandbox_judge_accuracy']}", "Alpha": None, "Position bias": None})
    if "nee" in record:
        n = record["nee"]
        rows.append({"Instrument": "NEE panel (" + ", ".join(n["models"]) + ")", "Accuracy": n["accuracy"],
                     "95% CI": ci(n["accuracy_ci"]), "Target": f">= {t['nee_accuracy']}", "Alpha": n["alpha"],
                     "Position bias": n["position_bias"]})
    return pd.DataFrame(rows)


def rm_accuracy(metrics: Mapping[str, dict]) -> pd.DataFrame:
    """Reward models, untrained base vs trained, on each kind's held-out test split (stage 02)."""
    rows = []
    for kind, record in metrics.items():
        for model in ("base", "trained"):
            m = record[model]
            rows.append({"Reward model": kind, "Model": model, "n": m.get("n", record.get("n_test")),
                         "Accuracy": m["accuracy"], "Majority baseline": m["majority_baseline"],
                         "Parse failures": m["parse_failure_rate"], "Position bias": m.get("position_bias"),
                         "Length bias": m.get("length_bias")})
    return pd.DataFrame(rows)


def winrates(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Pairwise win rate of each RL variant against the base policy (stage 03), per judge. A prompt is a
    win or a loss only when the judge agrees in both orders; "Order-consistent" is the share of prompts
    whose two orders agreed ("--" for a winrate.csv written before it was recorded), and an interval that is
    not shown (fewer than stats.MIN_N prompts) gives its note ("n too small (n = 8)") instead."""
    rows = pd.concat(list(tables.values()), ignore_index=True) if tables else pd.DataFrame()
    if rows.empty:
        return pd.DataFrame(columns=["Variant", "Judge", "Judge model", "n", "Wins", "Ties", "Losses",
                                     "Win rate", "95% CI", "Order-consistent"])
    hidden = rows["ci_degenerate"] if "ci_degenerate" in rows else pd.Series(False, index=rows.index)
    notes = rows["interval_note"] if "interval_note" in rows else pd.Series("", index=rows.index)
    ci = [note if str(flat) == "True" else f"[{format_cell(lo)}, {format_cell(hi)}]"
          for lo, hi, flat, note in zip(rows["ci_low"], rows["ci_high"], hidden.fillna(False), notes.fillna(""))]
    consistency = rows["position_consistency"] if "position_consistency" in rows else pd.Series(float("nan"), index=rows.index)
    return pd.DataFrame({"Variant": rows["variant"], "Judge": rows["judge"], "Judge model": rows["judge_model"],
                         "n": rows["n"], "Wins": rows["wins"], "Ties": rows["ties"], "Losses": rows["losses"],
                         "Win rate": rows["win_rate"], "95% CI": ci, "Order-consistent": consistency})


def empa_replay(published: pd.DataFrame) -> pd.DataFrame:
    """EMPA's published sandbox runs replayed by this package's EPM engine (stage 05 on their files):
    a check of the scoring code, not a measurement of any model by this run."""
    table = published.sort_values("EPM-Q", ascending=False)
    return pd.DataFrame({"Model": table["Model"], "Cases": table["Cases"].astype(int),
                         "Success (%)": success_rate(table).round(1), "EPM-Q": table["EPM-Q"],
                         "Outcome": table["Outcome"], "Efficiency": table["Efficiency"],
                         "Stability": table["Stability"]}).reset_index(drop=True)


# ---- The sycophancy guard (stage 06b, opt-in) ------------------------------------------------------------
GUARD_COLUMNS = ["Model", "Seeker cases", "Sycophancy rate", "95% CI", "Agreement (1-5)", "Seeker EPM-Q",
                 "Seeker EPM-Q 95% CI", "EPM-Q (stage 05)"]
CHECK_COLUMNS = ["Model", "Check", "n", "Mean difference", "95% CI", "Negative (%)", "Direct judge difference"]
CHECK_NAMES = {"sycophancy": "sycophancy (Delta E)", "persona_flip": "persona flip (Delta E)"}
PANEL_CHECK = "agreement level: endorsing - questioning replies"
REPORTED_ROW = "EMPA (reported)"


def sycophancy_guard(summary: pd.DataFrame) -> pd.DataFrame:
    """Per model under test: the share of its seeker dialogues the panel rated as agreeing with the false or
    harmful belief, with its interval, the mean agreement level, and the seeker dialogues' EPM-Q beside stage 05's
    (stage 06b's summary.csv); no rows when the guard did not run."""
    if summary.empty:
        return pd.DataFrame(columns=GUARD_COLUMNS)
    return pd.DataFrame({"Model": summary["Model"], "Seeker cases": summary["Seeker cases"].astype(int),
                         "Sycophancy rate": summary["Sycophancy rate"], "95% CI": summary["Rate CI"],
                         "Agreement (1-5)": summary["Agreement level"], "Seeker EPM-Q": summary["Seeker EPM-Q"],
                         "Seeker EPM-Q 95% CI": summary["Seeker EPM-Q CI"],
                         "EPM-Q (stage 05)": summary["EPM-Q (stage 05)"]}).reset_index(drop=True)


def _ci_cell(estimate: float | None, bounds, n: int, method: str, digits: int = 1) -> str:
    """An interval as summary.json holds it (estimate, [low, high] or None, n), printed as every table prints
    one (stats.Interval.cell): "[lo, hi]", or why there is none."""
    low, high = bounds or (None, None)
    return Interval(estimate, low, high, int(n), method).cell(digits)


def sycophancy_checks(record: Mapping | None) -> pd.DataFrame:
    """Can the guard's instruments see flattery? From stage 06b's summary.json: first the judge panel's check
    (the agreement level it gives replies written to endorse each seeker's belief minus replies written to question
    it, paired over the reference model's seeker cases: it must lie above 0 for the sycophancy rates to mean
    anything); then EMPA's perturbation checks on each model's sandbox dialogues (mean Delta E, perturbed -
    original, with its interval, the share below 0, the direct judge's mean change on NEE's 1-5 scale); then
    EMPA's published values, one row per check labelled reported (its direct judge rates 1-10)."""
    if not record:
        return pd.DataFrame(columns=CHECK_COLUMNS)
    s = record["sensitivity"]
    rows = [{"Model": ", ".join(record["judges"]), "Check": PANEL_CHECK, "n": int(s["n"]),
             "Mean difference": s["difference"], "95% CI": _ci_cell(s["difference"], s["ci"], s["n"], s["method"], 2),
             "Negative (%)": None, "Direct judge difference": None}]
    reported = {}
    for model, checks in record["checks"].items():
        for c in checks:
            share, dE = c["delta_E_negative"]["estimate"], c["delta_E"]
            rows.append({"Model": model, "Check": CHECK_NAMES.get(c["check"], c["check"]), "n": int(c["n"]),
                         "Mean difference": dE["estimate"],
                         "95% CI": _ci_cell(dE["estimate"], dE["ci"], c["n"], dE["method"]),
                         "Negative (%)": None if share is None else round(100 * share, 1),
                         "Direct judge difference": c["direct_delta"]["estimate"]})
            reported.setdefault(c["check"], c["reported"])
    for check, rep in reported.items():
        rows.append({"Model": REPORTED_ROW, "Check": CHECK_NAMES.get(check, check), "n": int(rep["n"]),
                     "Mean difference": rep["delta_E"],
                     "95% CI": _ci_cell(rep["delta_E"], rep["delta_E_ci"], rep["n"], "reported", 2),
                     "Negative (%)": round(100 * rep["negative_share"], 1),
                     "Direct judge difference": rep["direct_delta"]})
    return pd.DataFrame(rows, columns=CHECK_COLUMNS)


# ---- The numbers of main.tex's prose, as LaTeX macros (tables/macros.tex) ------------------------------
# main.tex names the models by role: the untrained base (roles.policy) and the two RL variants. Every
# macro is defined for every run, "n/a" where the run has no such value, so main.tex always compiles.
NOT_AVAILABLE = "n/a"
ROLES = {"Base": None, "Echo": "echo", "Scalar": "scalar"}   # macro prefix -> model (None: the run's base)
PAIRS = [("echo", "base"), ("scalar", "base"), ("echo", "scalar")]
DIFF_METRICS = {"EPM-Q": "EPMQ", "Outcome": "Outcome", "Efficiency": "Efficiency", "Stability": "Stability",
                "Success (%)": "Success", "NEE": "NEE", "Composite": "Composite"}
WIN_JUDGES = {"empathy_rm": "RM", "independent": "Independent"}


def _cell(table: pd.DataFrame, where: Mapping[str, object], column: str, fmt: str = "{:.2f}") -> str:
    """One cell as the table prints it (`fmt` for numbers), or n/a when the row or value is missing."""
    rows = table
    for key, value in where.items():
        rows = rows[rows[key] == value]
    if rows.empty or column not in rows or pd.isna(rows[column].iloc[0]) or rows[column].iloc[0] == "":
        return NOT_AVAILABLE
    value = rows[column].iloc[0]
    return fmt.format(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else str(value)


def result_macros(main: pd.DataFrame, differences: pd.DataFrame, rm: pd.DataFrame, wins: pd.DataFrame,
                  sensitivity: pd.DataFrame, base: str) -> dict[str, str]:
    """Macro name -> text, each read from a table of this run exactly as that table prints it."""
    out: dict[str, str] = {}
    for prefix, model in ROLES.items():
        row = {"Model": model or base}
        out |= {f"{prefix}Success": _cell(main, row, "Success (%)", "{:.1f}"),
                f"{prefix}SuccessCI": _cell(main, row, "Success 95% CI"),
                f"{prefix}EPMQ": _cell(main, row, "EPM-Q"), f"{prefix}EPMQCI": _cell(main, row, "EPM-Q 95% CI"),
                f"{prefix}NEE": _cell(main, row, "NEE"), f"{prefix}NEECI": _cell(main, row, "NEE 95% CI"),
                f"{prefix}Composite": _cell(main, row, "Composite")}
    names = {model or base: prefix for prefix, model in ROLES.items()}
    for a, b in PAIRS:
        a_name, b_name = (base if m == "base" else m for m in (a, b))
        for metric, short in DIFF_METRICS.items():
            row, key = {"Comparison": f"{a_name} - {b_name}", "Metric": metric}, f"Diff{names[a_name]}{names[b_name]}{short}"
            out |= {key: _cell(differences, row, "Difference"), f"{key}CI": _cell(differences, row, "95% CI"),
                    f"{key}Verdict": _cell(differences, row, "Verdict"), f"{key}N": _cell(differences, row, "n", "{:d}")}
    for kind in ("humanlike", "empathy", "scalar"):
        for model in ("base", "trained"):
            out[f"RM{kind.capitalize()}{model.capitalize()}"] = _cell(rm, {"Reward model": kind, "Model": model}, "Accuracy")
        out[f"RM{kind.capitalize()}Majority"] = _cell(rm, {"Reward model": kind, "Model": "trained"}, "Majority baseline")
    for variant in ("echo", "scalar"):
        for judge, short in WIN_JUDGES.items():
            row = {"Variant": variant, "Judge": judge}
            out[f"Win{variant.capitalize()}{short}"] = _cell(wins, row, "Win rate")
            out[f"Win{variant.capitalize()}{short}CI"] = _cell(wins, row, "95% CI")
    out["WinPrompts"] = _cell(wins, {"Judge": "independent"}, "n", "{:d}")
    judge = sensitivity[sensitivity["Instrument"].str.startswith("sandbox judge")]
    out["JudgeAccuracy"] = _cell(judge, {}, "Accuracy")
    out["JudgeAccuracyCI"] = _cell(judge, {}, "95% CI")
    out["JudgeTarget"] = _cell(judge, {}, "Target")
    out["LengthRuleAccuracy"] = _cell(sensitivity, {"Instrument": "length rule (probe)"}, "Accuracy")
    return out

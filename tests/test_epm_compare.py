"""echo_lib.epm.compare: per-model intervals over cases and paired differences with their verdict."""
import numpy as np
import pandas as pd
import pytest

from echo_lib.epm.compare import central_pairs, model_intervals, paired_differences, write_comparisons
from echo_lib.epm.termination import FAILURE, SUCCESS, TIMEOUT


def per_case(rows):
    return pd.DataFrame([{"Model": m, "Case_ID": c, "EPM-Q": q, "Outcome": q + 1, "Efficiency": q / 2,
                          "Stability": 50.0, "Outcome_Label": o} for m, c, q, o in rows])


TABLE = per_case([
    ("base", "c1", 10.0, FAILURE), ("base", "c2", 20.0, SUCCESS), ("base", "c3", 30.0, TIMEOUT),
    ("echo", "c1", 15.0, SUCCESS), ("echo", "c2", 30.0, SUCCESS), ("echo", "c3", 45.0, TIMEOUT),
    ("scalar", "c1", 10.0, FAILURE), ("scalar", "c2", 20.0, SUCCESS), ("scalar", "c3", 30.0, TIMEOUT),
])


def thirty_cases(gain: float, seed: int = 0) -> pd.DataFrame:
    """base and echo on 30 cases; echo = base + gain + small noise."""
    rng = np.random.default_rng(seed)
    base = rng.normal(40, 10, 30)
    rows = [("base", f"c{i}", q, FAILURE) for i, q in enumerate(base)]
    rows += [("echo", f"c{i}", q + gain + rng.normal(0, 1), SUCCESS if i % 3 == 0 else FAILURE)
             for i, q in enumerate(base)]
    return per_case(rows)


def test_central_pairs_are_variants_against_the_base_then_each_other():
    assert central_pairs(["base", "echo", "scalar"], ["echo", "scalar"], "base") == [
        ("echo", "base"), ("scalar", "base"), ("echo", "scalar")]
    assert central_pairs(["base", "echo"], ["echo", "scalar"], "base") == [("echo", "base")]
    assert central_pairs(["gpt", "claude"], ["echo", "scalar"], "base") == []


def test_model_intervals_carry_n_and_method_and_print_none_below_ten_cases():
    t = model_intervals(TABLE).set_index(["Model", "Metric"])
    assert t.loc[("echo", "EPM-Q"), "Estimate"] == 30.0 and t.loc[("base", "EPM-Q"), "Estimate"] == 20.0
    assert t.loc[("echo", "EPM-Q"), "n"] == 3 and t.loc[("echo", "EPM-Q"), "Method"] == "t"
    assert t.loc[("echo", "Success (%)"), "Estimate"] == pytest.approx(66.6667)
    assert t.loc[("echo", "Success (%)"), "Method"] == "wilson-cc"
    assert set(t.index.get_level_values("Metric")) == {"EPM-Q", "Outcome", "Efficiency", "Stability", "Success (%)"}
    # three cases: the interval is computed (its bounds are in the file) but not printed
    assert t.loc[("echo", "EPM-Q"), "CI low"] < 30.0 < t.loc[("echo", "EPM-Q"), "CI high"]
    assert not t.loc[("echo", "EPM-Q"), "Shown"] and t.loc[("echo", "EPM-Q"), "CI"].startswith("n too small")


def test_model_intervals_print_the_interval_from_ten_cases_and_flag_no_spread():
    t = model_intervals(thirty_cases(5.0)).set_index(["Model", "Metric"])
    row = t.loc[("echo", "EPM-Q")]
    assert row["n"] == 30 and row["Shown"] and row["CI"] == f"[{row['CI low']:.1f}, {row['CI high']:.1f}]"
    success = t.loc[("base", "Success (%)")]                  # 0 of 30: Wilson still has an upper bound
    assert success["Estimate"] == 0.0 and success["CI low"] == 0.0 and 0 < success["CI high"] < 15
    assert t.loc[("base", "Stability"), "CI"] == "no spread: every item scored the same"


def test_paired_differences_give_a_verdict_only_at_ten_cases_or_more():
    small = paired_differences(TABLE, [("echo", "base"), ("scalar", "base")])
    q = small[small.Metric == "EPM-Q"].set_index("A")
    assert q.loc["echo", "Difference"] == 10.0 and q.loc["echo", "n"] == 3
    assert q.loc["echo", "Method"] == "paired t" and q.loc["echo", "Verdict"] == "n too small"
    big = paired_differences(thirty_cases(5.0), [("echo", "base")]).set_index("Metric")
    assert big.loc["EPM-Q", "Verdict"] == "echo above base" and 4 < big.loc["EPM-Q", "CI low"] < 5
    assert paired_differences(thirty_cases(-5.0), [("echo", "base")]).set_index("Metric").loc[
        "EPM-Q", "Verdict"] == "echo below base"
    flat = paired_differences(thirty_cases(0.0), [("echo", "base")]).set_index("Metric")
    assert flat.loc["EPM-Q", "Verdict"] == "no difference at this scale"


def test_paired_differences_use_only_the_cases_both_ran_and_say_when_there_are_none():
    partial = pd.concat([TABLE, per_case([("new", "c9", 50.0, SUCCESS), ("new", "c1", 20.0, SUCCESS)])])
    t = paired_differences(partial, [("new", "base"), ("new", "ghost")])
    q = t[t.Metric == "EPM-Q"].set_index("B")
    assert q.loc["base", "n"] == 1 and q.loc["base", "Difference"] == 10.0
    assert q.loc["ghost", "n"] == 0 and q.loc["ghost", "Verdict"] == "no shared units"


def test_write_comparisons_writes_both_tables(tmp_path):
    write_comparisons(TABLE, central_pairs(["base", "echo", "scalar"], ["echo", "scalar"], "base"), tmp_path)
    assert len(pd.read_csv(tmp_path / "intervals.csv")) == 3 * 5
    paired = pd.read_csv(tmp_path / "paired.csv")
    assert len(paired) == 3 * 5 and set(paired.Metric) == {"EPM-Q", "Outcome", "Efficiency", "Stability", "Success (%)"}
    assert list(paired.columns) == ["A", "B", "Metric", "n", "Difference", "CI low", "CI high", "Method", "Verdict"]

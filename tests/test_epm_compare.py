"""echo_lib.epm.compare: per-model intervals over cases and paired differences with their reading."""
import pandas as pd
import pytest

from echo_lib.epm.compare import NO_DIFFERENCE, central_pairs, model_intervals, paired_differences, write_comparisons
from echo_lib.epm.termination import FAILURE, SUCCESS, TIMEOUT


def per_case(rows):
    return pd.DataFrame([{"Model": m, "Case_ID": c, "EPM-Q": q, "Outcome_Label": o} for m, c, q, o in rows])


TABLE = per_case([
    ("base", "c1", 10.0, FAILURE), ("base", "c2", 20.0, SUCCESS), ("base", "c3", 30.0, TIMEOUT),
    ("echo", "c1", 15.0, SUCCESS), ("echo", "c2", 30.0, SUCCESS), ("echo", "c3", 45.0, TIMEOUT),
    ("scalar", "c1", 10.0, FAILURE), ("scalar", "c2", 20.0, SUCCESS), ("scalar", "c3", 30.0, TIMEOUT),
])


def test_central_pairs_are_variants_against_the_base_then_each_other():
    assert central_pairs(["base", "echo", "scalar"], ["echo", "scalar"], "base") == [
        ("echo", "base"), ("scalar", "base"), ("echo", "scalar")]
    assert central_pairs(["base", "echo"], ["echo", "scalar"], "base") == [("echo", "base")]
    assert central_pairs(["gpt", "claude"], ["echo", "scalar"], "base") == []


def test_model_intervals_are_the_means_over_cases_with_a_bootstrap_interval():
    t = model_intervals(TABLE, n_boot=500, seed=0).set_index("Model")
    assert t.loc["echo", "EPM-Q"] == 30.0 and t.loc["base", "EPM-Q"] == 20.0 and t.loc["echo", "Cases"] == 3
    assert t.loc["echo", "Success (%)"] == pytest.approx(66.67) and t.loc["base", "Success (%)"] == pytest.approx(33.33)
    lo, hi = (float(x) for x in t.loc["echo", "EPM-Q 95% CI"].strip("[]").split(","))
    assert 15.0 <= lo < 30.0 < hi <= 45.0          # inside the range of the three cases, around the mean


def test_paired_differences_read_a_clear_gain_and_an_identical_model():
    t = paired_differences(TABLE, [("echo", "base"), ("scalar", "base")], n_boot=500, seed=0)
    q = t[t.Metric == "EPM-Q"].set_index("A")
    # echo - base per case: 5, 10, 15: every resample's mean is at least 5
    assert q.loc["echo", "Difference"] == 10.0 and q.loc["echo", "CI low"] >= 5.0 and q.loc["echo", "CI high"] <= 15.0
    assert q.loc["echo", "Reading"] == "echo above base"
    # scalar equals base on every case: the interval is [0, 0], which spans 0
    assert q.loc["scalar", "Difference"] == 0.0 and q.loc["scalar", "Reading"] == NO_DIFFERENCE
    s = t[t.Metric == "Success (%)"].set_index("A")
    # echo - base success per case: +100, 0, 0: a resample of three zeros is possible, so 0 is inside
    assert s.loc["echo", "Difference"] == pytest.approx(33.33) and s.loc["echo", "Reading"] == NO_DIFFERENCE


def test_paired_differences_use_only_the_cases_both_ran_and_say_when_there_are_none():
    partial = pd.concat([TABLE, per_case([("new", "c9", 50.0, SUCCESS), ("new", "c1", 20.0, SUCCESS)])])
    t = paired_differences(partial, [("new", "base"), ("new", "ghost")], n_boot=100)
    q = t[t.Metric == "EPM-Q"].set_index("B")
    assert q.loc["base", "Cases"] == 1 and q.loc["base", "Difference"] == 10.0
    assert q.loc["ghost", "Cases"] == 0 and q.loc["ghost", "Reading"] == "no shared cases"


def test_write_comparisons_writes_both_tables(tmp_path):
    write_comparisons(TABLE, central_pairs(["base", "echo", "scalar"], ["echo", "scalar"], "base"), tmp_path, seed=3)
    assert len(pd.read_csv(tmp_path / "intervals.csv")) == 3
    paired = pd.read_csv(tmp_path / "paired.csv")
    assert len(paired) == 6 and set(paired.Metric) == {"EPM-Q", "Success (%)"}

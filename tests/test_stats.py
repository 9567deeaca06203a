"""echo_lib.stats: balanced accuracy, AUROC (Mann-Whitney) and the intervals (their coverage: test_stats_coverage)."""
import numpy as np
import pytest

from echo_lib.stats import (MIN_N, accuracy_by_kind, auroc, balanced_accuracy, cluster_interval, mean_interval,
                            paired_difference, proportion_interval, verdict, wilson)


def test_balanced_accuracy_by_hand():
    labels = ["human"] * 8 + ["machine"] * 2
    always_human = ["human"] * 10
    plain = sum(p == y for p, y in zip(always_human, labels)) / len(labels)
    assert plain == 0.8
    assert balanced_accuracy(labels, always_human) == 0.5          # (8/8 + 0/2) / 2
    preds = ["human"] * 6 + ["machine"] * 2 + ["machine", None]      # recalls 6/8 and 1/2
    assert balanced_accuracy(labels, preds) == pytest.approx((0.75 + 0.5) / 2)


def test_balanced_accuracy_none_is_wrong_and_empty_is_none():
    assert balanced_accuracy(["better", "worse"], [None, None]) == 0.0
    assert balanced_accuracy(["tie", "tie"], ["tie", None]) == 0.5   # only the classes present count
    assert balanced_accuracy([], []) is None
    with pytest.raises(ValueError):
        balanced_accuracy(["tie"], [])


def test_auroc_by_hand():
    # positives 0.9, 0.4; negatives 0.5, 0.1: pairs won 0.9>0.5, 0.9>0.1, 0.4>0.1; lost 0.4<0.5 -> 3/4
    assert auroc([True, True, False, False], [0.9, 0.4, 0.5, 0.1]) == 0.75
    assert auroc([True, False], [0.3, 0.3]) == 0.5                     # a tie counts one half
    assert auroc([True, True, False], [0.2, 0.8, 0.8]) == pytest.approx(0.25)  # 0 + 0.5 over 2 pairs
    assert auroc([False, False, True], [0.1, 0.2, 0.9]) == 1.0
    assert auroc([True, True], [0.1, 0.2]) is None
    assert auroc([], []) is None


def test_mean_interval_by_hand_and_narrows():
    x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0]
    iv = mean_interval(x)                              # mean 5.5, sd 3.0277, t(0.975, 9) = 2.2622
    assert (iv.estimate, iv.n, iv.method) == (5.5, 10, "t")
    assert iv.low == pytest.approx(5.5 - 2.2622 * 3.0277 / 10 ** 0.5, abs=1e-3)
    assert iv.high - 5.5 == pytest.approx(5.5 - iv.low)
    rng = np.random.default_rng(3)
    small, large = mean_interval(rng.normal(size=20)), mean_interval(rng.normal(size=2000))
    assert large.high - large.low < small.high - small.low
    assert mean_interval([1.0, float("nan"), 3.0]).n == 2
    assert mean_interval([]).estimate is None and mean_interval([]).bounds is None
    assert mean_interval([2.0]).low is None
    assert mean_interval(x, level=0.90).low > iv.low
    with pytest.raises(ValueError, match="level"):
        mean_interval(x, level=95)


def test_interval_is_shown_only_from_min_n_and_with_spread():
    assert MIN_N == 10
    assert not mean_interval([1.0, 2.0, 3.0]).shown
    assert mean_interval([1.0, 2.0, 3.0]).text() == "2.0 (n too small, n = 3)"
    assert mean_interval([1.0, 2.0, 3.0]).note.startswith("n too small")
    flat = mean_interval([0.0] * 12)
    assert flat.bounds == [0.0, 0.0] and not flat.shown and flat.text() == "0.0 (no spread, n = 12)"
    wide = mean_interval(list(range(12)))
    assert wide.shown and wide.note == "" and wide.text(1) == f"5.5 [{wide.low:.1f}, {wide.high:.1f}]"
    assert wide.to_dict()["method"] == "t" and wide.to_dict()["shown"] is True
    assert proportion_interval([1, 0] * 10).text(1, scale=100).startswith("50.0 [")


def test_paired_difference_and_verdict():
    rng = np.random.default_rng(0)
    b = rng.normal(50, 10, 30)
    a = b + 5 + rng.normal(0, 1, 30)                    # the pairing removes the large per-item spread
    d = paired_difference(a, b)
    assert d.method == "paired t" and d.n == 30 and 4 < d.low < 5 < d.high < 6
    assert verdict(d, "echo", "base") == "echo above base"
    assert verdict(paired_difference(b, a), "echo", "base") == "echo below base"
    assert verdict(paired_difference(b + rng.normal(0, 1, 30), b), "echo", "base") == "no difference at this scale"
    assert verdict(paired_difference(a[:3], b[:3]), "echo", "base") == "n too small"
    assert paired_difference([1.0, float("nan")], [0.0, 0.0]).n == 1
    with pytest.raises(ValueError):
        paired_difference([1.0], [1.0, 0.0])


def test_wilson_with_continuity_correction_by_hand():
    # Newcombe (1998), table I: 0/10 -> [0, 0.3445]; 10/10 -> [0.6555, 1]; 81/263 -> [0.2535, 0.3682]
    assert wilson(0, 10).bounds == [0.0, 0.3445]
    assert wilson(10, 10).bounds == [0.6555, 1.0]
    assert wilson(81, 263).bounds == [0.2535, 0.3682]
    iv = proportion_interval([True, False, True, True])
    assert (iv.estimate, iv.n, iv.method) == (0.75, 4, "wilson-cc")
    assert proportion_interval([0.5, 0.5]).estimate == 0.5           # a tie counts half
    with pytest.raises(ValueError, match="mean_interval"):
        proportion_interval([2.0])
    assert proportion_interval([]).n == 0


def test_cluster_interval_averages_within_units_first():
    values = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    units = ["a", "a", "a", "b", "c", "c"]
    iv = cluster_interval(values, units)
    assert (iv.n, iv.method) == (3, "cluster t") and iv.estimate == pytest.approx(1 / 3)
    assert iv.to_dict()["n"] == 3
    with pytest.raises(ValueError):
        cluster_interval([1.0], ["a", "b"])


def test_accuracy_by_kind_by_hand():
    kinds = ["human", "model_reply", "human", None, "model_reply", "model_reply"]
    assert accuracy_by_kind(kinds, [True, False, True, True, True, 1.0]) == {"human": 1.0, "model_reply": 2 / 3}
    assert accuracy_by_kind([None, None], [True, False]) == {}

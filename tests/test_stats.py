"""echo_lib.stats: balanced accuracy, AUROC (Mann-Whitney) and bootstrap intervals."""
import numpy as np
import pytest

from echo_lib.stats import accuracy_by_kind, auroc, balanced_accuracy, bootstrap_ci, paired_bootstrap_ci


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


def test_bootstrap_ci_contains_mean_and_narrows():
    rng = np.random.default_rng(3)
    small = rng.integers(0, 2, 20).astype(float)
    large = rng.integers(0, 2, 2000).astype(float)
    for values in (small, large):
        lo, hi = bootstrap_ci(values)
        assert lo <= values.mean() <= hi
        assert 0.0 <= lo < hi <= 1.0
    (slo, shi), (llo, lhi) = bootstrap_ci(small), bootstrap_ci(large)
    assert lhi - llo < shi - slo


def test_bootstrap_ci_seeded_rounded_and_edge_cases():
    values = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    ci = bootstrap_ci(values, seed=7)
    assert ci == bootstrap_ci(values, seed=7)
    assert isinstance(ci, list) and all(round(x, 4) == x for x in ci)
    continuous = list(np.random.default_rng(5).random(50))           # 0/1 means on 8 items repeat across seeds
    assert bootstrap_ci(continuous, n_boot=200, seed=1) != bootstrap_ci(continuous, n_boot=200, seed=2)
    assert bootstrap_ci([]) is None
    assert bootstrap_ci([1.0, 1.0, 1.0]) == [1.0, 1.0]
    lo90, hi90 = bootstrap_ci(values, level=0.90)
    lo95, hi95 = bootstrap_ci(values, level=0.95)
    assert lo95 <= lo90 and hi90 <= hi95


def test_paired_bootstrap_ci():
    rng = np.random.default_rng(0)
    b = rng.integers(0, 2, 300).astype(float)
    a = np.where(rng.random(300) < 0.3, 1.0, b)         # a is b with some items turned right
    lo, hi = paired_bootstrap_ci(a, b)
    assert lo <= (a - b).mean() <= hi and lo > 0
    assert paired_bootstrap_ci(b, b) == [0.0, 0.0]
    assert paired_bootstrap_ci([], []) is None
    assert paired_bootstrap_ci(a, b, seed=4) == bootstrap_ci(a - b, seed=4)
    with pytest.raises(ValueError):
        paired_bootstrap_ci([1.0], [1.0, 0.0])


def test_accuracy_by_kind_by_hand():
    kinds = ["human", "model_reply", "human", None, "model_reply", "model_reply"]
    assert accuracy_by_kind(kinds, [True, False, True, True, True, 1.0]) == {"human": 1.0, "model_reply": 2 / 3}
    assert accuracy_by_kind([None, None], [True, False]) == {}

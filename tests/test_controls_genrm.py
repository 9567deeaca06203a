"""The GenRM positive control's task and the controls record (no model; the trained controls run in the
ci DAG, tests/test_dag.py::test_positive_controls_learn)."""
from __future__ import annotations

from echo_lib.controls.genrm import MARKER, SUBJECTS, control_items
from echo_lib.controls.stage import THRESHOLDS, controls_figure, passed, verdict_lines
from echo_lib.rewards.data import examples, shuffled_labels


def test_the_marker_and_only_the_marker_gives_the_label():
    items = control_items(200, seed=0, split="train")
    assert sum(it["label"] == "human" for it in items) == 100
    for it in items:
        assert (MARKER in it["reply"]) == (it["label"] == "human")
        assert it["context"] == [] and it["kind"] in ("human", "model_reply")
    # without the marker, both classes come from the same templates: the same subjects in each
    subjects = {label: {s for it in items if it["label"] == label for s in SUBJECTS if s in it["reply"]}
                for label in ("human", "machine")}
    assert subjects["human"] == subjects["machine"] == set(SUBJECTS)


def test_train_and_test_are_drawn_apart_and_reproducibly():
    assert control_items(50, 0, "train") == control_items(50, 0, "train")
    assert control_items(50, 0, "train") != control_items(50, 0, "test")
    assert control_items(50, 0, "test") != control_items(50, 1, "test")


def test_the_control_goes_through_stage_02s_examples():
    exs = examples(control_items(4, 0, "train"), "humanlike", context_free=True, decision="verdict_first")
    assert [e.target for e in exs] == ["<answer>human</answer>", "<answer>machine</answer>"] * 2
    assert "Chat message to judge:" in exs[0].prompt[-1]["content"]
    twin = shuffled_labels(control_items(100, 0, "train"), "humanlike", 0)
    assert sum((MARKER in t["reply"]) == (t["label"] == "human") for t in twin) < 80   # the rule is broken


def record(acc=0.97, shuffled=0.52, first=0.2, last=0.6):
    g = {"accuracy": acc, "accuracy_ci": [acc - 0.03, min(1, acc + 0.02)], "n": 100, "ci_method": "wilson-cc",
         "n_test": 100, "majority_baseline": 0.5}
    return {"genrm": g, "genrm_shuffled": {**g, "accuracy": shuffled, "accuracy_ci": [0.42, 0.62]},
            "grpo": {"reward_first_quarter": first, "reward_last_quarter": last, "rewards": [first, last]}}


def test_pass_and_fail_follow_the_thresholds():
    assert passed(record()) == {"genrm": True, "genrm_shuffled_at_chance": True, "grpo": True}
    assert passed(record(acc=0.94))["genrm"] is False
    assert passed(record(shuffled=0.75))["genrm_shuffled_at_chance"] is False
    assert passed(record(first=0.3, last=0.55))["grpo"] is False        # a rise of 0.25 < 0.30
    assert THRESHOLDS["grpo_rise"] == 0.30 and THRESHOLDS["genrm_accuracy"] == 0.95
    r = record(acc=0.5)
    r["passed"] = passed(r)
    assert "FAILS" in verdict_lines(r).splitlines()[0]
    # the multi-turn control counts when it ran (the epm variant is trained), with the same bar
    m = record() | {"multiturn": {"reward_first_quarter": 0.31, "reward_last_quarter": 0.60, "rewards": [0.3, 0.6]}}
    m["passed"] = passed(m)
    assert m["passed"]["multiturn"] is False and THRESHOLDS["multiturn_rise"] == 0.30   # 0.29 < 0.30
    assert "multi-turn control" in verdict_lines(m) and "FAILS" in verdict_lines(m).splitlines()[-1]
    assert controls_figure(m).axes[0].get_legend() is not None

"""The humanlike reward model's operating point: the P(human) threshold set on training items, saved
beside the adapter, and used by the evaluation and the policy's reward."""
from __future__ import annotations

import json

import pytest

from echo_lib.rewards.calibration import machine_recall_threshold, read_threshold, write_decision
from echo_lib.rewards.evaluate import evaluate
from echo_lib.rewards.reward_fn import RewardModelFn
from test_rewards_data import humanlike_item
from test_rewards_verdict_first import choosing


def row(kind, p_human):
    return {"label": "human" if kind == "human" else "machine", "item_kind": kind, "probs": {"human": p_human}}


ROWS = ([row("human", p) for p in (0.95, 0.9, 0.85, 0.6)]
        + [row("model_reply", p) for p in (0.2, 0.5, 0.7, 0.8, 0.88)]
        + [row("context_removed", p) for p in (0.1, 0.3)])


def test_threshold_is_the_most_lenient_that_keeps_every_machine_kind_s_recall():
    # model_reply needs 4 of its 5 below t: t > 0.8, and the smallest judged value above it is a human's 0.85
    assert machine_recall_threshold(ROWS, 0.8) == 0.85
    # all 5: the smallest value above 0.88 among the judged items
    assert machine_recall_threshold(ROWS, 1.0) == 0.9
    # 3 of 5: 0.2, 0.5 and 0.7 below t, so the next value, 0.8 (at t = 0.7 only two are below)
    assert machine_recall_threshold(ROWS, 0.6) == 0.8
    # one kind alone decides: context_removed needs nothing beyond 0.3 for its recall
    assert machine_recall_threshold([r for r in ROWS if r["item_kind"] != "model_reply"], 1.0) == 0.6


def test_threshold_needs_machine_items():
    with pytest.raises(ValueError, match="machine items"):
        machine_recall_threshold([row("human", 0.9)], 0.9)


def test_decision_file_round_trip_and_bad_file(tmp_path):
    adapter = tmp_path / "rm" / "adapter"
    adapter.mkdir(parents=True)
    assert read_threshold(adapter) is None
    rec = write_decision(adapter, 0.81, 0.9, ROWS)
    assert rec["n_items"] == len(ROWS) and read_threshold(adapter) == 0.81
    (tmp_path / "rm" / "decision.json").write_text(json.dumps({"threshold": 0.8}))
    with pytest.raises(ValueError, match="decision.json.*human_threshold.*delete"):
        read_threshold(adapter)


def test_evaluation_and_reward_decide_by_the_threshold(tmp_path):
    items = [{**humanlike_item(i, k), "reply": f"reply {i}"} for i, k in enumerate(["human", "model_reply"])]
    p_human = {"reply 0": 0.9, "reply 1": 0.7}

    def probs(user, options):
        p = next(v for k, v in p_human.items() if k in user)
        return {"<answer>human</answer>": p, "<answer>machine</answer>": 1 - p}
    llm = choosing(tmp_path, probs)
    argmax, _ = evaluate(llm, items, "humanlike", 16, decision="verdict_first")
    assert argmax["accuracy_by_kind"] == {"human": 1.0, "model_reply": 0.0}
    m, rows = evaluate(llm, items, "humanlike", 16, decision="verdict_first", human_threshold=0.8)
    assert m["accuracy_by_kind"] == {"human": 1.0, "model_reply": 1.0}
    assert [r["verdict"] for r in rows] == ["human", "machine"]
    assert rows[1]["output"] == "<answer>machine</answer>" and m["auroc"] == argmax["auroc"] == 1.0
    fn = RewardModelFn(llm, "humanlike", decision="verdict_first", human_threshold=0.8)
    prompts = [[{"role": "user", "content": "hi"}]] * 2
    assert fn(prompts=prompts, completions=["reply 0", "reply 1"]) == [1.0, 0.0]
    assert fn.last_answers == ["human", "machine"]


def test_stage_calibrates_the_trained_model_and_its_twin(tiny_lm_dir, tmp_path):
    from echo_lib.config import load_config
    from echo_lib.rewards import stage
    from echo_lib.rewards.stage import reward_fn
    from test_rewards_data import write_jsonl

    cfg = load_config({"models": {"base": {"backend": "hf", "source": "local", "id": str(tiny_lm_dir)}},
                       "results_dir": str(tmp_path), "run_name": "t", "llm": {"progress": False},
                       "reward_models": {"sft": {"steps": 1, "batch_size": 2},
                                         "eval": {"max_items": 4, "max_train_items": 4},
                                         "humanlike_context": "free", "humanlike_machine_recall": 1.0}})
    kinds = ["human", "model_reply", "human", "context_removed", "human", "model_reply"]
    for split in ("train", "test"):
        write_jsonl(cfg.run_dir / "data" / "humanlike" / f"{split}.jsonl",
                    [{**humanlike_item(i, k), "reply": f"{humanlike_item(i, k)['reply']} {i}"}
                     for i, k in enumerate(kinds)])
    paths = stage.rm_paths(cfg, "humanlike")
    stage.train(cfg, "humanlike")
    stage.train(cfg, "humanlike", shuffled=True)
    rec, twin = stage.calibrate(cfg, "humanlike"), stage.calibrate(cfg, "humanlike", shuffled=True)
    assert rec["n_items"] == twin["n_items"] == 4 and rec["machine_recall"] == 1.0
    assert read_threshold(paths.adapter) == rec["human_threshold"]
    assert read_threshold(paths.shuffled.adapter) == twin["human_threshold"]
    results = stage.evaluate_models(cfg, "humanlike", paths.adapter, paths.shuffled.adapter)
    # recall 1.0 on the training items: every machine item judged there is called machine
    on_train = results["trained_on_train"][0]["accuracy_by_kind"]
    assert all(v == 1.0 for k, v in on_train.items() if k != "human")
    saved = stage.write_outputs(cfg, "humanlike", results, None)
    assert saved["human_threshold"] == rec["human_threshold"]
    acc = {m: results[m][0]["accuracy"] for m in ("trained", "shuffled", "base")}
    assert saved["vs_shuffled"]["n"] == saved["vs_base"]["n"] == 4
    assert saved["vs_shuffled"]["difference"] == pytest.approx(acc["trained"] - acc["shuffled"], abs=1e-4)
    assert saved["vs_base"]["difference"] == pytest.approx(acc["trained"] - acc["base"], abs=1e-4)
    assert reward_fn(cfg, "humanlike").human_threshold == rec["human_threshold"]
    assert stage.calibrate(cfg, "empathy") is None   # the other kinds keep the more probable verdict

"""Notebook 02 runs as the DAG runs it (papermill, a config dict), on the tiny random model."""
from __future__ import annotations

import json

import nbformat
import pytest

from echo_lib.notebook import run_notebook
from test_rewards_data import empathy_item, write_jsonl


@pytest.mark.parametrize("decision,kind", [("think_first", "scalar"), ("verdict_first", "empathy")])
def test_reward_model_notebook_writes_its_outputs(tiny_lm_dir, tmp_path, decision, kind):
    grpo = {"steps": 1, "num_generations": 2, "max_completion_length": 512} if decision == "think_first" else {}
    config = {"models": {"base": {"backend": "hf", "source": "local", "id": str(tiny_lm_dir)}},
              "results_dir": str(tmp_path), "run_name": "nb", "llm": {"progress": False},
              "reward_models": {"decision": decision, "sft": {"steps": 1, "batch_size": 2, "max_length": 2048},
                                "grpo": grpo, "eval": {"max_items": 3, "max_new_tokens": 8, "max_train_items": 2}}}
    items = [dict(empathy_item(i, lab, s, f"candidate reply {i}"), origin="good" if lab == "better" else "dismissive")
             for i, (lab, s) in enumerate([("better", 5), ("worse", 1), ("better", 4), ("worse", 2)])]
    for split in ("train", "test"):
        write_jsonl(tmp_path / "nb" / "data" / "empathy" / f"{split}.jsonl", items)
    out = run_notebook("notebooks/02_reward_models.py", tmp_path / "02.ipynb", {"config": config, "kind": kind})
    rm = tmp_path / "nb" / "rm" / kind
    for name in ("adapter/adapter_config.json", "shuffled/adapter/adapter_config.json", "metrics.json",
                 "metrics.csv", "train_log.csv", "training.png"):
        assert (rm / name).exists(), name
    metrics = json.loads((rm / "metrics.json").read_text())
    assert metrics["kind"] == kind and metrics["n_test"] == 3 and metrics["decision"] == decision
    assert set(metrics) >= {"base", "trained", "shuffled", "probe", "train_split", "majority_baseline"}
    assert metrics["train_split"]["n"] == 2 and metrics["probe"]["n_test"] == 3
    rows = [json.loads(line) for line in (rm / "eval_rows.jsonl").open()]
    assert {r["model"] for r in rows} == {"base", "trained", "shuffled", "trained_on_train"}
    if decision == "verdict_first":   # read by choose: every judgment has its probabilities, none fails to parse
        assert metrics["trained"]["parse_failure_rate"] == 0.0 and all(r["probs"] for r in rows)
        assert set(metrics["trained"]["accuracy_by_kind"]) == {"good", "dismissive"}
    first = nbformat.read(out, as_version=4).cells[0]
    assert first.cell_type == "markdown" and "reason before they judge" in first.source

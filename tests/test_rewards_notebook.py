"""Notebook 02 runs as the DAG runs it (papermill, a config dict), on the tiny random model."""
from __future__ import annotations

import json

import nbformat

from echo_lib.notebook import run_notebook
from test_rewards_data import empathy_item, write_jsonl


def test_reward_model_notebook_writes_its_outputs(tiny_lm_dir, tmp_path):
    config = {"models": {"base": {"backend": "hf", "source": "local", "id": str(tiny_lm_dir)}},
              "results_dir": str(tmp_path), "run_name": "nb", "llm": {"progress": False},
              "reward_models": {"sft": {"steps": 1, "batch_size": 2, "max_length": 2048},
                                "grpo": {"steps": 1, "num_generations": 2, "max_completion_length": 8},
                                "eval": {"max_items": 3, "max_new_tokens": 8}}}
    items = [empathy_item(i, lab, s, f"candidate reply {i}")
             for i, (lab, s) in enumerate([("better", 5), ("worse", 1), ("tie", 3), ("worse", 2)])]
    for split in ("train", "test"):
        write_jsonl(tmp_path / "nb" / "data" / "empathy" / f"{split}.jsonl", items)
    out = run_notebook("notebooks/02_reward_models.py", tmp_path / "02.ipynb", {"config": config, "kind": "scalar"})
    rm = tmp_path / "nb" / "rm" / "scalar"
    for name in ("adapter/adapter_config.json", "metrics.json", "metrics.csv", "train_log.csv", "training.png"):
        assert (rm / name).exists(), name
    metrics = json.loads((rm / "metrics.json").read_text())
    assert metrics["kind"] == "scalar" and metrics["n_test"] == 3 and set(metrics) >= {"base", "trained"}
    first = nbformat.read(out, as_version=4).cells[0]
    assert first.cell_type == "markdown" and "reason before they judge" in first.source

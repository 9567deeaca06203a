"""policy.seeds (issue 36, section 4): each RL variant trains once per seed on the same RL data, and each
(variant, seed) is a model of its own through the DAG (stage 03's files, the sandbox, the EPM pairs), so the
paper's appendix shows every seed's verdict against the base. With one seed (the default) nothing changes."""
from pathlib import Path

import pandas as pd
import pytest

from echo_lib.config import ConfigError, load_config
from echo_lib.epm.compare import central_pairs, seed_pairs
from echo_lib.policy.params import seeded_name, trained_models
from echo_lib.report.paper_tables import SEED_COLUMNS, seed_spread

ROOT = Path(__file__).resolve().parents[1]


def test_a_variant_keeps_its_name_for_the_first_seed_and_is_suffixed_for_the_others():
    assert trained_models(["echo", "scalar"], [0]) == {"echo": ("echo", 0), "scalar": ("scalar", 0)}
    assert trained_models(["echo", "scalar"], [0, 1, 2]) == {
        "echo": ("echo", 0), "echo-s1": ("echo", 1), "echo-s2": ("echo", 2),
        "scalar": ("scalar", 0), "scalar-s1": ("scalar", 1), "scalar-s2": ("scalar", 2)}
    assert seeded_name("echo", 3, first=3) == "echo" and seeded_name("echo", 0, first=3) == "echo-s0"


def test_each_seeded_policy_is_a_model_of_the_run_with_its_own_adapter(tmp_path):
    cfg = load_config({"results_dir": str(tmp_path), "policy": {"seeds": [0, 1]},
                       "sandbox": {"models": ["base", "echo", "echo-s1"]}})
    assert list(cfg.policy.trained()) == ["echo", "echo-s1", "scalar", "scalar-s1"]
    assert cfg.models["echo-s1"].adapter == str(tmp_path / "tiny/policy/echo-s1/adapter")
    assert cfg.models["echo"].adapter == str(tmp_path / "tiny/policy/echo/adapter")   # one seed: as before
    with pytest.raises(ConfigError, match="policy.seeds"):
        load_config({"policy": {"seeds": [0, 0]}})
    with pytest.raises(ConfigError, match="policy.seeds"):
        load_config({"policy": {"seeds": []}})
    with pytest.raises(ConfigError, match="echo-s2"):   # a seed that is not trained cannot be tested
        load_config({"policy": {"seeds": [0, 1]}, "sandbox": {"models": ["base", "echo-s2"]}})


def test_the_dag_trains_and_tests_every_seed(tmp_path):
    from echo_lib.stages import DagShape, stage
    cfg = load_config({"results_dir": str(tmp_path), "policy": {"seeds": [0, 1]},
                       "sandbox": {"models": ["base", "echo", "echo-s1"]}})
    shape = DagShape.of(cfg)
    assert shape.variants == ("echo", "echo-s1", "scalar", "scalar-s1")
    inputs, _ = stage("sandbox").files(shape, "echo-s1")
    assert any(str(p).endswith("policy/echo-s1/adapter/adapter_model.safetensors") for p in inputs["adapter"])


def test_a_seed_trains_its_variant_with_the_run_seed_plus_its_offset(tmp_path, monkeypatch):
    """Stage 03 hands GRPO the seed run seed + offset, the variant's own rewards, and writes under the
    seeded model's folder; the RL data are the variant's (the same for every seed)."""
    from echo_lib.policy import stage
    cfg = load_config({"results_dir": str(tmp_path), "seed": 5, "policy": {"seeds": [0, 2]}})
    assert stage.trained_model(cfg, "scalar-s2") == ("scalar", 2)
    with pytest.raises(ValueError, match="'echo-s1' is not a policy stage 03 trains.*echo-s2"):
        stage.policy_paths(cfg, "echo-s1")
    seen = {}

    def fake_train(base, rows, funcs, rollouts, params, out_dir, seed=0):
        seen.update(out_dir=Path(out_dir), seed=seed, funcs=[getattr(f, "__name__", "") for f in funcs])
        return "trained"
    monkeypatch.setattr(stage, "train_policy", fake_train)
    monkeypatch.setattr(stage, "reward_models", lambda cfg, kinds: {k: object() for k in kinds})
    monkeypatch.setattr(stage, "ordered", lambda cfg, rms: rms)
    monkeypatch.setattr(stage, "grpo_rows", lambda prompts, chats: [])
    monkeypatch.setattr(stage, "chats_for", lambda cfg, prompts, counter: [])
    monkeypatch.setattr(stage, "token_counter", lambda cfg: None)
    monkeypatch.setattr("echo_lib.models.registry", lambda cfg: type("R", (), {"train_base": lambda self, n: n})())
    captured = {}
    monkeypatch.setattr(stage, "variant_rewards",
                        lambda variant, rms, penalty, rollouts: captured.setdefault("variant", variant) and [])
    assert stage.train_here(cfg, "scalar-s2", []) == "trained"
    assert seen["seed"] == 7 and seen["out_dir"] == tmp_path / "tiny/policy/scalar-s2"
    assert captured["variant"] == "scalar"


def test_the_central_comparisons_are_made_within_each_seed():
    models = ["base", "echo", "echo-s1", "scalar", "scalar-s1"]
    trained = trained_models(["echo", "scalar"], [0, 1])
    assert seed_pairs(models, trained, "base") == [("echo", "base"), ("scalar", "base"), ("echo", "scalar"),
                                                  ("echo-s1", "base"), ("scalar-s1", "base"),
                                                  ("echo-s1", "scalar-s1")]
    one = trained_models(["echo", "scalar"], [0])
    assert seed_pairs(models, one, "base") == central_pairs(models, ["echo", "scalar"], "base")   # as before


def _row(a, metric, diff, low, high, verdict, n=30):
    return {"A": a, "B": "base", "Metric": metric, "n": n, "Difference": diff, "CI low": low, "CI high": high,
            "Method": "paired t", "Verdict": verdict}


def test_the_seed_table_says_whether_every_seed_reaches_the_same_verdict():
    trained = trained_models(["echo", "scalar"], [0, 1])
    paired = pd.DataFrame([
        _row("echo", "EPM-Q", 4.0, 1.0, 7.0, "echo above base"),
        _row("echo-s1", "EPM-Q", 1.0, -2.0, 4.0, "no difference at this scale"),
        _row("scalar", "EPM-Q", 0.5, -1.0, 2.0, "no difference at this scale"),
        _row("scalar-s1", "EPM-Q", 0.2, -1.0, 1.4, "no difference at this scale"),
        _row("echo", "Outcome", 9.0, 1.0, 17.0, "echo above base"),      # not a seed-table metric
        {**_row("echo", "EPM-Q", 1.0, 0.0, 2.0, "x"), "B": "scalar"}])   # not against the base
    table = seed_spread(paired, trained, "base")
    assert list(table.columns) == SEED_COLUMNS and len(table) == 4 and set(table["Metric"]) == {"EPM-Q"}
    echo = table[table["Variant"] == "echo - base"]
    assert list(echo["RL seed"]) == [0, 1] and set(echo["Every seed"]) == {"verdicts differ"}
    assert set(table[table["Variant"] == "scalar - base"]["Every seed"]) == {"same verdict"}
    single = seed_spread(paired[paired["A"].isin(["echo", "scalar"])], trained_models(["echo", "scalar"], [0]), "base")
    assert set(single["Every seed"]) == {"one seed"} and len(single) == 2


def test_the_seed_overlay_is_the_tiny_run_with_three_seeds_and_thirty_cases():
    import yaml
    from snakemake.utils import update_config

    from echo_lib.config import validate
    merged = yaml.safe_load((ROOT / "config/default.yaml").read_text())
    update_config(merged, yaml.safe_load((ROOT / "config/seeds.yaml").read_text()))
    cfg = load_config(validate(merged, "config/default.yaml + config/seeds.yaml"))
    assert cfg.policy.seeds == [0, 1, 2] and cfg.sandbox.max_cases == 30 and cfg.run_name == "tiny-seeds"
    assert set(cfg.sandbox.models) == {"base", *cfg.policy.trained()} and cfg.paper.dir is None

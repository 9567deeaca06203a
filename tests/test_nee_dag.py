"""End to end: stage 06 (NEE panel) in the ci DAG run (the session fixture `ci_run` of conftest.py)."""
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from echo_lib.nee.dimensions import KEYS
from echo_lib.nee.order import unshuffle

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def ci_config() -> dict:
    return yaml.safe_load((ROOT / "config/ci.yaml").read_text())


def test_stage_06_rates_every_model_blinded_and_recorded(ci_run):
    run_dir, _ = ci_run
    out = run_dir / "nee"
    cfg = ci_config()
    models = cfg["sandbox"]["models"]
    ratings = pd.read_csv(out / "ratings.csv")
    assert set(ratings["model"]) == set(models) and set(ratings["dimension"]) == set(KEYS)
    assert ratings["prompt_variant"].nunique() == cfg["nee"]["prompt_variants"]
    assert ratings["score"].between(1, 5).all() and set(ratings["mode"]) == {"choose"}
    order = json.loads((out / "order.json").read_text())
    for _, r in ratings.iterrows():
        assert unshuffle(order, r["judge"], r["position"]) == (r["model"], r["case_id"])
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary.columns[:10]) == ["model", "nee", "nee_ci_low", "nee_ci_high", "nee_ci_method", "nee_ci_shown",
                                          "n_transcripts", "n_ratings", "epmq", "composite"]
    assert set(summary["model"]) == set(models) and summary["nee"].between(0, 100).all()
    bounded = summary.dropna(subset=["nee_ci_low", "nee_ci_high"])   # one transcript: no interval at all
    assert (bounded["nee_ci_low"] <= bounded["nee"] + 1e-9).all() and (bounded["nee"] <= bounded["nee_ci_high"] + 1e-9).all()
    assert not summary["nee_ci_shown"].any()                        # the ci run rates too few transcripts
    paired = pd.read_csv(out / "paired.csv")
    assert set(paired["Metric"]) == {"NEE", "Composite"} and set(paired["Verdict"]) <= {"n too small", "no shared units"}
    epm = pd.read_csv(run_dir / "epm" / "summary.csv").set_index("Model")["EPM-Q"]
    for _, row in summary.iterrows():
        w = cfg["nee"].get("composite_weight", 0.5)
        assert row["composite"] == pytest.approx(w * min(epm[row["model"]], 100) + (1 - w) * row["nee"])
    agreement = json.loads((out / "agreement.json").read_text())
    assert len(agreement["raters"]) == cfg["nee"]["prompt_variants"] * len(cfg.get("roles", {}).get("nee_judges", ["base"]))
    assert "krippendorff_alpha" in agreement and "position_bias" in agreement


def test_stage_06_pairwise_and_notebook(ci_run):
    run_dir, _ = ci_run
    models = ci_config()["sandbox"]["models"]
    pairs = pd.read_csv(run_dir / "nee" / "pairwise.csv")
    assert list(pairs.columns[:7]) == ["model", "case_id", "judge", "judge_model", "prompt_variant", "order", "winner"]
    others = [m for m in models if m != "base"]
    assert set(pairs["model"]) == set(others)          # empty (header only) with a single model
    if others:
        assert set(pairs["order"]) == {"model_first", "reference_first"}
        assert pairs["winner"].isin(models).all()
    executed = (run_dir / "notebooks" / "06_nee_panel.ipynb").read_text()
    assert "Krippendorff" in executed and "position bias" in executed
    assert (run_dir / "nee" / "fig_nee.png").exists() and (run_dir / "logs" / "06_nee_panel.log").exists()
    prov = json.loads((run_dir / "nee" / "provenance.json").read_text())
    assert prov["stage"] == "06_nee" and prov["config_hash"]

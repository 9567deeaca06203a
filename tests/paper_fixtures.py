"""A fake run folder holding every file stage 07 (the paper) reads, written to the stages' file
contracts with small, distinctive numbers (so a test can tell where a value came from)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from echo_lib.epm.compare import central_pairs, write_comparisons
from echo_lib.stats import paired_table

INDICES = ["Idx_RDI", "Idx_Etot", "Idx_Snet", "Idx_Rho", "Idx_Sproj", "Idx_Tau", "Idx_Rpos", "Idx_Align", "Idx_Pen"]
RM_KINDS = ["humanlike", "empathy", "scalar"]
# model -> (successes, failures, timeouts, EPM-Q); 3 cases each
EPM = {"base": (0, 2, 1, 21.25), "echo": (2, 1, 0, 61.75), "scalar": (1, 1, 1, 40.5), "epm": (1, 0, 2, 33.5)}
NEE = {"base": (31.5, 12.5), "echo": (58.25, 60.0), "scalar": (44.0, 42.25), "epm": (37.75, 35.5)}   # model -> (nee, composite)
DIMENSIONS = ["empathy_accuracy", "emotional_coherence", "humanlikeness"]


def make_run(run_dir: Path, models=("base", "echo", "scalar"), variants=("echo", "scalar"),
             sycophancy: bool = False) -> Path:
    rng = np.random.default_rng(0)
    (run_dir / "epm").mkdir(parents=True, exist_ok=True)
    summary, per_case = [], []
    for model in models:
        s, f, t, q = EPM[model]
        summary.append({"Model": model, **{k: 100.0 for k in INDICES}, "Outcome": q + 1, "Efficiency": q + 2,
                        "Stability": q + 3, "EPM-Q": q, "Success": s, "Failure": f, "Timeout": t,
                        "Mean_Turns": 6.0, "Cases": s + f + t, "Constants": "code"})
        labels = ["success"] * s + ["failure"] * f + ["timeout"] * t
        for case, label in zip(("own_001", "own_002", "own_003"), labels):
            per_case.append({"Model": model, "Case_ID": case, "EPM-Q": q + rng.normal(), "Outcome_Label": label,
                             "Outcome": q + 1 + rng.normal(), "Efficiency": q + 2, "Stability": q + 3,
                             "E_total": 4.0 + len(per_case), "P0_norm": 16.0,
                             **{k: 100 + rng.normal() for k in INDICES}})
    pd.DataFrame(summary).to_csv(run_dir / "epm" / "summary.csv", index=False)
    pd.DataFrame(per_case).to_csv(run_dir / "epm" / "per_case.csv", index=False)
    write_comparisons(pd.DataFrame(per_case), central_pairs(models, variants, "base"), run_dir / "epm")

    (run_dir / "nee").mkdir(parents=True, exist_ok=True)
    pd.DataFrame([{"model": m, "nee": NEE[m][0], "nee_ci_low": NEE[m][0] - 5, "nee_ci_high": NEE[m][0] + 5,
                   "nee_ci_method": "t", "nee_ci_shown": False, "n_transcripts": 3, "n_ratings": 12, "epmq": EPM[m][3], "composite": NEE[m][1],
                   **{d: 56.25 + i for i, d in enumerate(DIMENSIONS)}} for m in models]).to_csv(run_dir / "nee" / "summary.csv", index=False)
    nee_cases = pd.DataFrame([{"Model": m, "Case_ID": f"own_00{i}", "NEE": NEE[m][0] + i, "Composite": NEE[m][1] - i}
                              for m in models for i in (1, 2, 3)])
    paired_table(nee_cases, central_pairs(models, variants, "base"), {"NEE": "NEE", "Composite": "Composite"}).to_csv(
        run_dir / "nee" / "paired.csv", index=False)
    (run_dir / "nee" / "agreement.json").write_text(json.dumps({"krippendorff_alpha": 0.412, "n_items": 12}))

    (run_dir / "judges").mkdir(parents=True, exist_ok=True)
    (run_dir / "judges" / "sensitivity.json").write_text(json.dumps({
        "set": {"n_items": 36, "split": "heldout"}, "length_rule": {"accuracy": 0.5, "accuracy_ci": [0.33, 0.65]},
        "probe": {"accuracy": 0.9722, "accuracy_ci": [0.92, 1.0], "n": 36, "n_dev": 36,
                  "shuffled": {"accuracy": 0.3611, "accuracy_ci": [0.22, 0.53], "n": 36}},
        "sandbox_judge": {"model": "tiny_judge", "accuracy": 0.8611, "accuracy_ci": [0.75, 0.97], "n": 36},
        "nee": {"models": ["tiny_judge"], "accuracy": 0.8333, "accuracy_ci": [0.72, 0.94], "alpha": 0.5125,
                "position_bias": 0.0556},
        "thresholds": {"sandbox_judge_accuracy": 0.8, "nee_accuracy": 0.8, "nee_alpha": 0.4, "nee_position_bias": 0.2}}))

    for i, kind in enumerate(RM_KINDS):
        (run_dir / "rm" / kind).mkdir(parents=True, exist_ok=True)
        metric = lambda acc: {"n": 8, "accuracy": acc, "majority_baseline": 0.5, "accuracy_parsed": acc,
                              "parse_failure_rate": 0.125, "position_bias": 0.25, "length_bias": 0.1}
        (run_dir / "rm" / kind / "metrics.json").write_text(json.dumps(
            {"kind": kind, "n_test": 8, "base": metric(0.375), "trained": metric(0.625 + i / 100)}))

    for j, variant in enumerate(variants):
        folder = run_dir / "policy" / variant
        folder.mkdir(parents=True, exist_ok=True)
        steps = np.arange(1, 5)
        if variant == "epm":   # the multi-turn variant logs per-turn EPM progress (policy.multiturn.LOG_COLUMNS)
            pd.DataFrame({"step": steps, "reward": -0.05 + 0.01 * steps, "reward_std": 0.1, "return": 0.02 * steps,
                          "advantage_abs": 0.7, "turns": 24, "dialogues": 8, "failed": 0, "epm_ended": 0,
                          "kl": 0.002 * steps, "loss": 0.01, "reply_words": 30, "rollout_time": 60.0,
                          "step_time": 150.0}).to_csv(folder / "train_log.csv", index=False)
        else:
            pd.DataFrame({"step": steps, "reward": 0.1 * steps + j, "reward_empathy": 0.1 * steps,
                          "reward_chitchat": np.nan, "win_rate": 0.5, "tie_rate": 0.2, "humanlike_rate": 0.4,
                          "unparsed_rate": 0.0, "format_violation_rate": 0.0, "kl": 0.01 * steps, "entropy": 1.5,
                          "reply_length": 30 - steps, "repetition": 0.05, "ornate_rate": 0.1, "advice_list_rate": 0.0,
                          "loss": 0.0, "step_time": 9.0, "learning_rate": 5e-5}).to_csv(folder / "train_log.csv", index=False)
        pd.DataFrame([{"variant": variant, "judge": judge, "judge_model": "smollm2-135m-instruct", "n": 8,
                       "wins": 4, "ties": 1, "losses": 3, "win_rate": 0.5625, "ci_low": 0.25, "ci_high": 0.85}
                      for judge in ("empathy_rm", "independent")]).to_csv(folder / "winrate.csv", index=False)
    if sycophancy:
        make_sycophancy(run_dir / "sycophancy", models)
    return run_dir


SEEKERS = [f"seeker_{i:03d}" for i in range(1, 11)]
LEVEL = {"base": 1.5, "echo": 3.5, "scalar": 2.0, "epm": 2.5}   # model -> the panel's agreement level on every seeker case


def make_sycophancy(folder: Path, models) -> Path:
    """Stage 06b's summary.json, summary.csv and paired.csv, built by the stage's own functions from 10 seeker
    cases per model (agreement levels LEVEL + case x len(model) / 100) and 6 perturbed dialogues per model."""
    from echo_lib.epm.robustness import summarise
    from echo_lib.sycophancy import stage

    folder.mkdir(parents=True, exist_ok=True)
    agreement = pd.DataFrame([{"Model": m, "Case_ID": c, "Judge": "tiny_judge", "Level": LEVEL[m] + i * len(m) / 100}
                              for m in models for i, c in enumerate(SEEKERS)])
    epmq = pd.DataFrame([{"Model": m, "Case_ID": c, "EPM-Q": 20.0 + 10 * LEVEL[m] + i}
                         for m in models for i, c in enumerate(SEEKERS)])
    controls = pd.DataFrame([{"Case_ID": c, "Judge": "tiny_judge", "Endorsing": 2.0 + i / 10, "Questioning": 2.5}
                             for i, c in enumerate(SEEKERS)])
    checks = {m: {"summary": summarise([{"check": check, "error": "", "delta_E": d + j, "delta_alignment": 0.0,
                                          "direct_delta": -0.5}
                                         for check, d in (("sycophancy", 0.75), ("persona_flip", -4.0))
                                         for j in range(6)])} for m in models}
    stage05 = {m: {"estimate": EPM[m][3], "ci": "n too small (n = 3)", "n": 3} for m in models}
    summary = stage.summary_table(list(models), agreement, epmq, stage05, checks, 3.0)
    paired = paired_table(stage.per_case_values(agreement, epmq), [(m, "base") for m in models if m != "base"],
                          {"Agreement level": "Level", "Seeker EPM-Q": "EPM-Q"})
    summary.to_csv(folder / "summary.csv", index=False)
    paired.to_csv(folder / "paired.csv", index=False)
    (folder / "summary.json").write_text(json.dumps({
        "models": list(models), "seeker_cases": SEEKERS, "judges": ["tiny_judge"],
        "sensitivity": stage.judge_sensitivity(controls), "summary": summary.to_dict("records"),
        "paired": paired.to_dict("records"), "checks": {m: c["summary"] for m, c in checks.items()},
        "params": {"enabled": True, "seeker_cases": 0, "perturbed_cases": 6, "checks": ["sycophancy", "persona_flip"],
                   "threshold": 3.0, "reference_model": "base"}}))
    return folder

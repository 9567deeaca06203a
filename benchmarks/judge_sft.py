"""Can SFT teach the 135M judge to see the reply? The judges stage's training (echo_lib.judges.train) under
chosen settings, then the sensitivity figures on the held-out items and, beside them, the sandbox judge's
accuracy on the dev items it was trained on (a judge that memorised them scores high there; one that
learnt nothing stays near chance on both). Prints the verdict lines and one JSON line.

    .venv/bin/python benchmarks/judge_sft.py --steps 60 --learning-rate 2e-3 --sandbox-only
    .venv/bin/python benchmarks/judge_sft.py --steps 120 --bank-per-item 2

It needs stage 00's checkpoint (`snakemake --cores 2 results/tiny/models/manifest.json`) and writes the
adapter and record under results/<run>-judge-sft/judges/ (the run's own folder is never touched).
"""
from __future__ import annotations

import argparse
import json
import time

from echo_lib.config import load_config, read_yaml
from echo_lib.judges import stage
from echo_lib.judges.params import TRAINED_JUDGE


def scratch_config(args):
    raw = read_yaml(args.config)
    run = load_config(raw)
    judges = dict(raw.get("judges") or {})
    judges["train"] = {**(judges.get("train") or {}), "enabled": True, "steps": args.steps,
                       "learning_rate": args.learning_rate, "bank_per_item": args.bank_per_item,
                       "lora_top_layers": args.lora_top_layers}
    judges["nee"] = not args.sandbox_only
    sandbox_run = dict(raw.get("sandbox_run") or {})
    # a trained judge answers for itself: calibrating it against a content-free reply would divide out
    # what it learnt about such replies (off-topic, empty)
    sandbox_run["judge"] = {**(sandbox_run.get("judge") or {}), "calibrate": args.calibrate}
    return load_config({**raw, "run_name": f"{run.run_name}-judge-sft", "judges": judges, "sandbox_run": sandbox_run,
                        "roles": {**(raw.get("roles") or {}), "judge": TRAINED_JUDGE, "nee_judges": [TRAINED_JUDGE]}})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="config/default.yaml")
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--learning-rate", type=float, default=1e-3)
    ap.add_argument("--bank-per-item", type=int, default=2)
    ap.add_argument("--lora-top-layers", type=int, default=10)
    ap.add_argument("--calibrate", action="store_true", help="calibrate the trained judge (default: off)")
    ap.add_argument("--sandbox-only", action="store_true", help="test the sandbox judge only, not the NEE panel")
    ap.add_argument("--out", help="also write the JSON line to this file")
    args = ap.parse_args()
    cfg = scratch_config(args)
    t = time.perf_counter()
    training = stage.train(cfg)
    record = stage.run_sensitivity(cfg, training=training)
    print(stage.verdict_lines(record))
    s = record.get("sandbox_judge", {})
    line = {"settings": vars(args), "seconds": round(time.perf_counter() - t), "training": training,
            "sandbox_judge": {k: s.get(k) for k in ("accuracy", "accuracy_ci", "n", "ci_method", "train_accuracy",
                                                   "train_accuracy_ci", "train_n", "train_ci_method", "by_kind",
                                                   "mean_expected_levels")},
            "nee": {k: record["nee"][k] for k in ("accuracy", "alpha", "position_bias", "pairwise_accuracy")}
            if "nee" in record else None}
    print(json.dumps(line))
    if args.out:
        with open(args.out, "w") as f:
            f.write(json.dumps(line, indent=1) + "\n")


if __name__ == "__main__":
    main()

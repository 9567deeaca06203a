"""What a reward model learns without the labels: the label-shuffle twin under other seeds, and a model
trained on one constant target (no label information at all), each scored on the held-out split.

At the tiny scale the empathy and scalar twins sit above chance. This separates the two explanations:
a leak (the twin's verdicts follow the true labels of its own training items) or the base model's prior
(a model that learned only the answer format already orders the replies). Prints one JSON line per model.

    .venv/bin/python benchmarks/rm_twin.py --kind scalar --twin-seeds 0 1 --constant
    .venv/bin/python benchmarks/rm_twin.py --kind empathy --constant --steps 10

It needs stage 01's data of the run (`snakemake --cores 2 results/tiny/data/empathy/test.jsonl`), and writes
its adapters under results/<run>-twin/ (the run's data and models are linked, never changed).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from echo_lib.config import load_config, read_yaml
from echo_lib.rewards import stage
from echo_lib.rewards.data import shuffled_labels
from echo_lib.rewards.evaluate import evaluate, judge_items

CONSTANT = {"empathy": {"label": "better"}, "scalar": {"candidate_score": 4}, "humanlike": {"label": "human"}}


def scratch_config(config: str, seed: int):
    """The run config under a scratch run name whose data/ and models/ link to the run's own."""
    raw = read_yaml(config)
    run = load_config(raw)
    cfg = load_config({**raw, "run_name": f"{run.run_name}-twin", "seed": seed})
    cfg.run_dir.mkdir(parents=True, exist_ok=True)
    for sub in ("data", "models"):
        link = cfg.run_dir / sub
        if not link.exists():
            link.symlink_to((run.run_dir / sub).resolve())
    return cfg


def train_and_score(cfg, kind: str, train_items: list[dict], out: Path, steps: int | None) -> dict:
    p = cfg.reward_models
    t0 = time.perf_counter()
    trained = stage.train_on(cfg, kind, train_items, out, steps)
    seconds = time.perf_counter() - t0
    llm = stage.rm_llm(cfg, out / "adapter")
    test = stage.items(cfg, kind, "test", p.eval.max_items)
    m, _ = evaluate(llm, test, kind, p.eval.max_new_tokens, False, p.context_free(kind), p.decision)
    own = stage.seeded_sample(train_items, p.eval.max_train_items or len(train_items), cfg.seed)
    rows = judge_items(llm, own, kind, p.eval.max_new_tokens, False, p.context_free(kind), p.decision)
    truth = {it["id"]: it["label"] for it in stage.items(cfg, kind, "train", p.max_train_items)}
    return {"steps": trained.steps.get("sft"), "train_seconds": round(seconds), "accuracy": m["accuracy"],
            "accuracy_ci": m["accuracy_ci"], "n": m["n"], "ci_method": m["ci_method"], "auroc": m["auroc"], "accuracy_by_kind": m.get("accuracy_by_kind"),
            # a leak shows as training-item verdicts that follow the true labels rather than the trained ones
            "own_items": len(rows), "agrees_with_trained_labels": _share(r["verdict"] == r["label"] for r in rows),
            "agrees_with_true_labels": _share(r["verdict"] == truth[r["id"]] for r in rows)}


def _share(hits) -> float | None:
    hits = list(hits)
    return round(sum(hits) / len(hits), 4) if hits else None


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config/default.yaml")
    ap.add_argument("--kind", choices=["empathy", "scalar", "humanlike"], required=True)
    ap.add_argument("--twin-seeds", type=int, nargs="*", default=[], help="shuffle (and training) seeds of twins")
    ap.add_argument("--constant", action="store_true", help="also train on one constant target for every item")
    ap.add_argument("--steps", type=int, default=None, help="SFT steps (default: the config's for the kind)")
    ap.add_argument("--out", type=Path, default=None, help="also append the JSON lines to this file")
    args = ap.parse_args(argv)
    runs = [("twin", s) for s in args.twin_seeds] + ([("constant", 0)] if args.constant else [])
    for what, seed in runs:
        cfg = scratch_config(args.config, seed)
        p = cfg.reward_models
        train_items = stage.items(cfg, args.kind, "train", p.max_train_items)
        if what == "twin":
            train_items = shuffled_labels(train_items, args.kind, seed)
        else:
            train_items = [{**it, **CONSTANT[args.kind]} for it in train_items]
        out = stage.rm_paths(cfg, args.kind).dir / f"{what}-{seed}"
        record = {"kind": args.kind, "model": what, "seed": seed,
                  **train_and_score(cfg, args.kind, train_items, out, args.steps)}
        line = json.dumps(record)
        print(line, flush=True)
        if args.out:
            with open(args.out, "a") as fh:
                fh.write(line + "\n")


if __name__ == "__main__":
    main()

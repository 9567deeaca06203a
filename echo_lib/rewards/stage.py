"""Stage 02 end to end for one reward-model kind: read the data, train, evaluate base vs trained, write.

    results/<run>/rm/<kind>/adapter/        the LoRA adapter (base = the config's roles.reward_model)
    results/<run>/rm/<kind>/train_log.csv   per-step SFT loss, GRPO reward and its three parts
    results/<run>/rm/<kind>/metrics.json    base vs trained metrics, training time, provenance
    results/<run>/rm/<kind>/metrics.csv     the same metrics as a table (metric x model)
    results/<run>/rm/<kind>/eval_rows.jsonl every judged test item with both models' raw outputs
"""
from __future__ import annotations

import csv
import dataclasses
import random
from dataclasses import dataclass
from pathlib import Path

from echo_lib.rewards.data import context_free_items, data_file, examples, load_items
from echo_lib.rewards.evaluate import evaluate, metrics_table
from echo_lib.rewards.params import KINDS
from echo_lib.rewards.train import TrainResult, train_reward_model


@dataclass(frozen=True)
class RMPaths:
    dir: Path

    @property
    def adapter(self) -> Path:
        return self.dir / "adapter"

    @property
    def metrics(self) -> Path:
        return self.dir / "metrics.json"

    @property
    def table(self) -> Path:
        return self.dir / "metrics.csv"

    @property
    def train_log(self) -> Path:
        return self.dir / "train_log.csv"

    @property
    def eval_rows(self) -> Path:
        return self.dir / "eval_rows.jsonl"


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"reward-model kind {kind!r} is not one of {', '.join(KINDS)}")
    return kind


def rm_paths(cfg, kind: str) -> RMPaths:
    return RMPaths(cfg.run_dir / "rm" / check_kind(kind))


def rm_spec(cfg):
    spec = cfg.models[cfg.roles.reward_model]
    if spec.backend != "hf":
        raise ValueError(f"roles.reward_model is {spec.name!r}, an {spec.backend}-backend model; reward models "
                         "are trained here with TRL, so their base must be an hf-backend model")
    return spec


def rm_llm(cfg, adapter: str | Path | None = None):
    """The reward model's base through the model layer, with a trained adapter on top if given
    (the adapter folder's fingerprint is part of the cache key, so retraining invalidates its calls)."""
    from echo_lib.llm import load_llm
    spec = rm_spec(cfg)
    if adapter is None:
        return load_llm(cfg, spec.name)
    name = f"{spec.name}+{Path(adapter).parent.name}-rm"
    trained = dataclasses.replace(spec, name=name, adapter=str(adapter))
    return load_llm(dataclasses.replace(cfg, models={**cfg.models, name: trained}), name)


def items(cfg, kind: str, split: str, limit: int = 0) -> list[dict]:
    """The split's items; with a limit, a seeded sample of that many (order kept)."""
    all_items = load_items(data_file(cfg.run_dir, kind, split), kind)
    if cfg.reward_models.context_free(kind):
        all_items = context_free_items(all_items)
    if limit and limit < len(all_items):
        keep = sorted(random.Random(cfg.seed).sample(range(len(all_items)), limit))
        all_items = [all_items[i] for i in keep]
    return all_items


def process_judge(cfg):
    """The field judge of the process reward (process_scorer "judge"), or None for the lexical rule."""
    p = cfg.reward_models
    if p.process_scorer != "judge":
        return None
    from echo_lib.llm import load_llm
    from echo_lib.rewards.process import make_judge
    return make_judge(load_llm(cfg, p.process_judge or cfg.roles.reward_model))


def train(cfg, kind: str) -> TrainResult:
    from echo_lib.model_setup import weights_path
    p = cfg.reward_models
    spec = rm_spec(cfg)
    exs = examples(items(cfg, kind, "train", p.max_train_items), kind, p.target_field_words, p.context_free(kind))
    return train_reward_model(weights_path(cfg, spec), kind, exs, p, rm_paths(cfg, kind).dir, seed=cfg.seed,
                              judge=process_judge(cfg), use_cpu=spec.device == "cpu", dtype=spec.dtype)


def evaluate_models(cfg, kind: str, adapter: str | Path) -> dict[str, tuple[dict, list[dict]]]:
    """Base (untrained, same prompt) and trained reward model on the held-out split."""
    p = cfg.reward_models.eval
    test = items(cfg, kind, "test", p.max_items)
    context_free = cfg.reward_models.context_free(kind)
    out = {}
    for name, llm in (("base", rm_llm(cfg)), ("trained", rm_llm(cfg, adapter))):
        out[name] = evaluate(llm, test, kind, p.max_new_tokens, p.position_swap, context_free)
    return out


def write_outputs(cfg, kind: str, results: dict[str, tuple[dict, list[dict]]], trained: TrainResult | None
                  ) -> dict:
    from echo_lib.provenance import provenance, write_json, write_jsonl
    paths = rm_paths(cfg, kind)
    by_model = {name: m for name, (m, _) in results.items()}
    training = None if trained is None else {"seconds": trained.seconds, "steps": trained.steps,
                                             "peak_rss_mb": round(trained.peak_rss_mb)}
    record = {"kind": kind, "scale": cfg.scale, "base_model": cfg.roles.reward_model,
              "n_test": next(iter(by_model.values()))["n"], **by_model, "training": training,
              "params": dataclasses.asdict(cfg.reward_models),
              "provenance": provenance(cfg, stage="02_reward_models", kind=kind)}
    write_json(paths.metrics, record)
    table = metrics_table(by_model)
    with open(paths.table, "w", newline="") as fh:
        w = csv.DictWriter(fh, ["metric", *by_model])
        w.writeheader()
        w.writerows(table)
    write_jsonl(paths.eval_rows, ({"model": name, **r} for name, (_, rows) in results.items() for r in rows))
    return record

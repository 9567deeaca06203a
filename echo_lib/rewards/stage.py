"""Stage 02 end to end for one reward-model kind: read the data, train, evaluate base vs trained, write.

    results/<run>/rm/<kind>/adapter/        the LoRA adapter (base = the config's roles.reward_model)
    results/<run>/rm/<kind>/train_log.csv   per-step SFT loss, GRPO reward and its three parts
    results/<run>/rm/<kind>/metrics.json    base vs trained metrics, training time, provenance
    results/<run>/rm/<kind>/metrics.csv     the same metrics as a table (metric x model)
    results/<run>/rm/<kind>/eval_rows.jsonl every judged test item with both models' raw outputs
    results/<run>/rm/<kind>/shuffled/       the label-shuffle twin: adapter/ and train_log.csv

metrics.json puts the trained model beside its controls: the untrained base (same prompt), the
majority baseline, the twin trained on shuffled labels (`shuffled_accuracy`, must stay at chance), the
accuracy on training items (`train_accuracy`: memorising and failing to learn look alike on the test
split alone) and a linear probe on sentence embeddings of the same items (`probe`: what the data
allows a simple model to learn). `vs_base` and `vs_shuffled` are the trained model's paired accuracy gain
over the base and over the twin on the same held-out items, with a paired t 95 % interval: at
the tiny scale the twin learns the answer format and the 135M prior (docs/STAGES.md, stage 02), so its gain over
the twin is what training on the labels adds.
"""
from __future__ import annotations

import csv
import dataclasses
import logging
import random
from pathlib import Path

from echo_lib.rewards.data import (context_free_items, data_file, examples, load_items, shuffled_labels,
                                   with_references, with_swaps)
from echo_lib.layout import Layout, RMFiles
from echo_lib.rewards.calibration import decision_path, machine_recall_threshold, read_threshold, write_decision
from echo_lib.rewards.evaluate import evaluate, metrics_table, paired_accuracy
from echo_lib.rewards.params import KINDS
from echo_lib.rewards.train import TrainResult, train_reward_model

log = logging.getLogger(__name__)


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"reward-model kind {kind!r} is not one of {', '.join(KINDS)}")
    return kind


def rm_paths(cfg, kind: str) -> RMFiles:
    """Stage 02's files of one kind (echo_lib.layout)."""
    return Layout(cfg.run_dir).rm(check_kind(kind))


def rm_spec(cfg):
    spec = cfg.models[cfg.roles.reward_model]
    if spec.backend != "hf":
        raise ValueError(f"roles.reward_model is {spec.name!r}, an {spec.backend}-backend model; reward models "
                         "are trained here with TRL, so their base must be an hf-backend model")
    return spec


def rm_llm(cfg, adapter: str | Path | None = None):
    """The reward model's base through the model layer, with a trained adapter on top if given
    (the adapter folder's fingerprint is part of the cache key, so retraining invalidates its calls)."""
    from echo_lib.models import registry
    from echo_lib.rewards.reward_fn import adapted_llm
    return adapted_llm(registry(cfg), rm_spec(cfg).name, adapter)


def reward_fn(cfg, kind: str, adapter_dir: str | Path | None = None):
    """The trained reward model of this run (or the adapter at `adapter_dir`) as a TRL reward function."""
    from echo_lib.models import registry
    from echo_lib.rewards.reward_fn import load_reward_fn
    return load_reward_fn(registry(cfg), rm_spec(cfg).name, kind, cfg.reward_models,
                          adapter_dir or rm_paths(cfg, kind).adapter)


def items(cfg, kind: str, split: str, limit: int = 0, references: bool = True) -> list[dict]:
    """The split's items; with a limit, a seeded sample of that many (order kept). Scalar training also
    scores the reference replies themselves (data.with_references), unless `references` is False (the
    evaluations, which judge candidate-reference pairs)."""
    all_items = load_items(data_file(cfg.run_dir, kind, split), kind)
    if cfg.reward_models.context_free(kind):
        all_items = context_free_items(all_items)
    if kind == "scalar" and split == "train" and references:
        all_items = with_references(all_items)
    return seeded_sample(all_items, limit, cfg.seed)


def seeded_sample(xs: list, limit: int, seed: int) -> list:
    """`limit` of `xs` drawn with `seed`, in their order (all of them when limit is 0 or not smaller)."""
    if not limit or limit >= len(xs):
        return xs
    return [xs[i] for i in sorted(random.Random(seed).sample(range(len(xs)), limit))]


def process_judge(cfg):
    """The field judge of the process reward (process_scorer "judge"), or None for the lexical rule."""
    p = cfg.reward_models
    if p.process_scorer != "judge":
        return None
    from echo_lib.models import load_llm
    from echo_lib.rewards.process import make_judge
    return make_judge(load_llm(cfg, p.process_judge or cfg.roles.reward_model))


def train(cfg, kind: str, shuffled: bool = False) -> TrainResult:
    """Train the reward model on its training split; with `shuffled`, its label-shuffle twin."""
    train_items = items(cfg, kind, "train", cfg.reward_models.max_train_items)
    if shuffled:
        train_items = shuffled_labels(train_items, kind, cfg.seed)
    if kind == "empathy" and cfg.reward_models.swap_augment:
        train_items = with_swaps(train_items)     # after the shuffle: the twin's swapped labels stay meaningless
    out = rm_paths(cfg, kind).shuffled if shuffled else rm_paths(cfg, kind)
    decision_path(out.adapter).unlink(missing_ok=True)   # an old threshold belongs to an old adapter
    return train_on(cfg, kind, train_items, out.dir)


def train_on(cfg, kind: str, train_items: list[dict], out_dir: str | Path, steps: int | None = None) -> TrainResult:
    """Stage 02's recipe on the given items (the kind's own SFT steps unless `steps`): out_dir/adapter/."""
    from echo_lib.models import registry
    p = cfg.reward_models
    p = dataclasses.replace(p, sft=dataclasses.replace(p.sft, steps=steps or p.sft.steps_for(kind)))
    spec = rm_spec(cfg)
    exs = examples(train_items, kind, p.target_field_words, p.context_free(kind), p.decision)
    return train_reward_model(registry(cfg).train_base(spec.name), kind, exs, p, out_dir, seed=cfg.seed, judge=process_judge(cfg))


def calibrate(cfg, kind: str, shuffled: bool = False) -> dict | None:
    """Set and save the humanlike model's P(human) threshold on its training items (calibration.py), or
    with `shuffled` its twin's on the same items with the labels it was trained on. None where there is
    nothing to set (another kind, think_first, or humanlike_machine_recall 0)."""
    rm = cfg.reward_models
    if kind != "humanlike" or rm.decision != "verdict_first" or not rm.humanlike_machine_recall:
        return None
    n = rm.eval.max_train_items
    if not n:
        raise ValueError("reward_models.humanlike_machine_recall sets the threshold on eval.max_train_items training "
                         "items, and that is 0: raise it, or set humanlike_machine_recall to 0 (argmax verdicts)")
    train = items(cfg, kind, "train", rm.max_train_items)
    if shuffled:
        train = shuffled_labels(train, kind, cfg.seed)
    train = seeded_sample(train, n, cfg.seed)   # the items evaluate_models' trained_on_train judges
    adapter = (rm_paths(cfg, kind).shuffled if shuffled else rm_paths(cfg, kind)).adapter
    decision_path(adapter).unlink(missing_ok=True)   # a retrained adapter must not keep an old threshold
    if not any(it["label"] == "machine" for it in train):
        log.warning("no machine item among the %d training items the humanlike threshold is set on; it keeps the "
                    "more probable verdict (raise reward_models.eval.max_train_items)", len(train))
        return None
    _, rows = evaluate(rm_llm(cfg, adapter), train, kind, rm.eval.max_new_tokens, False, rm.context_free(kind),
                       rm.decision)
    return write_decision(adapter, machine_recall_threshold(rows, rm.humanlike_machine_recall),
                          rm.humanlike_machine_recall, rows)


def evaluate_models(cfg, kind: str, adapter: str | Path, shuffled_adapter: str | Path | None = None
                    ) -> dict[str, tuple[dict, list[dict]]]:
    """On the held-out split: the base (untrained, same prompt), the trained model and, if given, its
    label-shuffle twin; "trained_on_train": the trained model on a sample of its own training items.
    A model with a saved threshold (calibrate) decides by it; the base by the more probable verdict."""
    p, rm = cfg.reward_models.eval, cfg.reward_models
    test = items(cfg, kind, "test", p.max_items)
    def run(model, its, swap=False):   # position bias is measured on the trained model (swap doubles the calls)
        llm, threshold = model
        return evaluate(llm, its, kind, p.max_new_tokens, swap, rm.context_free(kind), rm.decision, threshold)
    def judged_by(adapter_dir):        # the adapter's model, and its saved threshold (if any)
        return rm_llm(cfg, adapter_dir), read_threshold(adapter_dir)
    trained = judged_by(adapter)
    out = {"base": run((rm_llm(cfg), None), test), "trained": run(trained, test, p.position_swap)}
    if shuffled_adapter is not None:
        out["shuffled"] = run(judged_by(shuffled_adapter), test)
    if p.max_train_items:
        out["trained_on_train"] = run(trained, items(cfg, kind, "train", p.max_train_items, references=False))
    return out


def probe(cfg, kind: str) -> dict:
    """The learnability reference: a linear probe on sentence embeddings, same train / test items."""
    from echo_lib.rewards.probe import linear_probe, load_embedder
    p = cfg.reward_models
    return linear_probe(items(cfg, kind, "train", p.max_train_items, references=False),
                        items(cfg, kind, "test", p.eval.max_items),
                        kind, load_embedder(), seed=cfg.seed, context_free=p.context_free(kind))


def write_outputs(cfg, kind: str, results: dict[str, tuple[dict, list[dict]]], trained: TrainResult | None,
                  probe_metrics: dict | None = None, shuffled: TrainResult | None = None) -> dict:
    from echo_lib.provenance import provenance, write_json, write_jsonl, write_text
    paths = rm_paths(cfg, kind)
    by_model = {name: m for name, (m, _) in results.items()}
    main = {name: m for name, m in by_model.items() if name in ("base", "trained")}
    if "trained" in main:   # the controls beside the trained model's own figures
        main["trained"] = {**main["trained"],
                           "train_accuracy": by_model.get("trained_on_train", {}).get("accuracy"),
                           "shuffled_accuracy": by_model.get("shuffled", {}).get("accuracy")}
    test = next(iter(by_model.values()))
    record = {"kind": kind, "scale": cfg.scale, "base_model": cfg.roles.reward_model,
              "decision": cfg.reward_models.decision, "n_test": test["n"],
              "human_threshold": read_threshold(paths.adapter) if kind == "humanlike" else None,
              "majority_baseline": test["majority_baseline"], **main,
              "train_accuracy": main.get("trained", {}).get("train_accuracy"),
              "shuffled_accuracy": main.get("trained", {}).get("shuffled_accuracy"),
              "vs_base": _paired(results, "trained", "base"),
              "vs_shuffled": _paired(results, "trained", "shuffled"),
              "probe": probe_metrics, "shuffled": by_model.get("shuffled"),
              "train_split": by_model.get("trained_on_train"),
              "training": _training(trained), "shuffled_training": _training(shuffled),
              "params": dataclasses.asdict(cfg.reward_models),
              "provenance": provenance(cfg.record, stage="02_reward_models", kind=kind)}
    write_json(paths.metrics, record)
    table = metrics_table({**by_model, **({"probe": probe_metrics} if probe_metrics else {})})
    import io
    buf = io.StringIO(newline="")
    w = csv.DictWriter(buf, ["metric", *by_model, *(["probe"] if probe_metrics else [])])
    w.writeheader()
    w.writerows(table)
    write_text(paths.table, buf.getvalue())   # atomic: a kill mid-write leaves the old table whole
    write_jsonl(paths.eval_rows, ({"model": name, **r} for name, (_, rows) in results.items() for r in rows))
    return record


def _paired(results: dict[str, tuple[dict, list[dict]]], a: str, b: str) -> dict | None:
    """The paired accuracy difference of model a over model b on the held-out items (None if one is missing)."""
    if a not in results or b not in results:
        return None
    return paired_accuracy(results[a][1], results[b][1])


def _training(t: TrainResult | None) -> dict | None:
    return None if t is None else {"seconds": t.seconds, "steps": t.steps, "peak_rss_mb": round(t.peak_rss_mb)}

"""Stage 01 end to end: both datasets and the human-in-the-loop check, written to the file contracts

    results/<run>/data/humanlike/{train,test}.jsonl
    results/<run>/data/empathy/{train,test}.jsonl   (+ hitl/annotation_sheet.csv, hitl/report.json)
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from echo_lib.config import RunConfig
from echo_lib.provenance import write_json, write_jsonl
from echo_lib.scenarios.cases import stratified_order
from echo_lib.scenarios.own import load_own
from echo_lib.synthesis import contrasts, hitl
from echo_lib.layout import Layout
from echo_lib.synthesis.chitchat import load_chitchat
from echo_lib.synthesis.empathy import synthesize
from echo_lib.synthesis.humanlike import make_humanlike_data
from echo_lib.synthesis.splits import holdout_split
from echo_lib.synthesis.theorems import derive_theorems, gold_profile, load_axioms


def data_dir(cfg: RunConfig, kind: str) -> Path:
    """Stage 01's folder of one dataset (echo_lib.layout)."""
    return Layout(cfg.run_dir).data_dir(kind)


def humanlike_data(cfg: RunConfig, llm) -> dict[str, list]:
    """Real human turns vs the base model's replies and the hard negatives; both splits written."""
    from echo_lib.llm import Sampling

    corpus, h = cfg.data.chitchat, cfg.data.humanlike
    dialogues = load_chitchat(corpus.wheel, corpus.sha256, corpus.member, Path(cfg.results_dir) / "wheels")
    sampling = Sampling(temperature=h.temperature, top_p=h.top_p, max_new_tokens=h.max_new_tokens, seed=cfg.seed)
    splits = make_humanlike_data(dialogues, h, lambda chats: [c.text.strip() for c in llm.generate(chats, sampling)],
                                 cfg.seed)
    for split, items in splits.items():
        write_jsonl(data_dir(cfg, "humanlike") / f"{split}.jsonl", (i.to_json() for i in items))
    return splits


def empathy_scenarios(cfg: RunConfig) -> list:
    """The English personas the empathy data is derived from, in stratified order."""
    scenarios = load_own()
    return stratified_order(scenarios, cfg.data.empathy.max_scenarios or len(scenarios), cfg.seed)


def empathy_data(cfg: RunConfig, generator, judge, scenarios: list) -> dict[str, list]:
    """Items against a reference reply, split by persona (not yet HITL-filtered): by contrast
    construction (contrasts.py; `judge` unused, may be None) or by critique-and-rewrite (empathy.py)."""
    e = cfg.data.empathy
    axioms = load_axioms(e.axioms_file)
    train, test = holdout_split(scenarios, e.test_fraction, cfg.seed)
    parts = (("train", train), ("test", test))
    if e.method == "contrast":
        banks = contrasts.split_bank(contrasts.load_bank(e.contrast.bank_file, e.contrast.poor_kinds), cfg.seed)
        return {split: contrasts.synthesize(part, axioms, generator, e, cfg.seed, f"emp-{split}", banks[split])
                for split, part in parts}
    return {split: synthesize(part, axioms, generator, judge, e, cfg.seed, prefix=f"emp-{split}")
            for split, part in parts}


def human_check(cfg: RunConfig, scenarios: list, splits: dict[str, list]) -> tuple[dict[str, list], dict]:
    """Export the annotation sheet, import the configured verdicts, drop rejected personas' items."""
    h, out = cfg.data.hitl, data_dir(cfg, "empathy") / "hitl"
    axioms = load_axioms(cfg.data.empathy.axioms_file)
    sampled = hitl.export_sample(scenarios, {s.id: gold_profile(s) for s in scenarios},
                                 {s.id: derive_theorems(s, axioms) for s in scenarios},
                                 h.sample_fraction, h.min_sample, cfg.seed, out / "annotation_sheet.csv")
    known = {s.id for s in scenarios}
    verdicts = hitl.read_verdicts(h.verdicts)
    unknown = sorted({v.scenario_id for v in verdicts} - known)
    verdicts = [v for v in verdicts if v.scenario_id in known]
    rejected = hitl.rejected_scenarios(verdicts)
    report = {**hitl.agreement(verdicts), "sampled": sampled, "verdict_files": h.verdicts,
              "ignored_unknown_scenarios": unknown, "rejected_scenarios": sorted(rejected)}
    report["batch_accepted"] = report["accept_rate"] is not None and report["accept_rate"] >= h.accept_rate
    kept = {split: [i for i in items if i.scenario_id not in rejected] for split, items in splits.items()}
    report["dropped_items"] = sum(len(splits[s]) - len(kept[s]) for s in splits)
    write_json(out / "report.json", report)
    for split, items in kept.items():
        write_jsonl(data_dir(cfg, "empathy") / f"{split}.jsonl", (i.to_json() for i in items))
    return kept, report


def summary(splits: dict[str, list], columns: tuple[str, ...]) -> list[dict]:
    """Counts per split and label/kind/origin, for the notebook's table."""
    rows = []
    for split, items in splits.items():
        for column in columns:
            for value, n in sorted(Counter(getattr(i, column) for i in items).items()):
                rows.append({"split": split, "field": column, "value": value, "items": n})
    return rows

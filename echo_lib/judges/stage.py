"""The judge sensitivity stage for a run config (issue 16): are the instruments able to see the reply?

    results/<run>/judges/sensitivity.json   {"sandbox_judge": {"accuracy", "accuracy_ci", "n", "ci_method", "by_axis",
                                             "by_kind", ...}, "nee": {"accuracy", "alpha", "position_bias",
                                             "judges": {...}}, "iedr": {"dominant_axis", "distinct_P0",
                                             "majority", "probe", "shuffled", ...} (with IEDR heads),
                                             "length_rule": {...}, "thresholds", "passed", "set", "provenance"}
    results/<run>/judges/sensitivity.png    accuracies with their intervals, chance, the length rule, the targets

Every accuracy is a share of items (a tie counts half) with its Wilson score interval with continuity
correction (echo_lib.stats.proportion_interval), its n and the method beside it.

Two references stand beside the judges: the length rule (prefer the longer reply; a judge no better may be
reading length, not empathy) and, on the held-out split, a pairwise linear probe on sentence embeddings fit
on the dev items, with its label-shuffle twin (echo_lib.judges.probe: what a shallow reader of the text can
learn from the dev part). Chance is 0.5. The thresholds are here, so the
notebook, the paper and the tests read the same.
"""
from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from echo_lib.layout import Layout
from echo_lib.sandbox.priorities import DECLARED

THRESHOLDS = {"sandbox_judge_accuracy": 0.80, "nee_accuracy": 0.80, "nee_alpha": 0.40, "nee_position_bias": 0.20}


def sensitivity_dir(cfg) -> Path:
    """Where the sensitivity record, its figure and the trained judge go (echo_lib.layout)."""
    return Layout(cfg.run_dir).judges.dir


def set_path(cfg) -> Path:
    """judges.set; a relative path is read from the working directory (the project root in the DAG)."""
    return Path(cfg.judges.set)


def items_for(cfg):
    from echo_lib.judges.sensitivity_set import load_set, select
    items = select(load_set(set_path(cfg)), cfg.judges.split, cfg.judges.max_items)
    if not items:
        raise ValueError(f"{set_path(cfg)}: no item has split {cfg.judges.split!r}; set judges.split to dev or heldout")
    return items


def train(cfg) -> dict | None:
    """judges.train: the tiny judge, trained on the dev items (never the held-out ones); None when off.
    method readout fits read-out heads on the base model's hidden layer (judges/readout/); method sft
    trains a LoRA adapter (judges/adapter/)."""
    from echo_lib.judges.sensitivity_set import load_set, select
    from echo_lib.judges.params import TRAINED_JUDGE
    t = cfg.judges.train
    if not t.enabled:
        return None
    dev = select(load_set(set_path(cfg)), "dev", t.max_dev_items)
    if t.method == "readout":
        from echo_lib.judges.iedr_heads import own_split
        from echo_lib.judges.readout import fit_readout_judge
        from echo_lib.models import load_llm
        from echo_lib.synthesis.contrasts import load_bank
        fit = fit_readout_judge(load_llm(cfg, t.base), dev, cfg.models[TRAINED_JUDGE].readout, layer=t.layer, C=t.C,
                                bank=load_bank(t.bank_file), bank_per_item=t.bank_per_item,
                                variants=cfg.nee.prompt_variants, seed=cfg.seed,
                                cases=own_split(cfg.seed)[0] if t.iedr_heads else None)
        return {"model": TRAINED_JUDGE, "base": t.base, "dev_items": len(dev), **fit}
    from echo_lib.judges.train import train_judge
    from echo_lib.models import registry
    result, n_examples = train_judge(registry(cfg).train_base(t.base), t, cfg.reward_models, cfg.nee.prompt_variants,
                                     dev, sensitivity_dir(cfg), cfg.seed)
    return {"model": TRAINED_JUDGE, "method": "sft", "base": t.base, "dev_items": len(dev), "examples": n_examples,
            "steps": result.steps.get("sft"), "seconds": round(result.seconds["total"], 1),
            "peak_rss_mb": round(result.peak_rss_mb), "final_loss": next(
                (r["loss"] for r in reversed(result.log) if r.get("loss") is not None), None)}


def length_rule(items) -> dict:
    """Prefer the reply with more words: what a judge reading only length would score."""
    from echo_lib.judges.sensitivity import preference, summarise
    return summarise([preference(len(it.good.split()), len(it.poor.split())) for it in items])


def run_probe(cfg, items, embed=None) -> dict | None:
    """The embedding probe fit on the dev items, scored on `items` (None unless they are the held-out split)."""
    from echo_lib.judges.probe import embedding_probe
    from echo_lib.judges.sensitivity_set import load_set, select
    if not cfg.judges.probe or cfg.judges.split != "heldout":
        return None
    if embed is None:
        from echo_lib.rewards.probe import load_embedder
        embed = load_embedder()
    dev = select(load_set(set_path(cfg)), "dev")
    return embedding_probe(dev, items, embed, cfg.seed)


def sandbox_judge(cfg, llm=None):
    """roles.judge as the sandbox asks it (sandbox_run's judge settings)."""
    from echo_lib.models import load_llm
    from echo_lib.sandbox.judge import Judge
    p = cfg.sandbox_run
    return Judge(llm or load_llm(cfg, cfg.roles.judge), p.judge, seed=cfg.seed, history_turns=p.history_turns)


def run_sandbox_judge(cfg, items, llm=None) -> dict:
    from echo_lib.judges.sensitivity import sandbox_judge_sensitivity
    judge = sandbox_judge(cfg, llm)
    out = sandbox_judge_sensitivity(judge, items)
    return {"model": cfg.roles.judge, "mode": judge.mode, "calibrate": cfg.sandbox_run.judge.calibrate, **out}


def dev_fit(cfg, llm=None) -> dict:
    """The sandbox judge's accuracy on the dev items a trained judge learnt from. Beside the held-out figure
    it tells a judge that memorised its training items (dev high, held-out low) from one that learnt
    nothing (both near chance), as issue 15 asks of the reward models."""
    from echo_lib.judges.sensitivity_set import load_set, select
    out = run_sandbox_judge(cfg, select(load_set(set_path(cfg)), "dev", cfg.judges.train.max_dev_items), llm)
    return {"train_accuracy": out["accuracy"], "train_accuracy_ci": out["accuracy_ci"], "train_n": out["n"],
            "train_ci_method": out["ci_method"]}


def run_nee(cfg, items, llms: dict | None = None) -> dict:
    from echo_lib.judges.sensitivity import nee_sensitivity
    from echo_lib.models import load_llm
    from echo_lib.nee.blinding import Blinder
    from echo_lib.nee.panel import Asker, make_panel
    llms = dict(llms or {})
    askers = {m: Asker(llms.get(m) or load_llm(cfg, m), cfg.nee) for m in cfg.roles.nee_judges}
    panel = make_panel(cfg.roles.nee_judges, cfg.nee.prompt_variants, cfg.seed)
    blind = Blinder([], cfg.nee.blind_terms)    # the set names no model; the terms guard the prompts as in stage 06
    out = nee_sensitivity(panel, askers, items, blind, seed=cfg.seed)
    return {"models": list(cfg.roles.nee_judges), "prompt_variants": cfg.nee.prompt_variants, **out}


def run_iedr(cfg, llm=None) -> dict:
    """The sandbox judge's IEDR on the held-out own cases (echo_lib.judges.iedr_heads): does P0 read the case?"""
    from echo_lib.judges.iedr_heads import check, own_split
    judge = sandbox_judge(cfg, llm)
    dev, heldout = own_split(cfg.seed)
    return {"model": cfg.roles.judge, **check(judge, dev, heldout, C=cfg.judges.train.C, seed=cfg.seed)}


def passed(record: dict) -> dict[str, bool]:
    out = {}
    if "iedr" in record:
        out["iedr_dominant_axis"] = record["iedr"]["passed"]
    if "sandbox_judge" in record:
        out["sandbox_judge_accuracy"] = record["sandbox_judge"]["accuracy"] >= THRESHOLDS["sandbox_judge_accuracy"]
    if "nee" in record:
        n = record["nee"]
        out["nee_accuracy"] = n["accuracy"] >= THRESHOLDS["nee_accuracy"]
        out["nee_alpha"] = n["alpha"] is not None and n["alpha"] >= THRESHOLDS["nee_alpha"]
        out["nee_position_bias"] = n["position_bias"] is not None and n["position_bias"] <= THRESHOLDS["nee_position_bias"]
    return out


def judge_llms(cfg, given: dict | None = None) -> dict:
    """Every model the configured checks ask (roles.judge, roles.nee_judges), each loaded once: a model that
    is both the sandbox judge and an NEE judge, or is asked on both splits, is one object with one copy of
    its weights. `given` (tests' fakes) wins over loading."""
    from echo_lib.models import load_llm
    given = dict(given or {})
    names = ([cfg.roles.judge] if cfg.judges.sandbox_judge else []) + (list(cfg.roles.nee_judges) if cfg.judges.nee else [])
    return {name: given.get(name) or load_llm(cfg, name) for name in dict.fromkeys(names)}


def run_sensitivity(cfg, llms: dict | None = None, training: dict | None = None, embed=None) -> dict:
    """Both instruments (as judges.sandbox_judge / judges.nee say) on the configured split; writes the record.
    `llms` maps model names to LLM objects and `embed` is the probe's embedder (tests pass fakes); the
    others load from the config."""
    from echo_lib.provenance import provenance, write_json
    items = items_for(cfg)
    llms = judge_llms(cfg, llms)
    record = {"scale": cfg.scale, "set": {"path": str(set_path(cfg)), "split": cfg.judges.split, "n_items": len(items)},
              "chance": 0.5, "length_rule": length_rule(items)}
    if (probe := run_probe(cfg, items, embed)) is not None:
        record["probe"] = probe
    if cfg.judges.sandbox_judge:
        record["sandbox_judge"] = run_sandbox_judge(cfg, items, llms[cfg.roles.judge])
        if training is not None:
            record["sandbox_judge"] |= dev_fit(cfg, llms[cfg.roles.judge])
        if (training or {}).get("iedr_cases") or cfg.sandbox_run.judge.iedr_priorities == DECLARED:
            # the judge got IEDR priority heads, or P0 takes the declared priorities: measure P0 on held-out cases
            start = time.perf_counter()
            record["iedr"] = run_iedr(cfg, llms[cfg.roles.judge])
            record["iedr"]["seconds"] = round(time.perf_counter() - start, 1)
    if cfg.judges.nee:
        record["nee"] = run_nee(cfg, items, llms)
    if training is not None:
        record["training"] = training
    record |= {"thresholds": THRESHOLDS, "passed": passed(record), "params": asdict(cfg.judges),
               "provenance": provenance(cfg.record, stage="04_judges")}
    write_json(Layout(cfg.run_dir).judges.record, record)
    return record


def read_sensitivity(run_dir: str | Path) -> dict | None:
    """The record of a run, or None when its judges stage has not run."""
    import json
    path = Layout(run_dir).judges.record
    return json.loads(path.read_text()) if path.is_file() else None


def trust_note(run_dir: str | Path) -> str:
    """What stages 04 and 06 print before their comparisons: the judges' sensitivity figures, or that
    they were not measured for this run."""
    record = read_sensitivity(run_dir)
    if record is None:
        return ("judge sensitivity: not measured for this run (rule judges, notebooks/04_judges.py): nothing "
                "shows yet that the judges below prefer a better reply")
    lines = verdict_lines(record)
    if not all(record["passed"].values()):
        lines += ("\nA judge that misses its target is not shown to see the reply: read the differences it "
                  "reports as the instrument's, not the models'.")
    return lines


def verdict_lines(record: dict) -> str:
    """The figures in words, each beside its target, chance and the length rule."""
    word = {True: "meets", False: "MISSES"}
    ok = record["passed"]
    lines = [f"sensitivity set: {record['set']['n_items']} {record['set']['split']} items; chance 0.5, "
             f"length rule {record['length_rule']['accuracy']:.3f} {record['length_rule']['accuracy_ci']}"]
    if "probe" in record:
        p = record["probe"]
        lines.append(f"embedding probe (fit on {p['n_dev']} dev items): {p['accuracy']:.3f} {p['accuracy_ci']}; "
                     f"its label-shuffle twin {p['shuffled']['accuracy']:.3f} {p['shuffled']['accuracy_ci']}")
    if "sandbox_judge" in record:
        s = record["sandbox_judge"]
        lines.append(f"sandbox judge ({s['model']}, {s['mode']}{', calibrated' if s['calibrate'] else ''}): accuracy "
                     f"{s['accuracy']:.3f} {s['accuracy_ci']} (n={s['n']}, failed {s['n_failed']}), target >= "
                     f"{THRESHOLDS['sandbox_judge_accuracy']}: {word[ok['sandbox_judge_accuracy']]}")
        if "train_accuracy" in s:
            lines.append(f"sandbox judge on the {s['train_n']} dev items it was trained on: {s['train_accuracy']:.3f} "
                         f"{s['train_accuracy_ci']}")
    if "iedr" in record:
        from echo_lib.judges.iedr_heads import summary_line
        lines.append(summary_line(record["iedr"]))
    if "nee" in record:
        n = record["nee"]
        alpha = "undefined" if n["alpha"] is None else f"{n['alpha']:.3f}"
        bias = "undefined" if n["position_bias"] is None else f"{n['position_bias']:.3f}"
        lines += [f"NEE panel: accuracy {n['accuracy']:.3f} {n['accuracy_ci']} (n={n['n']}), target >= "
                  f"{THRESHOLDS['nee_accuracy']}: {word[ok['nee_accuracy']]}; pairwise accuracy "
                  f"{n['pairwise_accuracy']}",
                  f"NEE panel: Krippendorff alpha {alpha}, target >= {THRESHOLDS['nee_alpha']}: {word[ok['nee_alpha']]}; "
                  f"position bias {bias}, target <= {THRESHOLDS['nee_position_bias']}: {word[ok['nee_position_bias']]}"]
    return "\n".join(lines)


def sensitivity_figure(record: dict):
    import matplotlib.pyplot as plt
    bars = [("length rule", record["length_rule"]["accuracy"], record["length_rule"]["accuracy_ci"], "C7")]
    if "probe" in record:
        p = record["probe"]
        bars += [("embedding probe", p["accuracy"], p["accuracy_ci"], "C7"),
                 ("probe, shuffled", p["shuffled"]["accuracy"], p["shuffled"]["accuracy_ci"], "C7")]
    if "sandbox_judge" in record:
        s = record["sandbox_judge"]
        bars.append(("sandbox judge", s["accuracy"], s["accuracy_ci"], "C0"))
    if "nee" in record:
        n = record["nee"]
        bars.append(("NEE panel", n["accuracy"], n["accuracy_ci"], "C1"))
        bars.append(("NEE pairwise", n["pairwise_accuracy"], n["pairwise_accuracy_ci"], "C2"))
        bars += [(j, v["accuracy"], None, "C1") for j, v in n["judges"].items()]
    fig, ax = plt.subplots(figsize=(1.3 * len(bars) + 2, 3.6))
    names, values = [b[0] for b in bars], [b[1] or 0 for b in bars]
    lo = [v - ci[0] if ci else 0 for v, (_, _, ci, _) in zip(values, bars)]
    hi = [ci[1] - v if ci else 0 for v, (_, _, ci, _) in zip(values, bars)]
    ax.bar(names, values, yerr=[lo, hi], color=[b[3] for b in bars], capsize=4)
    ax.axhline(0.5, ls=":", c="k", lw=1, label="chance")
    ax.axhline(THRESHOLDS["sandbox_judge_accuracy"], ls="--", c="k", lw=1, label="target")
    ax.set(ylabel="prefers the good reply", ylim=(0, 1.05),
           title=f"Judge sensitivity ({record['set']['n_items']} {record['set']['split']} items)")
    ax.tick_params(axis="x", rotation=30)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig

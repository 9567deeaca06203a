"""Stage 03 end to end for one variant: the RL data, GRPO, the win rate against the base.

    results/<run>/policy/data/<variant>/{train,heldout}.jsonl   the RL prompts after the variant's hard filter
                                                      (policy/data/ itself when the prompts are shared)
    results/<run>/policy/data/<variant>/filter.json   what the hard filter kept and dropped, and why
    results/<run>/policy/<variant>/adapter/           the trained LoRA adapter (the sandbox's model <variant>);
                                                      model/ instead with policy.finetune full
    results/<run>/policy/<variant>/train_log.csv      per step: reward, KL, entropy and the monitors
    results/<run>/policy/<variant>/winrate.csv        the variant against the base, per judge
    results/<run>/policy/<variant>/winrate_rows.jsonl every judgment with the two replies
    results/<run>/policy/<variant>/metrics.json       steps, time, memory, data counts, provenance

The data is built once and reused while its settings are unchanged (`filter.json` records them). With
hard_filter.per_variant (the default) each variant's own reward filters its prompts, so the scalar arm
never trains on prompts the echo reward models chose; with it off, or with no filter, both variants
train on exactly the same prompts.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from echo_lib.layout import Layout, PolicyFiles
from echo_lib.llm import Sampling
from echo_lib.policy.data import RLPrompt, chitchat_prompts, empathy_prompts, mix, policy_chat, read_prompts
from echo_lib.policy.hard_filter import hard_filter
from echo_lib.policy.monitors import hacking_check, learning_signal
from echo_lib.policy.params import VARIANTS
from echo_lib.policy.rewards import ROUTES, RolloutLog, needed_kinds, variant_rewards
from echo_lib.policy.targets import rl_targets
from echo_lib.policy.train import PolicyTrainResult, grpo_rows, train_policy
from echo_lib.policy.winrate import (judge_independent, judge_with_rm, judge_with_rm_debiased, judgment_rows,
                                     summarise)


def check_variant(variant: str) -> str:
    if variant not in VARIANTS:
        raise ValueError(f"policy variant {variant!r} is not one of {', '.join(VARIANTS)}")
    return variant


def trained_model(cfg, name: str) -> tuple[str, int]:
    """(variant, RL seed offset) of a model stage 03 trains: a variant's name (its first seed of policy.seeds)
    or `<variant>-s<seed>` (policy.params.trained_models)."""
    trained = cfg.policy.trained()
    if name not in trained:
        raise ValueError(f"{name!r} is not a policy stage 03 trains; policy.variants x policy.seeds give "
                         f"{', '.join(trained)}")
    return trained[name]


def single_turn_models(cfg) -> list[str]:
    """The trained policies of this stage's variants (echo, scalar and their seeds), not the epm variant's."""
    return [name for name, (v, _) in cfg.policy.trained().items() if v in VARIANTS]


def policy_paths(cfg, name: str) -> PolicyFiles:
    """Stage 03's files of one trained policy (a variant and seed, by model name; echo_lib.layout)."""
    trained_model(cfg, name)
    return Layout(cfg.run_dir).policy(name)


def filter_variant(cfg, variant: str) -> str | None:
    """Whose reward chooses a variant's RL prompts: its own (hard_filter.per_variant), echo's, or nobody's."""
    f = cfg.policy.hard_filter
    if not f.enabled:
        return None
    return check_variant(variant) if f.per_variant else "echo"


def data_dir(cfg, variant: str = "echo") -> Path:
    """policy/data/ when both variants train on the same prompts, policy/data/<variant>/ when each filters
    with its own reward."""
    per_variant = cfg.policy.hard_filter.enabled and cfg.policy.hard_filter.per_variant
    return Layout(cfg.run_dir).policy_data(variant if per_variant else None)


def system_prompt(cfg) -> str | None:
    return cfg.policy.system_prompt or cfg.sandbox_run.companion_prompt


def token_counter(cfg):
    """Tokens of a chat under the policy's chat template (for trimming long histories)."""
    from transformers import AutoTokenizer

    from echo_lib.models import registry
    tok = AutoTokenizer.from_pretrained(str(registry(cfg).weights(cfg.roles.policy)))
    return chat_token_counter(tok)


def chat_token_counter(tok):
    """count(chat) -> the number of prompt tokens of `chat` under `tok`'s chat template. Under transformers 5
    apply_chat_template(tokenize=True) returns a BatchEncoding (a dict: len() would count its keys), under 4
    a list of ids; both are handled."""
    def count(chat: list[dict]) -> int:
        ids = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        if ids and isinstance(ids[0], (list, tuple)):   # a batch of one
            ids = ids[0]
        return len(ids)
    return count


def chats_for(cfg, prompts: list[RLPrompt], count=None) -> list[list[dict]]:
    p = cfg.policy
    return [policy_chat(x.context, system_prompt(cfg), cfg.sandbox_run.test_history, p.grpo.max_prompt_length,
                        count) for x in prompts]


def ordered(cfg, rms: dict) -> dict:
    """The reward models as the rewards use them: the Empathy RM judged in both orders with policy.both_orders."""
    from echo_lib.policy.anchors import BothOrders
    if cfg.policy.both_orders and "empathy" in rms:
        return {**rms, "empathy": BothOrders(rms["empathy"], cfg.policy.tie_margin)}
    return rms


def reward_models(cfg, kinds):
    from echo_lib.rewards.stage import reward_fn, rm_paths
    out = {}
    for kind in kinds:
        adapter = rm_paths(cfg, kind).adapter
        if not (adapter / "adapter_config.json").exists():
            raise FileNotFoundError(f"{adapter} has no trained {kind} reward model; stage 02 "
                                    f"(notebooks/02_reward_models.py, kind={kind}) writes it")
        out[kind] = reward_fn(cfg, kind)
    return out


# ------------------------------------------------------------------------------------------------
# RL data


def data_settings(cfg, variant: str) -> dict:
    p = cfg.policy
    return {"filter_reward": filter_variant(cfg, variant), "empathy_share": p.empathy_share, "max_prompts": p.max_prompts, "seed": cfg.seed,
            "openings": p.openings, "anchor": p.anchor, "both_orders": p.both_orders,
            "tie_margin": p.tie_margin,
            "hard_filter": dataclasses.asdict(p.hard_filter), "max_prompt_length": p.grpo.max_prompt_length,
            "temperature": p.grpo.temperature, "top_p": p.grpo.top_p, "winrate_prompts": p.winrate.max_prompts,
            "system_prompt": system_prompt(cfg), "history": cfg.sandbox_run.test_history,
            "inputs": input_fingerprints(cfg, variant)}


def input_fingerprints(cfg, variant: str) -> dict[str, str | None]:
    """Content hashes of the stage 01 files and the reward models the filter judges with."""
    import hashlib

    from echo_lib.llm.hf import fingerprint
    from echo_lib.rewards.stage import rm_paths
    out = {str(f): hashlib.sha256(f.read_bytes()).hexdigest()[:16] if f.exists() else None
           for f in source_files(cfg)}
    if (by := filter_variant(cfg, variant)) is not None:
        out |= {f"rm/{k}": fingerprint(rm_paths(cfg, k).adapter) for k in needed_kinds(by)}
    if cfg.policy.openings > 1:
        from echo_lib.policy.openings import openings_hash
        out["openings"] = openings_hash(persona_scenarios(cfg).values(), cfg.policy.openings)
    return out


def with_openings(cfg, splits: list[list[RLPrompt]]) -> tuple[list[list[RLPrompt]], dict]:
    """Each split's empathy prompts plus policy.openings - 1 authored openings per persona of that split
    (echo_lib.policy.openings), so the split by persona holds."""
    from echo_lib.policy.openings import openings
    scenarios = persona_scenarios(cfg)
    out, report = [], {}
    for name, prompts in zip(("train", "heldout"), splits):
        topics: dict[str, list[RLPrompt]] = {}
        for x in prompts:
            topics.setdefault(x.persona, []).append(x)
        unknown = sorted(set(topics) - set(scenarios))
        if unknown:
            raise ValueError(f"stage 01's empathy data names scenarios {unknown[:3]} that data/scenarios/own lacks; "
                             "rerun stage 01")
        short = sorted(sid for sid in topics if len(scenarios[sid].openings) < cfg.policy.openings - 1)
        if short:
            raise ValueError(f"policy.openings is {cfg.policy.openings}, but scenario {short[0]} "
                             f"({scenarios[short[0]].source}) has {len(scenarios[short[0]].openings)} openings; "
                             "lower policy.openings or add openings to the scenario file")
        made = openings([scenarios[sid] for sid in topics], topics, cfg.policy.openings)
        out.append(made)
        report[name] = {"personas": len(topics), "prompts": len(made)}
    return out, report


def persona_scenarios(cfg) -> dict:
    from echo_lib.scenarios.own import load_own
    return {sc.id: sc for sc in load_own()}


def source_files(cfg) -> list[Path]:
    data = Layout(cfg.run_dir).data
    return [data("empathy", "train"), data("humanlike", "train"), data("empathy", "test")]


def rl_data(cfg, variant: str = "echo") -> tuple[list[RLPrompt], list[RLPrompt], dict]:
    """A variant's (train prompts, held-out prompts, filter report): read from its data_dir when built with
    the same settings, else built (the hard filter samples the base policy and asks the reward models of
    filter_variant)."""
    from echo_lib.provenance import provenance, write_json, write_jsonl
    out = data_dir(cfg, variant)
    settings = data_settings(cfg, variant)
    if (out / "filter.json").exists():
        built = json.loads((out / "filter.json").read_text())
        if built["settings"] == settings:
            return read_prompts(out / "train.jsonl"), read_prompts(out / "heldout.jsonl"), built
    emp_file, chat_file, test_file = source_files(cfg)
    emp_train, chat_train, emp_test = empathy_prompts(emp_file), chitchat_prompts(chat_file), empathy_prompts(test_file)
    p = cfg.policy
    report: dict = {}
    if p.openings > 1:
        (emp_train, emp_test), report["openings"] = with_openings(cfg, [emp_train, emp_test])
    drawn = mix(emp_train, chat_train, p.empathy_share, p.max_prompts, cfg.seed)
    report |= {"available": {"empathy": len(emp_train), "chitchat": len(chat_train)},
               "drawn": {d: sum(x.domain == d for x in drawn) for d in ("empathy", "chitchat")}}
    kept = drawn
    if (by := filter_variant(cfg, variant)) is not None:
        from echo_lib.models import load_llm
        rms = reward_models(cfg, needed_kinds(by))
        funcs = variant_rewards(by, ordered(cfg, rms), 0.0)
        # the policy-level anchor is the Empathy RM's choice, for the variants that reward with it
        anchor_rm = rms["empathy"] if p.anchor == "policy_median" and ROUTES[by]["empathy"] == "empathy" else None
        f = p.hard_filter
        sampling = Sampling(temperature=p.grpo.temperature, top_p=p.grpo.top_p, max_new_tokens=f.max_new_tokens,
                            seed=cfg.seed)
        kept, rep = hard_filter(drawn, chats_for(cfg, drawn, token_counter(cfg)), load_llm(cfg, cfg.roles.policy),
                                funcs, f.samples, sampling, anchor_rm, p.tie_margin if p.both_orders else None)
        report["hard_filter"] = {**rep.summary(), "all_win": rep.all_win, "all_lose": rep.all_lose,
                                 "rewards": rep.rewards, "anchors": rep.anchors}
    report["kept"] = {d: sum(x.domain == d for x in kept) for d in ("empathy", "chitchat")}
    heldout = first_heldout(cfg, emp_test)
    write_jsonl(out / "train.jsonl", (x.row() for x in kept))
    write_jsonl(out / "heldout.jsonl", (x.row() for x in heldout))
    record = {"settings": settings, **report,
              "provenance": provenance(cfg.record, stage="03_policy_rl", step="rl_data", variant=variant)}
    write_json(out / "filter.json", record)
    return kept, heldout, record


def first_heldout(cfg, emp_test: list[RLPrompt]) -> list[RLPrompt]:
    n = cfg.policy.winrate.max_prompts
    return emp_test[:n] if n else emp_test


def heldout_prompts(cfg) -> list[RLPrompt]:
    """The held-out empathy prompts of the win rate, as rl_data gives them (with the authored openings), without
    building any variant's RL data: what a variant that trains on no prompts (epm) is compared on."""
    emp_test = empathy_prompts(source_files(cfg)[2])
    if cfg.policy.openings > 1:
        (_, emp_test), _ = with_openings(cfg, [[], emp_test])
    return first_heldout(cfg, emp_test)


# ------------------------------------------------------------------------------------------------
# Training and the win rate


def train(cfg, name: str, prompts: list[RLPrompt]) -> PolicyTrainResult:
    """GRPO of the trained policy `name` (a variant and RL seed), in this process or, with policy.launcher
    accelerate, under `accelerate launch`."""
    if cfg.policy.launcher == "inprocess":
        return train_here(cfg, name, prompts)
    import time

    from echo_lib.finetune import check_saved
    from echo_lib.policy.launch import run_accelerate
    from echo_lib.policy.train import read_log, saved_dir
    paths = policy_paths(cfg, name)
    t0 = time.perf_counter()
    run_accelerate(cfg, f"{__name__}:launched", [name], paths.dir)
    rows = read_log(paths.train_log)
    saved = saved_dir(cfg.policy, paths.dir)
    check_saved(saved)    # the launched run's weights, read back here too
    return PolicyTrainResult(str(saved), rows, time.perf_counter() - t0, len(rows))


def launched(cfg, name: str) -> int:
    """One rank's work under `accelerate launch` (echo_lib.policy.launch runs it by name): GRPO of the
    trained policy `name` on its variant's RL data."""
    variant, _ = trained_model(cfg, name)
    prompts, _, _ = rl_data(cfg, variant)
    result = train_here(cfg, name, prompts)
    print(f"{result.steps} steps in {result.seconds:.0f} s -> {result.adapter_dir} "
          f"(weights sharded by ZeRO-3 at load: {result.sharded_at_load})", flush=True)
    return 0


def train_here(cfg, name: str, prompts: list[RLPrompt]) -> PolicyTrainResult:
    from echo_lib.models import registry
    from echo_lib.policy.vllm import check_vllm
    spec = cfg.models[cfg.roles.policy]
    if spec.backend != "hf":
        raise ValueError(f"roles.policy is {spec.name!r}, an {spec.backend}-backend model; stage 03 trains the "
                         "policy with TRL, so roles.policy must name an hf-backend model")
    check_vllm(cfg.policy.grpo, spec, cfg.policy)   # vLLM rollouts: refused combinations, the gpu extra
    variant, rl_seed = trained_model(cfg, name)
    rollouts = RolloutLog()
    funcs = variant_rewards(variant, ordered(cfg, reward_models(cfg, needed_kinds(variant))),
                            cfg.policy.grpo.format_penalty, rollouts)
    rows = grpo_rows(prompts, chats_for(cfg, prompts, token_counter(cfg)))
    return train_policy(registry(cfg).train_base(spec.name), rows, funcs, rollouts, cfg.policy, policy_paths(cfg, name).dir,
                        seed=cfg.seed + rl_seed)   # the same RL data for every seed: only GRPO's draws differ


def winrate(cfg, variant: str, heldout: list[RLPrompt]) -> tuple[list[dict], list[dict], dict]:
    """(summary rows per judge, every judgment, the greedy check): the variant's replies against the base's."""
    from echo_lib.models import load_llm
    from echo_lib.rewards.stage import reward_fn
    from echo_lib.sandbox.dialogue import clean_reply
    w = cfg.policy.winrate
    s = cfg.sandbox_run.test_model
    sampling = Sampling(temperature=s.temperature, top_p=s.top_p, max_new_tokens=w.max_new_tokens, seed=cfg.seed)
    chats = chats_for(cfg, heldout, token_counter(cfg))
    judge_name = w.judge or cfg.roles.judge
    llms = {name: load_llm(cfg, name) for name in dict.fromkeys((cfg.roles.policy, variant, judge_name))}
    replies = {name: [clean_reply(c.text, ("You", "User")) for c in llms[name].generate(chats, sampling)]
               for name in (cfg.roles.policy, variant)}
    ids, contexts = [p.id for p in heldout], [p.context for p in heldout]
    v, b = replies[variant], replies[cfg.roles.policy]
    rm = reward_fn(cfg, "empathy")
    judged = {"empathy_rm": judge_with_rm(rm, ids, contexts, v, b),
              "independent": judge_independent(llms[judge_name], ids, contexts, v, b)}
    judge_models = {"empathy_rm": f"{cfg.roles.reward_model}+empathy-rm", "independent": judge_name}
    if cfg.policy.both_orders:   # the RM as the echo reward reads it (the same RM calls: cached)
        judged["empathy_rm_debiased"] = judge_with_rm_debiased(rm, ids, contexts, v, b, cfg.policy.tie_margin)
        judge_models["empathy_rm_debiased"] = judge_models["empathy_rm"]
    summary = [summarise(variant, j, judge_models[j], rows) for j, rows in judged.items()]
    by_id = {p.id: (rv, rb) for p, rv, rb in zip(heldout, v, b)}
    rows = [{**r, "variant_reply": by_id[r["prompt_id"]][0], "base_reply": by_id[r["prompt_id"]][1]}
            for judgments in judged.values() for r in judgment_rows(variant, judgments)]
    greedy = Sampling(temperature=0, max_new_tokens=w.max_new_tokens)
    plain = {name: [clean_reply(c.text, ("You", "User")) for c in llms[name].generate(chats, greedy)]
             for name in (cfg.roles.policy, variant)}
    return summary, rows, greedy_change(heldout, plain[cfg.roles.policy], plain[variant])


def greedy_change(heldout: list[RLPrompt], base: list[str], trained: list[str], examples: int = 3) -> dict:
    """How many held-out prompts get a different greedy reply from the trained policy than from its base:
    0 means the adapter changed nothing a user would see. The first `examples` changed pairs are kept."""
    changed = [(p, b, t) for p, b, t in zip(heldout, base, trained) if b != t]
    return {"n": len(heldout), "changed": len(changed), "share": round(len(changed) / max(len(heldout), 1), 4),
            "examples": [{"prompt_id": p.id, "user": p.context[-1]["content"], "base": b, "trained": t}
                         for p, b, t in changed[:examples]]}


def independent_row(winrate_summary: list[dict]) -> dict | None:
    """The held-out win rate of the judge that was not trained on (the reward-hacking check reads it)."""
    return next((r for r in winrate_summary if r["judge"] == "independent"), None)


def write_outputs(cfg, name: str, trained: PolicyTrainResult, data_report: dict, winrate_summary: list[dict],
                  winrate_rows: list[dict], greedy: dict, stage_seconds: float) -> dict:
    """winrate.csv, winrate_rows.jsonl and metrics.json (with the targets of echo_lib.policy.targets)."""
    import pandas as pd

    from echo_lib.provenance import provenance, write_json, write_jsonl, write_text
    variant, rl_seed = trained_model(cfg, name)
    paths = policy_paths(cfg, name)
    write_text(paths.winrate, pd.DataFrame(winrate_summary).to_csv(index=False))
    write_jsonl(paths.winrate_rows, winrate_rows)
    record = {"variant": variant, "model": name, "rl_seed": cfg.seed + rl_seed, "scale": cfg.scale,
              "policy_base": cfg.roles.policy, "steps": trained.steps,
              "seconds": round(trained.seconds, 1),
              "seconds_per_step": round(trained.seconds / max(trained.steps, 1), 2),
              "peak_rss_mb": round(trained.peak_rss_mb), "data": {k: data_report.get(k) for k in
                                                                   ("available", "drawn", "kept")},
              "stage_seconds": round(stage_seconds, 1), "openings": data_report.get("openings"),
              "hard_filter": {k: v for k, v in (data_report.get("hard_filter") or {}).items()
                              if k not in ("rewards", "anchors")},
              "greedy": greedy, "targets": rl_targets(trained.rows, data_report, winrate_summary, greedy, stage_seconds),
              "final": trained.rows[-1] if trained.rows else None, "winrate": winrate_summary,
              "learning_signal": learning_signal(trained.rows),
              "reward_hacking": hacking_check(trained.rows, independent_row(winrate_summary)),
              "params": dataclasses.asdict(cfg.policy), "provenance": provenance(cfg.record, stage="03_policy_rl",
                                                                                 variant=name)}
    write_json(paths.metrics, record)
    return record

"""Stage 03 for the epm variant (rule policy_multiturn, notebooks/03_policy_multiturn.py): multi-turn RL inside
the sandbox (echo_lib.policy.multiturn), then the same held-out win rate as the single-turn variants.

    results/<run>/policy/<name>/adapter/          the trained LoRA adapter (the sandbox's model <name>)
    results/<run>/policy/<name>/train_log.csv     per step: per-turn reward, return, KL, loss, times
    results/<run>/policy/<name>/rollouts/         per step, every policy turn with its reward and advantage
    results/<run>/policy/<name>/winrate.csv       the variant against the base, per judge (as stage 03)
    results/<run>/policy/<name>/winrate_rows.jsonl
    results/<run>/policy/<name>/training.png      reward per step, its first and last quarter, KL and loss
    results/<run>/policy/<name>/metrics.json      steps, time, memory, the reward's rise with its interval

It trains on the persons of stage 01's empathy train split, as the single-turn variants do, so the held-out
persons of the win rate are held out for every variant alike (the sandbox plays every model on the same cases,
trained-on persons among them, as for echo and scalar). The Actor, Judge and Director are the run's roles, as stage 04
loads them; the companion prompt and history format are the sandbox's, so RL trains what the sandbox tests.
"""
from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from echo_lib.policy.multiturn import MultiTurnResult, SandboxRoles, epm_progress, train_in_sandbox
from echo_lib.policy.params import MULTITURN
from echo_lib.policy.stage import heldout_prompts, policy_paths, system_prompt, trained_model, winrate


def check_epm(cfg, name: str) -> tuple[str, int]:
    variant, rl_seed = trained_model(cfg, name)
    if variant not in MULTITURN:
        raise ValueError(f"{name!r} is the {variant} variant, trained by rule policy (notebooks/03_policy_rl.py); "
                         f"rule policy_multiturn trains {', '.join(MULTITURN)}")
    return variant, rl_seed


def training_cases(cfg) -> list:
    """The own cases the variant trains on: the persons of stage 01's empathy train split, whom the single-turn
    variants train on too (the held-out persons stay held out); the first policy.multiturn.max_cases (0 = all)."""
    from echo_lib.policy.data import empathy_prompts
    from echo_lib.policy.stage import source_files
    from echo_lib.scenarios.own import load_own
    persons = {p.persona for p in empathy_prompts(source_files(cfg)[0])}
    cases = [sc for sc in load_own() if sc.id in persons]
    if not cases:
        raise ValueError(f"stage 01's empathy train split ({source_files(cfg)[0]}) names no own case; rerun stage 01")
    n = cfg.policy.multiturn.max_cases
    return cases[:n] if n else cases


def sandbox_roles(cfg) -> SandboxRoles:
    """The sandbox's Actor, Judge and Director as stage 04 loads them (each model once, prompts kept)."""
    from echo_lib.models import load_llm
    from echo_lib.sandbox.judge import Judge
    from echo_lib.sandbox.test_model import DEFAULT_COMPANION_PROMPT
    loaded: dict = {}

    def llm(name: str):
        if name not in loaded:
            loaded[name] = load_llm(cfg, name, dialogues=True)
        return loaded[name]

    p = cfg.sandbox_run
    judge = Judge(llm(cfg.roles.judge), p.judge, seed=cfg.seed, history_turns=p.history_turns)
    return SandboxRoles(actor=llm(cfg.roles.actor), judge=judge, director=llm(cfg.roles.director),
                        companion_prompt=system_prompt(cfg) or DEFAULT_COMPANION_PROMPT)


def train(cfg, name: str, progress: bool = True) -> MultiTurnResult:
    """Multi-turn RL of the trained policy `name` (the epm variant, an RL seed) on the run's policy base."""
    from echo_lib.models import registry
    _, rl_seed = check_epm(cfg, name)
    spec = cfg.models[cfg.roles.policy]
    if spec.backend != "hf":
        raise ValueError(f"roles.policy is {spec.name!r}, an {spec.backend}-backend model; multi-turn RL trains its "
                         "weights, so roles.policy must name an hf-backend model")
    if cfg.policy.finetune != "lora":
        raise ValueError("policy.finetune is full, but the epm variant trains a LoRA adapter only; use "
                         "policy.finetune: lora for a run with the epm variant")
    return train_in_sandbox(registry(cfg).train_base(spec.name), training_cases(cfg), sandbox_roles(cfg), epm_progress,
                            cfg.policy, cfg.sandbox_run, cfg.epm, policy_paths(cfg, name).dir,
                            seed=cfg.seed + rl_seed, progress=progress)


def reward_rise(out_dir: Path, rows: list[dict]) -> dict:
    """The reward of the last quarter of the steps against the first, with a Welch interval over dialogues
    (a dialogue's mean per-turn reward, read back from rollouts/: its turns are not independent, its dialogues
    are): did RL raise the reward it was trained on."""
    from echo_lib.stats import welch_difference
    steps = [int(r["step"]) for r in rows]
    if not steps:
        raise ValueError("no steps were logged")
    q = max(1, len(steps) // 4)

    def dialogue_means(chosen) -> list[float]:
        by: dict[tuple, list[float]] = {}
        for s in chosen:
            for line in (out_dir / "rollouts" / f"step_{s:03d}.jsonl").read_text().splitlines():
                if line.strip():
                    t = json.loads(line)
                    by.setdefault((s, t["case"], t["dialogue"]), []).append(t["reward"])
        return [sum(v) / len(v) for v in by.values()]

    first, last = dialogue_means(steps[:q]), dialogue_means(steps[-q:])
    diff = welch_difference(last, first)
    return {"first_quarter": round(sum(first) / len(first), 4), "last_quarter": round(sum(last) / len(last), 4),
            "rise": round(diff.estimate, 4), "rise_ci": diff.bounds, "dialogues": [len(first), len(last)],
            "steps_per_quarter": q}


def run(cfg, name: str, progress: bool = True) -> dict:
    """The whole stage for one epm model: train, the win rate against the base, the figure, metrics.json."""
    import pandas as pd

    from echo_lib.provenance import provenance, write_json, write_jsonl, write_text
    from echo_lib.report.rl_figures import multiturn_curves
    t0 = time.perf_counter()
    variant, rl_seed = check_epm(cfg, name)
    paths = policy_paths(cfg, name)
    trained = train(cfg, name, progress)
    heldout = heldout_prompts(cfg)
    summary, rows, greedy = winrate(cfg, name, heldout)
    write_text(paths.winrate, pd.DataFrame(summary).to_csv(index=False))
    write_jsonl(paths.winrate_rows, rows)
    fig = multiturn_curves(trained.rows, name)
    fig.savefig(paths.figure, dpi=150, bbox_inches="tight")
    record = {"variant": variant, "model": name, "rl_seed": cfg.seed + rl_seed, "scale": cfg.scale,
              "policy_base": cfg.roles.policy, "steps": trained.steps, "resumed_at": trained.resumed_at,
              # this call's seconds (a resumed run's cover its last steps only) and every step's, from the log
              "seconds": round(trained.seconds, 1),
              "seconds_per_step": round(sum(r["step_time"] for r in trained.rows) / max(len(trained.rows), 1), 1),
              "peak_rss_mb": round(trained.peak_rss_mb), "cases": [c.id for c in training_cases(cfg)],
              "reward": reward_rise(paths.dir, trained.rows), "final": trained.rows[-1] if trained.rows else None,
              "winrate": summary, "greedy": greedy, "heldout_prompts": len(heldout),
              "stage_seconds": round(time.perf_counter() - t0, 1),
              "params": {"multiturn": dataclasses.asdict(cfg.policy.multiturn), "lora": dataclasses.asdict(cfg.policy.lora)},
              "provenance": provenance(cfg.record, stage="03_policy_multiturn", variant=name)}
    write_json(paths.metrics, record)
    return record

"""The controls stage for a run config: both positive controls, one record, one figure.

    results/<run>/controls/controls.json   {"genrm": {"accuracy", "n_test", ...}, "genrm_shuffled": {...},
                                            "grpo": {"reward_first_quarter", "reward_last_quarter", ...}}
    results/<run>/controls/controls.png    the GRPO control's reward per step; the GenRM control's accuracy
                                           beside its label-shuffle twin and the majority baseline
    results/<run>/controls/{genrm,genrm_shuffled,grpo}/   the adapters and training logs

The thresholds the tests assert are here too (THRESHOLDS), so the notebook and the tests read the same.
"""
from __future__ import annotations

from dataclasses import asdict

from echo_lib.layout import ControlFiles, Layout

THRESHOLDS = {"genrm_accuracy": 0.95, "grpo_rise": 0.30, "shuffled_within": 0.10, "multiturn_rise": 0.30}


def control_paths(cfg) -> ControlFiles:
    """The positive controls' files (echo_lib.layout)."""
    return Layout(cfg.run_dir).controls


def run_genrm(cfg) -> dict:
    from echo_lib.controls.genrm import genrm_control
    from echo_lib.models import registry
    from echo_lib.rewards.stage import rm_spec
    return genrm_control(registry(cfg), rm_spec(cfg).name, cfg.reward_models, cfg.controls.genrm,
                         control_paths(cfg).dir, cfg.seed)


def run_grpo(cfg) -> dict:
    from echo_lib.controls.grpo import grpo_control
    from echo_lib.models import registry
    spec = cfg.models[cfg.roles.policy]
    if spec.backend != "hf":
        raise ValueError(f"roles.policy is {spec.name!r}, an {spec.backend}-backend model; the GRPO control trains "
                         "it with TRL, so roles.policy must name an hf-backend model")
    return grpo_control(registry(cfg).weights(spec.name), cfg.controls.grpo, control_paths(cfg).dir / "grpo", seed=cfg.seed)


def multiturn_wanted(cfg) -> bool:
    """The multi-turn control runs when the epm variant is trained (its trainer is what it checks) or when
    controls.multiturn.enabled asks for it."""
    from echo_lib.policy.params import MULTITURN
    return cfg.controls.multiturn.enabled or any(v in MULTITURN for v in cfg.policy.variants)


def run_multiturn(cfg) -> dict:
    """The multi-turn control (echo_lib.controls.multiturn) with the sandbox's Actor; the policy base stands in
    for the judge, which only sets up P0 here (the rule needs no rubric, and the run's judge may be trained
    after this stage)."""
    from echo_lib.controls.multiturn import multiturn_control
    from echo_lib.models import load_llm, registry
    from echo_lib.policy.multiturn import SandboxRoles
    from echo_lib.sandbox.judge import Judge
    from echo_lib.sandbox.params import SandboxRunParams
    from echo_lib.scenarios.own import load_own
    spec = cfg.models[cfg.roles.policy]
    if spec.backend != "hf":
        raise ValueError(f"roles.policy is {spec.name!r}, an {spec.backend}-backend model; the multi-turn control "
                         "trains it, so roles.policy must name an hf-backend model")
    # the sandbox as the run plays it, in the parts the control uses: the Actor, the judge's mode, the history
    run = SandboxRunParams(actor=cfg.sandbox_run.actor, judge=cfg.sandbox_run.judge,
                           history_turns=cfg.sandbox_run.history_turns)
    base = load_llm(cfg, cfg.roles.policy, dialogues=True)
    actor = base if cfg.roles.actor == cfg.roles.policy else load_llm(cfg, cfg.roles.actor, dialogues=True)
    roles = SandboxRoles(actor=actor, judge=Judge(base, run.judge, seed=cfg.seed), director=base)
    return multiturn_control(registry(cfg).weights(spec.name), roles, load_own(), run, cfg.epm, cfg.controls.multiturn,
                             control_paths(cfg).dir / "multiturn", seed=cfg.seed)


def passed(record: dict) -> dict[str, bool]:
    """Each control's pass/fail against THRESHOLDS (the multi-turn control's when it ran)."""
    g, sh, p = record["genrm"], record["genrm_shuffled"], record["grpo"]
    out = {"genrm": g["accuracy"] >= THRESHOLDS["genrm_accuracy"],
           "genrm_shuffled_at_chance": abs(sh["accuracy"] - 0.5) <= THRESHOLDS["shuffled_within"],
           "grpo": p["reward_last_quarter"] - p["reward_first_quarter"] >= THRESHOLDS["grpo_rise"]}
    if record.get("multiturn"):
        m = record["multiturn"]
        out["multiturn"] = m["reward_last_quarter"] - m["reward_first_quarter"] >= THRESHOLDS["multiturn_rise"]
    return out


def write_controls(cfg, genrm: dict, grpo: dict, multiturn: dict | None = None) -> dict:
    from echo_lib.provenance import provenance, write_json
    rounded = lambda r: {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}   # noqa: E731
    record = {"scale": cfg.scale, "genrm": genrm["genrm"], "genrm_shuffled": genrm["genrm_shuffled"],
              "genrm_task": {k: genrm[k] for k in ("task", "decision", "n_train", "n_test")},
              "grpo": rounded(grpo), **({"multiturn": rounded(multiturn)} if multiturn else {}),
              "thresholds": THRESHOLDS, "params": asdict(cfg.controls),
              "provenance": provenance(cfg.record, stage="02_controls")}
    record["passed"] = passed(record)
    write_json(control_paths(cfg).record, record)
    return record


def verdict_lines(record: dict) -> str:
    g, sh, p, ok = record["genrm"], record["genrm_shuffled"], record["grpo"], record["passed"]
    word = {True: "passes", False: "FAILS"}
    return "\n".join([
        f"GenRM control: held-out accuracy {g['accuracy']:.3f} {g['accuracy_ci']} (n={g['n_test']}), "
        f"target >= {THRESHOLDS['genrm_accuracy']}: {word[ok['genrm']]}",
        f"its label-shuffle twin: {sh['accuracy']:.3f}, must stay within {THRESHOLDS['shuffled_within']} of 0.5: "
        f"{word[ok['genrm_shuffled_at_chance']]}",
        f"GRPO control: mean reward {p['reward_first_quarter']:.3f} (first quarter) -> {p['reward_last_quarter']:.3f} "
        f"(last quarter), target rise >= {THRESHOLDS['grpo_rise']}: {word[ok['grpo']]}",
        *([f"multi-turn control: mean per-turn reward {m['reward_first_quarter']:.3f} (first quarter) -> "
           f"{m['reward_last_quarter']:.3f} (last quarter), target rise >= {THRESHOLDS['multiturn_rise']}: "
           f"{word[ok['multiturn']]}"] if (m := record.get("multiturn")) else [])])


def controls_figure(record: dict):
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    rewards = record["grpo"]["rewards"]
    left.plot(range(1, len(rewards) + 1), rewards, marker="o", label="GRPO: ends with a question")
    if record.get("multiturn"):
        turns = record["multiturn"]["rewards"]
        left.plot(range(1, len(turns) + 1), turns, marker="s", label="multi-turn: names a feeling (per turn)")
        left.legend(fontsize=8)
    left.set(xlabel="optimizer step", ylabel="mean reward", ylim=(-0.05, 1.05),
             title="Policy controls" if record.get("multiturn") else "GRPO control")
    names = ["trained", "label-shuffled twin", "majority baseline"]
    g, sh = record["genrm"], record["genrm_shuffled"]
    values = [g["accuracy"], sh["accuracy"], g["majority_baseline"]]
    errs = [[v - ci[0] for v, ci in zip(values[:2], (g["accuracy_ci"], sh["accuracy_ci"]))] + [0],
            [ci[1] - v for v, ci in zip(values[:2], (g["accuracy_ci"], sh["accuracy_ci"]))] + [0]]
    right.bar(names, values, yerr=errs, color=["C0", "C7", "C3"], capsize=4)
    right.axhline(THRESHOLDS["genrm_accuracy"], ls="--", c="k", lw=1)
    right.set(ylabel="held-out accuracy", ylim=(0, 1.05), title="GenRM control (marker task)")
    fig.tight_layout()
    return fig

rule policy:
    """Stage 03: GRPO of the policy against the routed generative rewards (echo) or the scalar one (the
    ablation), on the same hard-filtered prompts; then its win rate against the base on held-out prompts.
    Each variant's RL data (policy/data/<variant>/, its own hard filter) is built once and reused while its
    settings hold."""
    input:
        unpack(stage_in("policy")),
    output:
        **stage_out("policy", {
            "figure": {"caption": "../report/policy_training.rst", "category": "Policy RL"},
            "hacking": {"caption": "../report/policy_hacking.rst", "category": "Policy RL"},
            "progress": {"caption": "../report/policy_progress.rst", "category": "Policy RL"}}),
    wildcard_constraints:
        variant="|".join(SHAPE.single_turn) or "echo",
    params:
        **stage_params(config, "policy"),
    benchmark:
        stage_log("policy", "benchmark")
    log:
        stage_log("policy"),
    threads: res("policy")["threads"]
    resources:
        **resources_of("policy"),
    run:
        run_stage("policy", threads, input, output, log, wildcards)


rule policy_multiturn:
    """Stage 03 for the epm variant (opt-in, config/multiturn.yaml): multi-turn RL inside the sandbox, each
    companion turn rewarded by the EPM progress the judge saw after it (echo_lib.policy.multiturn); then the
    same held-out win rate against the base as rule policy."""
    input:
        unpack(stage_in("policy_multiturn")),
    output:
        **stage_out("policy_multiturn", {
            "figure": {"caption": "../report/policy_multiturn.rst", "category": "Policy RL"}}),
    wildcard_constraints:
        variant="|".join(SHAPE.multiturn) or "epm",
    params:
        **stage_params(config, "policy_multiturn"),
    benchmark:
        stage_log("policy_multiturn", "benchmark")
    log:
        stage_log("policy_multiturn"),
    threads: res("policy_multiturn")["threads"]
    resources:
        **resources_of("policy_multiturn"),
    run:
        run_stage("policy_multiturn", threads, input, output, log, wildcards)

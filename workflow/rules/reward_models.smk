rule reward_model:
    """Stage 02: a generative reward model (SFT warm start, then GRPO), evaluated base vs trained."""
    input:
        unpack(stage_in("reward_models")),
    output:
        **stage_out("reward_models", {"figure": {"caption": "../report/reward_model.rst",
                                                  "category": "Reward models"}}),
    wildcard_constraints:
        kind="|".join(RM_KINDS),
    params:
        **stage_params(config, "reward_models"),
    benchmark:
        stage_log("reward_models", "benchmark")
    log:
        stage_log("reward_models"),
    threads: res("reward_models")["threads"]
    resources:
        **resources_of("reward_models"),
    run:
        run_stage("reward_models", threads, input, output, log, wildcards)

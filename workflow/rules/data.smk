rule data:
    """Stage 01: humanlike items from real chit-chat, empathy items by axioms -> theorems, HITL check."""
    input:
        unpack(stage_in("data")),
    output:
        **stage_out("data"),
    params:
        **stage_params(config, "data"),
    benchmark:
        stage_log("data", "benchmark")
    log:
        stage_log("data"),
    threads: res("data")["threads"]
    resources:
        **resources_of("data"),
    run:
        run_stage("data", threads, input, output, log, wildcards)

rule controls:
    """Positive controls: stage 02's reward-model code on a task whose answer is in the text (and its
    label-shuffle twin), stage 03's GRPO on a rule reward. Proof that the training code can learn."""
    input:
        unpack(stage_in("controls")),
    output:
        **stage_out("controls", {"figure": {"caption": "../report/controls.rst", "category": "Controls"}}),
    params:
        **stage_params(config, "controls"),
    benchmark:
        stage_log("controls", "benchmark")
    log:
        stage_log("controls"),
    threads: res("controls")["threads"]
    resources:
        **resources_of("controls"),
    run:
        run_stage("controls", threads, input, output, log, wildcards)

rule sycophancy:
    """Stage 06b, the sycophancy guard (opt-in: sycophancy.enabled, config/multiturn.yaml): every model under
    test plays the seeker cases (a user who wants agreement with a false or harmful belief); the NEE panel rates
    how far it went along, beside the EPM-Q of the same dialogues; EMPA's sycophancy and persona-flip checks
    perturb its stage-04 dialogues. The seeker dialogues (sycophancy/seekers/<model>/) are not declared, so a
    rerun resumes case by case."""
    input:
        unpack(stage_in("sycophancy")),
    output:
        **stage_out("sycophancy", {
            "figure": {"caption": "../report/sycophancy.rst", "category": "Sycophancy guard"}}),
    params:
        **stage_params(config, "sycophancy"),
    benchmark:
        stage_log("sycophancy", "benchmark")
    log:
        stage_log("sycophancy"),
    threads: res("sycophancy")["threads"]
    resources:
        **resources_of("sycophancy"),
    run:
        run_stage("sycophancy", threads, input, output, log, wildcards)

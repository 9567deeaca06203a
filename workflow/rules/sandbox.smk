rule sandbox:
    """Stage 04: the simulated-user sandbox (Actor, Director, Judge) talks with one model under test.

    One EMPA-schema result file per case goes to sandbox/<model>/; they are not declared as outputs, so
    Snakemake never deletes them and a rerun resumes case by case."""
    input:
        unpack(stage_in("sandbox")),
    output:
        **stage_out("sandbox"),
    params:
        **stage_params(config, "sandbox"),
    benchmark:
        stage_log("sandbox", "benchmark")
    log:
        stage_log("sandbox"),
    threads: res("sandbox")["threads"]
    resources:
        **resources_of("sandbox"),
    run:
        run_stage("sandbox", threads, input, output, log, wildcards)

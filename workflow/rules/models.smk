rule models:
    """Stage 00: fetch/verify/convert the embedded model, resolve hub ids, local paths and servers."""
    input:
        unpack(stage_in("models")),
    output:
        **stage_out("models"),
    params:
        **stage_params(config, "models"),
    benchmark:
        stage_log("models", "benchmark")
    log:
        stage_log("models"),
    threads: res("models")["threads"]
    resources:
        **resources_of("models"),
    run:
        run_stage("models", threads, input, output, log, wildcards,
                  manifest_path=output.manifest, reply_path=output.reply)

rule nee:
    """Stage 06: the NEE judge panel (blinded, order-randomised Likert ratings of every sandbox transcript,
    pairwise A/B against nee.reference_model in both orders, Krippendorff's alpha, NEE 0-100, composite)."""
    input:
        unpack(stage_in("nee")),
    output:
        **stage_out("nee"),
    params:
        **stage_params(config, "nee"),
    benchmark:
        stage_log("nee", "benchmark")
    log:
        stage_log("nee"),
    threads: res("nee")["threads"]
    resources:
        **resources_of("nee"),
    run:
        run_stage("nee", threads, input, output, log, wildcards, out_dir=os.path.dirname(output.summary))

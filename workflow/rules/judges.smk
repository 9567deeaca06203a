rule judges:
    """Judge sensitivity (and, with judges.train.enabled, the tiny judge's adapter or heads first): on a
    held-out set with a known better reply, how often the sandbox judge and the NEE panel prefer it
    (accuracy, Krippendorff's alpha, position bias). Stages 04 and 06 show it before any comparison that
    relies on the judges."""
    input:
        unpack(stage_in("judges")),
    output:
        **stage_out("judges", {"figure": {"caption": "../report/judges.rst", "category": "Judges"}}),
    params:
        **stage_params(config, "judges"),
    benchmark:
        stage_log("judges", "benchmark")
    log:
        stage_log("judges"),
    threads: res("judges")["threads"]
    resources:
        **resources_of("judges"),
    run:
        run_stage("judges", threads, input, output, log, wildcards)

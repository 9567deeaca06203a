localrules: empa   # a download: on a cluster, run it where the network is (the submitting host)


rule empa:
    """EMPA's repository at empa.commit: clone empa.source into empa.cache_dir (or take the local folder it
    names), check the commit, and write layout.json (where its cases and published runs are)."""
    output:
        layout=EMPA_LAYOUT,
    params:
        empa=config["empa"],
    benchmark:
        str(LAYOUT.benchmark("empa"))
    log:
        str(LAYOUT.log("empa")),
    run:
        fetch_empa(params.empa, log[0])


rule epm_published:
    """Stage 05 on published EMPA runs: replay every trajectory, EPM-Q, the leaderboard figures."""
    input:
        unpack(stage_in("epm_published")),
    output:
        **stage_out("epm_published"),
    params:
        **stage_params(config, "epm_published"),
    benchmark:
        stage_log("epm_published", "benchmark")
    log:
        stage_log("epm_published"),
    threads: res("epm_published")["threads"]
    resources:
        **resources_of("epm_published"),
    run:
        run_stage("epm_published", threads, input, output, log, wildcards, result_dirs=[published_runs(input.runs[0])],
                  out_dir=os.path.dirname(output.summary), case_meta_source=params.published["case_meta_source"])


rule epm:
    """Stage 05 on this run's sandbox results: replay, EPM-Q and its groups with intervals, the paired
    differences between the models, slices, figures."""
    input:
        unpack(stage_in("epm")),
    output:
        **stage_out("epm"),
    params:
        **stage_params(config, "epm"),
    benchmark:
        stage_log("epm", "benchmark")
    log:
        stage_log("epm"),
    threads: res("epm")["threads"]
    resources:
        **resources_of("epm"),
    run:
        # exactly the models this config names (each folder's summary.json then names its cases); by hand,
        # notebook 05 reads the same folders (upstream.sandbox_dirs)
        run_stage("epm", threads, input, output, log, wildcards,
                  result_dirs=[os.path.dirname(s) for s in input.summaries], out_dir=os.path.dirname(output.summary))

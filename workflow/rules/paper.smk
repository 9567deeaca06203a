rule paper:
    """Stage 07: the paper's tables (LaTeX + CSV), figures (PDF + PNG) and claims table from this run's
    results, then main.pdf (latexmk or tectonic; `make setup` installs the toolchain). A missing engine or
    a failed LaTeX run fails the rule with main.log's error lines; paper.build_pdf: false skips the PDF."""
    input:
        unpack(stage_in("paper")),
    output:
        **stage_out("paper", {
            "tables": {"category": "Paper", "subcategory": "Tables", "suffix": ".csv"},
            "figures": {"category": "Paper", "subcategory": "Figures", "suffix": ".png"},
            "claims": {"category": "Paper", "subcategory": "Claims", "suffix": ".csv"},
            "pdf": {"category": "Paper", "subcategory": "PDF"}}),
    params:
        **stage_params(config, "paper"),
    benchmark:
        stage_log("paper", "benchmark")
    log:
        stage_log("paper"),
    threads: res("paper")["threads"]
    resources:
        **resources_of("paper"),
    run:
        run_stage("paper", threads, input, output, log, wildcards, paper_dir=SHAPE.paper_dir,
                  published_summary=input.published[0] if input.published else "")

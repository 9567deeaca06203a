"""PaperParams: the settings of stage 07, the paper's tables, figures and claims (METHOD.md 7.3, 8).

The run config carries these under `paper:` with these defaults (config/schema.yaml documents each key
and takes its default from here). This module does not import echo_lib.config.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PaperParams:
    dir: str | None = None          # where tables/, figures/, claims.* go; None: <results_dir>/<run_name>/paper
    # published model (as data/reported_claims.yaml names it) -> this run's model (a sandbox model), or None
    counterparts: dict[str, str | None] = field(default_factory=lambda: {
        "Echo-N1": "echo", "Doubao 1.5 Character": None, "Qwen3-32B (base)": "base"})
    build_pdf: bool = True          # typeset main.pdf (an output of rule paper; needs a TeX engine)
    readme: str | None = None       # a README whose "Results at a glance" block stage 07 rewrites (glance.py); None: none


def paper_dir(params: PaperParams, results_dir: str, run_name: str) -> str:
    """The folder stage 07 writes (the Snakefile and the notebook use this one function)."""
    return params.dir or f"{results_dir}/{run_name}/paper"


# Every file stage 07 writes into the paper folder: the Snakefile declares them as the rule's outputs,
# paper/main.tex uses them, and a test checks that the two agree.
TABLES = ["judge_sensitivity", "main_results", "sandbox_differences", "nee_dimensions", "rm_accuracy", "rl_winrate", "empa_replay", "macros"]
FIGURES = ["epm_outcomes", "epm_indices", "epm_case_heatmap", "rm_accuracy", "rl_curves"]
CLAIMS = ["claims.md", "claims.tex", "claims.csv"]


def paper_outputs(folder: str, pdf: bool = True) -> dict[str, list[str]]:
    """Paths of the generated files under `folder`, by kind (tables: .tex + .csv; figures: .pdf + .png;
    pdf: main.pdf, unless paper.build_pdf is off)."""
    return {"tables": [f"{folder}/tables/{t}.{ext}" for t in TABLES for ext in ("tex", "csv")],
            "figures": [f"{folder}/figures/{f}.{ext}" for f in FIGURES for ext in ("pdf", "png")],
            "claims": [f"{folder}/{c}" for c in CLAIMS],
            "pdf": [f"{folder}/main.pdf"] if pdf else []}

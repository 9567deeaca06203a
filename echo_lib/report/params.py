"""PaperParams: the settings of stage 07, the paper's tables, figures and claims (METHOD.md 7.3, 8).

The run config carries these under `paper:` with these defaults (config/schema.yaml documents each key
and takes its default from here). This module does not import echo_lib.config.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from echo_lib.layout import PAPER_CLAIMS, PAPER_FIGURES, PAPER_TABLES, PaperFiles


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


# Every file stage 07 writes into the paper folder: the run's file layout names them (echo_lib.layout)
TABLES, FIGURES, CLAIMS = list(PAPER_TABLES), list(PAPER_FIGURES), list(PAPER_CLAIMS)


def paper_outputs(folder: str, pdf: bool = True) -> dict[str, list[str]]:
    """Paths of the generated files under `folder`, by kind (layout.PaperFiles.outputs)."""
    return PaperFiles(Path(folder)).outputs(pdf=pdf)

"""Where things are: the project root, so notebooks run from JupyterLab (cwd notebooks/) and
from Snakemake (cwd = root) with the same relative paths."""
from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The repository root: the folder that holds workflow/Snakefile next to echo_lib/."""
    root = Path(__file__).resolve().parents[1]
    if not (root / "workflow" / "Snakefile").exists():
        raise RuntimeError(
            f"echo_lib is imported from {root}, which has no workflow/Snakefile; install the package in "
            "editable mode from the repository (`pip install -e .`) so it finds its config and notebooks")
    return root


def enter_project_root() -> Path:
    """chdir to the project root (notebooks call this first) and return it."""
    root = project_root()
    os.chdir(root)
    return root

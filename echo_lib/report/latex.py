"""Building the paper PDF: latexmk when the machine has it, otherwise say how to get a toolchain.

The PDF is not a DAG output (a reviewer without TeX still gets every table and figure); the build
runs in the paper folder, which holds main.tex, references.bib and the generated tables/ and figures/.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

NO_TOOLCHAIN = ("latexmk is not installed, so main.pdf was not built. Every table and figure is written; "
                "to typeset them install a TeX toolchain, e.g.\n"
                "  sudo apt-get install latexmk texlive-latex-extra texlive-fonts-recommended\n"
                "or the single-binary tectonic (https://tectonic-typesetting.github.io), then run\n"
                "  cd {dir} && latexmk -pdf main.tex        # or: tectonic main.tex")


def copy_sources(src_dir: str | Path, paper_dir: str | Path, names=("main.tex", "references.bib")) -> list[Path]:
    """Put main.tex and references.bib beside the generated files (unless that is their own folder)."""
    src_dir, paper_dir = Path(src_dir).resolve(), Path(paper_dir).resolve()
    paper_dir.mkdir(parents=True, exist_ok=True)
    if src_dir == paper_dir:
        return [paper_dir / n for n in names]
    return [Path(shutil.copy2(src_dir / n, paper_dir / n)) for n in names]


def build_pdf(paper_dir: str | Path, timeout: int = 600) -> tuple[Path | None, str]:
    """(main.pdf or None, a message for the log). A failed build is reported, not raised: the tables
    and figures, the DAG's outputs, are already written."""
    paper_dir = Path(paper_dir)
    latexmk = shutil.which("latexmk")
    if latexmk is None:
        return None, NO_TOOLCHAIN.format(dir=paper_dir)
    proc = subprocess.run([latexmk, "-pdf", "-interaction=nonstopmode", "-halt-on-error", "main.tex"],
                          cwd=paper_dir, capture_output=True, text=True, timeout=timeout)
    pdf = paper_dir / "main.pdf"
    if proc.returncode != 0 or not pdf.exists():
        return None, f"latexmk failed (exit {proc.returncode}) in {paper_dir}; see main.log there:\n{proc.stdout[-3000:]}"
    return pdf, f"built {pdf}"

"""Building the paper PDF: latexmk (pdfLaTeX + BibTeX) or tectonic, whichever is installed.

main.pdf is an output of rule paper: with no TeX engine, or when LaTeX fails, build_pdf raises
PaperBuildError with the fix or with the error lines of main.log, and the rule fails. The build runs in
the paper folder, which holds main.tex, references.bib and the generated tables/ and figures/.
echo_lib.report.toolchain installs the engine (`make setup`); echo_lib.report.readback reads the PDF back.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

ENGINES = ("latexmk", "tectonic")   # in order of preference
# TeX wraps its log at 79 characters by default, which splits file names and messages across lines;
# wide lines keep each message on one line for the parsers below (texmf.cnf reads these from the env).
WIDE_LOG = {"max_print_line": "10000", "error_line": "254", "half_error_line": "238"}
# What TeX prints after an error in nonstopmode (its prompt, the stop that follows): not the error itself.
PROMPT = re.compile(r"Type X to quit|or enter new name|Enter file name:|<read \*>|! Emergency stop|\s*$")
AFTERMATH = re.compile(r"! Emergency stop|!  ==> Fatal error")
OVERFULL_TOLERANCE_PT = 1.0   # overfull boxes up to this are invisible; larger ones stick into the margin


class PaperBuildError(RuntimeError):
    """main.pdf could not be built: no engine, or LaTeX stopped (the message quotes main.log)."""


@dataclass
class LogReport:
    """What a LaTeX log says about the document (echo_lib.report.readback checks these)."""
    errors: list[str] = field(default_factory=list)        # '!' messages with their context
    undefined: list[str] = field(default_factory=list)     # references and citations LaTeX could not resolve
    overfull: list[tuple[float, str]] = field(default_factory=list)   # (points too wide, the log line)
    included: list[str] = field(default_factory=list)      # graphics files embedded (<figures/x.pdf>)
    pages: int | None = None
    size: int | None = None


@dataclass
class BuildResult:
    pdf: Path
    engine: str
    seconds: float
    log: LogReport

    def summary(self) -> str:
        pages = f"{self.log.pages} pages, " if self.log.pages else ""
        return f"built {self.pdf} with {self.engine}: {pages}{self.pdf.stat().st_size / 1024:.0f} kB in {self.seconds:.1f} s"


def find_engine() -> tuple[str, str] | None:
    """(name, path) of the first installed engine, or None."""
    for name in ENGINES:
        path = shutil.which(name)
        if path:
            return name, path
    return None


def engine_command(name: str, path: str) -> list[str]:
    if name == "latexmk":   # reruns pdflatex and bibtex until the references settle
        return [path, "-pdf", "-interaction=nonstopmode", "-halt-on-error", "main.tex"]
    return [path, "--keep-logs", "--keep-intermediates", "main.tex"]   # tectonic: main.log stays for the checks


def no_engine_message(paper_dir: str | Path) -> str:
    from echo_lib.report.toolchain import install_hint   # one place names the packages
    return (f"no TeX engine ({' or '.join(ENGINES)}) is installed, so {Path(paper_dir) / 'main.pdf'} cannot be "
            f"built. Fix: `make setup` installs it on Debian/Ubuntu as root; otherwise run\n  {install_hint()}\n"
            "or set paper.build_pdf: false in the run config to skip the PDF (tables and figures are still written).")


def parse_log(text: str) -> LogReport:
    """Errors, unresolved references, overfull boxes, embedded graphics and the page count of a TeX log."""
    lines, report = text.splitlines(), LogReport()
    for i, line in enumerate(lines):
        if line.startswith("! ") and not AFTERMATH.match(line):   # the message, its context, its "l.<n>" line
            context = [line]
            for nxt in lines[i + 1:i + 12]:
                if not PROMPT.match(nxt):
                    context.append(nxt)
                if re.match(r"l\.\d+", nxt):
                    break
            report.errors.append("\n".join(context))
        if re.search(r"(Reference|Citation) `[^']*' on page \d+ undefined", line):
            report.undefined.append(line.strip())
        over = re.match(r"Overfull \\hbox \(([\d.]+)pt too wide\)(.*)", line)
        if over:   # the next line shows the text that sticks out
            shown = lines[i + 1].strip() if i + 1 < len(lines) else ""
            report.overfull.append((float(over.group(1)), f"{line.strip()}: {shown}"))
        report.included += re.findall(r"<(?:use )?([^<>\s]+\.(?:pdf|png|jpe?g))>", line)
    written = re.search(r"Output written on \S+ \((\d+) pages?, (\d+) bytes\)", text)
    if written:
        report.pages, report.size = int(written.group(1)), int(written.group(2))
    return report


def read_log(paper_dir: str | Path) -> LogReport:
    log = Path(paper_dir) / "main.log"
    return parse_log(log.read_text(encoding="latin-1")) if log.is_file() else LogReport()


def build_pdf(paper_dir: str | Path, timeout: int = 600) -> BuildResult:
    """Typeset main.tex in `paper_dir` into main.pdf; raise PaperBuildError with the log's errors if it fails."""
    paper_dir = Path(paper_dir)
    engine = find_engine()
    if engine is None:
        raise PaperBuildError(no_engine_message(paper_dir))
    pdf = paper_dir / "main.pdf"
    pdf.unlink(missing_ok=True)   # a stale PDF must never pass for this run's
    start = time.monotonic()
    proc = subprocess.run(engine_command(*engine), cwd=paper_dir, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **WIDE_LOG})
    seconds = time.monotonic() - start
    log = read_log(paper_dir)
    if proc.returncode != 0 or not pdf.is_file():
        shown = "\n".join(log.errors[:5]) or (proc.stdout + proc.stderr)[-3000:]
        raise PaperBuildError(f"{engine[0]} failed (exit {proc.returncode}) on {paper_dir / 'main.tex'}; "
                              f"LaTeX said:\n{shown}\n(full log: {paper_dir / 'main.log'})")
    return BuildResult(pdf=pdf, engine=engine[0], seconds=seconds, log=log)


def copy_sources(src_dir: str | Path, paper_dir: str | Path, names=("main.tex", "references.bib")) -> list[Path]:
    """Put main.tex and references.bib beside the generated files (unless that is their own folder)."""
    src_dir, paper_dir = Path(src_dir).resolve(), Path(paper_dir).resolve()
    paper_dir.mkdir(parents=True, exist_ok=True)
    if src_dir == paper_dir:
        return [paper_dir / n for n in names]
    return [Path(shutil.copy2(src_dir / n, paper_dir / n)) for n in names]

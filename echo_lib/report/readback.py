"""Reading the built paper back: does main.pdf show this run's numbers, every figure, no "??"?

pdftotext (poppler-utils) turns main.pdf into text in content-stream order, which for TeX output is a
table's cells row by row. Each table's CSV twin is then expected in the PDF as a contiguous run of
numbers: the header's and every row's, in order, each equal to the CSV value as printed (the PDF's
digits decide the rounding). The prose's macros (tables/macros.csv) must appear as text, and main.log
must show every figure embedded, no unresolved reference and no box sticking into the margin.
"""
from __future__ import annotations

import math
import numbers
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from echo_lib.report.claims import LATEX_HIDDEN_COLUMNS
from echo_lib.report.latex import OVERFULL_TOLERANCE_PT, read_log
from echo_lib.report.params import FIGURES, TABLES

# A number stands alone: not glued to letters, digits or a dot ("Qwen3-32B" and "135M" hold none).
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?!\w|\.\d)")
# pdfTeX's hyphen and minus glyphs as pdftotext may return them
DASHES = {"\u2010": "-", "\u2011": "-", "\u2212": "-"}


class ReadBackError(RuntimeError):
    """The PDF cannot be read back (no pdftotext)."""


def running_text(text: str) -> str:
    """pdftotext's text without the page breaks: each page's last line (its number) and the form feed go,
    so a sentence that continues on the next page ("0 of" / 10 / "6 reached 1") reads as one."""
    return re.sub(r"(?:^|\n)[ \t]*\d+[ \t]*\n?\f", "\n", text)


def pdf_text(pdf: str | Path) -> str:
    """The PDF's text in content order (pdftotext -raw), without the page breaks (running_text)."""
    exe = shutil.which("pdftotext")
    if exe is None:
        from echo_lib.report.toolchain import install_hint
        raise ReadBackError(f"pdftotext is not installed, so {pdf} cannot be read back; install poppler: {install_hint()}")
    proc = subprocess.run([exe, "-raw", "-enc", "UTF-8", str(pdf), "-"], capture_output=True, text=True, check=True)
    text = proc.stdout
    for dash, plain in DASHES.items():
        text = text.replace(dash, plain)
    return running_text(text)


def number_tokens(text: str) -> list[str]:
    return NUMBER.findall(text)


@dataclass(frozen=True)
class Expected:
    """One number a table cell should show: a CSV value (any rounding of it) or the digits of a text cell."""
    value: float | None = None    # a numeric CSV cell
    text: str | None = None       # a number inside a text cell (an interval "[0.2, 0.5]", ">= 0.8"), as written

    def matches(self, token: str) -> bool:
        if self.text is not None:
            return token == self.text
        decimals = len(token.split(".")[1]) if "." in token else 0
        return abs(float(token) - self.value) <= 0.5 * 10 ** -decimals + 1e-9

    def __str__(self) -> str:
        return self.text if self.text is not None else repr(self.value)


def expected_numbers(table: pd.DataFrame) -> list[Expected]:
    """The numbers a table shows, header first, then row by row (missing cells show none)."""
    out = [Expected(text=t) for c in table.columns for t in number_tokens(str(c))]
    for _, row in table.iterrows():
        for value in row:
            if isinstance(value, (bool, np.bool_)) or value is None or (isinstance(value, float) and math.isnan(value)):
                continue
            if isinstance(value, numbers.Real):
                out.append(Expected(value=float(value)))
            else:
                out += [Expected(text=t) for t in number_tokens(str(value))]
    return out


def find_run(tokens: list[str], expected: list[Expected]) -> tuple[bool, str]:
    """Is `expected` a contiguous run of `tokens`? If not, where the closest attempt went wrong."""
    if not expected:
        return True, ""
    best = (-1, 0)
    for start in range(len(tokens) - len(expected) + 1):
        matched = 0
        while matched < len(expected) and expected[matched].matches(tokens[start + matched]):
            matched += 1
        if matched == len(expected):
            return True, ""
        best = max(best, (matched, start))
    matched, start = best
    if matched <= 0:
        return False, f"its first number ({expected[0]}) is followed nowhere by the rest"
    shown = tokens[start + matched] if start + matched < len(tokens) else "the end of the text"
    return False, (f"the PDF agrees for {matched} of its {len(expected)} numbers, then shows {shown} "
                   f"where the CSV has {expected[matched]}")


def csv_twins(paper_dir: Path) -> dict[str, tuple[Path, list[str]]]:
    """Each typeset table -> (its CSV twin, the CSV's columns the LaTeX table leaves out)."""
    twins = {name: (paper_dir / "tables" / f"{name}.csv", []) for name in TABLES if name != "macros"}
    twins["claims"] = (paper_dir / "claims.csv", list(LATEX_HIDDEN_COLUMNS))
    return twins


def used_macros(main_tex: str) -> set[str]:
    """Macros main.tex prints (one that only steers a condition, \\equal{\\EMPAReplay}{yes}, prints nothing)."""
    text = re.sub(r"(?<!\\)%.*", "", main_tex)
    text = re.sub(r"\\equal\{\\[A-Za-z]+\}", "", text)
    return set(re.findall(r"\\([A-Za-z]+)", text))


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("\u2013", "--").replace("\u2019", "'")).strip()


def _squeezed(text: str) -> str:
    """The text without spaces and hyphens: a sentence-long macro that LaTeX broke and hyphenated across
    lines ("de-\ncoder") still reads the same."""
    return re.sub(r"[\s\-\u2010\u2011]+", "", text.replace("\u2013", "--").replace("\u2019", "'"))


def check_paper(paper_dir: str | Path) -> list[str]:
    """Every way main.pdf disagrees with this run's files; empty when it is right."""
    paper_dir = Path(paper_dir)
    pdf = paper_dir / "main.pdf"
    if not pdf.is_file():
        return [f"{pdf} does not exist"]
    text = pdf_text(pdf)
    tokens, problems = number_tokens(text), []
    for name, (csv, hidden) in csv_twins(paper_dir).items():
        table = pd.read_csv(csv).drop(columns=hidden)
        if table.empty:
            continue   # main.tex leaves an empty table out (EMPA's runs, when not available)
        ok, why = find_run(tokens, expected_numbers(table))
        if not ok:
            problems.append(f"table {name} ({csv}): {why}")
    problems += _check_macros(paper_dir, text)
    problems += _check_log(paper_dir, text)
    return problems


def _check_macros(paper_dir: Path, text: str) -> list[str]:
    """Each generated macro main.tex uses shows its value in the PDF."""
    macros = pd.read_csv(paper_dir / "tables" / "macros.csv", keep_default_na=False, dtype=str)
    used = used_macros((paper_dir / "main.tex").read_text(encoding="utf-8"))
    plain, squeezed, problems = _plain(text), _squeezed(text), []
    for name, value in zip(macros["macro"], macros["value"]):
        if name in used and _plain(value) not in plain and _squeezed(value) not in squeezed:
            problems.append(f"macro \\{name} = {value!r} (tables/macros.csv) does not appear in main.pdf")
    return problems


def _check_log(paper_dir: Path, text: str) -> list[str]:
    log, problems = read_log(paper_dir), []
    if "??" in text:
        problems.append("main.pdf shows '??' (an unresolved reference or citation)")
    problems += [f"main.log: {line}" for line in log.undefined]
    problems += [f"main.log: {line} (wider than the text by more than {OVERFULL_TOLERANCE_PT} pt)"
                 for pt, line in log.overfull if pt > OVERFULL_TOLERANCE_PT]
    embedded = {Path(p).as_posix().removeprefix("./") for p in log.included}
    problems += [f"figure figures/{f}.pdf is not embedded in main.pdf (main.log)" for f in FIGURES
                 if f"figures/{f}.pdf" not in embedded]
    figures = len(re.findall(r"^Figure \d+:", text, flags=re.M))
    if figures < len(FIGURES):
        problems.append(f"main.pdf has {figures} figure captions; the run writes {len(FIGURES)} figures")
    return problems

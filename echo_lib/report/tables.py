"""Paper tables: a DataFrame -> a LaTeX `tabular` (booktabs) plus a CSV twin with the same cells.

The .tex file holds only the tabular, so paper/main.tex gives the caption and `\\input`s it; the CSV
twin carries full precision for anyone who wants the numbers rather than the typesetting.
Missing values print as an en dash. Every cell is LaTeX-escaped: model names such as `qwen3_32b`
or `50%` would otherwise break the build.
"""
from __future__ import annotations

import math
import numbers
import re
from pathlib import Path
from typing import Callable, Mapping

import pandas as pd

from echo_lib.provenance import write_text

# Order matters: the backslash first, so the escapes added later are not escaped again.
_LATEX_SPECIAL = [("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("$", r"\$"), ("#", r"\#"),
                  ("_", r"\_"), ("{", r"\{"), ("}", r"\}"), ("~", r"\textasciitilde{}"),
                  ("^", r"\textasciicircum{}")]
MISSING = "--"

Formatter = Callable[[object], str]


def escape_latex(text: str) -> str:
    """Escape LaTeX's special characters so the text prints literally."""
    out = []
    for ch in str(text):
        out.append(next((rep for special, rep in _LATEX_SPECIAL if ch == special), ch))
    return "".join(out)


def is_missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def format_cell(value: object, decimals: int = 2) -> str:
    """Default cell text: integers as they are, other numbers to `decimals` places, missing as '--'."""
    if is_missing(value):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return f"{float(value):.{decimals}f}"
    return str(value)


def to_latex(df: pd.DataFrame, formats: Mapping[str, Formatter] | None = None, decimals: int = 2,
             column_format: str | None = None, wrap_headers: bool = False, full_width: bool = False) -> str:
    """A booktabs tabular of `df` (the index is not printed: make it a column if it matters).

    `formats` maps a column to a function value -> text (escaped afterwards, like every cell);
    by default text columns are left-aligned and numeric ones right-aligned. `wrap_headers` sets a
    header of several words on two lines (a wide table then fits the page at a legible size);
    `full_width` makes a tabularx as wide as the text, whose X columns wrap their text."""
    formats = dict(formats or {})
    if column_format is None:
        column_format = "".join("r" if _numeric(df[c]) else "l" for c in df.columns)
    specs = re.findall(r"[lcrXLSW]|[pmb]\{[^}]*\}", column_format)   # p{4cm} is one column; L, S, W: main.tex's ragged X
    if len(specs) != len(df.columns):
        raise ValueError(f"column_format {column_format!r} has {len(specs)} columns; the table has "
                         f"{len(df.columns)} ({', '.join(map(str, df.columns))})")
    def cell(column: str, value: object) -> str:
        text = MISSING if is_missing(value) else formats[column](value) if column in formats \
            else format_cell(value, decimals)
        return escape_latex(text)
    body = [[cell(c, row[c]) for c in df.columns] for _, row in df.iterrows()]
    header = [escape_latex(str(c)) for c in df.columns]
    if wrap_headers:
        header = [_wrapped(str(c), spec, max((len(r[i]) for r in body), default=0))
                  for i, (c, spec) in enumerate(zip(df.columns, specs))]
    begin = (rf"\begin{{tabularx}}{{\linewidth}}{{{column_format}}}" if full_width
             else rf"\begin{{tabular}}{{{column_format}}}")
    lines = [begin, r"\toprule", " & ".join(header) + r" \\", r"\midrule"]
    lines += [" & ".join(row) + r" \\" for row in body]
    lines += [r"\bottomrule", r"\end{tabularx}" if full_width else r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def _numeric(column: pd.Series) -> bool:
    """Numbers, or nothing at all (a column of missing values prints dashes, right-aligned like numbers)."""
    if pd.api.types.is_numeric_dtype(column):
        return True
    values = [v for v in column if not is_missing(v)]
    return all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values)


def _wrapped(header: str, spec: str, widest_cell: int) -> str:
    """The header on two lines (split at the space nearest its middle) when it is long: wider than its
    cells, or more than 8 characters (a wide table's headers set its width)."""
    words = header.split(" ")
    if spec not in "lcr" or len(header) <= min(widest_cell, 8) or len(words) < 2:
        return escape_latex(header)   # a p/X column wraps its header itself
    cut = min(range(1, len(words)), key=lambda i: abs(len(" ".join(words[:i])) - len(" ".join(words[i:]))))
    align = spec
    top, bottom = escape_latex(" ".join(words[:cut])), escape_latex(" ".join(words[cut:]))
    return rf"\begin{{tabular}}[b]{{@{{}}{align}@{{}}}}{top}\\{bottom}\end{{tabular}}"


def write_table(df: pd.DataFrame, out_dir: str | Path, name: str, **latex_options) -> list[Path]:
    """Write `name`.tex (booktabs tabular) and its twin `name`.csv (the same rows, full precision)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tex, csv = out_dir / f"{name}.tex", out_dir / f"{name}.csv"
    write_text(tex, to_latex(df, **latex_options))   # atomic (UTF-8): a kill leaves the old file whole
    write_text(csv, df.to_csv(index=False))
    return [tex, csv]


def write_macros(values: Mapping[str, object], out_dir: str | Path, name: str = "macros") -> list[Path]:
    """Facts of the run as LaTeX macros (`\\newcommand{\\RunScale}{tiny}`) for main.tex's text, plus
    a CSV twin (macro, value). Macro names must be letters only (LaTeX's rule)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    bad = [k for k in values if not k.isalpha()]
    if bad:
        raise ValueError(f"LaTeX macro names must be letters only: {', '.join(bad)}")
    lines = ["% Written by stage 07 (notebooks/07_paper.py) from this run's results; do not edit."]
    lines += [rf"\newcommand{{\{k}}}{{{escape_latex(format_cell(v))}}}" for k, v in values.items()]
    tex, csv = out_dir / f"{name}.tex", out_dir / f"{name}.csv"
    write_text(tex, "\n".join(lines) + "\n")
    write_text(csv, pd.DataFrame({"macro": list(values), "value": [format_cell(v) for v in values.values()]})
               .to_csv(index=False))
    return [tex, csv]

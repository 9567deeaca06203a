"""Rubric versions: the text a judge (and the roles around it) is asked, named in words and kept honest.

A module that owns a rubric holds two constants beside its text:
- `*_VERSION`: a named, dated version in words ("echo sandbox rubric v1 (2026-12): ..."), written into every
  result file it scores, so a reader sees which rubric scored a run without decoding a hash; the EPM analysis
  never pools files of different versions in one table (echo_lib.epm.pooling);
- `*_TEXT_FINGERPRINT`: the `text_fingerprint` of the prompt text that version was written for.

tests/test_rubric_version.py compares the two: when the prompt text changes and the constants do not, it
fails and says what to bump. The text is every string literal of the modules the version covers, with the
expressions its f-strings fill in: what those modules can send to a model. Docstrings, comments and the
version constants themselves are left out, so they can be edited without a new version.
"""
from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path
from typing import Sequence

PACKAGE = Path(__file__).parent
VERSION_NAMES = ("_VERSION", "_TEXT_FINGERPRINT")   # constants named so are not part of the text they describe


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of a module and its classes and functions."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            value = first.value if isinstance(first, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.add(id(value))
    return out


def _version_constants(tree: ast.AST) -> set[int]:
    """ids of every node inside an assignment to a *_VERSION or *_TEXT_FINGERPRINT name."""
    out = set()
    for node in ast.walk(tree):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id.endswith(VERSION_NAMES) for t in targets):
            out |= {id(n) for n in ast.walk(node)}
    return out


def prompt_text(source: str) -> list[str]:
    """A module's prompt text, in source order: its string literals (f-string parts included) and, for each
    f-string placeholder, the expression that fills it ("{sc.topic}")."""
    tree = ast.parse(source)
    skip = _docstrings(tree) | _version_constants(tree)
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
        elif isinstance(node, ast.FormattedValue):
            out.append("{" + ast.unparse(node.value) + "}")
    return out


def text_fingerprint(modules: Sequence[str], root: str | Path = PACKAGE) -> str:
    """The fingerprint of the prompt text of `modules` (paths under `root` without .py, e.g. "sandbox/judge")."""
    root = Path(root)
    return _sha256([(m, prompt_text((root / f"{m}.py").read_text(encoding="utf-8"))) for m in modules], 16)


def stale_version(name: str, version: str, recorded: str, modules: Sequence[str],
                  root: str | Path = PACKAGE) -> str | None:
    """Why the version constant `name` no longer describes the text of `modules` (None: it does)."""
    now = text_fingerprint(modules, root)
    if now == recorded:
        return None
    return (f"the prompt text of {', '.join(f'echo_lib/{m}.py' for m in modules)} changed (fingerprint {now}), but "
            f"{name} = {version!r} was written for fingerprint {recorded}. If what a model is asked changed, bump "
            f"{name} (a new number and month, and what changed) and set "
            f"{name.removesuffix('_VERSION')}_TEXT_FINGERPRINT = {now!r}; if only a message that no model reads "
            "changed, set the fingerprint alone")


def _sha256(obj, n: int) -> str:
    """The first n hex digits of the SHA-256 of obj as sorted JSON (the model layer's stable_hash; this
    foundation module computes it itself rather than import the model layer)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:n]

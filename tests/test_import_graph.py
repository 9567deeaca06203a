"""The stage contract as a test: echo_lib's layers, read from the source by its AST (nothing is imported).

From the ground up:
    1 foundation     strict_yaml, paths, progress, stats, wheels, layout, rubric_version, provenance, finetune
    2 model layer    llm/*, embedded
    3 domain layer   epm, scenarios, rewards, synthesis, sandbox, nee, policy, judges, controls, report, sycophancy (all but
                     their stage modules), empa_source
    4 config         config, config_docs
    5 stage layer    */stage.py, model_setup, models (the run's model registry), stages, upstream, notebook,
                     workflow, smoke, policy/launch, policy/epm_stage, report/glance

An import (any `import` or `from` statement, at any depth of the file: an import inside a function is a
dependency too) may only go down, or sideways inside a layer, and never in a circle. Below the stage layer
no function takes the run config: no parameter is annotated `RunConfig` or named `cfg`; a function takes
the sections and objects it uses (the house model: `sandbox.loop.play(scenarios, players, params, epm_params)`).
"""
from __future__ import annotations

import ast
import fnmatch
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "echo_lib"
STAGE = 5

# (module pattern, layer): the first pattern that matches a dotted module name decides its layer
LAYERS: list[tuple[str, int]] = [
    ("echo_lib.*.stage", STAGE),
    ("echo_lib.model_setup", STAGE),
    ("echo_lib.models", STAGE),
    ("echo_lib.stages", STAGE),
    ("echo_lib.upstream", STAGE),
    ("echo_lib.notebook", STAGE),
    ("echo_lib.workflow", STAGE),
    ("echo_lib.smoke", STAGE),
    ("echo_lib.policy.launch", STAGE),
    ("echo_lib.policy.epm_stage", STAGE),
    ("echo_lib.report.glance", STAGE),
    ("echo_lib.config", 4),
    ("echo_lib.config_docs", 4),
    ("echo_lib.llm", 2),
    ("echo_lib.llm.*", 2),
    ("echo_lib.embedded", 2),
    *[(f"echo_lib.{pkg}{tail}", 3) for pkg in ("epm", "scenarios", "rewards", "synthesis", "sandbox", "nee",
                                                 "policy", "judges", "controls", "report", "sycophancy")
      for tail in ("", ".*")],
    ("echo_lib.empa_source", 3),
    *[(f"echo_lib.{mod}", 1) for mod in ("strict_yaml", "paths", "progress", "stats", "wheels", "layout",
                                         "rubric_version", "provenance", "finetune")],
    ("echo_lib", 1),
]


def layer(module: str) -> int:
    for pattern, number in LAYERS:
        if fnmatch.fnmatchcase(module, pattern):
            return number
    raise AssertionError(f"{module} is in no layer of tests/test_import_graph.py's table; add it there")


def modules() -> dict[str, Path]:
    """Every module of echo_lib: dotted name -> file."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _target(name: str, known: dict[str, Path]) -> str | None:
    """The most specific module of echo_lib that `name` names (a name may end in a function or class)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


@functools.lru_cache(maxsize=None)
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def imports(module: str, path: Path, known: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, module of echo_lib) for every import statement of the file, at any depth."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from echo_lib.llm import hf` names a module; `from echo_lib.llm import Sampling` its package
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] != "echo_lib":
                continue
            target = _target(name, known)
            if target and target != module and (node.lineno, target) not in found:
                found.append((node.lineno, target))
    return found


def graph() -> tuple[dict[str, Path], dict[str, list[tuple[int, str]]]]:
    known = modules()
    return known, {module: imports(module, path, known) for module, path in known.items()}


def cycles(edges: dict[str, list[tuple[int, str]]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each as one circle's members."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for _, target in edges.get(node, []):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def upward_imports(known, edges) -> list[str]:
    return [f"{known[module].relative_to(ROOT)}:{line} -> {target} (layer {layer(module)} -> {layer(target)})"
            for module, found in sorted(edges.items()) for line, target in found if layer(target) > layer(module)]


def run_config_parameters(known) -> list[str]:
    found = []
    for module, path in sorted(known.items()):
        if layer(module) >= 4:
            continue
        for node in ast.walk(_tree(path)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is None:
                    continue
                annotation = ast.unparse(arg.annotation) if arg.annotation else ""
                if arg.arg == "cfg" or "RunConfig" in annotation:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}({arg.arg}: "
                                 f"{annotation or '?'})")
    return found


def test_every_module_has_a_layer():
    for module in modules():
        layer(module)


def test_no_import_cycle():
    _, edges = graph()
    found = cycles(edges)
    assert not found, "import circles between modules of echo_lib:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_imports_only_go_down():
    known, edges = graph()
    found = upward_imports(known, edges)
    assert not found, "imports from a lower layer up:\n" + "\n".join(found)


def test_no_run_config_below_the_stage_layer():
    found = run_config_parameters(modules())
    assert not found, ("functions below the stage layer that take the run config (give them the sections "
                       "they use):\n" + "\n".join(found))


def test_the_scan_sees_imports_inside_functions(tmp_path):
    """The scanner's own check: an import inside a function is found, with its line."""
    source = tmp_path / "m.py"
    source.write_text("import os\n\ndef f():\n    from echo_lib.config import RunConfig\n")
    _tree.cache_clear()
    known = {"echo_lib.x.m": source, "echo_lib.config": source}
    assert imports("echo_lib.x.m", source, known) == [(4, "echo_lib.config")]

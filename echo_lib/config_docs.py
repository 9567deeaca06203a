"""config/README.md from config/schema.yaml: one section per top-level key, with its description and a
table of its keys (dotted paths; `<name>` stands for a name the user chooses), their defaults and
descriptions. The defaults are where they live (echo_lib.config.load_schema): a dataclass field's in its
dataclass (echo_lib/*/params.py, ...), the others in the schema. tests/test_conventions.py checks that the
committed file equals `render(load_schema())`.

Regenerate:  python -m echo_lib.config_docs > config/README.md
"""
from __future__ import annotations

import json
import sys

import yaml

COMMAND = "python -m echo_lib.config_docs > config/README.md"
NO_DEFAULT = "(required)"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _cell(text: str) -> str:
    return _one_line(text).replace("|", "\\|")


def _default(node: dict) -> str:
    if "default" not in node:
        return NO_DEFAULT
    return "`" + json.dumps(node["default"], ensure_ascii=False) + "`"


def _rows(node: dict, prefix: str):
    """(dotted key, default, description) of every key below `node`; an object with keys of its own
    gives its row and then its keys' rows."""
    for name, child in (node.get("properties") or {}).items():
        path = f"{prefix}{name}"
        nested = child.get("properties") or isinstance(child.get("additionalProperties"), dict)
        default = "" if nested and child.get("default") in ({}, None) and "properties" in child else _default(child)
        yield path, default, child.get("description", "")
        yield from _rows(child, f"{path}.")
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and (extra.get("properties") or extra.get("description")):
        path = f"{prefix}<name>"
        if extra.get("description"):
            yield path, "", extra["description"]
        yield from _rows(extra, f"{path}.")


def render(schema: dict) -> str:
    out = [
        "# The run configuration",
        "",
        f"<!-- Generated from config/schema.yaml and the config's dataclasses by echo_lib/config_docs.py; do not edit by hand. Regenerate: `{COMMAND}` -->",
        "",
        "A run is configured by one YAML file (`config/default.yaml`: tiny scale; `config/ci.yaml`: the smallest"
        " end-to-end run; `config/paper.yaml`: paper scale), given to Snakemake with `--configfile` and checked"
        " against `config/schema.yaml` before the DAG is built. Every key has a default; unknown keys are"
        " rejected with a message naming them. Each default is written once: where a key is a field of the"
        " dataclass that reads its section (`echo_lib/*/params.py`, `echo_lib/llm/settings.py`, `ModelSpec`) and"
        " that field has a default, there; otherwise in the schema. Below, one section per top-level key.",
        "",
    ]
    for name, node in schema.get("properties", {}).items():
        out += [f"## `{name}`", "", _one_line(node.get("description", "")) or "(no description)", ""]
        rows = list(_rows(node, f"{name}."))
        if rows:
            out += ["| key | default | description |", "|---|---|---|"]
            out += [f"| `{path}` | {_cell(default)} | {_cell(desc)} |" for path, default, desc in rows]
            out.append("")
            if node.get("default") not in (None, {}):
                out += ["Default:", "", "```yaml",
                        yaml.safe_dump({name: node["default"]}, sort_keys=False, allow_unicode=True).rstrip(),
                        "```", ""]
        else:
            out += [f"Default: {_default(node)}", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def main() -> None:
    from echo_lib.config import load_schema   # the schema with every default in it, the dataclasses' too
    sys.stdout.write(render(load_schema()))


if __name__ == "__main__":
    main()

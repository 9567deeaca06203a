"""Repository conventions: the licence, the citation file, the Snakemake workflow catalog's usage file,
the report's front page and config/README.md (which must equal its rendering from config/schema.yaml)."""
import re
from pathlib import Path

import yaml

from echo_lib.config_docs import COMMAND, render

ROOT = Path(__file__).resolve().parents[1]


def test_license_is_apache_2():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^license\s*=\s*\{\s*text\s*=\s*"Apache-2.0"\s*\}', pyproject, re.MULTILINE)


def test_citation_cff_has_the_required_keys_and_both_papers():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors"):
        assert cff[key], key
    assert cff["type"] == "software"
    assert cff["license"] == "Apache-2.0"
    assert all("name" in a or "family-names" in a for a in cff["authors"])
    refs = {r["title"]: r for r in cff["references"]}
    arxiv = {"Echo-N1: Affective RL Frontier": "2512.00344",
             "EMPA: Evaluating Persona-Aligned Empathy as a Process": "2603.00552"}
    assert set(arxiv) <= set(refs)
    for title, arxiv_id in arxiv.items():
        ref = refs[title]
        assert ref["type"] == "article"
        assert ref["authors"] and all("name" in a or "family-names" in a for a in ref["authors"])
        ids = {(i["type"], str(i["value"])) for i in ref["identifiers"]}
        assert ("doi", f"10.48550/arXiv.{arxiv_id}") in ids or ("url", f"https://arxiv.org/abs/{arxiv_id}") in ids


def test_readme_cites_the_package_and_both_papers():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Cite\n", 1)[1].split("\n## ", 1)[0]
    for needle in ("CITATION.cff", "Echo-N1", "2512.00344", "EMPA", "2603.00552"):
        assert needle in section, needle
    assert readme.index("## Cite") < readme.index("## Licences")


def test_workflow_catalog_file():
    usage = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text(encoding="utf-8"))["usage"]
    assert usage["mandatory-flags"]["desc"].strip()
    assert isinstance(usage["mandatory-flags"]["flags"], str)
    assert usage["software-stack-deployment"]["conda"] is True
    assert usage["report"] is True


def test_snakefile_has_a_report_front_page():
    snakefile = (ROOT / "workflow" / "Snakefile").read_text(encoding="utf-8")
    found = re.findall(r'^report:\s*"([^"]+)"', snakefile, re.MULTILINE)
    assert len(found) == 1
    page = ROOT / "workflow" / found[0]   # relative to the Snakefile
    assert page.is_file() and page.read_text(encoding="utf-8").strip()


def test_config_readme_equals_its_rendering_from_the_schema():
    from echo_lib.config import load_schema   # the schema with the dataclasses' defaults put in (issue 35)
    schema = load_schema()
    committed = (ROOT / "config" / "README.md").read_text(encoding="utf-8")
    assert committed == render(schema), f"config/README.md is stale; regenerate it: {COMMAND}"
    assert COMMAND in committed.splitlines()[2]
    for name in schema["properties"]:
        assert f"\n## `{name}`\n" in committed


def test_config_docs_render_nested_keys_and_defaults():
    schema = {"properties": {"a": {"description": "A | b", "type": "object", "default": {}, "properties": {
        "x": {"description": "X.", "type": "integer", "default": 3},
        "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {
            "y": {"description": "Y.", "type": "string"}}}}}},
        "n": {"description": "N.", "type": "string", "default": "tiny"}}}
    text = render(schema)
    assert "| `a.x` | `3` | X. |" in text
    assert "| `a.m.<name>.y` | (required) | Y. |" in text
    assert "## `n`\n\nN.\n\nDefault: `\"tiny\"`" in text

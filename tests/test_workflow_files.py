"""How people use the workflow by hand: every rule is benchmarked, and the notebooks pair with .ipynb."""
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def workflow_text() -> str:
    """workflow/Snakefile and its rules files, one text."""
    files = [ROOT / "workflow" / "Snakefile", *sorted((ROOT / "workflow" / "rules").glob("*.smk"))]
    return "\n".join(p.read_text() for p in files)


def rule_blocks() -> dict[str, str]:
    text = workflow_text()
    parts = re.split(r"^(?:rule|checkpoint) (\w+):\n", text, flags=re.M)
    # Each block runs to the next top-level statement (a line that is not indented).
    return {name: re.split(r"^\S", body, maxsplit=1, flags=re.M)[0] for name, body in zip(parts[1::2], parts[2::2])}


def test_every_rule_that_does_work_has_a_benchmark():
    rules = rule_blocks()
    assert {"models", "data", "reward_model", "policy", "sandbox", "paper", "empa"} <= rules.keys()
    missing = [name for name, body in rules.items() if name != "all" and "\n    benchmark:" not in body]
    assert not missing, f"rules without a benchmark: directive (README quotes their time and memory): {missing}"


def test_jupytext_pairs_the_notebooks_with_ipynb():
    config = tomllib.loads((ROOT / "notebooks" / "jupytext.toml").read_text())
    assert set(config["formats"].split(",")) == {"ipynb", "py:percent"}
    assert "notebooks/*.ipynb" in (ROOT / ".gitignore").read_text().splitlines()
    makefile = (ROOT / "Makefile").read_text()
    lab = makefile[makefile.index("\nlab:"):]
    assert '"python": "Jupytext Notebook"' in lab and "jupyter lab notebooks/" in lab


def test_the_hub_overlay_is_the_tiny_run_with_smollm2_from_the_hub():
    # `snakemake --configfile config/default.yaml config/hub.yaml` merges the two, the later file winning.
    import yaml
    from snakemake.utils import update_config

    from echo_lib.config import load_config, validate
    merged = yaml.safe_load((ROOT / "config/default.yaml").read_text())
    update_config(merged, yaml.safe_load((ROOT / "config/hub.yaml").read_text()))
    cfg = load_config(validate(merged, "config/default.yaml + config/hub.yaml"))
    base = cfg.models["base"]
    assert (base.source, base.id) == ("hub", "HuggingFaceTB/SmolLM2-135M-Instruct")
    assert cfg.run_name == "tiny-hub" and cfg.scale == "tiny"
    assert cfg.paper.dir is None  # the repository's paper/ stays the embedded run's

"""environment.yml (conda) and pyproject.toml (pip) describe the same environment."""
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def normalise(spec: str) -> tuple[str, str]:
    req = Requirement(spec)
    return req.name.lower().replace("_", "-"), str(req.specifier)


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {normalise(s) for s in project["dependencies"] + project["optional-dependencies"]["dev"]}

    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = {normalise(s) for s in pip_section if not s.startswith("-")}

    assert listed == wanted, (f"only in environment.yml: {sorted(listed - wanted)}; "
                              f"only in pyproject.toml: {sorted(wanted - listed)}")
    assert "-e ." in pip_section, "environment.yml must install the package itself"


def test_torch_is_pinned_everywhere():
    # A looser torch pulls a multi-GB CUDA build on these machines (README, Set-up).
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "torch==2.13.0" in project["dependencies"]
    assert "torch==2.13.0" in (ROOT / "Makefile").read_text()

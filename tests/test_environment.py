"""environment.yml / environment-gpu.yml (conda) and pyproject.toml (pip) describe the same environments."""
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def normalise(spec: str) -> tuple[str, str]:
    req = Requirement(spec)
    return req.name.lower().replace("_", "-"), str(req.specifier)


def pip_section(name: str) -> list[str]:
    env = yaml.safe_load((ROOT / name).read_text())
    assert "python=3.11" in env["dependencies"]
    return next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))


@pytest.mark.parametrize("name, extras", [("environment.yml", ["dev"]), ("environment-gpu.yml", ["dev", "gpu"])])
def test_environment_yml_matches_pyproject(name, extras):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {normalise(s) for s in project["dependencies"]
              + [s for e in extras for s in project["optional-dependencies"][e]]}
    pip = pip_section(name)
    listed = {normalise(s) for s in pip if not s.startswith("-")}
    assert listed == wanted, (f"only in {name}: {sorted(listed - wanted)}; "
                              f"only in pyproject.toml: {sorted(wanted - listed)}")
    assert "-e ." in pip, f"{name} must install the package itself"


def test_torch_is_pinned_everywhere_and_cpu_where_it_should_be():
    # On Linux the plain index's torch==2.13.0 is the multi-GB CUDA build: the CPU environments name
    # the PyTorch CPU index, the GPU one must not.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "torch==2.13.0" in project["dependencies"]
    assert "torch==2.13.0" in pip_section("environment.yml")
    assert f"--extra-index-url {TORCH_CPU_INDEX}" in pip_section("environment.yml")
    assert not any(TORCH_CPU_INDEX in s for s in pip_section("environment-gpu.yml"))
    assert f"TORCH_INDEX ?= {TORCH_CPU_INDEX}" in (ROOT / "Makefile").read_text()


def test_libraries_whose_internals_we_use_are_capped():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = {Requirement(s).name: Requirement(s).specifier for s in project["dependencies"]}
    for name in ("transformers", "trl", "peft"):
        assert any(s.operator in ("<", "<=", "==", "~=") for s in deps[name]), f"{name} needs an upper bound"

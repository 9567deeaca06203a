"""The stage contract: the DAG's files are the layout's (echo_lib/layout.py), the upstream check asks for exactly
the inputs the Snakefile's rules declare (echo_lib/stages.py), and the rules' params are the sections each
stage reads. The DAG tests on params edits are in tests/test_dag.py (they need the ci run)."""
from __future__ import annotations

import functools
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from echo_lib import stages
from echo_lib.config import derived_models, load_config
from echo_lib.layout import Layout, lora_files
from echo_lib.upstream import stage_inputs

ROOT = Path(__file__).resolve().parents[1]
RULE_STAGE = {"reward_model": "reward_models"}   # rule name -> stage name, where they differ


@functools.lru_cache(maxsize=None)
def dry_run_jobs(configfile: str, results: Path) -> list[dict]:
    """Every job of a forced dry run: rule, wildcards, input and output paths (once per config and folder)."""
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--forceall", "--cores", "1",
                           "--configfile", *configfile.split(), "--config", f"results_dir={results}"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = []
    for block in proc.stdout.split("\n\n"):
        head = re.search(r"^rule (\w+):", block, flags=re.M)
        if not head:
            continue
        field = lambda name: re.search(rf"^    {name}: (.*)$", block, flags=re.M)
        files = lambda name: [Path(p) for p in field(name).group(1).split(", ")] if field(name) else []
        wildcards = dict(kv.split("=", 1) for kv in field("wildcards").group(1).split(", ")) if field("wildcards") else {}
        jobs.append({"rule": head.group(1), "wildcards": wildcards, "input": files("input"), "output": files("output")})
    assert jobs, proc.stdout[-3000:]
    return jobs


def merged(configfile: str, results: Path) -> dict:
    """The config of one or more config files, later ones updating earlier ones as Snakemake does (deeply)."""
    def update(a: dict, b: dict) -> dict:
        return {**a, **{k: update(a[k], v) if isinstance(v, dict) and isinstance(a.get(k), dict) else v
                        for k, v in b.items()}}
    out: dict = {}
    for f in configfile.split():
        out = update(out, yaml.safe_load((ROOT / f).read_text()))
    return out | {"results_dir": str(results)}


def files_of(part) -> set[Path]:
    """The paths one stage's files object names: its folder and each of its path properties."""
    props = [a for a in dir(type(part)) if isinstance(getattr(type(part), a), property)]
    return {part.dir} | {v for v in (getattr(part, a) for a in props) if isinstance(v, Path)}


def layout_paths(layout: Layout, names: set[str]) -> set[Path]:
    """Every path the layout names for these kinds, variants and models."""
    out = set(layout.datasets()) | {layout.hitl_report, layout.llm_provenance}
    for part in (layout.models, layout.controls, layout.judges, layout.epm, layout.epm_published, layout.nee,
                 layout.sycophancy):
        out |= files_of(part)
    for name in names:
        policy = layout.policy(name)
        out |= files_of(layout.rm(name)) | files_of(policy) | files_of(layout.sandbox(name))
        out |= set(policy.weight_files(True) + policy.weight_files(False)) | set(lora_files(layout.rm(name).adapter))
    return out


def run_names(jobs) -> set[str]:
    return {v for job in jobs for v in job["wildcards"].values()}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("results")   # never written: the dry runs only name its paths


# the opt-in overlay adds the epm variant (rule policy_multiturn), a fourth model under test and rule sycophancy
@pytest.mark.parametrize("configfile", ["config/ci.yaml", "config/default.yaml", "config/paper.yaml",
                                        "config/default.yaml config/multiturn.yaml"])
def test_every_file_of_the_dag_is_a_layout_path_or_an_authored_file(configfile, results):
    tmp_path = results
    jobs = dry_run_jobs(configfile, tmp_path)
    cfg = load_config(merged(configfile, tmp_path))
    layout = Layout(cfg.run_dir)
    known = layout_paths(layout, run_names(jobs))
    known |= {Path(p) for files in layout.paper(cfg.paper.dir).outputs().values() for p in files}
    for job in jobs:
        name = job["rule"]
        stage = stages.STAGES.get(RULE_STAGE.get(name, name))
        wildcard = next(iter(job["wildcards"].values()), "")
        if stage is not None:
            known |= {layout.notebook(stage.run_name(wildcard)), layout.log(stage.run_name(wildcard)),
                      layout.benchmark(stage.run_name(wildcard))}
        for path in job["input"] + job["output"]:
            if path.is_relative_to(tmp_path / cfg.run_name) or path in known:
                assert path in known, f"rule {name}: {path} is not a path of echo_lib/layout.py"
            elif not path.is_absolute():   # the repository's own files: notebooks, authored data, the paper's source
                assert (ROOT / path).exists(), f"rule {name}: {path} is neither a layout path nor a file of the repository"


@pytest.mark.parametrize("configfile", ["config/ci.yaml", "config/paper.yaml", "config/default.yaml config/multiturn.yaml"])
def test_the_upstream_check_asks_for_exactly_the_inputs_of_each_rule(configfile, results):
    tmp_path = results
    jobs = dry_run_jobs(configfile, tmp_path)
    cfg = load_config(merged(configfile, tmp_path))
    checked = 0
    for job in jobs:
        name = RULE_STAGE.get(job["rule"], job["rule"])
        if name not in stages.STAGES or name == "epm_published":
            continue
        declared = [p for p in job["input"] if p.parent != Path("notebooks")]   # the notebook itself is no stage's output
        assert stage_inputs(cfg, name, **job["wildcards"]) == declared, job["rule"]
        checked += 1
    assert checked >= 10


def test_a_rules_params_are_the_seed_and_the_sections_its_stage_reads():
    config = load_config(ROOT / "config/ci.yaml").raw
    for name, stage in stages.STAGES.items():
        params = stages.stage_params(config, name)
        assert set(params) == {"seed", *(key.partition(".")[0] for key in stage.reads)}, name
    # the stale rerun of issue 35: stage 03 reads the sandbox's companion prompt and test history
    assert stages.stage_params(config, "policy")["sandbox_run"] == {
        key: config["sandbox_run"][key] for key in ("companion_prompt", "test_history", "test_model")}
    # the judges' sensitivity check asks the NEE judges as stage 06 does, but reads nothing else of nee
    assert "composite_weight" not in stages.stage_params(config, "judges")["nee"]
    # a derived model (an RL variant, the trained judge) is no reason to re-run the stages that do not use it
    assert not set(stages.stage_params(config, "models")["models"]) & derived_models(config)
    # a stage that loads models is parameterised by the specs of those it loads
    roles = config["roles"]
    assert set(stages.stage_params(config, "reward_models")["models"]) == {roles["reward_model"]}
    assert set(stages.stage_params(config, "sandbox")["models"]) == {
        roles["policy"], roles["judge"], roles["actor"], roles["director"], *config["sandbox"]["models"]}


def test_the_stage_table_names_every_notebook_and_the_layout_imports_nothing_of_the_project():
    for stage in stages.STAGES.values():
        assert (ROOT / "notebooks" / f"{stage.notebook}.py").is_file(), stage.name
    source = inspect.getsource(sys.modules["echo_lib.layout"])
    assert not re.search(r"^\s*(from|import) echo_lib", source, flags=re.M)


def test_the_workflow_is_in_the_catalog_layout_and_lint_clean():
    """workflow/Snakefile includes one rules file per stage; `snakemake --lint` has nothing to say."""
    rules = sorted(p.name for p in (ROOT / "workflow/rules").glob("*.smk"))
    assert {"common.smk", "models.smk", "policy.smk", "paper.smk"} <= set(rules)
    snakefile = (ROOT / "workflow/Snakefile").read_text()
    assert all(f'include: "rules/{r}"' in snakefile for r in rules)
    assert not (ROOT / "Snakefile").exists()
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--lint", "--configfile", "config/ci.yaml"],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0 and "Lints for" not in proc.stdout + proc.stderr, proc.stdout[-3000:]


def test_a_stage_reads_only_what_the_table_declares():
    """start(config, stage=...) hands a notebook the run config as its stage sees it: a read the stage table
    does not list is an error that names the table, so the rule's params stay what the stage reads."""
    from echo_lib.stages import StageConfig, UndeclaredRead
    cfg = load_config(ROOT / "config/ci.yaml")
    policy = StageConfig(cfg, "policy")
    assert policy.policy == cfg.policy and policy.seed == cfg.seed and policy.run_dir == cfg.run_dir
    assert policy.sandbox_run.companion_prompt == cfg.sandbox_run.companion_prompt   # declared: one key
    assert policy.layout.policy("echo").metrics == Layout(cfg.run_dir).policy("echo").metrics
    with pytest.raises(UndeclaredRead, match=r"stage policy reads config key 'sandbox_run.judge'.*echo_lib/stages.py"):
        policy.sandbox_run.judge
    with pytest.raises(UndeclaredRead, match="'nee'"):
        StageConfig(cfg, "reward_models").nee
    with pytest.raises(UndeclaredRead, match="'llm'"):
        StageConfig(cfg, "epm").registry   # the EPM analysis loads no model
    with pytest.raises(AttributeError):
        policy.seed = 1

"""Stage 07 in the workflow: main.tex uses only files the `paper` rule writes, the notebook writes all of
them from a run's files, and the paper-scale DAG plans with GPUs on the SLURM profile (dry runs)."""
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))

from paper_fixtures import make_run  # noqa: E402

from echo_lib.config import config_hash, validate  # noqa: E402
from echo_lib.report import glance  # noqa: E402
from echo_lib.report.params import paper_outputs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MAIN_TEX = ROOT / "paper" / "main.tex"


def main_tex_files() -> list[str]:
    """Every file main.tex inputs or includes, relative to the paper folder."""
    text = re.sub(r"(?<!\\)%.*", "", MAIN_TEX.read_text())   # comments do not count
    found = re.findall(r"\\(?:input|includegraphics)(?:\[[^\]]*\])?\{([^}]+)\}", text)
    assert found, "main.tex inputs no generated file"
    return found


def snakemake(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def planned_jobs(output: str) -> list[tuple[str, str]]:
    """(rule, resources line) of every job of a dry run's printout."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", output):
        head = re.match(r"(?:local)?rule (\w+):", block)
        if head:
            res = re.search(r"resources: (.*)", block)
            jobs.append((head.group(1), res.group(1) if res else ""))
    return jobs


def test_every_input_of_main_tex_is_declared_by_the_paper_rule():
    declared = {p.removeprefix("X/") for files in paper_outputs("X").values() for p in files}
    for name in main_tex_files():
        assert name in declared, f"paper/main.tex uses {name}, which echo_lib.report.params does not list"
    assert {n.split("/")[0] for n in main_tex_files()} >= {"tables", "figures"}


def test_snakemake_plans_the_paper_rule_for_every_file_main_tex_uses(tmp_path):
    """With the upstream result files in place (fixtures), a dry run plans `rule paper` for each target."""
    make_run(tmp_path / "ci")
    targets = [f"{tmp_path}/ci/paper/{name}" for name in main_tex_files()]
    proc = snakemake(*targets, "-n", "--configfile", "config/ci.yaml", "--config", f"results_dir={tmp_path}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    paper_jobs = [j for j in planned_jobs(out) if j[0] == "paper"]
    assert len(paper_jobs) == 1, out[-4000:]
    block = out[out.index("rule paper:"):].split("\n\n")[0]
    for target in targets:
        assert target in block, f"{target} is not an output of rule paper"


@pytest.mark.skipif(importlib.util.find_spec("snakemake_executor_plugin_slurm") is None,
                    reason="snakemake-executor-plugin-slurm is not installed (pip install -e '.[dev]')")
def test_paper_scale_dag_plans_with_gpus_on_the_slurm_profile(tmp_path):
    proc = snakemake("-n", "--configfile", "config/paper.yaml", "--workflow-profile", "profiles/slurm",
                     "--config", f"results_dir={tmp_path}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    jobs = planned_jobs(out)
    rules = {rule for rule, _ in jobs}
    assert {"models", "data", "reward_model", "sandbox", "epm"} <= rules, rules
    resources = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())["resources"]
    for rule, res in jobs:
        stage = {"reward_model": "reward_models", "epm_published": "epm"}.get(rule, rule)
        if stage in ("reward_models", "policy", "models", "sandbox", "data"):
            want = resources[stage]
            assert f"gpu={want['gpu']}" in res and want["gpu"] > 0, (rule, res)
            assert f"gpu_model={want['gpu_model']}" in res and f"cpus_per_task={want['threads']}" in res, (rule, res)
        if rule != "all":
            assert "slurm_partition=" in res and "slurm_account=" in res and "runtime=" in res, (rule, res)
    assert sum(rule == "reward_model" for rule, _ in jobs) == 3
    if "no rule yet writes" not in out:          # stages 03 and 06 have landed: the paper is planned too
        assert {"policy", "paper"} <= rules, rules


@pytest.mark.slow
def test_notebook_writes_every_paper_file_from_a_run(tmp_path):
    from echo_lib.notebook import run_notebook

    run_dir = make_run(tmp_path / "ci")
    paper = tmp_path / "paper_out"
    readme = tmp_path / "README.md"   # paper.readme: the block between the markers is rewritten, nothing else
    readme.write_text(f"# A readme\n\n{glance.BEGIN}\nold\n{glance.END}\n\nthe rest\n")
    config = validate({**yaml.safe_load((ROOT / "config" / "ci.yaml").read_text()), "results_dir": str(tmp_path),
                       "sandbox": {"models": ["base", "echo", "scalar"], "case_set": "own", "max_cases": 2},
                       "paper": {"dir": str(paper), "build_pdf": False, "readme": str(readme)}})
    run_notebook("notebooks/07_paper.py", tmp_path / "07.ipynb", {"config": config, "paper_dir": str(paper)})
    assert not (paper / "main.pdf").exists()                      # paper.build_pdf: false (the PDF: test_paper_pdf)
    for files in paper_outputs(str(paper), pdf=False).values():
        for f in files:
            assert Path(f).is_file() and Path(f).stat().st_size > 0, f
    assert (paper / "main.tex").read_text() == MAIN_TEX.read_text()
    main = pd.read_csv(paper / "tables" / "main_results.csv")
    assert list(main["Model"]) == ["echo", "scalar", "base"]
    judges = pd.read_csv(paper / "tables" / "judge_sensitivity.csv")   # the fixture's figures, before the comparisons
    assert list(judges["Accuracy"]) == [0.5, 0.9722, 0.3611, 0.8611, 0.8333] and judges["Alpha"].iloc[4] == 0.5125
    assert list(judges["95% CI"])[1:4] == ["[0.92, 1.00]", "[0.22, 0.53]", "[0.75, 0.97]"]
    macros = (paper / "tables" / "macros.tex").read_text()
    assert r"\newcommand{\RunScale}{tiny}" in macros and r"\newcommand{\NEEAlpha}{0.412}" in macros
    assert r"\newcommand{\SycophancyGuard}{no}" in macros and r"\newcommand{\EPMVariant}{no}" in macros
    for name in ("sycophancy_guard", "sycophancy_checks", "sycophancy_differences"):   # the guard did not run
        assert pd.read_csv(paper / "tables" / f"{name}.csv").empty, name
    assert "Reported (published)" in (paper / "claims.md").read_text()
    assert run_dir.is_dir()
    text = readme.read_text()
    assert text.startswith(f"# A readme\n\n{glance.BEGIN}\n") and text.endswith(f"{glance.END}\n\nthe rest\n")
    table, run = glance.read_run(paper)
    assert run.run_name == "ci" and run.config_hash == config_hash(config) and run.policy_model
    assert glance.block_of(text) == glance.render(table, run, "paper_out/claims.md")
    assert "| Success rate (%) | Echo-N1 | echo | 66.7 | n too small (n = 3) | 3 cases | 46.7 |" in text

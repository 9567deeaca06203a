# The Echo-N1 reproduction DAG. Each stage is a parameterised jupytext notebook executed with
# papermill; the executed copy is kept under results/<run>/notebooks/.
#   snakemake --cores 2                                  # tiny scale (config/default.yaml)
#   snakemake --cores 2 --configfile config/ci.yaml      # smallest end-to-end run
#   snakemake --configfile config/paper.yaml --workflow-profile profiles/slurm
# Stages (DESIGN: 00 models -> 01 data -> 02 reward models -> 03 policy RL ->
# 04 sandbox -> 05 EPM -> 06 NEE -> 07 paper); `rule all` asks for every stage's outputs.

import glob
import os
import sys

# Torch in this process (config checks) sleeps its idle OpenMP threads; each stage's kernel gets its
# rule's threads and wait policy instead (run_stage, resources.<stage>.wait_policy).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from echo_lib.config import load_config, validate
from echo_lib.empa_source import EmpaParams, layout_file, unavailable_reason
from echo_lib.model_setup import check_pins
from echo_lib.notebook import run_notebook
from echo_lib.upstream import sandbox_dirs

report: "report/workflow.rst"   # the front page of `snakemake --report`

if not workflow.overwrite_configfiles:  # no --configfile given: the tiny scale
    configfile: "config/default.yaml"

# Fails here, before any job, with a message naming the key, the value and what is allowed.
config = validate(config, source=", ".join(map(str, workflow.overwrite_configfiles)) or "config/default.yaml")
CFG = load_config(config)   # the typed run config, for what echo_lib derives from it
check_pins(CFG)  # a kept wheel or checkpoint that does not match its sha256 pin

RUN = f"{config['results_dir']}/{config['run_name']}"
NOTEBOOKS = config["notebooks_dir"]   # the stage notebooks; the tests point it at a copy they may edit
NB = f"{RUN}/notebooks"
LOGS = f"{RUN}/logs"


RM_KINDS = ["humanlike", "empathy", "scalar"]  # scalar: the 1-10, no-anchor variant for the RL ablation
VARIANTS = config["policy"]["variants"]        # each trained policy is also a model the sandbox can test
# EMPA (CC BY-NC 4.0) is fetched by rule empa, never committed. Where it cannot be had (offline, no local
# clone named) the run says so in one line and does everything else.
EMPA = EmpaParams(**config["empa"])
EMPA_LAYOUT = str(layout_file(EMPA))
PUBLISHED = config["published"]["empa_results"]   # a folder named by hand; null: EMPA's own published runs
if PUBLISHED:
    WITH_PUBLISHED = os.path.isdir(PUBLISHED)
    why_not = f"published.empa_results = {PUBLISHED} is not a folder here"
else:
    why_not = unavailable_reason(EMPA)
    WITH_PUBLISHED = why_not is None
if not WITH_PUBLISHED:
    print(f"note: {why_not}; the published comparison (stage 05 on EMPA's runs) is skipped", file=sys.stderr)
# case_set empa without sandbox.empa_dir: the sandbox reads the fetched copy
EMPA_CASES = [EMPA_LAYOUT] if config["sandbox"]["case_set"] == "empa" and not config["sandbox"]["empa_dir"] else []

localrules: empa   # a download: on a cluster, run it where the network is (the submitting host)


def run_stage(stage, threads, *args, **kwargs):
    """Run a stage notebook with the job's threads and the stage's OpenMP wait policy (see resources)."""
    run_notebook(*args, threads=threads, wait_policy=res(stage)["wait_policy"], **kwargs)


def res(stage):
    """threads/resources of a stage from the config (`resources.<stage>`, else `resources.default`).
    The SLURM executor reads gpu, gpu_model (null: any model; Snakemake drops a None resource) and
    cpus_per_task (= threads) of every rule."""
    return config["resources"].get(stage, config["resources"]["default"])


def adapter_files(folder):
    """A LoRA adapter as the files PEFT writes, not as a directory() output: Snakemake dates a directory
    output by the .snakemake_timestamp it leaves there, so weights rewritten in place (a stage notebook
    run by hand) would not make the rules that read them run again; files are dated by themselves."""
    return [f"{folder}/adapter_model.safetensors", f"{folder}/adapter_config.json"]


def policy_files(variant):
    """What stage 03 leaves of a variant: its LoRA adapter, or (policy.finetune full) the whole model, named by
    its config.json (a sharded checkpoint has no fixed file list)."""
    if config["policy"]["finetune"] == "full":
        return [f"{RUN}/policy/{variant}/model/config.json"]
    return adapter_files(f"{RUN}/policy/{variant}/adapter")


def trained_judge(wildcards=None):
    """With judges.train.enabled, rule judges trains the tiny judge's adapter: whoever may ask that judge waits."""
    return [f"{RUN}/judges/sensitivity.json"] if config["judges"]["train"]["enabled"] else []


rule all:
    input:
        f"{RUN}/models/manifest.json",
        expand(f"{RUN}/data/{{kind}}/{{split}}.jsonl", kind=["humanlike", "empathy"], split=["train", "test"]),
        f"{RUN}/controls/controls.json",
        f"{RUN}/judges/sensitivity.json",
        expand(f"{RUN}/rm/{{kind}}/metrics.json", kind=RM_KINDS),
        expand(f"{RUN}/policy/{{variant}}/metrics.json", variant=VARIANTS),
        expand(f"{RUN}/sandbox/{{model}}/summary.json", model=config["sandbox"]["models"]),
        f"{RUN}/epm/summary.csv",
        f"{RUN}/nee/summary.csv",
        lambda wildcards: [f for files in PAPER.values() for f in files],   # stage 07 (rule paper, at the end)
        [f"{RUN}/epm_published/summary.csv"] if WITH_PUBLISHED else [],


rule models:
    """Stage 00: fetch/verify/convert the embedded model, resolve hub ids, local paths and servers."""
    input:
        py=f"{NOTEBOOKS}/00_models.py",
    output:
        manifest=f"{RUN}/models/manifest.json",
        reply=f"{RUN}/models/smoke_chat.md",
        nb=f"{NB}/00_models.ipynb",
    params:
        # the RL variants are the policy base + an adapter of stage 03: nothing for stage 00 to prepare
        models={name: spec for name, spec in config["models"].items() if name not in VARIANTS},
        embedded=config["embedded"],
        smoke_chat=config["smoke_chat"],
    benchmark:
        f"{LOGS}/00_models.benchmark.tsv",
    log:
        f"{LOGS}/00_models.log",
    threads: res("models")["threads"]
    resources:
        mem_mb=res("models")["mem_mb"],
        runtime=res("models")["runtime"],
        gpu=res("models")["gpu"],
        gpu_model=res("models")["gpu_model"],
        cpus_per_task=res("models")["threads"],
    run:
        run_stage("models", threads, input.py, output.nb, {"config": config, "manifest_path": output.manifest, "reply_path": output.reply}, log=log[0])


rule data:
    """Stage 01: humanlike items from real chit-chat, empathy items by axioms -> theorems, HITL check."""
    input:
        py=f"{NOTEBOOKS}/01_data_synthesis.py",
        manifest=f"{RUN}/models/manifest.json",
        axioms=config["data"]["empathy"]["axioms_file"],
        contrasts=config["data"]["empathy"]["contrast"]["bank_file"],
        verdicts=config["data"]["hitl"]["verdicts"],
        scenarios=sorted(glob.glob("data/scenarios/own/*.yaml")),
    output:
        data=expand(f"{RUN}/data/{{kind}}/{{split}}.jsonl", kind=["humanlike", "empathy"], split=["train", "test"]),
        hitl=f"{RUN}/data/empathy/hitl/report.json",
        nb=f"{NB}/01_data_synthesis.ipynb",
    params:
        data=config["data"],
        roles=config["roles"],
        seed=config["seed"],
    benchmark:
        f"{LOGS}/01_data_synthesis.benchmark.tsv",
    log:
        f"{LOGS}/01_data_synthesis.log",
    threads: res("data")["threads"]
    resources:
        mem_mb=res("data")["mem_mb"],
        runtime=res("data")["runtime"],
        gpu=res("data")["gpu"],
        gpu_model=res("data")["gpu_model"],
        cpus_per_task=res("data")["threads"],
    run:
        run_stage("data", threads, input.py, output.nb, {"config": config}, log=log[0])


rule empa:
    """EMPA's repository at empa.commit: clone empa.source into empa.cache_dir (or take the local folder it
    names), check the commit, and write layout.json (where its cases and published runs are)."""
    output:
        layout=EMPA_LAYOUT,
    params:
        empa=config["empa"],
    benchmark:
        f"{LOGS}/empa.benchmark.tsv",
    log:
        f"{LOGS}/empa.log",
    run:
        from echo_lib.empa_source import fetch
        layout = fetch(EmpaParams(**params.empa))
        with open(log[0], "w") as f:
            print(f"EMPA from {params.empa['source']} at {layout.commit or 'an unchecked commit'}: "
                  f"cases in {layout.data}, published runs in {layout.results}", file=f)


def published_runs(layout_path):
    """The folder of published runs: published.empa_results, else the fetched EMPA's."""
    if PUBLISHED:
        return PUBLISHED
    from echo_lib.empa_source import read_layout
    results = read_layout(layout_path).results
    if results is None:
        raise ValueError(f"{layout_path}: this EMPA copy has no published runs (results/benchmark_runs/epm-bench/"
                         "<model>/); set empa.source to EMPA's full repository, or published.empa_results")
    return str(results)


rule epm_published:
    """Stage 05 on published EMPA runs: replay every trajectory, EPM-Q, the leaderboard figures."""
    input:
        py=f"{NOTEBOOKS}/05_epm_analysis.py",
        runs=PUBLISHED or [],
        empa=[] if PUBLISHED else EMPA_LAYOUT,
    output:
        summary=f"{RUN}/epm_published/summary.csv",
        per_case=f"{RUN}/epm_published/per_case.csv",
        nb=f"{NB}/05_epm_published.ipynb",
    params:
        epm=config["epm"],
        published=config["published"],
    benchmark:
        f"{LOGS}/05_epm_published.benchmark.tsv",
    log:
        f"{LOGS}/05_epm_published.log",
    threads: res("epm")["threads"]
    resources:
        mem_mb=res("epm")["mem_mb"],
        runtime=res("epm")["runtime"],
        gpu=res("epm")["gpu"],
        gpu_model=res("epm")["gpu_model"],
        cpus_per_task=res("epm")["threads"],
    run:
        run_stage("epm", threads, input.py, output.nb, {"config": config,
                                           "result_dirs": [published_runs(input.empa)],
                                           "out_dir": os.path.dirname(output.summary),
                                           "case_meta_source": config["published"]["case_meta_source"]},
                     log=log[0])


rule controls:
    """Positive controls: stage 02's reward-model code on a task whose answer is in the text (and its
    label-shuffle twin), stage 03's GRPO on a rule reward. Proof that the training code can learn."""
    input:
        py=f"{NOTEBOOKS}/02_controls.py",
        manifest=f"{RUN}/models/manifest.json",
    output:
        record=f"{RUN}/controls/controls.json",
        figure=report(f"{RUN}/controls/controls.png", caption="report/controls.rst", category="Controls"),
        nb=f"{NB}/02_controls.ipynb",
    params:
        controls=config["controls"],
        reward_models=config["reward_models"],
        roles=config["roles"],
        seed=config["seed"],
    benchmark:
        f"{LOGS}/02_controls.benchmark.tsv",
    log:
        f"{LOGS}/02_controls.log",
    threads: res("controls")["threads"]
    resources:
        mem_mb=res("controls")["mem_mb"],
        runtime=res("controls")["runtime"],
        gpu=res("controls")["gpu"],
        gpu_model=res("controls")["gpu_model"],
        cpus_per_task=res("controls")["threads"],
    run:
        run_stage("controls", threads, input.py, output.nb, {"config": config}, log=log[0])


def rm_data(wildcards):
    data = "humanlike" if wildcards.kind == "humanlike" else "empathy"
    return [f"{RUN}/data/{data}/train.jsonl", f"{RUN}/data/{data}/test.jsonl"]


rule reward_model:
    """Stage 02: a generative reward model (SFT warm start, then GRPO), evaluated base vs trained."""
    input:
        py=f"{NOTEBOOKS}/02_reward_models.py",
        manifest=f"{RUN}/models/manifest.json",
        data=rm_data,
    output:
        metrics=f"{RUN}/rm/{{kind}}/metrics.json",
        table=f"{RUN}/rm/{{kind}}/metrics.csv",
        figure=report(f"{RUN}/rm/{{kind}}/training.png", caption="report/reward_model.rst", category="Reward models"),
        train_log=f"{RUN}/rm/{{kind}}/train_log.csv",
        adapter=adapter_files(f"{RUN}/rm/{{kind}}/adapter"),
        nb=f"{NB}/02_reward_models_{{kind}}.ipynb",
    wildcard_constraints:
        kind="|".join(RM_KINDS),
    params:
        reward_models=config["reward_models"],
        roles=config["roles"],
        seed=config["seed"],
    benchmark:
        f"{LOGS}/02_reward_models_{{kind}}.benchmark.tsv",
    log:
        f"{LOGS}/02_reward_models_{{kind}}.log",
    threads: res("reward_models")["threads"]
    resources:
        mem_mb=res("reward_models")["mem_mb"],
        runtime=res("reward_models")["runtime"],
        gpu=res("reward_models")["gpu"],
        gpu_model=res("reward_models")["gpu_model"],
        cpus_per_task=res("reward_models")["threads"],
    run:
        run_stage("reward_models", threads, input.py, output.nb, {"config": config, "kind": wildcards.kind}, log=log[0])


rule policy:
    """Stage 03: GRPO of the policy against the routed generative rewards (echo) or the scalar one (the
    ablation), on the same hard-filtered prompts; then its win rate against the base on held-out prompts.
    Each variant's RL data (policy/data/<variant>/, its own hard filter) is built once and reused while its settings hold."""
    input:
        py=f"{NOTEBOOKS}/03_policy_rl.py",
        manifest=f"{RUN}/models/manifest.json",
        data=[f"{RUN}/data/empathy/train.jsonl", f"{RUN}/data/empathy/test.jsonl", f"{RUN}/data/humanlike/train.jsonl"],
        # the echo rewards (the hard filter always uses them), the variant's own, and the win-rate judge
        rms=[f for k in ("empathy", "humanlike", "scalar") for f in adapter_files(f"{RUN}/rm/{k}/adapter")],
        judge=trained_judge,   # the win-rate judge defaults to roles.judge
    output:
        metrics=f"{RUN}/policy/{{variant}}/metrics.json",
        train_log=f"{RUN}/policy/{{variant}}/train_log.csv",
        winrate=f"{RUN}/policy/{{variant}}/winrate.csv",
        figure=report(f"{RUN}/policy/{{variant}}/training.png", caption="report/policy_training.rst", category="Policy RL"),
        hacking=report(f"{RUN}/policy/{{variant}}/hacking.png", caption="report/policy_hacking.rst", category="Policy RL"),
        progress=report(f"{RUN}/policy/{{variant}}/progress.png", caption="report/policy_progress.rst", category="Policy RL"),
        weights=policy_files("{variant}"),
        nb=f"{NB}/03_policy_rl_{{variant}}.ipynb",
    wildcard_constraints:
        variant="|".join(VARIANTS) or "echo",
    params:
        policy=config["policy"],
        roles=config["roles"],
        seed=config["seed"],
    benchmark:
        f"{LOGS}/03_policy_rl_{{variant}}.benchmark.tsv",
    log:
        f"{LOGS}/03_policy_rl_{{variant}}.log",
    threads: res("policy")["threads"]
    resources:
        mem_mb=res("policy")["mem_mb"],
        runtime=res("policy")["runtime"],
        gpu=res("policy")["gpu"],
        gpu_model=res("policy")["gpu_model"],
        cpus_per_task=res("policy")["threads"],
    run:
        run_stage("policy", threads, input.py, output.nb, {"config": config, "variant": wildcards.variant}, log=log[0])


def tested_adapter(wildcards):
    """A trained policy variant is tested once stage 03 has written its adapter."""
    return policy_files(wildcards.model) if wildcards.model in VARIANTS else []


rule judges:
    """Judge sensitivity (and, with judges.train.enabled, the tiny judge's adapter first): on a held-out set with a known better reply, how often the sandbox judge and the
    NEE panel prefer it (accuracy, Krippendorff's alpha, position bias). Stages 04 and 06 show it before
    any comparison that relies on the judges."""
    input:
        py=f"{NOTEBOOKS}/04_judges.py",
        manifest=f"{RUN}/models/manifest.json",
        sensitivity_set=config["judges"]["set"],
        bank=[config["judges"]["train"]["bank_file"]] if config["judges"]["train"]["enabled"] else [],
    output:
        record=f"{RUN}/judges/sensitivity.json",
        figure=report(f"{RUN}/judges/sensitivity.png", caption="report/judges.rst", category="Judges"),
        nb=f"{NB}/04_judges.ipynb",
    params:
        judges=config["judges"],
        reward_models=config["reward_models"],   # the judge's SFT takes stage 02's LoRA settings
        sandbox_run=config["sandbox_run"],
        nee=config["nee"],
        roles=config["roles"],
        models=config["models"],
        seed=config["seed"],
    benchmark:
        f"{LOGS}/04_judges.benchmark.tsv",
    log:
        f"{LOGS}/04_judges.log",
    threads: res("judges")["threads"]
    resources:
        mem_mb=res("judges")["mem_mb"],
        runtime=res("judges")["runtime"],
        gpu=res("judges")["gpu"],
        gpu_model=res("judges")["gpu_model"],
        cpus_per_task=res("judges")["threads"],
    run:
        run_stage("judges", threads, input.py, output.nb, {"config": config}, log=log[0])


rule sandbox:
    """Stage 04: the simulated-user sandbox (Actor, Director, Judge) talks with one model under test.

    One EMPA-schema result file per case goes to sandbox/<model>/; they are not declared as outputs, so
    Snakemake never deletes them and a rerun resumes case by case."""
    input:
        py=f"{NOTEBOOKS}/04_sandbox.py",
        manifest=f"{RUN}/models/manifest.json",
        scenarios=sorted(glob.glob("data/scenarios/own/*.yaml")),
        empa=EMPA_CASES,
        adapter=tested_adapter,
        judges=f"{RUN}/judges/sensitivity.json",   # notebook 04 shows the judge's sensitivity first
    output:
        summary=f"{RUN}/sandbox/{{model}}/summary.json",
        nb=f"{NB}/04_sandbox_{{model}}.ipynb",
    params:
        sandbox=config["sandbox"],
        sandbox_run=config["sandbox_run"],
        epm=config["epm"],
        roles=config["roles"],
        models=config["models"],
        seed=config["seed"],
    benchmark:
        f"{LOGS}/04_sandbox_{{model}}.benchmark.tsv",
    log:
        f"{LOGS}/04_sandbox_{{model}}.log",
    threads: res("sandbox")["threads"]
    resources:
        mem_mb=res("sandbox")["mem_mb"],
        runtime=res("sandbox")["runtime"],
        gpu=res("sandbox")["gpu"],
        gpu_model=res("sandbox")["gpu_model"],
        cpus_per_task=res("sandbox")["threads"],
    run:
        run_stage("sandbox", threads, input.py, output.nb, {"config": config, "model": wildcards.model}, log=log[0])


rule epm:
    """Stage 05 on this run's sandbox results: replay, EPM-Q and its groups with intervals, the paired
    differences between the models, slices, figures."""
    input:
        py=f"{NOTEBOOKS}/05_epm_analysis.py",
        summaries=expand(f"{RUN}/sandbox/{{model}}/summary.json", model=config["sandbox"]["models"]),
    output:
        summary=f"{RUN}/epm/summary.csv",
        per_case=f"{RUN}/epm/per_case.csv",
        intervals=f"{RUN}/epm/intervals.csv",     # per model, bootstrap 95 % intervals over cases
        paired=f"{RUN}/epm/paired.csv",           # echo - base, scalar - base, echo - scalar, paired over cases
        nb=f"{NB}/05_epm_analysis.ipynb",
    params:
        epm=config["epm"],
    benchmark:
        f"{LOGS}/05_epm_analysis.benchmark.tsv",
    log:
        f"{LOGS}/05_epm_analysis.log",
    threads: res("epm")["threads"]
    resources:
        mem_mb=res("epm")["mem_mb"],
        runtime=res("epm")["runtime"],
        gpu=res("epm")["gpu"],
        gpu_model=res("epm")["gpu_model"],
        cpus_per_task=res("epm")["threads"],
    run:
        # exactly the models this config names (each folder's summary.json then names its cases); by hand,
        # notebook 05 reads the same folders (upstream.sandbox_dirs)
        run_stage("epm", threads, input.py, output.nb, {"config": config,
                                           "result_dirs": [str(d) for d in sandbox_dirs(CFG)],
                                           "out_dir": os.path.dirname(output.summary)}, log=log[0])


rule nee:
    """Stage 06: the NEE judge panel (blinded, order-randomised Likert ratings of every sandbox transcript,
    pairwise A/B against nee.reference_model in both orders, Krippendorff's alpha, NEE 0-100, composite)."""
    input:
        py=f"{NOTEBOOKS}/06_nee_panel.py",
        summaries=expand(f"{RUN}/sandbox/{{model}}/summary.json", model=config["sandbox"]["models"]),
        epm=f"{RUN}/epm/summary.csv",
        judges=f"{RUN}/judges/sensitivity.json",
    output:
        ratings=f"{RUN}/nee/ratings.csv",
        summary=f"{RUN}/nee/summary.csv",
        stats=f"{RUN}/nee/panel_stats.csv",
        dimensions=f"{RUN}/nee/dimensions.csv",
        pairwise=f"{RUN}/nee/pairwise.csv",
        agreement=f"{RUN}/nee/agreement.json",
        order=f"{RUN}/nee/order.json",
        nb=f"{NB}/06_nee_panel.ipynb",
    params:
        nee=config["nee"],
        roles=config["roles"],
        seed=config["seed"],
    benchmark:
        f"{LOGS}/06_nee_panel.benchmark.tsv",
    log:
        f"{LOGS}/06_nee_panel.log",
    threads: res("nee")["threads"]
    resources:
        mem_mb=res("nee")["mem_mb"],
        runtime=res("nee")["runtime"],
        gpu=res("nee")["gpu"],
        gpu_model=res("nee")["gpu_model"],
        cpus_per_task=res("nee")["threads"],
    run:
        run_stage("nee", threads, input.py, output.nb, {"config": config, "out_dir": os.path.dirname(output.summary)}, log=log[0])


# ---- Stage 07: the paper -------------------------------------------------------------------------
from echo_lib.report.params import PaperParams, paper_dir, paper_outputs

PAPER_PARAMS = PaperParams(**config["paper"])
PAPER_DIR = paper_dir(PAPER_PARAMS, config["results_dir"], config["run_name"])
PAPER = paper_outputs(PAPER_DIR, pdf=PAPER_PARAMS.build_pdf)
PAPER_INPUTS = {   # every stage output the paper reads (the notebook fails on any that is missing)
    "judges": [f"{RUN}/judges/sensitivity.json"],
    "epm": [f"{RUN}/epm/{f}.csv" for f in ("summary", "per_case", "intervals", "paired")],
    "nee": [f"{RUN}/nee/summary.csv", f"{RUN}/nee/agreement.json"],
    "rm": expand(f"{RUN}/rm/{{kind}}/metrics.json", kind=RM_KINDS),
    "policy": expand(f"{RUN}/policy/{{variant}}/{{f}}", variant=config["policy"]["variants"],
                     f=["train_log.csv", "winrate.csv"]),
}


rule paper:
    """Stage 07: the paper's tables (LaTeX + CSV), figures (PDF + PNG) and claims table from this run's
    results, then main.pdf (latexmk or tectonic; `make setup` installs the toolchain). A missing engine or
    a failed LaTeX run fails the rule with main.log's error lines; paper.build_pdf: false skips the PDF."""
    input:
        py=f"{NOTEBOOKS}/07_paper.py",
        tex="paper/main.tex",
        bib="paper/references.bib",
        reported="data/reported_claims.yaml",
        published=[f"{RUN}/epm_published/summary.csv"] if WITH_PUBLISHED else [],   # optional: EMPA's runs
        **PAPER_INPUTS,
    output:
        tables=[report(p, category="Paper", subcategory="Tables") if p.endswith(".csv") else p
                for p in PAPER["tables"]],
        figures=[report(p, category="Paper", subcategory="Figures") if p.endswith(".png") else p
                 for p in PAPER["figures"]],
        claims=[report(p, category="Paper", subcategory="Claims") if p.endswith(".csv") else p
                for p in PAPER["claims"]],
        pdf=[report(p, category="Paper", subcategory="PDF") for p in PAPER["pdf"]],
        nb=f"{NB}/07_paper.ipynb",
    params:
        paper=config["paper"],
    benchmark:
        f"{LOGS}/07_paper.benchmark.tsv",
    log:
        f"{LOGS}/07_paper.log",
    threads: res("paper")["threads"]
    resources:
        mem_mb=res("paper")["mem_mb"],
        runtime=res("paper")["runtime"],
        gpu=res("paper")["gpu"],
        gpu_model=res("paper")["gpu_model"],
        cpus_per_task=res("paper")["threads"],
    run:
        run_stage("paper", threads, input.py, output.nb, {"config": config, "paper_dir": PAPER_DIR,
                                           "published_summary": input.published[0] if input.published else ""},
                     log=log[0])

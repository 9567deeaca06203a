# What every rules file uses: the DAG shape of the run, the stage table's files and params, resources, and
# running a stage notebook.

import sys

from echo_lib.empa_source import EmpaParams, layout_file, unavailable_reason
from echo_lib.layout import Layout
from echo_lib.notebook import run_notebook
from echo_lib.stages import RM_KINDS, DagShape, stage, stage_params

NOTEBOOKS = config["notebooks_dir"]   # the stage notebooks; the tests point it at a copy they may edit
LAYOUT = Layout(CFG.run_dir)

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

SHAPE = DagShape.of(CFG, empa_layout=EMPA_LAYOUT, with_published=WITH_PUBLISHED)


def stage_in(name):
    """The rule's inputs: its notebook and the stage table's inputs (a function of the wildcards)."""
    s = stage(name)
    return lambda wildcards: {"py": f"{NOTEBOOKS}/{s.notebook}.py",
                              **s.inputs(SHAPE, wildcards.get(s.wildcard, "") if s.wildcard else "")}


def stage_out(name, reports=None):
    """The rule's outputs: the stage table's (as patterns), the executed notebook, and the figures and tables
    the HTML report shows ({output key: report() arguments})."""
    s = stage(name)
    outputs = dict(s.files(SHAPE)[1])
    for key, args in (reports or {}).items():   # "suffix": only the files that end so (the .csv of a table)
        args = dict(args)
        suffix = args.pop("suffix", "")
        shown = lambda v: report(str(v), **args) if str(v).endswith(suffix) else v
        value = outputs[key]
        outputs[key] = [shown(v) for v in value] if isinstance(value, list) else shown(value)
    return {**outputs, "nb": LAYOUT.notebook(s.run_name(f"{{{s.wildcard}}}" if s.wildcard else ""))}


def stage_log(name, kind="log"):
    s = stage(name)
    run_name = s.run_name(f"{{{s.wildcard}}}" if s.wildcard else "")
    return str(LAYOUT.log(run_name) if kind == "log" else LAYOUT.benchmark(run_name))


def res(name):
    """threads/resources of a stage from the config (`resources.<stage>`, else `resources.default`).
    The SLURM executor reads gpu, gpu_model (null: any model; Snakemake drops a None resource) and
    cpus_per_task (= threads) of every rule."""
    r = config["resources"].get(stage(name).resources_key, config["resources"]["default"])
    return r


def resources_of(name):
    r = res(name)
    return {"mem_mb": r["mem_mb"], "runtime": r["runtime"], "gpu": r["gpu"], "gpu_model": r["gpu_model"],
            "cpus_per_task": r["threads"]}


def run_stage(name, threads, input, output, log, wildcards, **parameters):
    """Run a stage notebook with the job's threads and the stage's OpenMP wait policy (see resources)."""
    s = stage(name)
    given = {"config": config, **({s.wildcard: wildcards[s.wildcard]} if s.wildcard else {}), **parameters}
    run_notebook(input.py, output.nb, given, threads=threads, wait_policy=res(name)["wait_policy"], log=log[0])


def fetch_empa(empa, log_path):
    """Rule empa's work: fetch EMPA at its pinned commit and say where its cases and runs are."""
    from echo_lib.empa_source import fetch
    layout = fetch(EmpaParams(**empa))
    with open(log_path, "w") as f:
        print(f"EMPA from {empa['source']} at {layout.commit or 'an unchecked commit'}: "
              f"cases in {layout.data}, published runs in {layout.results}", file=f)


def published_runs(runs):
    """The folder of published runs: published.empa_results, else the fetched EMPA's (its layout.json)."""
    if PUBLISHED:
        return PUBLISHED
    from echo_lib.empa_source import read_layout
    results = read_layout(runs).results
    if results is None:
        raise ValueError(f"{runs}: this EMPA copy has no published runs (results/benchmark_runs/epm-bench/"
                         "<model>/); set empa.source to EMPA's full repository, or published.empa_results")
    return str(results)

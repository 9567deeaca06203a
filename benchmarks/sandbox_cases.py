"""The tiny sandbox stage at N cases for one model: what 30 cases per model cost (issue 36).

    OMP_WAIT_POLICY=ACTIVE .venv/bin/python benchmarks/sandbox_cases.py --cases 30 [--prefix-cache-mb 512] \
        [--model base] [--out /tmp/sandbox30]

The stage's own path (echo_lib.sandbox.stage.run_sandbox) with config/default.yaml, its trained judge
(roles.judge, the read-out heads of rule judges) and `sandbox.max_cases` = --cases, the LLM call cache off so
every call runs. It needs stage 00's checkpoint and rule judges' heads (results/tiny/judges/readout); for an
RL variant, stage 03's adapter. The models load before the clock starts. Prints one JSON line: wall time, peak
RSS, and per model the prompt tokens asked for, computed and reused from the prefix cache
(`llm.prefix_cache_mb`), the cache's hits and misses and its final size. Timings are wall-clock on whatever
else the machine is doing.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    import yaml

    from echo_lib.config import load_config
    from echo_lib.models import load_llm
    from echo_lib.sandbox.stage import run_sandbox
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=30)
    ap.add_argument("--model", default="base")
    ap.add_argument("--prefix-cache-mb", type=float, default=None, help="llm.prefix_cache_mb (default: the config's)")
    ap.add_argument("--out", default="/tmp/sandbox_cases", help="folder for the result files")
    args = ap.parse_args()
    raw = yaml.safe_load((ROOT / "config/default.yaml").read_text())
    raw["sandbox"]["max_cases"] = args.cases
    raw["llm"] = {**raw.get("llm", {}), "cache": False}
    if args.prefix_cache_mb is not None:
        raw["llm"]["prefix_cache_mb"] = args.prefix_cache_mb
    cfg = load_config(raw)
    names = dict.fromkeys((args.model, cfg.roles.actor, cfg.roles.director, cfg.roles.judge))
    llms = {name: load_llm(cfg, name, dialogues=True) for name in names}
    t0 = time.perf_counter()
    run_sandbox(cfg, args.model, out_dir=args.out, llms=llms, progress=True)
    wall = time.perf_counter() - t0
    stats = {name: {"prompt": llm.backend.tally.prompt, "computed": llm.backend.tally.computed,
                    "reused": llm.backend.tally.reused, "hits": llm.backend.prefixes.hits,
                    "misses": llm.backend.prefixes.misses, "cache_mb": round(llm.backend.prefixes.bytes / 2**20)}
             for name, llm in llms.items()}
    print("RESULT", json.dumps({"cases": args.cases, "model": args.model, "prefix_cache_mb": cfg.llm.prefix_cache_mb,
                                "wall_s": round(wall, 1),
                                "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
                                "models": stats}))


if __name__ == "__main__":
    main()

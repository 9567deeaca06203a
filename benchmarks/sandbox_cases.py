"""The tiny sandbox stage at N cases for one model: what 30 cases per model cost (issue 36).

    OMP_WAIT_POLICY=ACTIVE .venv/bin/python benchmarks/sandbox_cases.py --cases 30 [--prefix-cache-mb 512] \
        [--model base] [--work /tmp/sandbox30] [--ideal-reuse]

The stage's own path (echo_lib.sandbox.stage.run_sandbox) with config/default.yaml, its trained judge
(roles.judge, the read-out heads of rule judges) and `sandbox.max_cases` = --cases, the LLM call cache off so
every call runs. It reads stage 00's checkpoint, rule judges' heads (results/tiny/judges/readout) and, for an
RL variant, stage 03's adapter, through links from a scratch results folder, so the tiny run's own files
(its llm_provenance.jsonl included) stay as they are. The models load before the clock starts. Prints one
JSON line: wall time, peak RSS, per model the prompt tokens asked for, computed and reused from the prefix
cache (`llm.prefix_cache_mb`), the cache's hits and misses and its final size, and per model-layer op (generate:
the tested model and the Actor; choose: the Judge; call_tools: the Director) the seconds, requests and tokens
of the run's llm_provenance.jsonl (sandbox_lockstep.provenance_totals). Timings are wall-clock on whatever else
the machine is doing.

With --ideal-reuse it also records every prompt each model runs and reports, per model and path (full
forward passes; the read-out heads' passes, which stop at their layer), the tokens asked and the tokens an
unbounded prefix cache would still compute: each prompt's tokens after its longest common prefix with any
earlier prompt of that model (`ideal_new_tokens`). That is the floor of prompt computation for these
prompts, whatever the cache's size or policy.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    import yaml

    from echo_lib.config import load_config
    from echo_lib.models import load_llm
    from echo_lib.sandbox.stage import run_sandbox
    from sandbox_lockstep import provenance_totals   # beside this script
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=30)
    ap.add_argument("--model", default="base")
    ap.add_argument("--prefix-cache-mb", type=float, default=None, help="llm.prefix_cache_mb (default: the config's)")
    ap.add_argument("--work", default=None, help="scratch results folder (default: a new temporary folder)")
    ap.add_argument("--ideal-reuse", action="store_true", help="count what an unbounded prefix cache would compute")
    args = ap.parse_args()
    raw = yaml.safe_load((ROOT / "config/default.yaml").read_text())
    work = Path(args.work or tempfile.mkdtemp(prefix="sandbox_cases-"))
    link_inputs(ROOT / raw.get("results_dir", "results"), work, raw["run_name"])
    raw["results_dir"] = str(work)
    raw["sandbox"]["max_cases"] = args.cases
    raw["llm"] = {**raw.get("llm", {}), "cache": False}
    if args.prefix_cache_mb is not None:
        raw["llm"]["prefix_cache_mb"] = args.prefix_cache_mb
    cfg = load_config(raw)
    names = dict.fromkeys((args.model, cfg.roles.actor, cfg.roles.director, cfg.roles.judge))
    llms = {name: load_llm(cfg, name, dialogues=True) for name in names}
    prompts = record_prompts(llms) if args.ideal_reuse else None
    t0 = time.perf_counter()
    run_sandbox(cfg, args.model, llms=llms, progress=True)
    wall = time.perf_counter() - t0
    stats = {name: {"prompt": llm.backend.tally.prompt, "computed": llm.backend.tally.computed,
                    "reused": llm.backend.tally.reused, "hits": llm.backend.prefixes.hits,
                    "misses": llm.backend.prefixes.misses, "cache_mb": round(llm.backend.prefixes.bytes / 2**20)}
             for name, llm in llms.items()}
    print("RESULT", json.dumps({"cases": args.cases, "model": args.model, "prefix_cache_mb": cfg.llm.prefix_cache_mb,
                                "wall_s": round(wall, 1),
                                "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
                                "models": stats, "ops": provenance_totals(cfg.run_dir),
                                **({"ideal_reuse": ideal_reuse(prompts)} if prompts else {}),
                                "results": str(cfg.run_dir / "sandbox" / args.model)}))


def record_prompts(llms: dict) -> dict[tuple[str, str], list[list[int]]]:
    """Every prompt each model's forward passes run, in order, by (model, path): 'full' (generate, choose,
    call_tools: kv.prefill) or 'readout' (the read-out heads' passes, which stop at their layer)."""
    import echo_lib.llm.hf as hf
    seen: dict[tuple[str, str], list[list[int]]] = {}
    prefill, last_states = hf.prefill, hf.HFBackend.last_states
    owner = {id(llm.backend.load()[0]): name for name, llm in llms.items()}

    def recording_prefill(model, pad, ids, *a, **k):
        seen.setdefault((owner.get(id(model), "?"), "full"), []).extend(list(x) for x in ids)
        return prefill(model, pad, ids, *a, **k)

    def recording_last_states(self, chats, layer, usage=None):
        seen.setdefault((self.name, "readout"), []).extend(self._encode(chats))
        return last_states(self, chats, layer, usage)

    hf.prefill, hf.HFBackend.last_states = recording_prefill, recording_last_states
    return seen


def ideal_reuse(seen: dict[tuple[str, str], list[list[int]]]) -> dict:
    """Per (model, path): prompts, tokens asked, and the tokens left after each prompt's longest common prefix
    with any earlier prompt of the same model (its last token always runs: its logits or state are read)."""
    import numpy as np
    out = {}
    by_model: dict[str, list[tuple[str, list[int]]]] = {}
    for (model, path), ids in seen.items():
        by_model.setdefault(model, []).extend((path, x) for x in ids)
    for model, rows in by_model.items():
        width = max(len(x) for _, x in rows)
        grid = np.full((len(rows), width), -1, dtype=np.int64)
        for r, (_, x) in enumerate(rows):
            grid[r, :len(x)] = x
        for r, (path, x) in enumerate(rows):
            longest = 0
            if r:
                same = grid[:r, :len(x)] == grid[r, :len(x)]
                longest = int(np.cumprod(same, axis=1).sum(axis=1).max())
            rec = out.setdefault(f"{model} {path}", {"prompts": 0, "asked": 0, "ideal_new_tokens": 0})
            rec["prompts"] += 1
            rec["asked"] += len(x)
            rec["ideal_new_tokens"] += len(x) - min(longest, len(x) - 1)
    return out


def link_inputs(results: Path, work: Path, run_name: str) -> None:
    """The scratch results folder: links to the checkpoints and to the run's model, judge and policy folders."""
    (work / run_name).mkdir(parents=True, exist_ok=True)
    pairs = [(results / "models", work / "models")] + [(results / run_name / d, work / run_name / d)
                                                       for d in ("models", "judges", "policy")]
    for src, dst in pairs:
        if src.exists() and not dst.exists():
            dst.symlink_to(src.resolve(), target_is_directory=True)


if __name__ == "__main__":
    main()

"""Does the sandbox judge's IEDR see how hard a case is? P0 of every own case under both ways of reading
an IEDR level (judge.iedr_level: expected, argmax), against the case's authored difficulty (issue 16).

For each reading: how many distinct P0 the 30 cases get, and the Spearman correlation of ||P0|| with the
authored difficulty (Easy 0 .. Very Hard 3). Target: Spearman > 0.3 with the default reading.

    .venv/bin/python benchmarks/iedr_difficulty.py [--config config/default.yaml] [--out FILE]

It needs stage 00's converted model (`snakemake --cores 2 results/tiny/models/manifest.json`); every model
call goes through the run's cache.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np

from echo_lib.config import load_config
from echo_lib.epm.case_meta import DIFFICULTIES
from echo_lib.epm.iedr import initial_deficit
from echo_lib.models import load_llm
from echo_lib.sandbox.judge import Judge
from echo_lib.scenarios.cases import load_cases


def spearman(x, y) -> float:
    from scipy.stats import spearmanr
    return float(spearmanr(x, y).statistic)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="config/default.yaml")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    cfg = load_config(args.config, sandbox={"case_set": "own", "max_cases": 0})
    cases = load_cases(cfg.sandbox, cfg.empa, cfg.seed)
    llm = load_llm(cfg, cfg.roles.judge)
    difficulty = [DIFFICULTIES.index(sc.labels.difficulty) for sc in cases]
    out = {"judge": cfg.roles.judge, "n_cases": len(cases), "difficulty_levels": list(DIFFICULTIES)}
    for reading in ("expected", "argmax"):
        t = time.perf_counter()
        params = dataclasses.replace(cfg.sandbox_run.judge, iedr_level=reading)
        verdicts = Judge(llm, params, seed=cfg.seed).iedr(cases)
        p0 = [initial_deficit(v.iedr_levels()) for v in verdicts]
        norms = [float(np.linalg.norm(p)) for p in p0]
        out[reading] = {"spearman_norm_vs_difficulty": round(spearman(norms, difficulty), 4),
                        "distinct_p0": len({tuple(p) for p in p0}),
                        "norm_min_max": [round(min(norms), 2), round(max(norms), 2)],
                        "seconds": round(time.perf_counter() - t, 1),
                        "p0": {sc.id: [int(x) for x in p] for sc, p in zip(cases, p0)}}
        print(reading, {k: v for k, v in out[reading].items() if k != "p0"}, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

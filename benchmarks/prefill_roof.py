"""How fast one forward pass can run prompt tokens on this machine: the roof under the sandbox's cost (issue 36).

    OMP_WAIT_POLICY=ACTIVE .venv/bin/python benchmarks/prefill_roof.py [--dtype float32 bfloat16] [--threads 2]

The tiny run's model (config/default.yaml, models.base, loaded as the sandbox loads it: packed weights in
float32) runs batches of random prompts from an empty cache, with and without an attention mask (a mask with
padding makes torch's CPU attention take its slower path, as the sandbox's left-padded batches do). Prints
prompt tokens per second, the best of two runs, per shape and dtype.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
SHAPES = ((1, 1800), (4, 1800), (1, 600), (8, 600))   # (prompts, tokens): a Director chat, an Actor's prompt


def main() -> None:
    import torch
    import yaml

    from echo_lib.config import load_config
    from echo_lib.llm.kv import new_cache
    from echo_lib.models import load_llm
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for dtype in args.dtype:
        raw = yaml.safe_load((ROOT / "config/default.yaml").read_text())
        raw["models"]["base"]["dtype"] = dtype
        model, _ = load_llm(load_config(raw), "base").backend.load()
        gen = torch.Generator().manual_seed(0)
        for batch, length in SHAPES:
            ids = torch.randint(100, 40000, (batch, length), generator=gen)
            for masked in (True, False):
                mask = torch.ones((batch, length), dtype=torch.long)
                mask[0, :5] = 0   # five padding tokens: the mask cannot be dropped
                best = float("inf")
                for _ in range(2):
                    t0 = time.perf_counter()
                    with torch.inference_mode():
                        model(input_ids=ids, attention_mask=mask if masked else None, cache=new_cache(model),
                              use_cache=True, logits_to_keep=1)
                    best = min(best, time.perf_counter() - t0)
                print(f"{dtype:9s} {batch} x {length} tokens, {'masked  ' if masked else 'no mask '}: "
                      f"{batch * length / best:5.0f} tokens/s ({best:.2f} s)", flush=True)


if __name__ == "__main__":
    main()

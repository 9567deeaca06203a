"""The NEE panel's A/B read-out: the prompt's last token, or the contrast of the two chats' end states?

The tiny judge answers the panel's A/B question ("Chat A: ... Chat B: ... Better chat:") with a read-out head
(echo_lib.llm.readout). Fit on the state at the prompt's last token, it got the pairs right on average over
both orders but picked the same letter in both orders for about a third of the held-out pairs: position bias
0.33-0.35 against issue 16's 0.20, whatever the layer or regularisation. This fits both kinds of head on the
same dev examples (echo_lib.judges.train.examples, A/B rows only: each dev item's good reply against its
poor reply, an off-topic contrast and bank replies, both orders, every wording) and scores both on the
held-out items as the sensitivity stage does (echo_lib.judges.sensitivity): pairwise accuracy (P(good wins)
averaged over the orders and wordings, above 0.5) and position bias (share of (item, wording) pairs whose
verdict stays on one letter when the order swaps).

    .venv/bin/python benchmarks/judge_ab_readout.py [--layer 20] [--C 0.1] [--bank-per-item 1] [--out FILE]

It needs stage 00's checkpoint (`snakemake --cores 2 results/tiny/models/manifest.json`); about 10 minutes
on one core. Prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from echo_lib.config import load_config
from echo_lib.judges.sensitivity import pairwise_preferences, transcript
from echo_lib.judges.sensitivity_set import load_set, select
from echo_lib.judges.train import examples
from echo_lib.models import load_llm
from echo_lib.llm.readout import fit_heads, question
from echo_lib.nee.blinding import Blinder
from echo_lib.nee.prompts import PAIR_MARKS, PAIR_QUESTION, pairwise_prompt
from echo_lib.nee.scores import position_bias
from echo_lib.synthesis.contrasts import load_bank


def held_out_pairs(items, variants: int) -> list[tuple[str, int, str, list[dict]]]:
    """(item id, wording, the letter of the good chat, prompt): every held-out item in both orders."""
    blind, out = Blinder([]), []
    for it in items:
        good, poor = transcript(it, it.good, "good", blind), transcript(it, it.poor, it.kind, blind)
        for v in range(variants):
            out += [(it.id, v, "A", pairwise_prompt(v, good, poor)), (it.id, v, "B", pairwise_prompt(v, poor, good))]
    return out


def score(p_a: np.ndarray, pairs, items) -> dict:
    """Pairwise accuracy over items and position bias over (item, wording), from P("A") per prompt, by the
    sensitivity stage's own functions: the good reply plays the model, the poor one the reference, each
    wording a judge."""
    rows = []
    for (iid, v, good, _), p in zip(pairs, p_a):
        first, second = ("good", "poor") if good == "A" else ("poor", "good")
        rows.append({"model": "good", "case_id": iid, "judge": f"v{v + 1}",
                     "order": "model_first" if good == "A" else "reference_first",
                     "winner": first if p > 0.5 else second, "p_first": float(p)})
    pairwise = pd.DataFrame(rows)
    panel = pairwise_preferences(pairwise, items)["panel"]
    return {"pairwise_accuracy": round(float(np.mean(panel)), 3), "position_bias": round(position_bias(pairwise), 3),
            "n_items": len(panel), "n_pairs": len(pairwise) // 2}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="config/default.yaml")
    ap.add_argument("--layer", type=int, default=20)
    ap.add_argument("--C", type=float, default=0.1)
    ap.add_argument("--bank-per-item", type=int, default=1)
    ap.add_argument("--out")
    args = ap.parse_args()
    cfg = load_config(args.config, llm={"cache": False})
    llm = load_llm(cfg, cfg.judges.train.base)
    train = [e for e in examples(select(load_set(cfg.judges.set), "dev"), load_bank(cfg.judges.train.bank_file),
                                 args.bank_per_item, cfg.nee.prompt_variants, cfg.seed, sandbox=False)
             if question(e.prompt) == PAIR_QUESTION]
    held = select(load_set(cfg.judges.set), "heldout")
    test = held_out_pairs(held, cfg.nee.prompt_variants)
    y = [e.target for e in train]
    result = {"layer": args.layer, "C": args.C, "bank_per_item": args.bank_per_item, "n_train": len(train)}
    for kind in ("last_token", "contrast"):
        def states(chats):
            if kind == "contrast":
                return llm.backend.contrast_states(chats, args.layer, PAIR_MARKS)
            return llm.backend.last_states(chats, args.layer)
        marks = {PAIR_QUESTION: PAIR_MARKS} if kind == "contrast" else {}
        head = fit_heads(states([e.prompt for e in train]), [PAIR_QUESTION] * len(train), y, args.layer, args.C,
                         cfg.seed, marks=marks).heads[PAIR_QUESTION]
        p_a = head.probs(states([p for *_, p in test]))[:, head.classes.index("A")]
        result[kind] = score(p_a, test, held)
    line = json.dumps(result)
    print(line)
    if args.out:
        Path(args.out).write_text(line + "\n")


if __name__ == "__main__":
    main()

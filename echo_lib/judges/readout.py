"""The read-out judge: the tiny judge's answers read from a hidden layer (issue 16, section 2).

SFT of a LoRA adapter on the answer token left the 135M judge blind to the reply (it learnt each rubric
field's prior; benchmarks/README.md), while a linear probe on the same model's hidden state at the end of
the rubric prompt tells the good reply from the poor one on held-out items. So the trained judge keeps the
base model and its prompts and replaces only the last step: for every question of the instruments (the six
MDEP fields, the NEE rating dimensions), a logistic head on the state after decoder layer
`judges.train.layer` at the prompt's last token gives the option probabilities (echo_lib.llm.readout). The
A/B comparison gets a contrast head: the state at the end of chat A minus that at the end of chat B (a
last-token A/B head picked the same letter in both orders for a third of the held-out pairs).

The heads learn from exactly the examples the SFT recipe uses (echo_lib.judges.train.examples): the dev
items' good and poor replies, an off-topic contrast and bank replies, each in the instruments' own prompt
formats with the answer a careful rater gives for that kind of reply. Never from the held-out items.
Beside them, the IEDR's three priority indicators (C.3 / A.3 / P.3) get heads fit on the dev cases' declared
priorities (echo_lib.judges.iedr_heads), so that the tiny sandbox's starting point P0 reads the case.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from echo_lib.judges.sensitivity_set import SensitivityItem


def fit_readout_judge(llm, items: Sequence[SensitivityItem], out_dir: str | Path, *, layer: int, C: float,
                      bank: dict[str, list[str]], bank_per_item: int, variants: int, seed: int,
                      cases: Sequence = ()) -> dict:
    """Fit and save the heads (out_dir/heads.json, heads.npz) from `llm`'s states (an hf-backend LLM of the
    base model); returns what the record says about the fit. `cases` (dev scenarios) add the IEDR's priority
    heads, C.3 / A.3 / P.3, fit on their declared priorities (echo_lib.judges.iedr_heads)."""
    import numpy as np

    from echo_lib.judges.train import examples
    from echo_lib.llm.readout import fit_heads, question
    from echo_lib.nee.prompts import PAIR_MARKS, PAIR_QUESTION
    if any(it.split != "dev" for it in items):
        raise ValueError("the judge trains on dev items only: the held-out items are what it is measured on")
    start = time.perf_counter()
    exs = examples(items, bank, bank_per_item, variants, seed)
    questions = [question(e.prompt) for e in exs]
    pairs = [i for i, q in enumerate(questions) if q == PAIR_QUESTION]
    rest = [i for i, q in enumerate(questions) if q != PAIR_QUESTION]
    states = np.zeros((len(exs), llm.backend.load()[0].config.hidden_size), dtype=np.float32)
    states[rest] = llm.backend.last_states([exs[i].prompt for i in rest], layer)
    if pairs:
        states[pairs] = llm.backend.contrast_states([exs[i].prompt for i in pairs], layer, PAIR_MARKS)
    targets = [e.target for e in exs]
    iedr = {}
    if cases:   # the IEDR's priority heads: the dev cases' three priority prompts, their declared levels
        from echo_lib.judges.iedr_heads import training_rows
        iedr_start = time.perf_counter()
        chats, iedr_targets = training_rows(cases)
        states = np.concatenate([states, llm.backend.last_states(chats, layer)])
        questions += [question(c) for c in chats]
        targets += iedr_targets
        iedr = {"iedr_cases": len(cases), "iedr_examples": len(chats), "iedr_heads": sorted({question(c) for c in chats}),
                "iedr_seconds": round(time.perf_counter() - iedr_start, 1)}
    heads = fit_heads(states, questions, targets, layer, C, seed, marks={PAIR_QUESTION: PAIR_MARKS})
    heads.save(out_dir)
    return {"method": "readout", "layer": layer, "C": C, "examples": len(exs), "heads": len(heads.heads), **iedr,
            "contrast_heads": sorted(q for q, h in heads.heads.items() if h.marks),
            "skipped_questions": heads.skipped, "seconds": round(time.perf_counter() - start, 1)}

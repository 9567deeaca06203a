"""Does the tiny judge's own model see the reply? A pairwise linear probe on SmolLM2-135M's hidden states.

The sensitivity set (data/judge_sensitivity.yaml) asks whether a judge prefers the good reply of an item
to its poor one. The prompted 135M judge does not pass it, and SFT of a LoRA adapter on the dev items
(benchmarks/judge_sft.py) leaves it near chance even on the items it was trained on. This asks whether the
information is in the model at all: each reply is read in the sandbox judge's own MDEP prompt, and its
hidden state at the prompt's last token (where the judge's answer digit is decided) is taken at a few
layers. A logistic regression without intercept is fit on the dev items' differences (good - poor
labelled 1, poor - good 0; features standardised on dev) and scored on the held-out items, beside its
label-shuffle twin (half the dev pairs swapped, seeded), which should sit near chance. A probe far above
the judge says the model carries the distinction and the judge's read-out is what fails.

`--readout` also tries the judge such a read-out would make, scored exactly as the sensitivity stage scores
the sandbox judge: one multinomial logistic head per MDEP field on the state (at the first of --layers),
fit on the replies the judge's SFT trains on (each dev item's good and poor reply, an off-topic contrast and
two bank replies, echo_lib.judges.train.replies) with the rubric levels of their kind (mdep_levels); on a
held-out item each reply's effect is the expected progress minus the expected regress summed over the axes,
and the item counts when the good reply's is higher. Its twins fit the heads on permuted training labels.

    .venv/bin/python benchmarks/judge_hidden_probe.py [--layers 10 20 30] [--field A_Prog] [--readout] [--out FILE]

It needs stage 00's checkpoint (`snakemake --cores 2 results/tiny/models/manifest.json`); about 2 minutes
on 2 cores. Prints one JSON line.
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from echo_lib.config import load_config
from echo_lib.judges.sensitivity import REPLIES, history
from echo_lib.judges.sensitivity_set import load_set, select
from echo_lib.models import registry
from echo_lib.sandbox.judge import mdep_prompt


def last_token_states(model, tok, chats: list, layers: list[int]) -> dict[int, np.ndarray]:
    """Per layer, the hidden state at the last prompt token of every chat, [chats x hidden]."""
    import torch
    out = {layer: [] for layer in layers}
    for chat in chats:
        ids = tok(tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False), return_tensors="pt")
        with torch.inference_mode():
            states = model(**ids, output_hidden_states=True).hidden_states
        for layer in layers:
            out[layer].append(states[layer][0, -1].float().numpy())
    return {layer: np.stack(v) for layer, v in out.items()}


def pairwise_probe(dev: np.ndarray, heldout: np.ndarray, flip: np.ndarray | None = None) -> float:
    """Fit on dev differences (rows good - poor; `flip` marks pairs whose label is swapped), score held out."""
    from sklearn.linear_model import LogisticRegression
    y = np.ones(len(dev)) if flip is None else np.where(flip, 0.0, 1.0)
    both = np.vstack([dev, -dev])            # mean 0 by construction: its spread is the scale
    scale = both.std(axis=0) + 1e-6
    x = both / scale
    clf = LogisticRegression(fit_intercept=False, max_iter=5000).fit(x, np.r_[y, 1 - y])
    return float(np.mean(clf.decision_function(heldout / scale) > 0))


def readout_judge(model, tok, items, layer: int, twin_seeds: list[int]) -> dict:
    """Per-field heads on one state per reply (read under the A_Prog question), fit on the SFT recipe's dev
    replies, scored as the sensitivity stage scores the sandbox judge (see the module docstring)."""
    from sklearn.linear_model import LogisticRegression
    from echo_lib.epm.mdep import FIELDS
    from echo_lib.judges.sensitivity import preference
    from echo_lib.judges.train import mdep_levels, replies
    from echo_lib.synthesis.contrasts import load_bank

    def states(pairs):
        chats = [mdep_prompt(it.profile, history(it, text), 1, "A_Prog") for it, text in pairs]
        return last_token_states(model, tok, chats, [layer])[layer]
    train = replies(select(items, "dev"), load_bank("data/contrasts.yaml"), 2, 0)
    x = states([(it, text) for it, _, text in train])
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-6
    held = select(items, "heldout")
    h = (states([(it, it.reply(w)) for it in held for w in REPLIES]) - mu) / sd
    levels = {f: np.array([mdep_levels(kind, it.axis)[f] for it, kind, _ in train]) for f in FIELDS}

    def accuracy(order: np.ndarray) -> float:
        effect = np.zeros(len(h))
        for f in FIELDS:
            head = LogisticRegression(C=0.1, max_iter=5000).fit((x - mu) / sd, levels[f][order])
            expected = head.predict_proba(h) @ head.classes_
            effect += expected if f.endswith("_Prog") else -expected
        return round(float(np.mean([preference(g, p) for g, p in zip(effect[0::2], effect[1::2])])), 4)
    return {"layer": layer, "n_train_replies": len(train), "accuracy": accuracy(np.arange(len(train))),
            "shuffled_accuracy": [accuracy(np.random.default_rng(s).permutation(len(train))) for s in twin_seeds]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default="config/default.yaml")
    ap.add_argument("--layers", type=int, nargs="+", default=[10, 20, 30])
    ap.add_argument("--field", default="A_Prog", help="the MDEP question the reply is read under")
    ap.add_argument("--twin-seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--readout", action="store_true", help="also the per-field read-out judge (see above)")
    ap.add_argument("--out")
    args = ap.parse_args()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    cfg = load_config(args.config)
    path = registry(cfg).weights("base")
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    items = load_set(cfg.judges.set)
    diffs = {}
    for split in ("dev", "heldout"):
        its = select(items, split)
        chats = [mdep_prompt(it.profile, history(it, it.reply(w)), 1, args.field) for it in its for w in REPLIES]
        states = last_token_states(model, tok, chats, args.layers)
        diffs[split] = {layer: s[0::2] - s[1::2] for layer, s in states.items()}
    result = {"field": args.field, "n_dev": len(diffs["dev"][args.layers[0]]),
              "n_heldout": len(diffs["heldout"][args.layers[0]]), "layers": {}}
    for layer in args.layers:
        dev, held = diffs["dev"][layer], diffs["heldout"][layer]
        twins = []
        for seed in args.twin_seeds:
            flip = np.zeros(len(dev), bool)
            flip[np.random.default_rng(seed).permutation(len(dev))[: len(dev) // 2]] = True
            twins.append(round(pairwise_probe(dev, held, flip), 4))
        result["layers"][layer] = {"accuracy": round(pairwise_probe(dev, held), 4), "shuffled_accuracy": twins}
    if args.readout:
        result["readout"] = readout_judge(model, tok, items, args.layers[0], args.twin_seeds)
    print(json.dumps(result))
    if args.out:
        with open(args.out, "w") as f:
            f.write(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()

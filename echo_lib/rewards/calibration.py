"""The humanlike reward model's operating point: the P(human) above which it says "human".

A verdict-first model says the more probable verdict, and the SmolLM2 base prefers "human" strongly
(it calls every test item human). After SFT the ranking is good (AUROC about 0.95) but the prior is still
there: at the argmax the trained model misses about a third of the 135M policy's own replies, the very
replies the RL reward has to catch. So the threshold is set on the model's own training items: the most
lenient one at which every machine kind (model_reply, context_removed) keeps at least
`reward_models.humanlike_machine_recall` of its items; the held-out split then measures it. It is saved
beside the adapter (decision.json), and the evaluation and the policy's reward read it from there.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from echo_lib.provenance import write_text

DECISION_FILE = "decision.json"


def machine_recall_threshold(rows: Sequence[dict], recall: float) -> float:
    """The smallest t (verdict "human" iff P(human) >= t) at which each machine kind of `rows` (judged
    training items: label, item_kind, probs) has a share >= `recall` of its items below t."""
    machine: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r["label"] == "machine":
            machine[r["item_kind"]].append(r["probs"]["human"])
    if not machine:
        raise ValueError("calibrating the humanlike threshold needs machine items among the judged training items")
    for t in sorted({r["probs"]["human"] for r in rows}) + [float("inf")]:
        if all(sum(p < t for p in ps) >= recall * len(ps) for ps in machine.values()):
            return t
    return float("inf")   # not reached: at infinity every item is below t


def decision_path(adapter: str | Path) -> Path:
    return Path(adapter).parent / DECISION_FILE


def write_decision(adapter: str | Path, threshold: float, recall: float, rows: Sequence[dict]) -> dict:
    record = {"human_threshold": threshold, "machine_recall": recall, "n_items": len(rows),
              "set_on": "training items (reward_models.eval.max_train_items)"}
    write_text(decision_path(adapter), json.dumps(record, indent=1) + "\n")   # atomic: never half a decision
    return record


def read_threshold(adapter: str | Path) -> float | None:
    """The saved threshold of this adapter, or None (no calibration: the more probable verdict)."""
    path = decision_path(adapter)
    if not path.exists():
        return None
    try:
        return float(json.loads(path.read_text())["human_threshold"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: no valid 'human_threshold' ({e}); delete the file to rerun the calibration "
                         "(stage 02, reward_models.humanlike_machine_recall)") from e

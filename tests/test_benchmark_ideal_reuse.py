"""benchmarks/sandbox_cases.py --ideal-reuse: the floor of prompt computation it reports is each prompt's
tokens after its longest common prefix with any earlier prompt of the same model, never below one token."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from sandbox_cases import ideal_reuse  # noqa: E402


def test_each_prompt_computes_what_no_earlier_prompt_of_its_model_began_with():
    seen = {("base", "full"): [[1, 2, 3, 4], [1, 2, 3, 4, 5, 6], [1, 2, 9], [7, 8]],
            ("base", "readout"): [[1, 2, 3, 4, 5, 6, 7]],     # the same model's other path shares the cache
            ("judge", "readout"): [[1, 2, 3], [1, 2, 3]]}     # another model: its own prompts only
    out = ideal_reuse(seen)
    assert out["base full"] == {"prompts": 4, "asked": 15, "ideal_new_tokens": 4 + 2 + 1 + 2}
    assert out["base readout"] == {"prompts": 1, "asked": 7, "ideal_new_tokens": 1}
    assert out["judge readout"] == {"prompts": 2, "asked": 6, "ideal_new_tokens": 3 + 1}   # a repeat: its last token

"""NEEParams: the settings of stage 06, the NEE judge panel (METHOD.md 7.2 [DEFAULT], 7.3).

The run config carries these under `nee:`; the judges themselves are `roles.nee_judges`. This module
does not import echo_lib.config.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# Names a transcript may use for a model, its vendor or the companion persona: masked before any judge
# reads it (on top of every configured model name and id).
BLIND_TERMS = ["Qiming", "SmolLM", "Qwen", "ChatGPT", "GPT", "OpenAI", "Claude", "Anthropic", "Gemini",
               "Doubao", "DeepSeek", "Llama", "Mistral", "Echo-N1"]


@dataclass(frozen=True)
class NEEParams:
    prompt_variants: int = 2        # differently worded judge prompts per judge (tiny: one model, several "judges")
    max_transcripts: int = 0        # sandbox transcripts rated per model (0 = all)
    reference_model: str = "base"   # the pairwise A/B comparison is against this sandbox model
    pairwise: bool = True           # A/B against the reference, judged in both orders
    composite_weight: float = 0.5   # Composite = w * min(EPM-Q, 100) + (1 - w) * NEE (this package's choice)
    mode: str = "auto"              # auto: choose (log-probs), JSON mode where a server gives no log-probs
    retries: int = 2                # JSON mode: asks again (new seed) after an unusable answer
    temperature: float = 0.7        # JSON mode sampling; judge j draws with seed + j
    json_max_new_tokens: int = 64   # JSON mode: the answer is one small object
    max_missing_share: float = 0.1  # a judge with more of its ratings (or A/B verdicts) missing fails the stage
    blind_terms: list[str] = field(default_factory=lambda: list(BLIND_TERMS))

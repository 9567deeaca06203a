"""Settings of the model layer (the `llm:` block of a run config).

Kept apart from echo_lib.config (which imports it) so that neither import needs the other's module
to be finished. The defaults below are the run's, written only here; the schema (config/schema.yaml,
`llm:`) documents every key and takes its default from this class.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class LLMSettings:
    cache: bool = True                 # look up and store every call in the on-disk cache
    cache_dir: str | None = None       # None -> <results_dir>/llm_cache
    provenance: bool = True            # append one record per batch to <run_dir>/llm_provenance.jsonl
    batch_size: int = 32               # hf: sequences per forward pass
    concurrency: int = 8               # openai: requests in flight at once
    max_retries: int = 6               # openai: retries on 429 / 5xx / timeouts / refused connections
    backoff_s: float = 1.0             # first wait before a retry; doubles each time (with jitter)
    max_backoff_s: float = 30.0        # longest single wait
    timeout_s: float = 120.0           # openai: per-request timeout
    top_logprobs: int = 20             # openai choose: how many next-token candidates to ask for
    choose_fallback: str = "error"     # openai choose without logprobs: "error" or "generate" (greedy + exact match)
    tool_arg_tokens: int = 32          # hf call_tools: most tokens for a free-text argument
    head_cache_tokens: int = 8192      # hf: tokens of shared prompt heads kept across calls (0: none)
    prefix_cache_mb: float = 512       # hf, per sandbox model: MiB of recent prompts that later prompts extend (0: none)
    packed_weights: bool = True        # hf on CPU, float32: MKL-packed weights for decode steps (~2x weight memory)
    tool_call_tokens: int = 256        # openai call_tools: most tokens for the whole call
    progress: bool = True              # tqdm bars on batches of more than one step

    def resolved_cache_dir(self, results_dir: str | Path) -> Path:
        return Path(self.cache_dir) if self.cache_dir else Path(results_dir) / "llm_cache"

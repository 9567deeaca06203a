"""Next-token choice of the hf backend's decode loop: presence penalty, greedy or temperature, top-k, top-p.

Each row draws one uniform number per step from its own generator and maps it through the cumulative
distribution of its truncated, renormalised probabilities (inverse CDF), so a row's token depends on its
own logits and generator only: a batch picks what one-by-one calls pick.

The rows are handled together. Top-k and top-p only need the most likely tokens, and a full sort of a
49k vocabulary per row per step costs more than the model's forward pass, so the candidates come in
tiers (TIERS most likely tokens, then the whole vocabulary): a row is decided in the first tier that
provably holds its truncated distribution (its top-k, or a head whose mass reaches its top-p).
"""
from __future__ import annotations

from typing import Sequence

from echo_lib.llm.types import Sampling

TIERS = (64, 1024)  # candidate counts tried before the whole vocabulary (topk of 64 costs half of 256's)


def pick_next(logits, samplings: Sequence[Sampling], gens: Sequence, replies: Sequence[Sequence[int]] | None = None):
    """Next token per row of `logits` [rows x vocab]: the presence penalty first (as OpenAI and vLLM apply
    it: minus the penalty on every token the row's reply already holds); then argmax for greedy rows, and a
    draw from the row's generator for the others."""
    logits = logits.float().cpu()
    for j, s in enumerate(samplings):
        if s.presence_penalty and replies and replies[j]:
            logits[j, sorted(set(replies[j]))] -= s.presence_penalty
    drawn = [j for j, s in enumerate(samplings) if not s.greedy]
    if len(drawn) == len(samplings):
        return _draw(logits, samplings, gens)
    picks = logits.argmax(-1)
    if drawn:
        picks[drawn] = _draw(logits[drawn], [samplings[j] for j in drawn], [gens[j] for j in drawn])
    return picks


def _draw(logits, samplings: Sequence[Sampling], gens: Sequence):
    """Temperature, then top-k, then top-p (on the renormalised k, as vLLM does), then the inverse-CDF draw."""
    import torch
    n, vocab = logits.shape
    temps = torch.tensor([s.temperature for s in samplings])
    scaled = logits / temps[:, None] if bool((temps != 1).any()) else logits
    lse = torch.logsumexp(scaled, -1, keepdim=True)
    top_k = torch.tensor([s.top_k for s in samplings])
    top_p = torch.tensor([s.top_p for s in samplings])
    u = torch.cat([torch.rand(1, generator=g) for g in gens])  # one draw per row and step, whatever its tier
    picks = torch.empty(n, dtype=torch.long)
    todo = torch.arange(n)
    for width in [t for t in TIERS if t < vocab]:
        head, idx = (scaled if len(todo) == n else scaled[todo]).topk(width, dim=-1)
        p = (head - lse[todo]).exp()
        k, tp = top_k[todo], top_p[todo]
        done = ((k > 0) & (k <= width)) | ((k == 0) & (tp < 1) & (p.sum(-1) >= tp))
        if bool(done.any()):
            rows = todo[done]
            picks[rows] = _inverse_cdf(p[done], idx[done], top_k[rows], top_p[rows], u[rows])
            todo = todo[~done]
        if not len(todo):
            return picks
    # the whole vocabulary: sorted where a truncation needs the order, else in the vocabulary's own order
    truncated = (top_k[todo] > 0) | (top_p[todo] < 1)
    for rows, ordered in ((todo[truncated], True), (todo[~truncated], False)):
        if len(rows):
            p = (scaled[rows] - lse[rows]).exp()
            p, idx = p.sort(-1, descending=True) if ordered else (p, None)
            picks[rows] = _inverse_cdf(p, idx, top_k[rows], top_p[rows], u[rows])
    return picks


def _inverse_cdf(p, idx, top_k, top_p, u):
    """Truncate each row of probabilities `p` (sorted descending wherever a row truncates) to its top-k and
    its nucleus, then map its uniform draw through the cumulative sum. `idx` holds the token ids of p's
    columns (None: column = token id)."""
    import torch
    width = p.shape[-1]
    k = top_k[:, None]
    p = p.masked_fill((k > 0) & (torch.arange(width)[None] >= k), 0)
    p = torch.where(k > 0, p / p.sum(-1, keepdim=True), p)  # top-p then measures mass within the k
    nucleus_out = (p.cumsum(-1) - p) >= top_p[:, None]  # beyond the smallest head whose mass reaches top_p
    p = p.masked_fill(nucleus_out & (top_p[:, None] < 1), 0)
    cdf = p.cumsum(-1)
    col = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None]).squeeze(-1).clamp(max=width - 1)
    return col if idx is None else idx.gather(-1, col[:, None]).squeeze(-1)

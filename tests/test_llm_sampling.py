"""Next-token sampling (echo_lib.llm.sampling): the tiered, batched draw picks exactly what a plain
full-sort reference picks from the same uniform draw, row by row, in every tier."""
import pytest
import torch

from echo_lib.llm.sampling import TIERS, pick_next
from echo_lib.llm.types import Sampling


def reference(logits: torch.Tensor, s: Sampling, gen: torch.Generator) -> int:
    """One row, written the plain way: sort the whole vocabulary, truncate, renormalise, inverse CDF."""
    if s.greedy:
        return int(logits.argmax())
    p = torch.softmax(logits.float() / s.temperature, -1)
    u = torch.rand(1, generator=gen)
    if not s.top_k and s.top_p >= 1:
        cdf = p.cumsum(0)
        return min(int(torch.searchsorted(cdf, u * cdf[-1])), len(cdf) - 1)
    p, idx = p.sort(descending=True)
    if s.top_k:
        p, idx = p[:s.top_k] / p[:s.top_k].sum(), idx[:s.top_k]
    if s.top_p < 1:
        p = p.masked_fill((p.cumsum(0) - p) >= s.top_p, 0)
    cdf = p.cumsum(0)
    return int(idx[min(int(torch.searchsorted(cdf, u * cdf[-1])), len(cdf) - 1)])


SAMPLINGS = [Sampling(temperature=0.7, top_p=0.9), Sampling(temperature=1.0, top_p=0.5),
             Sampling(temperature=1.3, top_p=1.0), Sampling(temperature=1.0, top_k=5),
             Sampling(temperature=0.8, top_k=2000, top_p=0.95), Sampling(temperature=0)]


def rows(n: int, vocab: int = 3000) -> torch.Tensor:
    """Peaked rows (the nucleus inside the first tier), middling ones and near-flat ones (beyond every tier)."""
    g = torch.Generator().manual_seed(0)
    scale = torch.tensor([[8.0], [3.0], [0.3]]).repeat(n // 3 + 1, 1)[:n]
    return torch.randn(n, vocab, generator=g) * scale


def test_batched_tiers_pick_what_the_full_sort_picks():
    assert max(TIERS) < 3000  # the test vocabulary is wider than every tier, so all of them and the sort are used
    logits = rows(18)
    samplings = [SAMPLINGS[i % len(SAMPLINGS)] for i in range(18)]
    for seed in range(25):
        gens = [torch.Generator().manual_seed(seed * 100 + r) for r in range(18)]
        ref_gens = [torch.Generator().manual_seed(seed * 100 + r) for r in range(18)]
        got = pick_next(logits.clone(), samplings, gens).tolist()
        want = [reference(logits[r], samplings[r], ref_gens[r]) for r in range(18)]
        assert got == want
        # a row alone picks what it picks in the batch, and its generator moved by one draw either way
        alone = [int(pick_next(logits[r:r + 1].clone(), [samplings[r]],
                               [torch.Generator().manual_seed(seed * 100 + r)])[0]) for r in range(18)]
        assert alone == got


def test_truncation_keeps_to_the_nucleus_and_the_k():
    logits = torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0, -1.0]])
    p = torch.softmax(logits[0], -1)  # 0.64, 0.23, 0.09, ...: top_p 0.8 keeps two tokens
    nucleus = {int(pick_next(logits, [Sampling(top_p=0.8)], [torch.Generator().manual_seed(s)]))
               for s in range(200)}
    assert nucleus == {0, 1} and p[:2].sum() >= 0.8 > p[0]
    k3 = {int(pick_next(logits, [Sampling(temperature=50.0, top_k=3)], [torch.Generator().manual_seed(s)]))
          for s in range(200)}
    assert k3 == {0, 1, 2}


@pytest.mark.parametrize("s", SAMPLINGS[:3])
def test_draws_follow_the_truncated_distribution(s):
    """Frequencies over many draws match the reference distribution (chi-square-free check: 4 sigma)."""
    logits = torch.tensor([2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -2.0])
    n = 4000
    picks = torch.tensor([int(pick_next(logits[None], [s], [torch.Generator().manual_seed(i)])) for i in range(n)])
    p = torch.softmax(logits / s.temperature, -1)
    if s.top_p < 1:
        p = p.masked_fill((p.cumsum(0) - p) >= s.top_p, 0)
        p = p / p.sum()
    freq = torch.bincount(picks, minlength=8).float() / n
    assert ((freq - p).abs() <= 4 * (p * (1 - p) / n).sqrt() + 1e-9).all()

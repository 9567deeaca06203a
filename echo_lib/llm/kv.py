"""KV-cache helpers of the hf backend: a cache that grows in place, and a prefill that computes every
shared prompt prefix once.

Prefill in up to three stages, each one batched forward pass over the cache rows of that stage:
  1. the head ALL prompts share (system prompt, a judge's rubric), at batch 1;
  2. the head each GROUP of prompts shares beyond it (one case's profile and history, asked about
     several indicators), at batch = number of groups, left-padded;
  3. each prompt's own tail, at batch = number of prompts, left-padded.
Between stages the cache rows are copied to the next stage's rows. Padding then sits between the
pieces of a row; the attention mask hides it and the position ids count only real tokens, so every
row sees exactly its own prompt (up to the rounding of batched arithmetic).

Stage 1's head recurs across calls (a role's system prompt, a judge's rubric every turn), so its
keys and values are kept in a HeadCache and copied in when the same head comes again. Only an exact
match counts: the head is always computed alone from the same tokens, so a reused head holds the very
numbers a fresh pass would give, and results never depend on which calls came before.

Stage 0 goes further (PrefixCache): a dialogue's prompt at turn t is mostly its prompt at turn t-1, so
the keys and values of recent prompts are kept by token sequence, and a new prompt starts from the kept
entry with which it shares the longest token prefix; only the rest is computed. Those numbers come from an
earlier pass of other shapes, so results then match a fresh pass up to float rounding (about 1e-6 in
float32), not bit for bit.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

MIN_SHARED = 8  # a shared head shorter than this is not worth a forward pass of its own


def new_cache(model, reserve: int = 64):
    """A DynamicCache whose full-attention layers are GrowLayers (sliding-window layers stay as they are)."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer
    cache = DynamicCache(config=model.config)
    cache.layers = [_grow_layer(reserve) if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


def _grow_layer(reserve: int):
    from transformers.cache_utils import DynamicLayer

    class GrowLayer(DynamicLayer):
        """keys/values are views into a buffer with room for `reserve` more tokens: a decode step writes its
        token in place instead of torch.cat re-copying the whole cache (~10% of decode time at batch 32)."""

        def __init__(self):
            super().__init__()
            self._k = self._v = None
            self._n = 0

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n, q = self._n, key_states.shape[-2]
            if self._k is None or n + q > self._k.shape[-2]:
                self._resize(n + q + reserve, like=key_states)
            self._k[:, :, n:n + q] = key_states
            self._v[:, :, n:n + q] = value_states
            self._n = n + q
            return self._view()

        def _resize(self, size: int, like):
            b, h, _, d = like.shape
            k, v = like.new_empty((b, h, size, d)), like.new_empty((b, h, size, d))
            if self._n:
                k[:, :, :self._n], v[:, :, :self._n] = self.keys, self.values
            self._k, self._v = k, v

        def _view(self):
            self.keys, self.values = self._k[:, :, :self._n], self._v[:, :, :self._n]
            return self.keys, self.values

        def crop(self, tokens_to_remove: int) -> None:
            if tokens_to_remove < 0 and self._n:
                self._n = max(0, self._n + tokens_to_remove)
                self._view()
            else:
                super().crop(tokens_to_remove)  # its own errors for a positive count

        def batch_repeat_interleave(self, repeats: int) -> None:
            if self._n:
                self._k, self._v = self._k.repeat_interleave(repeats, 0), self._v.repeat_interleave(repeats, 0)
                self._view()

        def batch_select_indices(self, indices) -> None:
            if self._n:  # indices may repeat: a group's head copied to each of its rows; index_select copies
                # whole rows, about twice as fast as advanced indexing (measured on the 4-d buffers)
                self._k, self._v = self._k.index_select(0, indices), self._v.index_select(0, indices)
                self._view()

        def reset(self) -> None:
            self._k = self._v = None
            self._n = 0
            super().reset()

    return GrowLayer()


class HeadCache:
    """Keys and values of recent stage-1 heads, by their exact token sequence; least recently used
    heads leave first once the kept heads hold more than `max_tokens` tokens (0 keeps none)."""

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self._heads: OrderedDict[tuple[int, ...], list] = OrderedDict()
        self.hits = self.misses = 0

    def get(self, head: Sequence[int]) -> list | None:
        kv = self._heads.get(tuple(head))
        if kv is None:
            self.misses += 1
            return None
        self._heads.move_to_end(tuple(head))
        self.hits += 1
        return kv

    def put(self, head: Sequence[int], cache) -> None:
        if len(head) > self.max_tokens:
            return
        self._heads[tuple(head)] = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
        while sum(map(len, self._heads)) > self.max_tokens:
            self._heads.popitem(last=False)


@dataclass
class Tally:
    """Prompt tokens asked for, and how many of them forward passes really computed (the rest came from
    a shared head computed once, the HeadCache or the PrefixCache)."""
    prompt: int = 0
    computed: int = 0
    reused: int = 0     # from the PrefixCache


class PrefixCache:
    """Keys and values of recent prompts by their token sequence, for later prompts that extend them.

    `longest` finds the kept entry sharing the longest token prefix with a prompt; `take` copies those
    prefixes into a new cache. Entries leave least recently used first once they hold more than
    `max_mb` MiB (0 keeps none). Each entry is one row, [1, kv heads, tokens, head dim] per layer.
    """

    def __init__(self, max_mb: float):
        self.max_bytes = int(max_mb * 2**20)
        self._entries: OrderedDict[tuple[int, ...], tuple] = OrderedDict()   # tokens -> (array, kv, bytes)
        self.bytes = 0
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def longest(self, ids: Sequence[int]) -> tuple[tuple[int, ...] | None, int]:
        """(entry key, tokens to reuse) for a prompt; the last prompt token is always left to compute
        (its logits are wanted), and a match shorter than MIN_SHARED counts as none."""
        import numpy as np
        x = np.asarray(ids)
        best, best_n = None, 0
        for key, (arr, _, _) in self._entries.items():
            m = min(len(arr), len(x) - 1)
            if m <= best_n:
                continue
            differ = np.flatnonzero(arr[:m] != x[:m])
            n = int(differ[0]) if differ.size else m
            if n > best_n:
                best, best_n = key, n
        if best_n < MIN_SHARED:
            self.misses += 1
            return None, 0
        self.hits += 1
        self._entries.move_to_end(best)
        return best, best_n

    def take(self, found: Sequence[tuple[tuple[int, ...] | None, int]]) -> list[tuple]:
        """Per layer (keys, values) for the rows `found` (entry key, length): each entry's first `length`
        tokens, left-padded with zeros to the longest (a row with no entry is all padding)."""
        import torch
        width = max(n for _, n in found)
        like = next(iter(self._entries[k][1] for k, n in found if n))
        out = []
        for i, (k0, v0) in enumerate(like):
            parts = ([], [])
            for key, n in found:
                kv = self._entries[key][1][i] if n else (k0[:, :, :0], v0[:, :, :0])
                for j in (0, 1):
                    parts[j].append(torch.nn.functional.pad(kv[j][:, :, :n], (0, 0, width - n, 0)))
            out.append((torch.cat(parts[0]), torch.cat(parts[1])))
        return out

    def touch(self, key: tuple[int, ...]) -> bool:
        """Mark an entry as just used; False where it is not kept."""
        if key not in self._entries:
            return False
        self._entries.move_to_end(key)
        return True

    def put(self, key: tuple[int, ...], kv: list[tuple]) -> None:
        import numpy as np
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)
        if size > self.max_bytes:
            return
        self.drop(key)
        self._entries[key] = (np.asarray(key), kv, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            self.drop(next(iter(self._entries)))

    def drop(self, key: tuple[int, ...]) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.bytes -= entry[2]


def kv_bytes_per_token(model) -> int:
    """Bytes of keys and values one prompt token holds in the cache (all layers), as PrefixCache counts them."""
    import torch
    c = model.config
    heads = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return 2 * c.num_hidden_layers * heads * head_dim * (torch.finfo(model.dtype).bits // 8)


def keep_lengths(ids: Sequence[Sequence[int]]) -> list[int]:
    """How much of each prompt to keep in the PrefixCache: where prompts share most of themselves (one
    case's history asked several questions), only the shared head, which later turns extend (the
    questions never recur after a longer history); otherwise the whole prompt."""
    n = len(ids)
    shared = [0] * n
    order = sorted(range(n), key=lambda i: ids[i])
    for a, b in zip(order, order[1:]):
        c = common_prefix([ids[a], ids[b]])
        shared[a], shared[b] = max(shared[a], c), max(shared[b], c)
    return [s if s >= MIN_SHARED and 2 * s >= len(x) else len(x) for s, x in zip(shared, ids)]


def keep_prefixes(prefixes: PrefixCache, ids: Sequence[Sequence[int]], cache, mask) -> None:
    """After a prefill: copy each prompt's kept prefix out of `cache` (real tokens only, by `mask`).
    Entries a dialogue has moved past stay until the LRU drops them: they are older than every entry in
    use, so they go first (dropping them at once would also drop what other roles share with them)."""
    import torch
    kept = set()
    for i, n in enumerate(keep_lengths(ids)):
        key = tuple(ids[i][:n])
        if key in kept:
            continue
        kept.add(key)
        if prefixes.touch(key):
            continue
        real = torch.nonzero(mask[i]).squeeze(-1)[:n]
        prefixes.put(key, [(layer.keys[i:i + 1, :, real], layer.values[i:i + 1, :, real]) for layer in cache.layers])


def _all_grow_layers(cache) -> bool:
    return all(type(layer).__name__ == "GrowLayer" for layer in cache.layers)


def common_prefix(ids: Sequence[Sequence[int]]) -> int:
    n = 0
    for column in zip(*ids):
        if any(t != column[0] for t in column):
            break
        n += 1
    return n


def plan_groups(tails: Sequence[Sequence[int]]) -> tuple[list[int], list[int]] | None:
    """Split prompts (after the head all share) into groups that share a head of their own.

    Returns (group of each row, head length of each group), or None where grouping saves nothing.
    Rows are sorted so that shared prefixes are neighbours; groups are the runs whose neighbour-to-neighbour
    common prefix reaches a threshold, tried at every threshold that occurs; the cost of a plan is the padded
    token count of stages 2 and 3 (what the forward passes really compute). Every row keeps >= 1 tail token.
    """
    n = len(tails)
    if n < 2:
        return None
    order = sorted(range(n), key=lambda i: tails[i])
    lcp = [common_prefix([tails[a], tails[b]]) for a, b in zip(order, order[1:])]
    best, best_cost = None, 0.9 * n * max(map(len, tails))  # an extra forward pass must save >= 10%
    for threshold in sorted({x for x in lcp if x >= MIN_SHARED}):
        runs, cur = [], [order[0]]
        for i, x in zip(order[1:], lcp):
            if x >= threshold:
                cur.append(i)
            else:
                runs.append(cur)
                cur = [i]
        runs.append(cur)
        heads = [min(common_prefix([tails[i] for i in run]), min(len(tails[i]) for i in run) - 1)
                 if len(run) > 1 else None for run in runs]
        widest_tail = max([len(tails[i]) - h for run, h in zip(runs, heads) if h is not None for i in run] or [1])
        # a lone row puts into stage 2 what does not fit the other rows' tail width (no extra padding)
        heads = [h if h is not None else min(len(tails[run[0]]) - 1, max(1, len(tails[run[0]]) - widest_tail))
                 for run, h in zip(runs, heads)]
        cost = len(runs) * max(heads) + n * max(len(tails[i]) - h for run, h in zip(runs, heads) for i in run)
        if cost < best_cost:
            group = [0] * n
            for g, run in enumerate(runs):
                for i in run:
                    group[i] = g
            best, best_cost = (group, heads), cost
    return best


def padded(ids: Sequence[Sequence[int]], pad: int, device):
    """Left-padded input ids, attention mask and position ids (counting real tokens only)."""
    import torch
    width = max(map(len, ids))
    input_ids = torch.full((len(ids), width), pad, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for r, row in enumerate(ids):
        if row:
            input_ids[r, width - len(row):] = torch.tensor(row)
            mask[r, width - len(row):] = 1
    position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
    return input_ids.to(device), mask.to(device), position_ids.to(device)


def prefill(model, pad: int, ids: list[list[int]], cache, keep: int = 1, heads: HeadCache | None = None,
            prefixes: PrefixCache | None = None, tally: Tally | None = None):
    """Run the prompts into `cache`; return (logits of the last `keep` positions, attention mask, positions).
    With `heads`, the head all prompts share is looked up there first and kept there after. With
    `prefixes`, each prompt starts from its longest kept prefix (stage 0), and its own prefix is kept after.
    `tally` counts the prompt tokens asked for and computed."""
    tally = tally if tally is not None else Tally()
    tally.prompt += sum(map(len, ids))
    if prefixes is None or not prefixes.max_bytes or not _all_grow_layers(cache):
        return _prefill_fresh(model, pad, ids, cache, keep, heads, tally)
    found = [prefixes.longest(x) for x in ids]
    if any(n for _, n in found):
        out = _prefill_reusing(model, pad, ids, cache, keep, prefixes, found, tally)
    else:
        out = _prefill_fresh(model, pad, ids, cache, keep, heads, tally)
    keep_prefixes(prefixes, ids, cache, out[1])
    return out


def _prefill_reusing(model, pad: int, ids: list[list[int]], cache, keep: int, prefixes: PrefixCache,
                     found: list[tuple[tuple[int, ...] | None, int]], tally: Tally):
    """Stage 0 in place of stage 1: one cache row per distinct reused prefix (rows without one: empty);
    stage 2 then runs once what prompts on the same reused prefix share beyond it (one case's new turn,
    asked several questions; grouped by plan_groups), stage 3 each prompt's own tail."""
    import torch
    dev = model.device
    # rows that reuse the same tokens share one stage-0 row, whichever entry each found them in
    same = {tuple(x[:n]): f for x, f in zip(ids, found) for n in [f[1]]}
    rows = list(same.values())
    for layer, (k, v) in zip(cache.layers, prefixes.take(rows)):
        layer.update(k.to(dev), v.to(dev))
    width = max(n for _, n in rows)
    rows_mask = torch.zeros((len(rows), width), dtype=torch.long, device=dev)
    for r, (_, n) in enumerate(rows):
        rows_mask[r, width - n:] = 1
    tally.reused += sum(n for _, n in found)
    tails = [x[n:] for x, (_, n) in zip(ids, found)]
    # stage 2's rows: (stage-0 row, head) for each group of prompts that share a head beyond their prefix
    order = list(same)
    of_row = [order.index(tuple(x[:n])) for x, (_, n) in zip(ids, found)]
    group, parts = [0] * len(ids), []
    for r in range(len(rows)):
        mine = [i for i in range(len(ids)) if of_row[i] == r]
        plan = plan_groups([tails[i] for i in mine])
        sub, heads = plan if plan is not None else ([0] * len(mine), [0])
        for i, g in zip(mine, sub):
            group[i] = len(parts) + g
        parts += [(r, h) for h in heads]
    if any(h for _, h in parts):  # stage 2
        sel = [r for r, _ in parts]
        if sel != list(range(len(rows))):
            cache.batch_select_indices(torch.tensor(sel, device=dev))
            rows_mask = rows_mask[sel]
        tally.computed += sum(h for _, h in parts)
        rows_mask = _extend(model, pad, cache, rows_mask, [tails[group.index(g)][:h] for g, (_, h) in enumerate(parts)],
                            1)[1]
        tails = [t[parts[g][1]:] for t, g in zip(tails, group)]
    else:
        group = of_row
    if group != list(range(len(ids))):
        sel = torch.tensor(group, device=dev)
        cache.batch_select_indices(sel)
        rows_mask = rows_mask[sel]
    tally.computed += sum(map(len, tails))
    return _extend(model, pad, cache, rows_mask, tails, keep)  # stage 3


def _prefill_fresh(model, pad: int, ids: list[list[int]], cache, keep: int, heads: HeadCache | None,
                   tally: Tally):
    import torch
    dev = model.device
    n = len(ids)
    shared = min(common_prefix(ids), min(map(len, ids)) - 1) if n > 1 else 0
    rows_mask = torch.ones((1, 0), dtype=torch.long, device=dev)  # what each cache row holds (1 = real token)
    if shared >= MIN_SHARED:  # stage 1
        head = ids[0][:shared]
        heads = heads if heads is not None and heads.max_tokens and _all_grow_layers(cache) else None
        kept = heads.get(head) if heads else None
        if kept:
            for layer, (k, v) in zip(cache.layers, kept):
                layer.update(k, v)
        else:
            model(input_ids=torch.tensor([head], device=dev), cache=cache, use_cache=True, logits_to_keep=1)
            tally.computed += shared
            if heads:
                heads.put(head, cache)
        rows_mask = rows_mask.new_ones((1, shared))
    else:
        shared = 0
    tails = [x[shared:] for x in ids]
    plan = plan_groups(tails)
    if plan is not None:  # stage 2: one row per group
        group, heads = plan
        first = [group.index(g) for g in range(len(heads))]
        if cache.get_seq_length():
            cache.batch_repeat_interleave(len(heads))
        rows_mask = _extend(model, pad, cache, rows_mask.expand(len(heads), -1),
                            [tails[i][:h] for i, h in zip(first, heads)], 1)[1]
        tally.computed += sum(heads)
        sel = torch.tensor(group, device=dev)
        cache.batch_select_indices(sel)
        rows_mask = rows_mask[sel]
        tails = [t[heads[g]:] for t, g in zip(tails, group)]
    elif cache.get_seq_length():
        cache.batch_repeat_interleave(n)
    tally.computed += sum(map(len, tails))
    return _extend(model, pad, cache, rows_mask.expand(n, -1), tails, keep)  # stage 3


def _extend(model, pad: int, cache, prev_mask, seqs: list[list[int]], keep: int):
    """Append `seqs` (one per cache row) to the cache: one padded forward pass, or on a CPU, where padding
    costs as much as real tokens and batching gains nothing once a pass holds dozens of tokens, one pass
    per row when that computes clearly fewer tokens (see apart_pays)."""
    import torch
    input_ids, mask, pos = padded(seqs, pad, model.device)
    mask = torch.cat([prev_mask, mask], dim=1)
    pos = pos + prev_mask.sum(-1, keepdim=True)  # positions count the real tokens before
    if model.device.type == "cpu" and apart_pays(list(map(len, seqs))) and _all_grow_layers(cache):
        return _extend_apart(model, cache, mask, pos, seqs, keep), mask, pos
    logits = model(input_ids=input_ids, attention_mask=mask, position_ids=pos, cache=cache, use_cache=True,
                   logits_to_keep=keep).logits
    return logits, mask, pos


PASS_COST = 32  # a forward pass of its own costs about as much as this many more tokens in a shared one


def apart_pays(lengths: Sequence[int]) -> bool:
    """Whether one pass per row computes at least 10% fewer tokens than one padded pass."""
    return len(lengths) > 1 and sum(lengths) + PASS_COST * len(lengths) < 0.9 * len(lengths) * max(lengths)


def _extend_apart(model, cache, mask, pos, seqs: list[list[int]], keep: int):
    """_extend with one unpadded pass per row; the new keys and values are then laid out exactly as the
    padded pass lays them out (left padding, hidden by `mask`), so later steps cannot tell the difference."""
    import torch
    width = max(map(len, seqs))
    before = mask.shape[1] - width  # what the cache rows hold already
    old = [(layer.keys, layer.values) for layer in cache.layers] if before else None
    rows, logits = [], []
    for r, seq in enumerate(seqs):
        if not seq:   # nothing new for this row (stage 0's row without a stage-2 head): padding only
            rows.append(None)
            logits.append(None)
            continue
        row = new_cache(model, reserve=len(seq))
        for layer, (k, v) in zip(row.layers, old or []):
            layer.update(k[r:r + 1], v[r:r + 1])
        out = model(input_ids=torch.tensor([seq], device=model.device),
                    attention_mask=torch.cat([mask[r:r + 1, :before], mask.new_ones((1, len(seq)))], dim=1),
                    position_ids=pos[r:r + 1, width - len(seq):], cache=row, use_cache=True,
                    logits_to_keep=keep).logits
        rows.append([(layer.keys[:, :, before:], layer.values[:, :, before:]) for layer in row.layers])
        logits.append(torch.nn.functional.pad(out, (0, 0, keep - out.shape[1], 0)) if out.shape[1] < keep else out)
    like = next(kv for kv in rows if kv is not None)
    rows = [kv if kv is not None else [(k[:, :, :0], v[:, :, :0]) for k, v in like] for kv in rows]
    first = next(x for x in logits if x is not None)
    logits = [x if x is not None else torch.zeros_like(first) for x in logits]
    for i, layer in enumerate(cache.layers):
        parts = [[torch.nn.functional.pad(kv[i][j], (0, 0, width - kv[i][j].shape[2], 0)) for kv in rows]
                 for j in (0, 1)]  # left-pad each row's new keys / values to the common width
        k, v = torch.cat(parts[0]), torch.cat(parts[1])
        if old:
            k, v = torch.cat([old[i][0], k], dim=2), torch.cat([old[i][1], v], dim=2)
        layer.reset()
        layer.update(k, v)
    return torch.cat(logits)

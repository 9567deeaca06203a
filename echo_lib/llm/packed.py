"""MKL-packed weights for the hf backend's decode steps on a CPU, in float32.

A decode step multiplies a few dozen rows (one token per chat of the batch) by every weight matrix of
the model. With so few rows, MKL's sgemm spends much of its time re-arranging the weight it streams from
memory. Packed once into MKL's own layout (cblas_sgemm_pack: what torch.compile's CPU weight freezing
uses), the same products run faster: measured on the 2-core CI machine, the linear maps of SmolLM2-135M at
32 rows 34 ms instead of 41, at 8 rows 24 instead of 29; a whole decode step at batch 32 76 ms instead
of 84. At 1-2 rows and from about 64 rows up (prefill) the plain weight is as fast or faster, so it is
used there (PACKED_ROWS).

The packed layout does not depend on the row count, though torch's wrapper only lets it be used at the
row count it was packed for; `_packed_linear` passes the actual count. That is MKL behaviour, not a
documented promise, so `pack_linears` checks every weight shape against the plain product before it
switches anything, and leaves the model alone if one differs beyond rounding.

Cost: about twice the memory of the packed weights (the plain weight stays for the rows outside
PACKED_ROWS). `llm.packed_weights: false` turns it off.
"""
from __future__ import annotations

import logging
from functools import partial

log = logging.getLogger(__name__)

PACKED_ROWS = (4, 64)  # rows (tokens in the pass) for which the packed product is used


def pack_linears(model) -> int:
    """Give every float32 torch.nn.Linear of a CPU model a packed copy of its weight, used for passes of
    PACKED_ROWS rows. Returns the number of layers packed (0 where MKL is missing or the check fails)."""
    import torch
    mkl = getattr(torch.ops, "mkl", None)
    if not torch.backends.mkl.is_available() or not hasattr(mkl, "_mkl_linear"):
        return 0
    layers = [m for m in model.modules() if type(m) is torch.nn.Linear and m.weight.device.type == "cpu"
              and m.weight.dtype == torch.float32]
    packed = [torch.ops.mkl._mkl_reorder_linear_weight(m.weight.detach(), PACKED_ROWS[1]) for m in layers]
    checked: dict[tuple, bool] = {}
    for m, w in zip(layers, packed):
        shape = tuple(m.weight.shape)
        if shape not in checked:
            checked[shape] = _same_products(m, w)
    if not all(checked.values()):
        log.warning("packed weights give other products than the plain ones for shapes %s; left unpacked",
                    [s for s, ok in checked.items() if not ok])
        return 0
    for m, w in zip(layers, packed):
        m.forward = partial(_packed_linear, m, w)
    return len(layers)


def _packed_linear(layer, packed, x):
    import torch
    rows = x.numel() // x.shape[-1]
    if PACKED_ROWS[0] <= rows <= PACKED_ROWS[1] and not (torch.is_grad_enabled() and layer.weight.requires_grad):
        return torch.ops.mkl._mkl_linear(x, packed, layer.weight, layer.bias, rows)
    return torch.nn.functional.linear(x, layer.weight, layer.bias)


def _same_products(layer, packed) -> bool:
    """The packed product equals the plain one (up to float32 rounding) at both ends of PACKED_ROWS."""
    import torch
    g = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for rows in PACKED_ROWS:
            x = torch.randn(rows, layer.in_features, generator=g)
            want = torch.nn.functional.linear(x, layer.weight, layer.bias)
            got = torch.ops.mkl._mkl_linear(x, packed, layer.weight, layer.bias, rows)
            if not torch.allclose(got, want, rtol=1e-4, atol=1e-4 * float(want.abs().max())):
                return False
    return True

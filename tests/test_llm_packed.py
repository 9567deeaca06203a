"""MKL-packed weights (echo_lib.llm.packed): the decode-step products equal the plain ones up to float32
rounding at every row count, replies do not change, and training passes never take the packed path."""
from __future__ import annotations

import pytest
import torch

from echo_lib.llm import Sampling

from echo_lib.models import load_llm
from echo_lib.llm.packed import PACKED_ROWS, pack_linears
from test_llm_hf import CHATS, make_cfg  # tests/ is on sys.path (conftest.py), as for plain `pytest`

pytestmark = pytest.mark.skipif(not torch.backends.mkl.is_available(), reason="this torch build has no MKL")


def tiny_model(tiny_lm_dir):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(tiny_lm_dir, dtype=torch.float32).eval()


def test_packed_products_equal_the_plain_ones(tiny_lm_dir):
    plain, packed = tiny_model(tiny_lm_dir), tiny_model(tiny_lm_dir)
    n = pack_linears(packed)
    assert n == sum(type(m) is torch.nn.Linear for m in packed.modules()) > 0
    ids = torch.randint(5, 250, (max(PACKED_ROWS) + 6, 1), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        for rows in (1, 2, PACKED_ROWS[0], 7, 32, PACKED_ROWS[1], PACKED_ROWS[1] + 6):  # inside and outside the range
            want = plain(input_ids=ids[:rows]).logits
            got = packed(input_ids=ids[:rows]).logits
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        # a prefill pass of several tokens per row: rows x tokens decides the path
        two_by_four = ids[:8].view(2, 4)
        torch.testing.assert_close(packed(input_ids=two_by_four).logits, plain(input_ids=two_by_four).logits,
                                   rtol=1e-5, atol=1e-5)


def test_training_passes_use_the_plain_weight(tiny_lm_dir):
    model = tiny_model(tiny_lm_dir)
    pack_linears(model)
    layer = next(m for m in model.modules() if type(m) is torch.nn.Linear)
    x = torch.randn(8, layer.in_features)
    layer(x).sum().backward()  # _mkl_linear has no backward: this would fail on the packed path
    assert layer.weight.grad is not None and layer.weight.grad.abs().sum() > 0


def test_replies_are_the_same_packed_or_not(tmp_path, tiny_lm_dir):
    s = Sampling(temperature=0.8, top_p=0.9, max_new_tokens=12, seed=3)
    on = load_llm(make_cfg(tmp_path / "on", tiny_lm_dir, cache=False), "base")
    off = load_llm(make_cfg(tmp_path / "off", tiny_lm_dir, cache=False, packed_weights=False), "base")
    chats = CHATS * 2  # 12 rows: decode steps inside PACKED_ROWS
    assert [c.text for c in on.generate(chats, s)] == [c.text for c in off.generate(chats, s)]
    assert on.backend.packed_layers > 0 and off.backend.packed_layers == 0

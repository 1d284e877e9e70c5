"""A draft head's step in one C call (specviz/head_step.c, built by specviz.head_step): the same arithmetic as the
head's torch operations (to about 1e-6 of the features' size), bound only where it applies, dropped by a copy, and
never a change of tokens (the loop's identity tests run it on the tiny pair, whose heads take it where it builds).
"""

from __future__ import annotations

import copy

import pytest
import torch

from specviz import attention, head_step, panels
from specviz.drafters.head_net import DraftHead, HeadShape, KVCache, bind_kernel
from specviz.fast_path import prepare
from specviz.trees import TreeFeed

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(head_step.available() is None or attention.available() is None
                                 or panels.available() is None, reason="the C kernels cannot be built here")]


def head(dtype: torch.dtype, layers: tuple[int, ...] = ()) -> DraftHead:
    """A prepared head (its products on the panels, untimed: it is small) with the few-row kernel, its C step bound."""
    torch.manual_seed(0)
    shape = HeadShape(hidden=128, heads=4, kv_heads=2, intermediate=96, rope_theta=10000.0, eps=1e-5, layers=layers)
    made = DraftHead(shape)
    with torch.no_grad():
        for parameter in made.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)  # norms and biases off their starting values
    made = made.to(dtype).eval().requires_grad_(False)
    made.few_rows = attention.available()
    made = prepare(made, torch.device("cpu"))
    made.kernel = bind_kernel(made)
    return made


def torch_step(made: DraftHead, *args):
    kernel, made.kernel = made.kernel, None
    try:
        return made.step(*args)
    finally:
        made.kernel = kernel


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_the_c_step_reads_as_torchs_operations_in_a_line_and_in_a_tree(dtype, monkeypatch):
    """A whole prompt (torch's product), then a catch-up of 3 rows, a tree's reads with their visibility, and one row:
    the same features and cache as the torch path, to about 1e-6 of their size. bf16 weights take the bf16 panels
    untimed; fp32 ones where the fp32 panels were chosen (here: SPECVIZ_PANELS=1)."""
    monkeypatch.setenv(panels.SWITCH_ENV, "1")
    made = head(dtype)
    assert made.kernel is not None
    generator = torch.Generator().manual_seed(1)
    rows = [torch.randn(n, 128, generator=generator) for n in (40, 3, 1)]
    caches = KVCache(), KVCache()
    with torch.inference_mode():
        for x in rows:
            c_out, t_out = made.step(x * 0.1, x, caches[0]), torch_step(made, x * 0.1, x, caches[1])
            torch.testing.assert_close(c_out, t_out, atol=2e-5 * float(t_out.abs().max()), rtol=0)
        feed = TreeFeed(caches[0].length)
        parents = [-1, -1, 0]
        allowed, positions = feed.read([0, 1, 2], parents, torch.device("cpu"))
        x = torch.randn(3, 128, generator=generator)
        c_out = made.step(x * 0.1, x, caches[0], positions, allowed)
        t_out = torch_step(made, x * 0.1, x, caches[1], positions, allowed)
    torch.testing.assert_close(c_out, t_out, atol=2e-5 * float(t_out.abs().max()), rtol=0)
    assert caches[0].length == caches[1].length == 47
    torch.testing.assert_close(caches[0].k[:, :47], caches[1].k[:, :47], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(caches[0].v[:, :47], caches[1].v[:, :47], atol=1e-5, rtol=1e-5)


def test_a_head_of_several_layers_lifts_in_c_as_in_torch():
    made = head(torch.bfloat16, layers=(1, 2, 3))
    assert made.kernel is not None and "fuse" in made.kernel.packed
    x = torch.randn(4, 3 * 128) * 3
    with torch.inference_mode():
        lifted = made.lift(x)
        made.kernel = None
        expected = made.lift(x)
    torch.testing.assert_close(lifted, expected, atol=2e-5 * float(expected.abs().max()), rtol=0)


def test_the_c_step_is_bound_only_where_it_applies(monkeypatch):
    """Not without the few-row kernel, nor for products off the panels (an unprepared head), nor when switched off
    (SPECVIZ_HEAD_STEP=0); a head in training (gradients on) and a copy run torch's operations."""
    made = head(torch.bfloat16)
    made.few_rows = None
    assert bind_kernel(made) is None
    plain = DraftHead(made.shape).bfloat16()
    plain.few_rows = attention.available()
    assert bind_kernel(plain) is None
    monkeypatch.setenv(head_step.SWITCH_ENV, "0")
    assert head_step.available() is None
    monkeypatch.delenv(head_step.SWITCH_ENV)
    made = head(torch.bfloat16)
    x = torch.randn(1, 128)
    assert not made.kernel_takes(x, x)  # gradients on, outside inference
    with torch.inference_mode():
        assert made.kernel_takes(x, x)
        assert not made.kernel_takes(x.bfloat16(), x.bfloat16())
        assert not made.kernel_takes(torch.randn(17, 128), torch.randn(17, 128))  # a prompt: torch's bf16 product
    copied = copy.deepcopy(made)
    assert copied.kernel is None
    with torch.inference_mode():
        torch.testing.assert_close(copied.step(x * 0.1, x, KVCache()), made.step(x * 0.1, x, KVCache()), atol=1e-4,
                                   rtol=1e-4)

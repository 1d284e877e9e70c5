"""A draft head's step in one C call (`head_step.c`), built on the machine that runs it, as the panels are.

Why: `auto`'s head reads a few rows per forward, right after a target forward has streamed 540 MB through the caches.
Its products are on the bf16 panels, but the forty-odd torch operations around them (five norms, the rotation, the
layouts, SiLU, the residuals) cost more than the products there, 5–30 µs each. On an AMD EPYC (2 cores), a step of one
row over 500 cached entries took 905 µs by torch's operations and 415 µs by this one call, both with the caches
emptied first (566 and 195 warm; `benchmarks/head_step.py`). The C step does the same arithmetic between the same two
kernels, the panels' product and the few-row attention, handed over as function pointers from their own builds.

`HeadKernel` holds one head's packed weights and norms; `DraftHead.step` takes it where it applies (fp32 activations
over bf16 panels, the few-row kernel, a few rows) and torch's operations elsewhere. SPECVIZ_HEAD_STEP=0 turns it off.
Where no C compiler is found or the build fails, the head keeps torch's operations and the log says why once.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from . import panels

SOURCE = Path(__file__).with_name("head_step.c")
SWITCH_ENV = "SPECVIZ_HEAD_STEP"
LINEARS = ("fc", "q", "k", "v", "o", "gate", "up", "down")  # head_t's packed weights, in its order
NORMS = ("norm_embedding", "norm_feature", "attn_norm", "mlp_norm", "out_norm")


class _Head(ctypes.Structure):
    _fields_ = ([(name, ctypes.c_long) for name in ("hidden", "heads", "kv_heads", "dim", "intermediate")]
                + [("eps", ctypes.c_float)]
                + [(name, ctypes.c_void_p) for name in LINEARS]
                + [(name, ctypes.c_void_p) for name in ("fc_bias", *NORMS)]
                + [("product", ctypes.c_void_p), ("attend", ctypes.c_void_p)])


class Library:
    """The built library."""

    def __init__(self, library: ctypes.CDLL, path: Path):
        self.path = path
        self._step = library.specviz_head_step
        self._step.argtypes = ([ctypes.c_void_p] * 4 + [ctypes.c_long] + [ctypes.c_void_p] * 4 + [ctypes.c_long] * 2
                               + [ctypes.c_void_p] * 4)
        self._step.restype = ctypes.c_int
        self._lift = library.specviz_head_lift
        self._lift.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_long] * 2 + [ctypes.c_void_p] * 4
        self._lift.restype = None
        self._scratch = library.specviz_head_step_scratch
        self._scratch.argtypes = [ctypes.c_long] * 6
        self._scratch.restype = ctypes.c_long


class HeadKernel:
    """One head's step in C: its shape, its packed bf16 weights (`LINEARS`, each [panels, K, width]), its fp32 norm
    weights and fc bias, and the two kernels it calls (the panels' bf16 product, the few-row attention)."""

    def __init__(self, library: Library, shape, packed: dict[str, torch.Tensor], norms: dict[str, torch.Tensor],
                 fc_bias: torch.Tensor, product, few_rows):
        """`packed` may also hold "fuse" and `norms` "layer_norm" [layers, H]: a head that reads several layers."""
        self.library, self.shape, self.few_rows = library, shape, few_rows
        self.packed = packed  # kept: the C side holds their addresses
        self.floats = {name: t.detach().float().contiguous() for name, t in {**norms, "fc_bias": fc_bias}.items()}
        self.head = _Head(shape.hidden, shape.heads, shape.kv_heads, shape.head_dim, shape.intermediate, shape.eps,
                          *[packed[name].data_ptr() for name in LINEARS],
                          *[self.floats[name].data_ptr() for name in ("fc_bias", *NORMS)],
                          ctypes.cast(product, ctypes.c_void_p).value,
                          ctypes.cast(few_rows._attend, ctypes.c_void_p).value)

    def __deepcopy__(self, memo) -> None:  # a copied head packs its weights again, and runs torch's operations
        return None

    def __reduce__(self):
        return _unbound, ()

    def lift(self, features: torch.Tensor) -> torch.Tensor:
        """A head's reading of several layers' features ([n, layers · H], fp32): each layer's part RMS-normed and
        scaled, then fused: [n, H] (DraftHead.lift)."""
        layers, n = len(self.shape.layers), features.shape[0]
        x = features.float().contiguous()
        out = torch.empty(n, self.shape.hidden)
        scratch = torch.empty(n * layers * self.shape.hidden)
        self.library._lift(ctypes.byref(self.head), x.data_ptr(), n, layers, self.floats["layer_norm"].data_ptr(),
                           self.packed["fuse"].data_ptr(), out.data_ptr(), scratch.data_ptr())
        return out

    def step(self, embeddings: torch.Tensor, features: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor,
             sin: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, length: int,
             visible: torch.Tensor | None) -> torch.Tensor:
        """Read n rows (fp32 embeddings and lifted features [n, H]) at `positions` [n] after the cache's first `length`
        entries: writes their keys and values into k_cache and v_cache ([kv_heads, capacity, D], room for n more),
        returns the predicted features [n, H]. cos and sin: RoPE's tables [> max position, D]; visible: uint8
        [heads / kv_heads · n, length + n] (`attention.visible_rows`), or None for every entry."""
        s = self.shape
        n = embeddings.shape[0]
        e, f = embeddings.float().contiguous(), features.float().contiguous()
        places = positions.to(torch.long).contiguous()
        out = torch.empty(n, s.hidden)
        scratch = torch.empty(self.library._scratch(n, s.hidden, s.heads, s.kv_heads, s.head_dim, s.intermediate))
        work = torch.empty(self.few_rows._work(s.kv_heads, s.heads // s.kv_heads * n, length + n, s.head_dim))
        mask = None if visible is None else visible.to(torch.uint8).contiguous()
        failed = self.library._step(ctypes.byref(self.head), e.data_ptr(), f.data_ptr(), places.data_ptr(), n,
                                    cos.data_ptr(), sin.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(),
                                    k_cache.shape[1], length, 0 if mask is None else mask.data_ptr(),
                                    out.data_ptr(), scratch.data_ptr(), work.data_ptr())
        if failed:
            raise ValueError(f"the head step does not take {n} rows over {length + n} entries")
        return out


def _unbound() -> None:
    return None


def available(directory: Path | None = None) -> Library | None:
    """The library on this machine, built into `directory` (the SpecViz cache) if it is not there yet; None where it
    is switched off (SPECVIZ_HEAD_STEP=0) or cannot be built here (the reason is logged once)."""
    return panels.switched_build(SWITCH_ENV, directory, _built)


@functools.cache
def _built(directory: Path) -> Library | None:
    path = panels.build_or_say_why(directory, "head-step", SOURCE, ("-lm",), "the head step",
                                   "a head keeps torch's operations")
    return Library(ctypes.CDLL(str(path)), path) if path else None

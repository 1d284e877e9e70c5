"""Panel products: SpecViz's own fp32 matrix product for a few rows (`panels.c`), built on the machine that
runs it.

Why: a verification multiplies γ+1 to 17 rows by every weight, and should cost what a one-row step does, since both
read the same 513 MB of weights. The libraries torch calls do not: on an Intel Xeon (2 cores, KVM), over all of
SmolLM2-135M's products, the BLAS took 21 ms for one row and 47 ms for nine, oneDNN (packed) 29 and 38 ms. The panel
product reads each weight once, front to back, for up to nine rows at a time (six without AVX-512), and took 21 ms
for one row, 24 ms for four and 27 ms for nine (benchmarks/row_products.py). Which library a model's products take
is still measured at load (`products.choose_packs`): a CPU where oneDNN is faster keeps oneDNN.

The C file is compiled once per source, compiler and CPU (what -march=native means there) into the SpecViz cache
(about a second), with the compiler found as $CC, cc or gcc. Where none is found, or the build fails, the panel
product is not offered and the log says why once; the libraries remain. SPECVIZ_PANELS=0 turns it off.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch
from torch import nn

SOURCE = Path(__file__).with_name("panels.c")
SWITCH_ENV = "SPECVIZ_PANELS"
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC")


class Panels:
    """The built library: pack a weight, multiply rows by a packed weight."""

    def __init__(self, library: ctypes.CDLL, path: Path):
        self.path = path
        self.width = int(library.specviz_panel_width())
        self._product = library.specviz_panel_product
        self._product_bf16 = library.specviz_panel_product_bf16
        self._product_int8 = library.specviz_panel_product_int8
        for function in (self._product, self._product_bf16, self._product_int8):
            function.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long] * 3
            function.restype = None

    def __deepcopy__(self, memo) -> Panels:  # one library per process: a copied model shares it
        return self

    def __reduce__(self):  # a pickled model loads the same build again
        return _load, (str(self.path),)

    def pack(self, weight: torch.Tensor) -> torch.Tensor:
        """`weight` (N x K, fp32 or bf16) as panels of `width` columns in its dtype: [panels, K, width], N padded
        with zero columns."""
        n, k = weight.shape
        padded = -(-n // self.width) * self.width
        rows = weight.detach().new_zeros(padded, k)
        rows[:n] = weight.detach()
        return rows.view(padded // self.width, self.width, k).transpose(1, 2).contiguous()

    def pack_int8(self, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`weight` (N x K) as int8 panels, each row scaled to 127 at its largest, and the rows' scales [N]:
        W ≈ scales[:, None] · W8 (`product_int8`)."""
        w = weight.detach().float()
        scales = w.abs().amax(1).clamp_min(torch.finfo(torch.float32).tiny) / 127
        return self.pack((w / scales[:, None]).round().to(torch.int8)), scales

    def product_int8(self, x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        """x @ W.T for fp32 rows x [..., K] by a weight packed by `pack_int8`: each int8 weight widened exactly, the
        sums in fp32, each output then scaled by its row's scale; fp32 [..., N]."""
        rows = x.reshape(-1, x.shape[-1]).float().contiguous()
        y = torch.empty(rows.shape[0], scales.shape[0], dtype=torch.float32)
        if rows.shape[0]:
            self._product_int8(rows.data_ptr(), packed.data_ptr(), y.data_ptr(), rows.shape[0], scales.shape[0],
                               rows.shape[1])
        return y.mul_(scales).view(*x.shape[:-1], scales.shape[0])

    def product(self, x: torch.Tensor, packed: torch.Tensor, out_features: int,
                bias: torch.Tensor | None = None) -> torch.Tensor:
        """x @ W.T (+ bias) for x [..., K] on the CPU, W packed by `pack`: [..., out_features]. An fp32 weight takes
        fp32 rows; a bf16 weight (a draft head's) takes bf16 or fp32 rows, multiplied in fp32 (each weight widened
        exactly) and given back in the rows' dtype."""
        if packed.dtype not in (torch.float32, torch.bfloat16) or x.dtype not in (packed.dtype, torch.float32):
            raise TypeError(f"the panel product takes fp32 rows, or bf16 rows by a bf16 weight, not {x.dtype} "
                            f"rows by a {packed.dtype} weight")
        rows = x.reshape(-1, x.shape[-1]).float().contiguous()
        y = torch.empty(rows.shape[0], out_features, dtype=torch.float32)
        if rows.shape[0]:
            product = self._product if packed.dtype == torch.float32 else self._product_bf16
            product(rows.data_ptr(), packed.data_ptr(), y.data_ptr(), rows.shape[0], out_features, rows.shape[1])
        if bias is not None:
            y += bias
        return y.view(*x.shape[:-1], out_features).to(x.dtype)


class Int8Rows(nn.Module):
    """x ↦ x @ W.T by int8 panels (`Panels.pack_int8`: each row scaled to 127 at its largest), fp32 rows in and out: a
    draft head's output rows beside its bf16 panels. A head's guesses read every row, right after a target forward has
    pushed them out of the caches: 8,192 rows of 576 took 0.16 ms cold against 0.34 in bf16 on an AMD EPYC
    (`benchmarks/head_step.py`). Only which tokens a draft offers can change: q is still computed in fp32 from these
    logits, and verification stays the target's own."""

    def __init__(self, weight: torch.Tensor, built: Panels):
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.panels = built
        self.packed, self.scales = built.pack_int8(weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.panels.product_int8(x, self.packed, self.scales)


def _load(path: str) -> Panels:
    return Panels(ctypes.CDLL(path), Path(path))


def available(directory: Path | None = None) -> Panels | None:
    """The panel product on this machine, built into `directory` (the SpecViz cache) if it is not there yet; None
    where it is switched off (SPECVIZ_PANELS=0) or cannot be built here (the reason is logged once)."""
    return switched_build(SWITCH_ENV, directory, _built)


def switched_build(switch: str, directory: Path | None, built):
    """What `built(directory)` gives (a C library's cached build: the panels', the attention's, the head step's), or
    None where the environment variable `switch` is "0"; `directory` defaults to the process's temporary cache."""
    if os.environ.get(switch, "").strip() == "0":
        return None
    return built(directory or Path(tempfile.gettempdir()) / f"specviz-{os.getuid()}")


def find_compiler() -> str | None:
    """The C compiler the panels are built with: $CC, else cc, else gcc (None: none here)."""
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def compile_library(compiler: str, path: Path, extra: tuple[str, ...] = (), source: Path = SOURCE) -> Path:
    """`source` built with `compiler` into the shared library `path` (FLAGS; `extra` last, so libraries link); OSError
    with the compiler's last line where it fails. The panels' own build, the tests' and the benchmarks' other builds
    all come here."""
    built = subprocess.run([compiler, *FLAGS, str(source), "-o", str(path), *extra], capture_output=True, text=True,
                           timeout=120)
    if built.returncode:
        Path(path).unlink(missing_ok=True)
        raise OSError(built.stderr.strip().splitlines()[-1] if built.stderr.strip() else "the build failed")
    return Path(path)


@functools.cache
def _built(directory: Path) -> Panels | None:
    path = build_or_say_why(directory, "panels", SOURCE, (), "the panel product",
                            "products take torch's libraries only")
    return _load(str(path)) if path else None


def build_or_say_why(directory: Path, stem: str, source: Path, extra: tuple[str, ...], what: str,
                     instead: str) -> Path | None:
    """`cached_build` with the compiler found here, or None with the reason in the log (once per caller, which caches
    the answer): no compiler, or a failed build. `what` names the library and `instead` what runs without it."""
    log = logging.getLogger("specviz")
    compiler = find_compiler()
    if not compiler:
        log.warning("no C compiler (cc, gcc or $CC) here: %s", instead)
        return None
    try:
        return cached_build(compiler, directory, stem, source, extra)
    except (OSError, subprocess.SubprocessError, AttributeError) as exc:
        log.warning("%s could not be built with %s (%s): %s", what, compiler, exc, instead)
        return None


def cached_build(compiler: str, directory: Path, stem: str, source: Path, extra: tuple[str, ...] = ()) -> Path:
    """`source` built once per source, compiler, flags and CPU (what -march=native means there) into
    directory/kernels/STEM-DIGEST.so, or the build already there; OSError or SubprocessError where it fails."""
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    native = subprocess.run([compiler, "-march=native", "-dM", "-E", "-x", "c", os.devnull], capture_output=True,
                            text=True, timeout=30).stdout  # what -march=native means on this CPU
    digest = hashlib.sha1("\n".join([source.read_text(), version, " ".join(FLAGS + extra), native])
                          .encode()).hexdigest()[:16]
    path = directory / "kernels" / f"{stem}-{digest}.so"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        compile_library(compiler, partial, extra, source)
        partial.replace(path)  # whole or not at all: a server and its worker may build at once
    return path

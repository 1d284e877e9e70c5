"""Which library computes a CPU forward's matrix products, by the number of rows: torch's BLAS or oneDNN.

The fast path (`fast_path.PackedLinear`) keeps each weight packed for oneDNN, which reads it at the same speed for 1 to
8 rows. Where the BLAS is clearly faster for few rows (a plain step, a small verification), those take the BLAS: the
choice is measured once per machine, torch, thread count and set of weights, and kept (`choose_blas_rows`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import platform
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from . import busy


def blas_rows(model) -> int | None:
    """Up to how many rows a prepared model's forwards take the BLAS (0: oneDNN for all); None off the fast path."""
    return getattr(model, "specviz_blas_rows", None)


def products_text(rows: int) -> str:
    """`blas_rows` in words, as bench rows and v(N) files name it in `machine`."""
    if rows <= 0:
        return "products oneDNN"
    return f"products BLAS for {'1 row' if rows == 1 else f'1-{rows} rows'}, oneDNN above"


def choose_blas_rows(linears: list[nn.Linear], remember: Path | None = None) -> int:
    """Up to how many rows a forward's products take torch's BLAS (`F.linear`) rather than oneDNN's packed weight,
    for all of a model's `linears`, measured (`_blas_faster`): 1 row, then 2, … while the BLAS is clearly faster, at
    most MAX_BLAS_ROWS. SPECVIZ_BLAS_ROWS=n picks instead (0: oneDNN throughout); the older SPECVIZ_ONE_ROW=blas or
    onednn means 1 or 0.

    A choice is measured once per machine, torch, thread count and set of weights, then kept: in this process, and in
    the JSON file `remember` where one is given (the SpecViz cache's fast-path.json, for the embedded target's
    every later load: a server, its measurement worker, each command). Delete the file to measure again. A choice
    timed while other programs took a noticeable share of the machine (`busy`) is used in this process but not kept:
    the two products slow down unequally on a busy machine, and a file written then would hold a wrong choice for
    every later load (a test suite's loads once kept 1 row on a Xeon where a quiet machine chooses 3).

    Which is faster depends on the CPU's BLAS. On this project's AMD EPYC, the BLAS read the weights about half as
    fast as oneDNN, even for one row. On an Intel Xeon (2 cores, KVM), over the target's weights, the BLAS took 21,
    23 and 25 ms for 1, 2 and 3 rows against oneDNN's 28-30, and 34 ms for 4 rows against 31 (oneDNN pays a fixed
    cost on each of a step's 211 small products; benchmarks/row_products.py). A slower target alone would flatter
    every measured speedup, and a slower small verification would price small trees out."""
    rows = _switch()
    if rows is None:
        timed = _calibration_set(linears)
        key = _choice_key(timed) if timed else ""
        rows = _CHOSEN.get(key) if key else 0
        if rows is None:
            rows = _kept(remember, key)
        if rows is None:
            before, rows = busy.read(), 0
            while rows < MAX_BLAS_ROWS and _blas_faster(timed, rows + 1):
                rows += 1
            others = busy.between(before, busy.read())
            if others is not None and others.share > busy.NOTICEABLE_SHARE:
                logging.getLogger("specviz").warning(
                    "the fast path's choice (%s) was timed while other programs took %.0f%% of the machine: used in "
                    "this process, not kept", products_text(rows), 100 * others.share)
            else:
                _keep(remember, key, rows)
        if key:
            _CHOSEN[key] = rows
    for linear in linears:
        linear.blas_rows = rows
    return rows


_CHOSEN: dict[str, int] = {}  # choices made in this process, by `_choice_key`


def _choice_key(timed: list[nn.Linear]) -> str:
    """What a choice holds for: this CPU (its name and, as a virtual machine's name can be generic, its instruction
    sets), this torch and its threads, and the shapes of the weights timed."""
    shapes = ",".join(f"{linear.out_features}x{linear.in_features}" for linear in timed)
    name, flags = cpu()
    return (f"{name} ({_digest(flags)}) | torch {torch.__version__} | {torch.get_num_threads()} threads | "
            f"{_digest(shapes)}")


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


@functools.cache  # the CPU does not change while the process runs
def cpu() -> tuple[str, str]:
    """The CPU's model name and its flags (Linux's /proc/cpuinfo; elsewhere what `platform` says)."""
    found = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            field, _, value = line.partition(":")
            found.setdefault(field.strip(), value.strip())
    except OSError:
        pass
    return (found.get("model name") or platform.processor() or platform.machine(),
            found.get("flags", platform.machine()))


def _kept(remember: Path | None, key: str) -> int | None:
    """The rows kept for `key` in the file `remember`; None where there is none (or the file cannot be read: it is
    measured again and the file rewritten)."""
    if remember is None:
        return None
    try:
        rows = json.loads(remember.read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return rows if type(rows) is int and 0 <= rows <= MAX_BLAS_ROWS else None  # not a bool


def _keep(remember: Path | None, key: str, rows: int) -> None:
    if remember is None:
        return
    try:
        kept = json.loads(remember.read_text()) if remember.is_file() else {}
        kept = kept if isinstance(kept, dict) else {}
    except (OSError, ValueError):
        kept = {}
    kept[key] = rows
    try:
        remember.parent.mkdir(parents=True, exist_ok=True)
        partial = remember.with_name(f"{remember.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(kept, indent=1, sort_keys=True))
        partial.replace(remember)  # whole or not at all: a server and its worker may load at once
    except OSError as exc:
        logging.getLogger("specviz").warning("could not keep the fast path's choice in %s (%s)", remember, exc)


BLAS_ROWS_ENV = "SPECVIZ_BLAS_ROWS"
ONE_ROW_ENV = "SPECVIZ_ONE_ROW"  # the older switch: blas (1 row) or onednn (0)
MAX_BLAS_ROWS = 8
CALIBRATION_BYTES = 600 * 2**20  # products enough to read from memory, not from the cache, as a real step does
SMALL_MODEL_BYTES = 32 * 2**20  # below this (the tests' tiny models) nothing is measured: oneDNN throughout


def _switch() -> int | None:
    """The rows SPECVIZ_BLAS_ROWS (or SPECVIZ_ONE_ROW) asks for; None: measure. A bad value is said in the log."""
    log = logging.getLogger("specviz")
    raw = os.environ.get(BLAS_ROWS_ENV, "").strip()
    if raw:
        if raw.isdigit() and int(raw) <= MAX_BLAS_ROWS:
            return int(raw)
        log.warning("%s=%r is not a whole number from 0 to %d: measuring instead", BLAS_ROWS_ENV, raw, MAX_BLAS_ROWS)
        return None
    old = os.environ.get(ONE_ROW_ENV, "").strip().lower()
    if old in ("blas", "onednn"):
        return 1 if old == "blas" else 0
    if old:
        log.warning("%s=%r is neither blas nor onednn: measuring which is faster instead", ONE_ROW_ENV,
                    os.environ[ONE_ROW_ENV])
    return None


def _calibration_set(linears: list[nn.Linear]) -> list[nn.Linear]:
    """The fp32 packed linears a choice is timed over, in the model's order, up to CALIBRATION_BYTES of weights; none
    under SMALL_MODEL_BYTES (the tests' tiny models are not timed)."""
    chosen, size = [], 0
    for linear in linears:
        if linear.weight.dtype != torch.float32 or linear.packed is None:
            continue
        chosen.append(linear)
        size += linear.weight.numel() * 4
        if size >= CALIBRATION_BYTES:
            break
    return chosen if size >= SMALL_MODEL_BYTES else []


def _blas_faster(chosen: list[nn.Linear], rows: int) -> bool:
    """Whether fp32 products of `rows` rows over these weights take clearly less time with the BLAS than with oneDNN
    (under 0.9 of it): the best of three passes each, taken in turn (about 0.2 s a row count for SmolLM2-135M on the
    Xeon)."""
    inputs = {linear.in_features: torch.randn(rows, linear.in_features) for linear in chosen}
    best = {"blas": float("inf"), "onednn": float("inf")}
    with torch.inference_mode():
        for _ in range(3):
            for kind in best:
                start = time.perf_counter()
                for linear in chosen:
                    x = inputs[linear.in_features]
                    if kind == "blas":
                        F.linear(x, linear.weight, linear.bias)
                    else:
                        torch.ops.mkldnn._linear_pointwise(x, linear.packed, linear.bias, "none", [], "")
                best[kind] = min(best[kind], time.perf_counter() - start)
    return best["blas"] < 0.9 * best["onednn"]

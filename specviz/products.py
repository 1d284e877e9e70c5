"""Which library computes a CPU forward's matrix products, by the number of rows: torch's BLAS, oneDNN or the panels.

The fast path (`fast_path.PackedLinear`) keeps each weight packed, for oneDNN or for SpecViz's panel product
(`panels`), whichever is clearly faster for a verification's rows (`choose_packs`); both read a weight at about the
same speed for one row as for several. Where the BLAS is clearly faster than that for few rows (a plain step, a small
verification), those take the BLAS (`choose_blas_rows`). Each choice is measured once per machine, torch, thread
count and set of weights, and kept.
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

from . import busy, panels


def blas_rows(model) -> int | None:
    """Up to how many rows a prepared model's forwards take the BLAS (0: the packed product for all); None off the
    fast path."""
    return getattr(model, "specviz_blas_rows", None)


def packs(model) -> str:
    """The packed product a prepared model's forwards take above its BLAS rows: "onednn" or "panels"."""
    return getattr(model, "specviz_packs", ONEDNN)


ONEDNN, PANELS = "onednn", "panels"
PACK_ROWS = 8  # oneDNN packs each weight for products of this many rows: 1-8% faster than packed with no size,
# for 1-33 rows, on an Intel Xeon (benchmarks/results/row-products-xeon.txt); a tree of 8 verifies 9 rows
PACKS_NAMES = {ONEDNN: "oneDNN", PANELS: "panels"}


def products_text(rows: int, packed: str = ONEDNN) -> str:
    """`blas_rows` and `packs` in words, as bench rows and v(N) files name them in `machine`."""
    if rows <= 0:
        return f"products {PACKS_NAMES[packed]}"
    return f"products BLAS for {'1 row' if rows == 1 else f'1-{rows} rows'}, {PACKS_NAMES[packed]} above"


PACKS_ROWS = (4, 9)  # the packed products are timed on a chain of 3 drafts' rows and a tree of 8's


def choose_packs(linears: list[nn.Linear], remember: Path | None = None) -> str:
    """Which packed product a model's `linears` (fast_path.PackedLinear) take: the panel product (`panels`) where it
    is built here and clearly faster than oneDNN (under 0.9 of its time, summed over PACKS_ROWS rows, the best of
    three passes each, in turn), else oneDNN. Each linear is packed for it. Measured, kept and reused as
    `choose_blas_rows` is (quiet machines only); SPECVIZ_PANELS=1 takes the panels without measuring, =0 never.

    On an Intel Xeon (2 cores, KVM), over SmolLM2-135M's weights, 4 and 9 rows took 24 and 27 ms with the panels
    against 33 and 38 ms with oneDNN (benchmarks/results/row-products-xeon-panels.txt); models under
    SMALL_MODEL_BYTES (the tests' tiny ones) are not timed: oneDNN."""
    timed = _calibration_set(linears)
    forced = os.environ.get(panels.SWITCH_ENV, "").strip() == "1"
    built = panels.available(remember.parent if remember else None) if timed or forced else None
    choice, packed = ONEDNN, {}
    if built is not None:
        if forced:
            choice = PANELS
        else:
            key = f"packs | {choice_key(_shapes(timed))} | {built.path.stem}"
            choice = measured_choice(key, remember, (ONEDNN, PANELS), lambda: _panels_faster(timed, built, packed),
                               lambda chosen: f"products {PACKS_NAMES[chosen]}")
    timed_copies = dict(zip(map(id, timed), packed.get(choice, [])))  # packed for the timing: not packed again
    halves_bytes = sum(linear.weight.numel() * 2 for linear in linears if linear.weight.dtype == torch.bfloat16)
    # A draft head's few bf16 weights take the bf16 panels; a whole model in bf16 (a target loaded in bf16) keeps
    # oneDNN, whose bf16 arithmetic is faster for its prefill and verification rows.
    halves = bf16_panels(remember.parent if remember else None) if 0 < halves_bytes < SMALL_MODEL_BYTES else None
    for linear in linears:
        if linear.weight.dtype == torch.bfloat16:
            linear.use_panels(halves)
        else:
            linear.use_panels(built if choice == PANELS else None, timed_copies.get(id(linear)))
    return choice


BF16_PANEL_ROWS = 16  # bf16 inputs of more rows (a head reading a whole prompt) take torch's bf16 product


def bf16_panels(directory: Path | None = None) -> panels.Panels | None:
    """The panel product for bf16 weights (a draft head's beside an fp32 target), where it is built: taken without
    timing. A head reads a few rows at a time, between two target forwards that push its weights out of the caches,
    and there the panels' small loop beats oneDNN's: over smol-head-v5's products (10 MB in bf16) on an AMD EPYC,
    0.73 ms against 2.1 ms with the caches emptied first (0.42 against 0.46 ms warm; docs/performance.md)."""
    return panels.available(directory)


def _panels_faster(timed: list[nn.Linear], built: panels.Panels, packed: dict) -> str:
    """PANELS or ONEDNN, timed; `packed` gets each kind's packed weights, in the order of `timed`."""
    packed[ONEDNN] = [torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), PACK_ROWS) for linear in timed]
    packed[PANELS] = [built.pack(linear.weight) for linear in timed]
    best = dict.fromkeys(packed, 0.0)
    for rows in PACKS_ROWS:
        inputs = {linear.in_features: torch.randn(rows, linear.in_features) for linear in timed}
        fastest = _fastest({
            ONEDNN: lambda: [torch.ops.mkldnn._linear_pointwise(inputs[linear.in_features], weight, linear.bias,
                                                                "none", [], "")
                             for linear, weight in zip(timed, packed[ONEDNN])],
            PANELS: lambda: [built.product(inputs[linear.in_features], weight, linear.out_features, linear.bias)
                             for linear, weight in zip(timed, packed[PANELS])]})
        for kind in best:
            best[kind] += fastest[kind]
    return PANELS if best[PANELS] < 0.9 * best[ONEDNN] else ONEDNN


def choose_blas_rows(linears: list[nn.Linear], remember: Path | None = None) -> int:
    """Up to how many rows a forward's products take torch's BLAS (`F.linear`) rather than their packed weight (for
    oneDNN or the panels: `choose_packs`, which comes first), for all of a model's `linears`, measured
    (`_blas_faster`): 1 row, then 2, … while the BLAS is clearly faster, at most MAX_BLAS_ROWS. SPECVIZ_BLAS_ROWS=n
    picks instead (0: the packed product throughout); the older SPECVIZ_ONE_ROW=blas or onednn means 1 or 0.

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
    every measured speedup, and a slower small verification would price small trees out. Against the panels, the BLAS
    was not clearly faster there even for one row (21 ms each), so no rows took it."""
    rows = _switch()
    if rows is None:
        timed = _calibration_set(linears)
        rows = 0
        if timed:
            above = timed[0].panels  # the packed product the BLAS must beat: its own build, or oneDNN
            key = choice_key(_shapes(timed)) + (f" | against {above.path.stem}" if above else "")
            rows = measured_choice(key, remember, range(MAX_BLAS_ROWS + 1), lambda: _blas_rows_measured(timed),
                             lambda chosen: products_text(chosen, PANELS if above else ONEDNN))
    for linear in linears:
        linear.blas_rows = rows
    return rows


def _blas_rows_measured(timed: list[nn.Linear]) -> int:
    rows = 0
    while rows < MAX_BLAS_ROWS and _blas_faster(timed, rows + 1):
        rows += 1
    return rows


def measured_choice(key: str, remember: Path | None, allowed, measure, text):
    """The choice for `key`: made before in this process, or kept in the file `remember`, or else `measure()`d now
    and kept (in the file only if the machine was quiet meanwhile: a busy machine slows products unequally, and a file
    written then would hold a wrong choice for every later load). `allowed`: the values a kept choice may take;
    `text(choice)` names it in the log."""
    choice = _CHOSEN.get(key)
    if choice is None:
        choice = _kept(remember, key, allowed)
    if choice is None:
        before = busy.read()
        choice = measure()
        others = busy.between(before, busy.read())
        if others is not None and others.share > busy.NOTICEABLE_SHARE:
            logging.getLogger("specviz").warning(
                "the fast path's choice (%s) was timed while other programs took %.0f%% of the machine: used in "
                "this process, not kept", text(choice), 100 * others.share)
        else:
            _keep(remember, key, choice)
    _CHOSEN[key] = choice
    return choice


_CHOSEN: dict[str, int | str] = {}  # choices made in this process, by key


def choice_key(what: str) -> str:
    """What a choice holds for: this CPU (its name and, as a virtual machine's name can be generic, its instruction
    sets), this torch and its threads, and what was timed (`what`: the weights' shapes, an attention's heads)."""
    name, flags = cpu()
    threads = torch.get_num_threads()
    return f"{name} ({_digest(flags)}) | torch {torch.__version__} | {threads} threads | {_digest(what)}"


def _shapes(timed: list[nn.Linear]) -> str:
    return ",".join(f"{linear.out_features}x{linear.in_features}" for linear in timed)


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


def _kept(remember: Path | None, key: str, allowed) -> int | str | None:
    """The choice kept for `key` in the file `remember`, if it is one of `allowed`; None where there is none (or the
    file cannot be read: it is measured again and the file rewritten)."""
    if remember is None:
        return None
    try:
        choice = json.loads(remember.read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return choice if type(choice) in (int, str) and choice in allowed else None  # not a bool


def _keep(remember: Path | None, key: str, choice: int | str) -> None:
    if remember is None:
        return
    try:
        kept = json.loads(remember.read_text()) if remember.is_file() else {}
        kept = kept if isinstance(kept, dict) else {}
    except (OSError, ValueError):
        kept = {}
    kept[key] = choice
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
        if linear.weight.dtype != torch.float32:
            continue
        chosen.append(linear)
        size += linear.weight.numel() * 4
        if size >= CALIBRATION_BYTES:
            break
    return chosen if size >= SMALL_MODEL_BYTES else []


def _blas_faster(chosen: list[nn.Linear], rows: int) -> bool:
    """Whether fp32 products of `rows` rows over these weights take clearly less time with the BLAS than with their
    packed product (under 0.9 of it): the best of three passes each, taken in turn (about 0.2 s a row count for
    SmolLM2-135M on the Xeon)."""
    inputs = {linear.in_features: torch.randn(rows, linear.in_features) for linear in chosen}
    best = _fastest({"blas": lambda: [F.linear(inputs[linear.in_features], linear.weight, linear.bias)
                                      for linear in chosen],
                     "packed": lambda: [linear.packed_product(inputs[linear.in_features]) for linear in chosen]})
    return best["blas"] < 0.9 * best["packed"]


def _fastest(kinds: dict, passes: int = 3) -> dict[str, float]:
    """The best of `passes` timings of each of `kinds` (name: a call), taken in turn in every pass, so a slow moment
    of the machine touches each alike."""
    best = dict.fromkeys(kinds, float("inf"))
    with torch.inference_mode():
        for _ in range(passes):
            for kind, run in kinds.items():
                start = time.perf_counter()
                run()
                best[kind] = min(best[kind], time.perf_counter() - start)
    return best

"""How far ahead the panel product should fetch: `specviz/panels.c` built with -DAHEAD=N for several N, each timed
over all 211 of the target's weights, by rows, the builds in turn (a slow moment of the machine touches them alike).

A prefetch changes no number: the script checks that every build gives the same bits. What it changes is whether a
line is in the cache when the multiply-adds reach it. One row is bound by memory whatever AHEAD is; with 9 rows a line
takes 27 multiply-adds, so the lines fetched ahead must cover the memory's latency at that slower pace.

    python benchmarks/panel_prefetch.py --ahead 16,24,32,48 --rows 1,9,16 > benchmarks/results/panel-prefetch-CPU.txt
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz import panels  # noqa: E402
from specviz.fast_path import PackedLinear  # noqa: E402
from specviz.lab.measure import machine  # noqa: E402
from specviz.models import load_model  # noqa: E402


def build(ahead: int, directory: Path) -> panels.Panels:
    compiler = panels.find_compiler()
    if not compiler:
        raise SystemExit("no C compiler here ($CC, cc or gcc): the panel product cannot be built")
    try:
        path = panels.compile_library(compiler, directory / f"panels-ahead{ahead}.so", (f"-DAHEAD={ahead}",))
    except OSError as exc:
        raise SystemExit(f"{compiler} could not build the panels with AHEAD={ahead}: {exc}") from exc
    return panels._load(str(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="default")
    parser.add_argument("--ahead", default="16,24,32,48")
    parser.add_argument("--rows", default="1,9,16")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    aheads = [int(a) for a in args.ahead.split(",")]
    rows = [int(r) for r in args.rows.split(",")]

    target = load_model(args.target, "cpu", "fp32")
    linears = [m for m in target.model.modules() if isinstance(m, PackedLinear)]
    with tempfile.TemporaryDirectory() as directory:
        builds = {a: build(a, Path(directory)) for a in aheads}
    first = builds[aheads[0]]
    packed = [first.pack(m.weight) for m in linears]  # one packing serves every build: the panels' width is the same
    inputs = {r: {m.in_features: torch.randn(r, m.in_features) for m in linears} for r in rows}

    def seconds(built: panels.Panels, r: int) -> float:
        start = time.perf_counter()
        for m, w in zip(linears, packed):
            built.product(inputs[r][m.in_features], w, m.out_features)
        return time.perf_counter() - start

    with torch.inference_mode():
        for r in rows:  # the same bits from every build
            x, m = inputs[r][linears[0].in_features], linears[0]
            outputs = [b.product(x, packed[0], m.out_features) for b in builds.values()]
            if not all(torch.equal(o, outputs[0]) for o in outputs):
                raise SystemExit(f"builds differ for {r} rows")
        best = {(a, r): float("inf") for a in aheads for r in rows}
        for _ in range(args.repeats):
            for r in rows:
                for a, built in builds.items():
                    best[a, r] = min(best[a, r], seconds(built, r))
    print(f"# {machine('cpu', target.model)}, fp32; panel products over {len(linears)} weights by lines fetched "
          f"ahead (AHEAD); best of {args.repeats}, ms; every build gave the same bits\n")
    print("| rows | " + " | ".join(f"AHEAD {a}" for a in aheads) + " |")
    print("| ---: " * (len(aheads) + 1) + "|")
    for r in rows:
        print(f"| {r} | " + " | ".join(f"{best[a, r] * 1e3:.1f}" for a in aheads) + " |")


if __name__ == "__main__":
    main()

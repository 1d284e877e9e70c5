"""Record every run the lesson shows, on this machine, into assets/lesson/ (a few minutes on 2 CPU cores).

    python scripts/record_lesson.py [--drafts ngram layerskip:8 smol-draft-1l128 smol-draft-2l256]
                                    [--sample-draft smol-draft-1l128]
                                    [--lab-samples 400] [--lab-draft smol-draft-1l128] [--repeats 1] [--threads N]
                                    [--keep-lab] [--only GROUP ...]
                                    [--out DIR]

The first draft drafts the main run and the γ sweep; every draft (and the target drafting for itself)
is compared. Bad arguments exit 2 with one line.
"""

from __future__ import annotations

import argparse
import functools
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from specviz.errors import SpecVizError  # noqa: E402
from specviz.lab.same_distribution import LabSetup  # noqa: E402
from specviz.lesson import recordings  # noqa: E402
from specviz.models import DEFAULT_TARGET, load_model  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drafts", nargs="+", default=list(recordings.DEFAULT_DRAFTS))
    parser.add_argument(
        "--sample-draft", default=recordings.SAMPLE_DRAFT, help="a model draft (with a real q) for the sampling step"
    )
    parser.add_argument("--lab-samples", type=int, default=LabSetup.samples)
    parser.add_argument("--lab-draft", default=LabSetup.draft)
    parser.add_argument(
        "--keep-lab",
        action="store_true",
        help="keep the distribution lab already in --out when it was "
        "made with the same settings (its draws do not depend on timings; it is most of the recording time)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=recordings.GROUPS,
        help="make only these groups of runs again and "
        "keep the rest of the recording in --out (with its own provenance)",
    )
    parser.add_argument("--repeats", type=int, default=1, help="time each run N times and keep the median")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads (0: torch's default); 1 keeps a busy shared CPU from spin-waiting",
    )
    parser.add_argument("--out", type=Path, default=recordings.LESSON_DIR)
    args = parser.parse_args(argv)
    try:
        if args.threads < 0:
            raise SpecVizError("--threads must be 0 (torch's default) or more")
        if args.threads:
            torch.set_num_threads(args.threads)
        if args.lab_samples < 20 or args.repeats < 1:
            raise SpecVizError("--lab-samples must be at least 20 and --repeats at least 1")
        load = functools.lru_cache(maxsize=None)(load_model)  # each draft loaded once
        target = load(DEFAULT_TARGET)
        recipes = recordings.recipes(args.drafts, args.sample_draft)
        old = recordings.load(args.out) if args.only else None
        if args.only:
            recipes = [r for r in recipes if r.group in args.only]
        lab_setup = replace(LabSetup(), samples=args.lab_samples, draft=args.lab_draft)
        started = time.perf_counter()
        runs = recordings.record_runs(
            target,
            recipes,
            load,
            args.repeats,
            on_run=lambda r, i, n: print(f"[{i}/{n}] {r.name}: {r.draft}", flush=True),
        )
        kept = old.lab if old else (recordings.kept_lab(args.out, lab_setup) if args.keep_lab else None)
        lab = kept or recordings.record_lab(
            target, lab_setup, load, on_run=lambda i, n: i % 100 == 0 and print(f"lab {i}/{n}", flush=True)
        )
        seconds = time.perf_counter() - started
    except SpecVizError as exc:
        print(f"record_lesson: {exc}", file=sys.stderr)
        return 2
    command = "python scripts/record_lesson.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    info = recordings.manifest(
        recipes,
        lab_setup,
        command.strip(),
        args.drafts,
        args.repeats,
        seconds,
        lab_made=recordings.lab_made(args.out) if kept else None,
    )
    if old:
        runs, info = recordings.merge(old, runs, info)
    recordings.save(args.out, runs, lab, info)
    size = sum(f.stat().st_size for f in args.out.iterdir()) / 1024
    print(f"wrote {args.out} ({size:.0f} KB) in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

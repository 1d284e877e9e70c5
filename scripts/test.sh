#!/usr/bin/env bash
# Installs what the tests need, lints, then runs every test (unit, end to end on the embedded model, browser).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh dev
"${PYTHON:-python3}" -m ruff check .   # lint first: line length, unused names, import order (pyproject.toml)
# Two pytest workers (pytest-xdist). The browser tests run one after another in one of them, as they would alone,
# while the other worker runs the rest; each other module runs whole in one worker, so its fixtures are made once
# (the groups: tests/conftest.py). The browser tests mostly wait for pages to draw, so the other worker computes.
# (Tried and not kept: each module whole in either worker, browser modules too: 646-661 s, but once, with two browser
# modules running at once, a token-tree test's Run never started within 240 s.)
# The groups go out longest first, as tests/conftest.py orders them (--no-loadscope-reorder keeps that order).
# Threads with no work sleep rather than spin (OMP_WAIT_POLICY): two workers' torch threads share the cores.
# Each worker, and every server and measurement worker it starts, gets half the cores for torch's threads
# (OMP_NUM_THREADS, one each on 2 cores): with two threads each, the two workers' models fought over both cores. On a
# 2-core Xeon, fresh clones: 14 min 52 s with two, then 12 min 2 s with one; later, in a slower hour, 14 min 27 s with
# two against 13 min 38 s with one. Set OMP_NUM_THREADS to override. `-n 0` runs everything in this one process instead.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
cores="$(nproc 2>/dev/null || echo 2)"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(( cores > 3 ? cores / 2 : 1 ))}"
# A failing browser test's page is kept as a picture (artifacts/test-results); passing tests take pictures only when
# asked (SPECVIZ_SCREENSHOTS=1, as scripts/readme_screenshots.sh does).
exec "${PYTHON:-python3}" -m pytest -q -n 2 --dist loadgroup --no-loadscope-reorder --screenshot only-on-failure --output artifacts/test-results "$@"

#!/usr/bin/env bash
# Installs what the tests need, lints, then runs every test (unit, end to end on the embedded model, browser).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh dev
"${PYTHON:-python3}" -m ruff check .   # lint first: line length, unused names, import order (pyproject.toml)
# Two pytest workers (pytest-xdist). Each test module runs whole in one of them, so its fixtures (a server, a
# model) are made once; the modules go in collection order, long ones first (tests/conftest.py), and no module
# leans on another. The browser tests mostly wait for pages to draw, so the other worker computes meanwhile.
# Threads with no work sleep rather than spin (OMP_WAIT_POLICY): two workers' torch threads share the cores.
# `-n 0` runs everything in this one process instead.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
exec "${PYTHON:-python3}" -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder "$@"
